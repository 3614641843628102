"""Hyperparameters as state: `inject_hyperparams`, and `Hyperparams`, the dict that holds them."""

from __future__ import annotations

import importlib.util
import inspect
import numbers
from typing import Any, Callable, Iterable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import naming as _naming
from gradtx._core import protocol as _protocol


class Hyperparams(dict):
    """`InjectHyperparamsState.hyperparams`: a dict whose values keep their dtype when replaced.

    `hyperparams["learning_rate"] = 0.01` (or `= jnp.asarray(0.01)`) stores a scalar array of
    the dtype the value had, so the state's types do not change and a jitted step is not
    traced again; so do `update`, `|=` and `setdefault`. Only the injected names can be set (a
    new name would change the tree). `copy()`, `|`, `copy.deepcopy` and pickle give a
    `Hyperparams` back.
    """

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self:
            raise KeyError(
                f"`inject_hyperparams`: {key!r} is not an injected hyperparameter of this state; "
                f"the injected ones are {sorted(self)}."
            )
        old = dict.__getitem__(self, key)
        if hasattr(old, "dtype") and not isinstance(value, jax.ShapeDtypeStruct):
            value = _as_hyperparameter(key, value, old.dtype)
        dict.__setitem__(self, key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default  # refused: a new name
        return dict.__getitem__(self, key)

    def __ior__(self, other: Any) -> Hyperparams:
        self.update(other)
        return self

    def __or__(self, other: Any) -> Hyperparams:
        new = self.copy()
        new.update(other)
        return new

    def copy(self) -> Hyperparams:
        return Hyperparams(self)  # dict's constructor stores the values as they are

    def __reduce__(self) -> tuple[Any, ...]:  # copy.deepcopy and pickle (dict's own refills by []=)
        return Hyperparams, (dict(self),)


def _as_hyperparameter(key: Any, value: Any, dtype: Any) -> jax.Array:
    dt = getattr(value, "dtype", None)
    if dt is None:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    else:
        ok = jnp.issubdtype(dt, jnp.floating) or jnp.issubdtype(dt, jnp.integer)
    if not ok or jnp.ndim(value) != 0:
        raise TypeError(
            f"`inject_hyperparams`: hyperparams[{key!r}] must be a real scalar (a Python number or a "
            f"0-d float array), got {value!r}."
        )
    return jnp.asarray(value, dtype)


def _flatten(h: Hyperparams) -> tuple[list[tuple[Any, Any]], tuple[Any, ...]]:
    keys = tuple(sorted(h))
    return [(jax.tree_util.DictKey(k), dict.__getitem__(h, k)) for k in keys], keys


def _unflatten(keys: tuple[Any, ...], values: Iterable[Any]) -> Hyperparams:
    h = Hyperparams()
    for k, v in zip(keys, values, strict=True):
        dict.__setitem__(h, k, v)  # as flattened: leaves may be tracers, shapes or None
    return h


jax.tree_util.register_pytree_with_keys(
    Hyperparams,
    _flatten,
    _unflatten,
    lambda h: ([dict.__getitem__(h, k) for k in sorted(h)], tuple(sorted(h))),
)


def _register_flax() -> None:
    """Flax's serialization stores `Hyperparams` as the dict it is (when Flax is installed)."""
    if importlib.util.find_spec("flax") is None:
        return
    from flax import serialization

    def to_state(h: Hyperparams) -> dict:
        return {str(k): serialization.to_state_dict(v) for k, v in h.items()}

    def from_state(target: Hyperparams, state: dict) -> Hyperparams:
        keys = sorted(target)
        return _unflatten(
            tuple(keys), [serialization.from_state_dict(target[k], state[str(k)]) for k in keys]
        )

    serialization.register_serialization_state(Hyperparams, to_state, from_state, override=True)


_register_flax()


class InjectHyperparamsState(NamedTuple):
    """State of `inject_hyperparams`."""

    count: _protocol.Count  # int32: completed updates
    hyperparams: Hyperparams  # name -> the value used in the last step (schedules evaluated), editable
    inner_state: Any


def _is_injectable(value: Any, mark: Any) -> bool:
    if _checks.is_schedule(value):
        # only where the factory takes "a number or a schedule" (`ScalarOrSchedule`): other
        # callables (label functions, `fn` arguments, a schedule-only argument) stay static
        return mark is _protocol.HYPERPARAMETER
    if isinstance(value, (bool, int)) or not isinstance(value, (numbers.Real, jax.Array, np.ndarray)):
        return False  # ints (step counts), bools, strings, containers, transforms
    dtype = getattr(value, "dtype", None)  # a PRNG key, an int or bool array stays static
    return dtype is None or jnp.issubdtype(dtype, jnp.floating) and getattr(value, "ndim", 0) == 0


def _as_count_schedule(factory: str, name: str, value: Any) -> Any:
    """`value`, or for optax's `WrappedSchedule` (a stateful schedule whose state is the step count) its
    schedule `count -> value`, which this state's `count` drives alike; any other stateful schedule
    (`init`, `update` and `__call__(state)`: optax's `StatefulSchedule`) is refused."""
    if not (
        callable(value)
        and callable(getattr(value, "init", None))
        and callable(getattr(value, "update", None))
    ):
        return value
    schedule_fn = getattr(value, "schedule_fn", None)
    if type(value).__name__ == "WrappedSchedule" and callable(schedule_fn):
        return schedule_fn
    raise TypeError(
        f"`inject_hyperparams({factory})`: `{name}` is a stateful schedule ({type(value).__name__}: `init`, "
        "`update`, `__call__(state)`), whose state this state has no place for; use "
        "`gradtx.optax_compat.inject_hyperparams`, which keeps it in `hyperparams_states`."
    )


def _static_names(static_args: Any) -> frozenset[Any]:
    names = (static_args,) if isinstance(static_args, str) else static_args
    try:
        return frozenset(names)
    except TypeError:
        raise TypeError(
            f"`inject_hyperparams`: `static_args` must be an argument name or an iterable of names, "
            f"got {static_args!r}."
        ) from None


def _check_static_names(factory: str, statics: frozenset[Any], known: Any) -> None:
    unknown = statics - set(known)
    if unknown:
        raise ValueError(
            f"`inject_hyperparams`: `static_args` names [{', '.join(sorted(map(repr, unknown)))}], which "
            f"{factory} does not take; its arguments are {sorted(known)}."
        )


class Injection:
    """How `inject_hyperparams` sorts the arguments and keeps their values: gradtx's policy.

    A float or a schedule where the factory takes one (`ScalarOrSchedule`) is injected, cast to
    `dtype`; a schedule is evaluated at `count`; the state is `InjectHyperparamsState`.
    `gradtx.optax_compat`'s `inject_hyperparams` is this engine with optax's policy (a subclass).
    """

    label = "inject_hyperparams"  # the transform's name: `<label>(<factory>)`
    checked = True  # the factory's checks on each step's values: the step's updates NaN where one fails

    def __init__(self, factory: str, hyperparam_dtype: Any) -> None:
        self.factory = factory
        self.dtype = hyperparam_dtype or jax.dtypes.canonicalize_dtype(jnp.float64)

    def sort(self, name: str, value: Any, mark: Any) -> tuple[bool, Any]:
        """Whether the argument `name` is injected, and its value as kept."""
        value = _as_count_schedule(self.factory, name, value)
        return _is_injectable(value, mark), value

    def first(self, injected: dict[str, Any]) -> dict[str, Any]:
        """The values the factory is built from once, at construction (its checks, its kind)."""
        return self.start(injected, None)[0]

    def start(self, injected: dict[str, Any], params: Any) -> tuple[dict[str, Any], Any]:
        """The values at `init`, and the schedules' states (none here: the count is theirs)."""
        count = _hyper.zero_count()
        return Hyperparams(
            {k: jnp.asarray(_hyper.resolve(v, count), self.dtype) for k, v in injected.items()}
        ), None

    def step(self, injected: dict[str, Any], state: Any, params: Any, extra_args: dict) -> tuple[dict, Any]:
        """The values of a step (the state's, schedules evaluated at `count`), and the schedules' states."""
        # cast: a plain dict put in the state (`_replace`, `optax.tree.set`) may hold Python floats
        values = {k: jnp.asarray(v, self.dtype) for k, v in state.hyperparams.items()}
        scheduled = {k: v for k, v in injected.items() if _checks.is_schedule(v)}
        values.update(
            {k: jnp.asarray(_hyper.resolve(v, state.count, k), self.dtype) for k, v in scheduled.items()}
        )
        return values, None

    def cast_note(self, params: Any) -> str:
        """What to say after the factory's ValueError at `init` about the cast of its values."""
        return ""

    def state(self, count: Any, values: dict[str, Any], schedule_states: Any, inner: Any) -> Any:
        del schedule_states
        return InjectHyperparamsState(count, Hyperparams(values), inner)

    def outermost(
        self, label: str, raw: _protocol.GradientTransformation
    ) -> _protocol.GradientTransformation:
        """`raw` as an outermost factory returns it (`_factory.wrapped_once`)."""
        return _factory.wrapped_once(label, raw)


def inject(
    policy: type[Injection],
    factory: Callable[..., Any],
    static_args: Any,
    hyperparam_dtype: Any,
) -> Callable[..., _protocol.GradientTransformation]:
    """`inject_hyperparams(factory)` under `policy` (gradtx's `Injection`, or optax_compat's): each step
    builds the factory from that step's values, its checks deferred on traced ones (NaN updates)."""
    _checks.check_callable("inject_hyperparams", "factory", factory)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`inject_hyperparams`: cannot read the signature of {factory!r}: {err}.") from None
    name = getattr(factory, "__name__", repr(factory))
    statics = _static_names(static_args)
    params = signature.parameters
    var_kw = next((p.name for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    var_pos = next((p.name for p in params.values() if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    if var_kw is None:
        _check_static_names(name, statics, params)
    tx_name = f"{policy.label}({_naming.factory_name(factory)})"  # what a checkpoint records

    def wrapped(*args: Any, **kwargs: Any) -> _protocol.GradientTransformation:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"`inject_hyperparams({name})`: {err}.") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        keywords = dict(arguments.pop(var_kw, {})) if var_kw else {}  # e.g. per_leaf's **hyperparams
        var_args = tuple(arguments.pop(var_pos, ())) if var_pos else ()
        arguments.update(keywords)
        if var_kw is not None:
            _check_static_names(name, statics, arguments)
        how = policy(name, hyperparam_dtype)
        injected: dict[str, Any] = {}
        static: dict[str, Any] = {}
        for key, value in arguments.items():
            mark = _protocol.mark_of(factory, key if key in params else var_kw or "")
            inject_it, value = (False, value) if key in statics else how.sort(key, value, mark)
            (injected if inject_it else static)[key] = value

        def build(values: dict) -> _protocol.GradientTransformation:
            call = {**static, **values}
            positional = [
                call.pop(p.name) for p in params.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY
            ]
            return _factory.member(factory(*positional, *var_args, **call))

        def init_fn(params):
            values, schedule_states = how.start(injected, params)
            try:
                inner = build(values)
            except ValueError as err:
                raise ValueError(f"{err}{how.cast_note(params)}") from None
            return how.state(_hyper.zero_count(), values, schedule_states, inner.init(params))

        def update_fn(updates, state, params=None, **extra_args):
            values, schedule_states = how.step(injected, state, params, extra_args)
            with _checks.deferred() as intervals:  # the factory's checks on traced values: NaN if one fails
                inner_tx = build(values)
            new_updates, inner = inner_tx.update(updates, state.inner_state, params, **extra_args)
            new_state = how.state(_hyper.increment(state.count), values, schedule_states, inner)
            return (_checks.nan_unless(intervals, new_updates) if how.checked else new_updates), new_state

        raw = _factory.composite(init_fn, update_fn, build(how.first(injected)))  # checked now; its kind
        if _checks._API_NAME.get() is not None:  # inside another factory: it wraps once
            return _naming.named(raw, tx_name)
        return _naming.named(how.outermost(f"inject_hyperparams({name})", raw), tx_name)

    return wrapped


@_factory.api
def inject_hyperparams(
    factory: Callable[..., _protocol.GradientTransformation],
    *,
    static_args: str | Iterable[str] = (),
    hyperparam_dtype: Any = None,
) -> Callable[..., _protocol.GradientTransformation]:
    """Hyperparameters as state (never recompiled): not `optax.inject_hyperparams` (`optax_compat`'s).

    `inject_hyperparams(gradtx.adam)(learning_rate=1e-3)` behaves like `gradtx.adam(1e-3)`,
    but its state is `InjectHyperparamsState(count, hyperparams, inner_state)` with
    `hyperparams = {"learning_rate": ..., "b1": ..., ...}` (a dict, as in optax). Replace a
    value in the state between steps (`state.hyperparams["learning_rate"] = 0.01`, or
    `= jnp.asarray(0.01)`, or `state.hyperparams.update(learning_rate=0.01)`) and the jitted
    step uses it without retracing: `hyperparams` is a `Hyperparams` dict, which casts a new
    value to the dtype of the old one. Replacing the whole dict by a plain one
    (`state._replace(hyperparams={...})`, `optax.tree.set(state, learning_rate=0.01)`) traces
    the step once more, for the plain dict; the state it returns holds a `Hyperparams` again.
    Float arguments (Python floats or 0-d float arrays) and schedules are injected; a schedule
    is evaluated at `count` each step and its value stored (a callable counts as a schedule
    where the factory annotates the argument `ScalarOrSchedule`; other callables stay
    static). Ints, bools, integer, bool and complex arrays, PRNG keys (typed or uint32),
    strings, containers and transforms stay static, as do the names in `static_args`.
    optax's (`optax_compat.inject_hyperparams`) differs: it injects ints and every callable,
    keeps floats in the params' widest dtype (not float32) and has stateful schedules (its
    state has a `hyperparams_states` field). Here optax's `WrappedSchedule(schedule)` is taken
    as `schedule` (its state is the step count, which `count` is); another stateful schedule
    is refused (`TypeError`).

    Each step builds the factory from that step's values (set ones and schedules' values), so
    the factory's own construction checks -- finiteness and the ranges its `Raises:` lists
    (`learning_rate >= 0`, FTRL's `learning_rate > 0`, a beta in `[0, 1)`, `eps >= 0`, ...) --
    see every value: a concrete one (an eager step) raises the factory's `ValueError`, as at
    construction; a traced one (a step under `jax.jit`) cannot raise, so the same conditions
    are tested in the step and, if one fails, every float update of that step is NaN (row-sparse
    values too; ints and `None` kept): the params go visibly non-finite instead of, say, a
    negative rate ascending. It costs a few scalar tests and one select fused into the update's
    own loop (no extra pass). The inner state of such a step is what the bad value made it; a
    valid value steps again. Not checked in the step: static arguments (ints, bools, strings,
    `static_args`: checked once, at construction, they cannot change) and the few conditions a
    factory tests by hand on a known value rather than through its declared checks.

    Args:
      factory: any gradtx (or optax) factory returning a transform.
      static_args: the names of arguments to keep static even if numeric: one name (a
        string, matched whole: `"b1"` is not `"b"`) or an iterable of names; each must be an
        argument of `factory`.
      hyperparam_dtype: dtype of the injected values (default: float32, float64 under x64).

    Returns:
      A function taking the factory's arguments and returning the transform.

    Raises:
      TypeError: if `factory` is not callable, `static_args` is neither a string nor an
        iterable of strings, or the arguments do not fit its signature (or hold a stateful
        schedule other than a `WrappedSchedule`).
      ValueError: for a name in `static_args` that is not an argument of `factory`: here, or
        for a factory taking `**kwargs`, when the returned function is called without it;
        the factory's own error for a value it refuses, at construction and in an eager step
        (a jitted step gives NaN updates instead, see above).

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=0.1)
        >>> state = tx.init(jnp.zeros(2))
        >>> step = jax.jit(tx.update)
        >>> state.hyperparams["learning_rate"] = jnp.asarray(0.5)
        >>> step(jnp.ones(2), state)[0]
        Array([-0.5, -0.5], dtype=float32)
        >>> state.hyperparams["learning_rate"] = 2.0  # stored as float32: not traced again
        >>> step(jnp.ones(2), state)[0]
        Array([-2., -2.], dtype=float32)
        >>> tx = gradtx.inject_hyperparams(gradtx.adam, static_args="b1")(learning_rate=0.1)
        >>> sorted(tx.init(jnp.zeros(2)).hyperparams)
        ['b2', 'eps', 'learning_rate']
    """
    return inject(Injection, factory, static_args, hyperparam_dtype)

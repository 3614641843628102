"""optax's `inject_hyperparams`: its classification of arguments, dtype policy and state layout.

`gradtx.inject_hyperparams` injects float arguments and the schedules a factory marks as
hyperparameters; optax 0.2.8's injects every number (ints too) and treats every callable not
named in `static_args` as a schedule, casts float values to the params' widest dtype, and keeps
`InjectStatefulHyperparamsState(count, hyperparams, hyperparams_states, inner_state)`, where a
schedule's state lives beside its value (`WrappedSchedule` makes a `count -> value` schedule
one, a `StatefulSchedule` brings its own). This module is that combinator, with no math: each
step builds the inner transform from the values of that step, as optax does, and runs it.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Iterable, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import naming as _naming
from gradtx._core import protocol as _protocol
from gradtx._core import shapes as _shapes


class InjectHyperparamsState(NamedTuple):
    """optax's deprecated state class (since 0.1.9), kept for code that names it.

    `inject_hyperparams` returns an `InjectStatefulHyperparamsState`, as optax's does.
    """

    count: _protocol.Count  # int32: completed updates
    hyperparams: dict[str, Any]
    inner_state: Any


class InjectStatefulHyperparamsState(NamedTuple):
    """State of `inject_hyperparams` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates
    hyperparams: dict[str, Any]  # name -> the value used in the last step (schedules evaluated), editable
    hyperparams_states: dict[str, Any]  # name -> the state of its schedule
    inner_state: Any


@runtime_checkable
class StatefulSchedule(Protocol):
    """optax's stateful schedule: `init()`, `update(state, **extra_args)` and `__call__(state, **extra_args)`.

    `inject_hyperparams` evaluates one at its state before each step, with the step's extra
    arguments, and then updates the state with them. Any object with these three methods is
    one (optax's own included).
    """

    def init(self) -> Any:
        """The schedule's initial state."""

    def update(self, state: Any, **extra_args: Any) -> Any:
        """The state after a step."""

    def __call__(self, state: Any, **extra_args: Any) -> Any:
        """The value at `state`."""


class WrappedScheduleState(NamedTuple):
    """State of `WrappedSchedule` (optax's layout)."""

    count: _protocol.Count  # int32: completed updates


class WrappedSchedule:
    """optax's stateful schedule around a schedule `count -> value`: its state is the count.

    Args:
      schedule_fn: the schedule.

    Example:
        >>> from gradtx import optax_compat as optax
        >>> s = optax.WrappedSchedule(lambda count: 0.5 * count)
        >>> float(s(s.update(s.init())))
        0.5
    """

    def __init__(self, schedule_fn: Callable[[Any], Any]) -> None:
        self.schedule_fn = schedule_fn

    def init(self) -> WrappedScheduleState:
        """The state before the first step: count 0."""
        return WrappedScheduleState(count=_hyper.zero_count())

    def update(self, state: WrappedScheduleState, **extra_args: Any) -> WrappedScheduleState:
        """The state after a step: the count plus one (the extra arguments are not used)."""
        del extra_args
        return WrappedScheduleState(count=_hyper.increment(state.count))

    def __call__(self, state: WrappedScheduleState, **extra_args: Any) -> Any:
        return self.schedule_fn(state.count)


def _convert_floats(x: Any, dtype: Any) -> Any:
    """optax's cast of a hyperparameter: a strong-typed jax array as it is, a float-like one to `dtype`,
    anything else (ints, an int schedule's value) as it is."""
    if isinstance(x, jax.Array) and not getattr(x, "weak_type", False):
        return x
    if jax.dtypes.issubdtype(x.dtype if hasattr(x, "dtype") else type(x), jnp.floating):
        return jnp.asarray(x, dtype=dtype)
    return x


def _widest_dtype(params: Any) -> Any:
    """`optax.tree.dtype(params, "highest")`: the dtype every other leaf's promotes to (the default float
    dtype for no leaves); `ShapeDtypeStruct` leaves count by their dtype."""
    dtypes = [
        jnp.dtype(x.dtype) if hasattr(x, "dtype") else jnp.asarray(x).dtype for x in jax.tree.leaves(params)
    ]
    if not dtypes:
        return jnp.asarray([]).dtype

    def higher(a, b):
        wide = jnp.promote_types(a, b)
        if wide not in (a, b):
            raise ValueError(
                f"`inject_hyperparams`: the params mix {a} and {b}, neither of which promotes to the other, "
                "so no hyperparameter dtype follows from them; pass `hyperparam_dtype`."
            )
        return wide

    return functools.reduce(higher, dtypes)


def _static_names(static_args: Any) -> set[Any]:
    if isinstance(static_args, str):
        return {static_args}
    try:
        return set(static_args)
    except TypeError:
        raise TypeError(
            f"`inject_hyperparams`: `static_args` must be an argument name or an iterable of names, "
            f"got {static_args!r}."
        ) from None


def _check_static_names(name: str, statics: set[Any], known: Iterable[str]) -> None:
    unknown = statics - set(known)
    if unknown:
        raise ValueError(
            f"`inject_hyperparams`: `static_args` names {', '.join(sorted(map(repr, unknown)))}, which "
            f"{name} does not take; its arguments are {sorted(known)}."
        )


def _outermost(label: str, raw: _protocol.GradientTransformation) -> _protocol.GradientTransformation:
    """`raw` as an outermost factory returns it (`_factory.wrapped_once`), except that a step keeps the dtypes
    of the inner state only: the values and the schedules' states take the dtypes optax's steps give them
    (a stateful schedule's state may start as int32 and become float32)."""
    checked = _factory.wrapped_once(label, raw)

    def update_fn(updates, state, params=None, **extra_args):
        _shapes.check_shapes(label, updates, params, state)
        new_updates, new_state = raw.update(updates, state, params, **extra_args)
        inner = _factory._keep_dtypes(new_state.inner_state, state.inner_state)
        return new_updates, new_state._replace(inner_state=inner)

    update_fn._gradtx_raw = raw  # type: ignore[attr-defined]
    return type(checked)(checked.init, update_fn)


def inject_hyperparams(
    inner_factory: Callable[..., Any], static_args: str | Iterable[str] = (), hyperparam_dtype: Any = None
) -> Callable[..., _protocol.GradientTransformation]:
    """optax's `inject_hyperparams`: the factory's numeric arguments and schedules become state.

    As optax 0.2.8 sorts the arguments: a name in `static_args` or a bool stays static; a
    `StatefulSchedule` is evaluated at its state before each step (with the step's extra
    arguments) and its state updated after; any other callable is a schedule of the count
    (`WrappedSchedule`); an int, float, jax or NumPy array is injected as it is (ints too);
    anything else stays static. A callable that is not a schedule (a mask function, a dtype
    such as `jnp.bfloat16`) must be named in `static_args`. Float values are cast to
    `hyperparam_dtype`, or else to the params' widest dtype (bf16 params: bf16 values); a
    strong-typed jax array keeps its dtype. Each step builds `inner_factory` from the values of
    that step and runs it; the state is
    `InjectStatefulHyperparamsState(count, hyperparams, hyperparams_states, inner_state)`, whose
    `hyperparams` dict can be edited between steps (`state.hyperparams["learning_rate"] = 0.01`,
    `optax.tree.set(state, learning_rate=0.01)`) for the values not scheduled.

    Unlike optax's, each step's values pass the factory's checks, as `gradtx.inject_hyperparams`'
    do: an eager step raises the factory's `ValueError` for a value it refuses (a negative rate,
    a beta outside `[0, 1)`, NaN); a jitted step, whose values are traced, gives NaN for every
    float update instead (one select fused into the update; the state's layout is optax's).
    Injected ints meet checks that want a Python int (`min_dim_size_to_factor`): name them in
    `static_args`.

    Args:
      inner_factory: a factory of transforms (`optax_compat.adam`, ...).
      static_args: the names of arguments that stay static (one name, or an iterable of names).
      hyperparam_dtype: the dtype of float values (default: the params' widest dtype).

    Returns:
      A factory with `inner_factory`'s arguments whose numeric ones and schedules live in the state.

    Raises:
      TypeError: for a factory without a signature, a `static_args` that is not a name or an
        iterable, or arguments that do not fit the factory's signature.
      ValueError: for a name in `static_args` that the factory does not take; the factory's own
        error for a value it refuses, at construction and in an eager step (jitted: NaN updates).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> schedule = optax.linear_schedule(0.1, 0.0, transition_steps=10)
        >>> tx = optax.inject_hyperparams(optax.sgd)(learning_rate=schedule, momentum=0.9)
        >>> state = tx.init(jnp.zeros(1, jnp.bfloat16))
        >>> state.hyperparams["momentum"].dtype, int(state.hyperparams_states["learning_rate"].count)
        (dtype(bfloat16), 0)
    """
    statics = _static_names(static_args)
    signature = inspect.signature(inner_factory)
    parameters = signature.parameters
    name = getattr(inner_factory, "__name__", repr(inner_factory))
    var_kw = next((p.name for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    var_pos = next((p.name for p in parameters.values() if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    if var_kw is None:
        _check_static_names(name, statics, parameters)

    @functools.wraps(inner_factory)
    def wrapped_transform(*args: Any, **kwargs: Any) -> _protocol.GradientTransformation:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"`inject_hyperparams({name})`: {err}.") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        keywords = dict(arguments.pop(var_kw, {})) if var_kw else {}
        var_args = tuple(arguments.pop(var_pos, ())) if var_pos else ()
        arguments.update(keywords)
        if var_kw is not None:
            _check_static_names(name, statics, arguments)

        scheduled, numeric, static = {}, {}, {}
        for key, value in arguments.items():
            if key in statics or isinstance(value, bool):
                static[key] = value
            elif isinstance(value, StatefulSchedule):
                scheduled[key] = value
            elif callable(value):
                scheduled[key] = WrappedSchedule(value)
            elif isinstance(value, (int, float, jax.Array, np.ndarray)):
                numeric[key] = value
            else:
                static[key] = value

        def build(values: dict) -> _protocol.GradientTransformation:
            call = {**static, **values}
            positional = [
                call.pop(p.name) for p in parameters.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY
            ]
            return _factory.member(inner_factory(*positional, *var_args, **call))

        def dtype_of(params: Any) -> Any:
            return hyperparam_dtype if hyperparam_dtype is not None else _widest_dtype(params)

        def init_fn(params):
            dtype = dtype_of(params)
            with jax.ensure_compile_time_eval():  # concrete under jit too, so the factory checks them
                values = {k: jnp.asarray(_convert_floats(v, dtype)) for k, v in numeric.items()}
            states = {k: f.init() for k, f in scheduled.items()}
            values.update({k: _convert_floats(f(states[k]), dtype) for k, f in scheduled.items()})
            try:
                inner = build(values)
            except ValueError as err:
                raise ValueError(
                    f"{err} `inject_hyperparams` cast the values to {jnp.dtype(dtype)} (`hyperparam_dtype`, "
                    "else the params' widest dtype), which moved this one out of range (optax runs with it, "
                    "and may give NaN): pass a wider `hyperparam_dtype`, such as `jnp.float32`."
                ) from None
            return InjectStatefulHyperparamsState(_hyper.zero_count(), values, states, inner.init(params))

        def update_fn(updates, state, params=None, **extra_args):
            dtype = dtype_of(params)
            values = {k: _convert_floats(v, dtype) for k, v in state.hyperparams.items()}
            values.update(
                {
                    k: _convert_floats(f(state.hyperparams_states[k], **extra_args), dtype)
                    for k, f in scheduled.items()
                }
            )
            states = {k: f.update(state.hyperparams_states[k], **extra_args) for k, f in scheduled.items()}
            with _checks.deferred() as conditions:  # the factory's checks on traced values: NaN if one fails
                inner_tx = build(values)
            new_updates, inner = inner_tx.update(updates, state.inner_state, params, **extra_args)
            return _checks.nan_unless(conditions, new_updates), InjectStatefulHyperparamsState(
                _hyper.increment(state.count), values, states, inner
            )

        # built once here from the values as given: the factory checks them now, and its kind is ours
        probe = build({**numeric, **{k: f(f.init()) for k, f in scheduled.items()}})
        raw = _factory.composite(init_fn, update_fn, probe)
        tx_name = f"optax_compat.inject_hyperparams({_naming.factory_name(inner_factory)})"
        if _checks._API_NAME.get() is not None:  # inside another factory: it wraps once
            return _naming.named(raw, tx_name)
        return _naming.named(_outermost(f"inject_hyperparams({name})", raw), tx_name)

    return wrapped_transform


def inject_stateful_hyperparams(
    inner_factory: Callable[..., Any], static_args: str | Iterable[str] = (), hyperparam_dtype: Any = None
) -> Callable[..., _protocol.GradientTransformation]:
    """optax's deprecated `inject_stateful_hyperparams`: warns, then is `inject_hyperparams`.

    Args:
      inner_factory: a factory of transforms (`optax_compat.adam`, ...).
      static_args: the names of arguments that stay static (one name, or an iterable of names).
      hyperparam_dtype: the dtype of float values (default: the params' widest dtype).

    Returns:
      `inject_hyperparams(inner_factory, static_args, hyperparam_dtype)`, after a
      `DeprecationWarning` (optax's).

    Example:
        >>> import warnings
        >>> from gradtx import optax_compat as optax
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     factory = optax.inject_stateful_hyperparams(optax.sgd)
        >>> caught[0].category.__name__
        'DeprecationWarning'
    """
    warnings.warn(
        "inject_stateful_hyperparams is deprecated, use inject_hyperparams instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return inject_hyperparams(inner_factory, static_args, hyperparam_dtype)

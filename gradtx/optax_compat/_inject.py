"""optax's `inject_hyperparams`: optax's policy (`_OptaxInjection`) on gradtx's engine.

optax 0.2.8 injects every number (ints too), treats every callable not in `static_args` as a
schedule, casts floats to the params' widest dtype and keeps a schedule's state beside its value
(`WrappedSchedule` makes a `count -> value` schedule one, a `StatefulSchedule` brings its own).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import shapes as _shapes
from gradtx.combinators._inject import Injection, inject
from gradtx.optax_compat._mirror import recipe

SCHEDULES_NAMES = (
    "InjectHyperparamsState InjectStatefulHyperparamsState StatefulSchedule WrappedSchedule "
    "inject_hyperparams inject_stateful_hyperparams"
).split()
"""This module's names in `optax.schedules` (all but `StatefulSchedule` at optax's top level too)."""


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


class _OptaxInjection(Injection):
    """optax 0.2.8's policy: every number and callable is injected; floats take the params' widest dtype."""

    label = "optax_compat.inject_hyperparams"

    def cast_note(self, params: Any) -> str:
        return (
            f" `inject_hyperparams` cast the values to {jnp.dtype(self._dtype(params))} (`hyperparam_dtype`, "
            "else the params' widest dtype), which moved this one out of range (optax runs with it, and may "
            "give NaN): pass a wider `hyperparam_dtype`, such as `jnp.float32`."
        )

    def sort(self, name: str, value: Any, mark: Any) -> tuple[bool, Any]:
        if isinstance(value, bool):
            return False, value
        if callable(value) and not isinstance(value, StatefulSchedule):
            return True, WrappedSchedule(value)
        return isinstance(value, (int, float, jax.Array, np.ndarray, StatefulSchedule)), value

    def _dtype(self, params: Any) -> Any:
        return self.dtype if self.given else gradtx.tree.dtype(params, "highest")  # optax's

    def __init__(self, factory: str, hyperparam_dtype: Any) -> None:
        super().__init__(factory, hyperparam_dtype)
        self.given = hyperparam_dtype is not None

    def first(self, injected: dict[str, Any]) -> dict[str, Any]:
        return {k: v(v.init()) if isinstance(v, StatefulSchedule) else v for k, v in injected.items()}

    def start(self, injected: dict[str, Any], params: Any) -> tuple[dict[str, Any], Any]:
        dtype = self._dtype(params)
        scheduled = {k: v for k, v in injected.items() if isinstance(v, StatefulSchedule)}
        with jax.ensure_compile_time_eval():  # concrete under jit too, so the factory checks them
            values = {
                k: jnp.asarray(_convert_floats(v, dtype)) for k, v in injected.items() if k not in scheduled
            }
        states = {k: f.init() for k, f in scheduled.items()}
        values.update({k: _convert_floats(f(states[k]), dtype) for k, f in scheduled.items()})
        return values, states

    def step(self, injected: dict[str, Any], state: Any, params: Any, extra_args: dict) -> tuple[dict, Any]:
        dtype = self._dtype(params)
        scheduled = {k: v for k, v in injected.items() if isinstance(v, StatefulSchedule)}
        values = {k: _convert_floats(v, dtype) for k, v in state.hyperparams.items()}
        old = state.hyperparams_states
        values.update({k: _convert_floats(f(old[k], **extra_args), dtype) for k, f in scheduled.items()})
        return values, {k: f.update(old[k], **extra_args) for k, f in scheduled.items()}

    def state(self, count: Any, values: dict[str, Any], schedule_states: Any, inner: Any) -> Any:
        return InjectStatefulHyperparamsState(count, values, schedule_states, inner)

    def outermost(
        self, label: str, raw: _protocol.GradientTransformation
    ) -> _protocol.GradientTransformation:
        """As gradtx's, except that a step keeps the dtypes of the inner state only: the values and the
        schedules' states take the dtypes optax's steps give them (a stateful schedule's state may start
        as int32 and become float32)."""
        checked = _factory.wrapped_once(label, raw)

        def update_fn(updates, state, params=None, **extra_args):
            _shapes.check_shapes(label, updates, params, state)
            new_updates, new_state = raw.update(updates, state, params, **extra_args)
            inner = _factory._keep_dtypes(new_state.inner_state, state.inner_state)
            return new_updates, new_state._replace(inner_state=inner)

        update_fn._gradtx_raw = raw  # type: ignore[attr-defined]
        return type(checked)(checked.init, update_fn)


@recipe(
    "inject_hyperparams",
    gradtx.inject_hyperparams,
    kind="function",
    returns="A factory with `inner_factory`'s arguments whose numeric ones and schedules live in the state.",
    example="inject_hyperparams(optax.sgd)(learning_rate=0.1)",
    api=False,
)
def inject_hyperparams(a):
    """the factory's numeric arguments and schedules become state, sorted as optax 0.2.8 sorts them: a
    name in `static_args` or a bool stays static; a `StatefulSchedule` is evaluated at its state before
    each step (with the step's extra arguments) and its state updated after; any other callable is a
    schedule of the count (`WrappedSchedule`); an int, float, jax or NumPy array is injected (ints too);
    anything else stays static (a callable that is no schedule, such as a mask function or a dtype, must
    be named in `static_args`). Float values are cast to `hyperparam_dtype`, else to the params' widest
    dtype; a strong-typed jax array keeps its dtype. The state is `InjectStatefulHyperparamsState(count,
    hyperparams, hyperparams_states, inner_state)`, its `hyperparams` editable between steps. Unlike
    optax's, each step's values pass the factory's checks, as `gradtx.inject_hyperparams`' do: an eager
    step raises the factory's `ValueError`, a jitted one gives NaN updates; injected ints meet checks that
    want a Python int (`min_dim_size_to_factor`): name them in `static_args`.

    Args:
      inner_factory: a factory of transforms (`optax_compat.adam`, ...).
      hyperparam_dtype: the dtype of float values (default: the params' widest dtype).
    """
    return inject(_OptaxInjection, a.inner_factory, a.static_args, a.hyperparam_dtype)


@recipe(
    "inject_stateful_hyperparams",
    inject_hyperparams,
    kind="deprecated",
    returns="`inject_hyperparams(inner_factory, static_args, hyperparam_dtype)`, after a warning.",
    example="inject_stateful_hyperparams(optax.sgd)(learning_rate=0.1)",
    api=False,
)
def inject_stateful_hyperparams(a):
    """optax's deprecated name: a `DeprecationWarning` (optax's), then `inject_hyperparams`."""
    warnings.warn(
        "inject_stateful_hyperparams is deprecated, use inject_hyperparams instead",
        DeprecationWarning,
        stacklevel=3,
    )
    return inject_hyperparams(a.inner_factory, a.static_args, a.hyperparam_dtype)

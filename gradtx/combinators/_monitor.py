"""Measurements of the updates kept in the state, the updates passed on as they are: `snapshot`,
`monitor` and `measure_with_ema` (optax's monitoring transforms)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.restated import restated
from gradtx.combinators._ema import ema
from gradtx.combinators._stateless import stateless


class SnapshotState(NamedTuple):
    """State of `snapshot`."""

    measurement: dict[str, Any]  # {measure_name: the measure of the last updates (of the params after init)}


class MonitorState(NamedTuple):
    """State of `monitor`."""

    measurements: dict[str, Any]  # {name: the last measurement} (zeros shaped like one after init)
    measure_states: tuple[Any, ...]  # the state of each stateful measure, in the order of `measures`


setattr(MonitorState, "inner_states_shaped_like_params", False)  # noqa: B010  (not a field: measures' states)


class MeasureEmaState(NamedTuple):
    """State of `measure_with_ema`'s average (`EmaState`'s fields; `ema` is shaped like the measurement, so
    it is not a slot)."""

    count: _protocol.Count  # int32: completed updates
    ema: Any  # the moving average of the measurement (starts at 0)


def _check_name(fn: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: a measure's name must be a string, got {name!r} of type "
            f"{type(name).__name__}."
        )


@_registry.transform()
def snapshot(measure_name: str, measure: Callable[[Any], Any]) -> _protocol.GradientTransformation:
    r"""Keep a measurement of the updates in the state (`measure(updates)`); pass the updates on unchanged.

    Put it in a chain to see an intermediate value (the norm before a clip, say):
    `gradtx.tree.get(state, measure_name)` reads it after each step. `init` stores the
    measure of the params, so the state keeps one structure. A row-sparse update is
    measured densified (and passed on as it is). `optax.snapshot`.

    Args:
      measure_name: the name the measurement is stored under.
      measure: a function of the update tree returning a pytree of arrays.

    Returns:
      A `GradientTransformation` with state ``SnapshotState({measure_name: measurement})``.

    Raises:
      TypeError: for a non-string name or a non-callable measure.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.snapshot("norm", gradtx.tree.norm), gradtx.clip_by_global_norm(1.0))
        >>> _, state = tx.update(jnp.array([3.0, 4.0]), tx.init(jnp.zeros(2)))
        >>> gradtx.tree.get(state, "norm")
        Array(5., dtype=float32)
    """
    fn = "snapshot"
    _check_name(fn, measure_name)
    _checks.check_callable(fn, "measure", measure)

    def init_fn(params):
        return SnapshotState({measure_name: measure(params)})

    def update_fn(updates, state, params=None, **extra_args):
        del state, params, extra_args
        return updates, SnapshotState({measure_name: measure(sparse.densify(updates))})

    return _protocol.GradientTransformation(init_fn, update_fn)


def _as_transform(measure: Any) -> _protocol.GradientTransformation:
    """A measure as a transform whose `update` returns the measurement: a function becomes a stateless one."""
    if callable(measure):
        return stateless(lambda updates, params: measure(updates))
    return _factory.with_extra_args_support(measure)


@_registry.transform()
def monitor(measures: Mapping[str, Any]) -> _protocol.GradientTransformation:
    r"""Keep named measurements of the updates in the state, some of them stateful; pass the updates on.

    `snapshot` for several measures, each a function of the updates or a transform whose
    `update(updates, state, params)` returns the measurement (`measure_with_ema` gives a
    moving average of one). Each measure sees the updates densified; the updates go on as
    they are. After `init`, each measurement is zeros shaped like what its measure gives
    for the params, so the state keeps one structure (optax's `init` leaves them out, so
    its state changes structure at the first step; `gradtx.optax_compat.monitor` does as
    optax); a measure that needs extra arguments of `update` appears from the first step
    on, as in optax. `optax.monitor`.

    Args:
      measures: `{name: measure}`, a measure being a function of the updates or a
        transform (its extra arguments are passed on).

    Returns:
      A `GradientTransformation` with state `MonitorState(measurements, measure_states)`.

    Raises:
      TypeError: for a non-dict `measures`, a non-string name, or a measure that is neither
        callable nor a transform.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.monitor({"norm": gradtx.tree.norm,
        ...                      "norm_ema": gradtx.measure_with_ema(gradtx.tree.norm, decay=0.5)})
        >>> state = tx.init(jnp.zeros(2))
        >>> for g in ([3.0, 4.0], [0.0, 1.0]):
        ...     _, state = tx.update(jnp.array(g), state)
        >>> # the norm_ema, debiased: (0.25 * 5 + 0.5 * 1) / 0.75
        >>> gradtx.tree.get(state, "norm"), gradtx.tree.get(state, "norm_ema")
        (Array(1., dtype=float32), Array(2.3333333, dtype=float32))
    """
    fn = "monitor"
    if not isinstance(measures, Mapping):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `measures` must be a dict {{name: measure}}, got {measures!r} of "
            f"type {type(measures).__name__}."
        )
    for name, measure in measures.items():
        _check_name(fn, name)
        if not callable(measure):
            _checks.check_transform(fn, f"measures[{name!r}]", measure)
    names = tuple(measures)
    transforms = {name: _as_transform(measures[name]) for name in names}

    def init_fn(params):
        states = tuple(transforms[n].init(params) for n in names)
        measurements = {}
        for n, s in zip(names, states, strict=True):
            try:  # what the measure gives for updates shaped like the params
                shape = jax.eval_shape(lambda p, s=s, n=n: transforms[n].update(p, s, p)[0], params)
            except TypeError:  # it needs extra arguments of `update`: measured from the first step on
                continue
            measurements[n] = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shape)
        return MonitorState(measurements, states)

    def update_fn(updates, state, params=None, **extra_args):
        dense = sparse.densify(updates)
        measurements, states = {}, []
        for n, s in zip(names, state.measure_states, strict=True):
            measurements[n], s = transforms[n].update(dense, s, params, **extra_args)
            states.append(s)
        return updates, MonitorState(measurements, tuple(states))

    return _protocol.GradientTransformation(init_fn, update_fn)


def _floating(tree: Any) -> Any:
    """Booleans and integers as float32 (a moving average of them is a fraction), floats as they are."""
    return jax.tree.map(
        lambda x: x if jnp.issubdtype(jnp.result_type(x), jnp.inexact) else jnp.asarray(x, jnp.float32), tree
    )


def measure_with_ema(
    measure: Callable[[Any], Any],
    decay: _protocol.ScalarOrSchedule,
    debias: bool = True,
    accumulator_dtype: Any = None,
    *,
    state: Any = MeasureEmaState,
) -> _protocol.GradientTransformation:
    r"""A measure for `monitor`: the exponential moving average of `measure(updates)`, debiased by default.

    .. math:: m_t = \beta m_{t-1} + (1 - \beta) f(u_t), \qquad
        \text{measurement}_t = m_t / (1 - \beta^t) \ \text{(debiased)}

    Its `update` returns the average (not updates): give it to `monitor` (so it is not
    checked against the params' shapes as a transform of the updates is). It is
    `chain(stateless(measure), ema(decay, debias=debias))` with the average started at
    zeros shaped like the measure of the params; a boolean or integer measurement (a
    "was it clipped" flag) is averaged as float32. `optax.measure_with_ema`.

    Args:
      measure: a function of the updates returning a pytree of arrays.
      decay: :math:`\beta`, in [0, 1] (number, scalar array or schedule).
      debias: divide by :math:`1 - \beta^t`.
      accumulator_dtype: dtype of the average (default: the measurement's).
      state: the average's state class, with `EmaState`'s fields (`count`, `ema`).

    Returns:
      A `GradientTransformation` with state `(EmptyState(), MeasureEmaState(count, ema))`.

    Raises:
      TypeError: for a non-callable measure, a non-bool `debias` or a non-float `accumulator_dtype`.
      ValueError: for a decay outside [0, 1].

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.measure_with_ema(lambda u: jnp.max(u), decay=0.9, debias=False)
        >>> tx.update(jnp.array([1.0, 2.0]), tx.init(jnp.zeros(2)))[0]  # 0.1 * 2
        Array(0.2, dtype=float32)
    """
    fn = "measure_with_ema"
    _checks.check_callable(fn, "measure", measure)
    _checks.check_bool(fn, "debias", debias)

    def measured(updates, params):
        del params
        return _floating(measure(updates))

    token = _checks._API_NAME.set(_checks.api_name(fn))  # nested: errors name this function, no shape checks
    try:
        average = restated(ema(decay, debias=debias, mu_dtype=accumulator_dtype), state)

        def init_average(params):
            return average.init(_floating(measure(params)))

        return chain(stateless(measured), _protocol.GradientTransformation(init_average, average.update))
    finally:
        _checks._API_NAME.reset(token)

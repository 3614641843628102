"""Hyperparameters as state: `inject_hyperparams`."""

from __future__ import annotations

import inspect
import numbers
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree


class InjectHyperparamsState(NamedTuple):
    """State of `inject_hyperparams`."""

    count: _protocol.Count  # int32: completed updates
    hyperparams: dict  # name -> the value used in the last step (schedules evaluated), editable
    inner_state: Any


def _is_injectable(value: Any, mark: Any) -> bool:
    if _checks.is_schedule(value):
        # only where the factory takes "a number or a schedule" (`ScalarOrSchedule`): other
        # callables (label functions, `fn` arguments, a schedule-only argument) stay static
        return mark is _protocol.HYPERPARAMETER
    if isinstance(value, bool):
        return False
    if (
        isinstance(value, (jax.Array, jnp.ndarray))
        or isinstance(value, numbers.Real)
        and not isinstance(value, int)
    ):
        return getattr(value, "ndim", 0) == 0  # a Python number is 0-d
    return False


@_base.api
def inject_hyperparams(
    factory: Callable[..., _protocol.GradientTransformation],
    *,
    static_args: tuple[str, ...] = (),
    hyperparam_dtype: Any = None,
) -> Callable[..., _protocol.GradientTransformation]:
    """Make the numeric hyperparameters of any factory part of the state, so changing them never recompiles.

    `inject_hyperparams(gradtx.adam)(learning_rate=1e-3)` behaves like `gradtx.adam(1e-3)`,
    but its state is `InjectHyperparamsState(count, hyperparams, inner_state)` with
    `hyperparams = {"learning_rate": ..., "b1": ..., ...}` (a dict, as in optax). Replace a
    value in the state between steps (e.g. `state.hyperparams["learning_rate"] = 0.01`)
    and the jitted step uses it without retracing. Float (and scalar array) arguments and
    schedules are injected; a schedule is evaluated at `count` each step and its value
    stored (a callable counts as a schedule where the factory annotates the argument
    `ScalarOrSchedule`; other callables stay static). Ints, bools, strings, containers and
    transforms stay static, as do names in `static_args`.

    Args:
      factory: any gradtx (or optax) factory returning a transform.
      static_args: argument names to keep static even if numeric.
      hyperparam_dtype: dtype of the injected values (default: float32, float64 under x64).

    Returns:
      A function taking the factory's arguments and returning the transform.

    Raises:
      TypeError: if `factory` is not callable, or the arguments do not fit its signature.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.inject_hyperparams(gradtx.sgd)(learning_rate=0.1)
        >>> state = tx.init(jnp.zeros(2))
        >>> state.hyperparams["learning_rate"] = jnp.asarray(0.5)
        >>> tx.update(jnp.ones(2), state)[0]
        Array([-0.5, -0.5], dtype=float32)
    """
    _checks.check_callable("inject_hyperparams", "factory", factory)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`inject_hyperparams`: cannot read the signature of {factory!r}: {err}.") from None
    name = getattr(factory, "__name__", repr(factory))

    def wrapped(*args: Any, **kwargs: Any) -> _protocol.GradientTransformation:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"`inject_hyperparams({name})`: {err}.") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        params = signature.parameters
        var_kw = next((p.name for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        var_pos = next((p.name for p in params.values() if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
        keywords = dict(arguments.pop(var_kw, {})) if var_kw else {}  # e.g. per_leaf's **hyperparams
        var_args = tuple(arguments.pop(var_pos, ())) if var_pos else ()

        def injectable(name, value):
            mark = _protocol.mark_of(factory, name if name in params else var_kw or "")
            return name not in static_args and _is_injectable(value, mark)

        candidates = {**arguments, **keywords}
        numeric = {k: v for k, v in candidates.items() if injectable(k, v)}
        static = {k: v for k, v in candidates.items() if k not in numeric}
        dtype = hyperparam_dtype or jax.dtypes.canonicalize_dtype(jnp.float64)

        def build(values: dict) -> _protocol.GradientTransformation:
            call = {**static, **values}
            positional = [
                call.pop(p.name) for p in params.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY
            ]
            return _base.with_extra_args_support(factory(*positional, *var_args, **call))

        def values_at(count):
            return {k: jnp.asarray(_tree.resolve(v, count), dtype) for k, v in numeric.items()}

        def init_fn(params):
            count = _tree.zero_count()
            values = values_at(count)
            return InjectHyperparamsState(count, values, build(values).init(params))

        def update_fn(updates, state, params=None, **extra_args):
            values = dict(state.hyperparams)
            values.update(
                {k: jnp.asarray(v(state.count), dtype) for k, v in numeric.items() if _checks.is_schedule(v)}
            )
            new_updates, inner = build(values).update(updates, state.inner_state, params, **extra_args)
            return new_updates, InjectHyperparamsState(_tree.increment(state.count), values, inner)

        return _base.composite(
            init_fn, update_fn, build(values_at(_tree.zero_count()))
        )  # the inner one's kind

    return wrapped

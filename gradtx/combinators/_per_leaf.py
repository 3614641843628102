"""`per_leaf`: write an optimizer as one rule for one array (RETURNN's BaseCustomOptimizer idea)."""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class PerLeafState(NamedTuple):
    """State of `per_leaf`."""

    count: _protocol.Count  # int32: completed updates (the rule gets it: step t sees count = t-1)
    slots: _protocol.SlotDict  # slot name -> tree of that slot, as `init_slots` made them


_PREFIX = "hyper_"  # the rule's hyperparameters in `h` (so that one named `t` is not `h.t`)


def _per_leaf_leaf(g, slots, w, h, *, apply, names):
    """`apply` on one parameter: `(step, new slots)`, the slots it returns checked against the state's."""
    values = {k: getattr(h, _PREFIX + k) for k in names}
    step, new = apply(g, w, dict(slots), h.count, **values)
    if sorted(new) != sorted(slots):
        raise ValueError(f"`per_leaf`: `apply` must return the slots {sorted(slots)}, got {sorted(new)}.")
    return step, dict(new)


@_registry.transform()
def per_leaf(
    init_slots: Callable[[jax.Array], dict[str, jax.Array]],
    apply: Callable[..., tuple[jax.Array, dict[str, jax.Array]]],
    **hyperparams: _protocol.ScalarOrSchedule,
) -> _protocol.GradientTransformation:
    r"""A full optimizer from one per-array rule: RETURNN's "just implement `_apply`".

    `init_slots(param) -> {name: array}` makes the slots of one parameter;
    `apply(grad, param, slots, count, **hyperparams) -> (step, new_slots)` computes the
    step to *subtract* from one parameter (RETURNN's `_assign_sub(var, step)`) and its new
    slots. `per_leaf` lifts them to pytrees, resolves the hyperparameters (numbers or
    schedules of `count`) once per step (a number is passed as it is, an array value in
    the leaf's dtype), keeps `count`, and densifies row-sparse gradients; the step comes
    back in the gradient's dtype and the slots in theirs. The slots are visible by name
    (`gradtx.get_slot(state, "m")`).

    RETURNN's `CustomGradientDescentOptimizer` is::

        def custom_sgd(learning_rate):
            return gradtx.per_leaf(lambda p: {},
                                   lambda g, p, slots, count, learning_rate: (learning_rate * g, slots),
                                   learning_rate=learning_rate)

    and its `CustomAdamOptimizer` (float32 beta powers from `count`)::

        def custom_adam(learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8):
            def init(p):
                return {"m": jnp.zeros_like(p), "v": jnp.zeros_like(p)}

            def apply(g, p, s, count, learning_rate, beta1, beta2, epsilon):
                t = (count + 1).astype(g.dtype)
                lr = learning_rate * jnp.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                m = beta1 * s["m"] + (1 - beta1) * g
                v = beta2 * s["v"] + (1 - beta2) * _tree.abs_sq(g)
                return lr * (m / (jnp.sqrt(v) + epsilon)), {"m": m, "v": v}

            return gradtx.per_leaf(init, apply, learning_rate=learning_rate, beta1=beta1,
                                   beta2=beta2, epsilon=epsilon)

    Args:
      init_slots: `param -> {slot name: array}` for one parameter (may look only at its
        shape and dtype, so that init from `jax.ShapeDtypeStruct` works).
      apply: the rule for one parameter, as above; jittable.
      **hyperparams: the rule's hyperparameters, each a number, scalar array or schedule.

    Returns:
      A `GradientTransformation` with state `PerLeafState(count, slots)`.

    Raises:
      TypeError: if `init_slots` or `apply` is not callable, or a hyperparameter is not a
        number or schedule; at update time, if `params` is missing (ValueError).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> sgd = gradtx.per_leaf(lambda p: {}, lambda g, p, s, count, learning_rate: (learning_rate * g, s),
        ...                       learning_rate=0.5)
        >>> params = jnp.ones(2)
        >>> gradtx.apply_updates(params, sgd.update(jnp.ones(2), sgd.init(params), params)[0])
        Array([0.5, 0.5], dtype=float32)

    References:
      RETURNN, `returnn/tf/updater.py`: `BaseCustomOptimizer`.
    """
    fn = "per_leaf"
    _checks.check_callable(fn, "init_slots", init_slots)
    _checks.check_callable(fn, "apply", apply)
    for name, value in hyperparams.items():
        _checks.check_hyperparam(fn, name, value)

    rule = update_rule(
        fn,
        PerLeafState,
        functools.partial(_per_leaf_leaf, apply=apply, names=tuple(hyperparams)),
        hyper={_PREFIX + k: v for k, v in hyperparams.items()},
        slots={"slots": init_slots},  # a `SlotDict`: one dict per parameter
        reads_params=True,
        kind=_protocol.LeafWise,  # `apply` may read whole arrays
    )
    return chain(rule, scale_by_learning_rate(1.0))  # `apply` returns the step to subtract

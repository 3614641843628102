"""Weight decay: `add_decayed_weights` (through the gradient), `decoupled_weight_decay` (AdamW, MomentumW),
pytorch-optimizer's three forms (`torch_weight_decay`)."""

from __future__ import annotations

from typing import Any, NamedTuple

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core import walk as _walk
from gradtx._core.chain import chain
from gradtx.combinators import _masking
from gradtx.combinators._masking import Mask
from gradtx.combinators._scale import scale_by_learning_rate


class AddDecayedWeightsState(NamedTuple):
    """State of `add_decayed_weights` when `weight_decay` is a schedule."""

    count: _protocol.Count  # int32: completed updates


@_registry.transform()
def add_decayed_weights(
    weight_decay: _protocol.ScalarOrSchedule, *, mask: Mask | None = None
) -> _protocol.GradientTransformation:
    r"""Add `weight_decay * params` to the updates (L2 regularization through the gradient).

    .. math:: u \leftarrow u + \lambda\, w

    Put it before `scale_by_learning_rate` to get the decay scaled by the rate (optax's
    AdamW convention). TF's decoupled decay (`adamw`, `momentumw`) is different: it
    subtracts `weight_decay * var` unscaled; see those aliases. A row-sparse update gets
    the decay on its rows only.

    Args:
      weight_decay: the factor, >= 0 (number, scalar array or schedule); a number 0 returns the updates
        as they are (as optax does: no `+ 0 * params` for XLA to keep).
      mask: which parameters decay (a tree of bools, a function `params -> tree`, or a list
        of key-path patterns); all when None.

    Returns:
      A `GradientTransformation`; state `EmptyState()`, or `AddDecayedWeightsState(count)`
      for a schedule.

    Raises:
      ValueError: for a negative `weight_decay`; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.add_decayed_weights(0.1)
        >>> params = jnp.array([1.0, -2.0])
        >>> tx.update(jnp.zeros(2), tx.init(params), params)[0]
        Array([ 0.1, -0.2], dtype=float32)
    """
    fn = "add_decayed_weights"
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    if mask is not None:
        _masks.check_mask(fn, mask)
    scheduled = _hyper.any_schedule(weight_decay)
    none = _scalars.is_python_number(weight_decay) and weight_decay == 0  # 0: the updates as given

    def init_fn(params):
        if mask is not None and not _masks.is_placeholder(params):  # fail early on a bad mask
            _masks.resolve_mask(fn, mask, params)
        return AddDecayedWeightsState(_hyper.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise _protocol.missing_params(fn)
        if none:  # no work for XLA to keep (`p * 0` is not 0 for an infinite `p`), as optax skips it
            return updates, state
        wd = _hyper.resolve(weight_decay, state.count if scheduled else None)
        m = _masks.resolve_mask(fn, True if mask is None else mask, params)

        def leaf(g, p, on):
            if not on:
                return g
            if _walk.is_row_sparse(g):
                g = g.deduplicated()  # the decay is added once per row
                return g.with_values(
                    g.values + _hyper.like(wd, g.values) * g.gather(p).astype(g.values.dtype)
                )
            return g + _hyper.like(wd, g) * p.astype(g.dtype)

        out = _walk.map_updates(fn, leaf, updates, params, m, names=("updates", "params", "mask"))
        return out, (AddDecayedWeightsState(_hyper.increment(state.count)) if scheduled else state)

    if mask is None:
        return _protocol.ElementWise(init_fn, update_fn)
    return _masking.by_structure(_protocol.GradientTransformation(init_fn, update_fn), mask, [])


class DecoupledWeightDecayState(NamedTuple):
    """State of `decoupled_weight_decay`."""

    count: _protocol.Count  # int32: completed updates
    inner_state: Any


def _add_rows(u: Any, rows: Any, like: Any) -> Any:
    """An inner update plus a decay given on the rows of the row-sparse gradient `like`."""
    if _walk.is_row_sparse(u):  # same deduplicated rows as the decay
        return u.with_values(u.values + rows.astype(u.values.dtype))
    return like.add_to_rows(u, rows)


@_registry.wrapper()
def decoupled_weight_decay(
    tx: Any,
    weight_decay: _protocol.ScalarOrSchedule,
    *,
    mask: Mask | None = None,
    learning_rate: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""TF's decoupled weight decay around an optimizer: `var -= weight_decay * var`, then `tx`'s step.

    .. math:: w \leftarrow w - \lambda w + \Delta_{tx}(g)

    This is contrib's `DecoupledWeightDecayExtension` (AdamW, MomentumW): the decay is NOT
    multiplied by the learning rate, and it is computed from the variable before the
    inner step (which does not read the variable for Adam or Momentum). Pass
    `learning_rate` for the other convention, `-learning_rate * weight_decay * var`
    (optax's `adamw`). With a row-sparse gradient only its rows decay, as contrib does.

    Args:
      tx: the inner optimizer (producing updates that are added to the params).
      weight_decay: the decay factor, >= 0 (number, scalar array or schedule).
      mask: which parameters decay (contrib's `decay_var_list`): a tree of bools, a
        function `params -> tree` or key-path patterns; all when None.
      learning_rate: if given, the decay is multiplied by it (the lr-scaled variant).

    Returns:
      A `GradientTransformation` with state `DecoupledWeightDecayState(count, inner_state)`.

    Raises:
      ValueError: for a negative `weight_decay`; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.decoupled_weight_decay(gradtx.sgd(0.1), weight_decay=0.5)
        >>> params = jnp.array([2.0])
        >>> tx.update(jnp.array([1.0]), tx.init(params), params)[0]  # -0.5 * 2 - 0.1 * 1
        Array([-1.1], dtype=float32)

    References:
      Loshchilov, Hutter, *Decoupled weight decay regularization*, ICLR 2019.
    """
    fn = "decoupled_weight_decay"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    if learning_rate is not None:
        _checks.check_learning_rate(fn, learning_rate)
    if mask is not None:
        _masks.check_mask(fn, mask)
    inner = _factory.member(tx)

    def init_fn(params):
        if mask is not None and not _masks.is_placeholder(params):  # fail early on a bad mask
            _masks.resolve_mask(fn, mask, params)
        return DecoupledWeightDecayState(_hyper.zero_count(), inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        wd = _hyper.resolve(weight_decay, state.count)
        if learning_rate is not None:
            wd = _hyper.scalar(_hyper.resolve(learning_rate, state.count), params) * wd
        on = _masks.resolve_mask(fn, True if mask is None else mask, params)
        inner_updates, inner_state = inner.update(updates, state.inner_state, params, **extra_args)

        def leaf(g, u, p, decay):
            if u is None or not decay:
                return u
            if _walk.is_row_sparse(g):
                g = g.deduplicated()
                return _add_rows(u, -_hyper.like(wd, p) * g.gather(p), g)
            return u + (-_hyper.like(wd, p) * p).astype(u.dtype)

        out = _walk.map_updates(
            fn, leaf, updates, inner_updates, params, on, names=("updates", "inner updates", "params", "mask")
        )
        return out, DecoupledWeightDecayState(_hyper.increment(state.count), inner_state)

    if mask is not None:  # a key-path mask: leaf-wise (resolved on unpacked params), exact on ZeRO's slices
        return _masking.by_structure(_protocol.GradientTransformation(init_fn, update_fn), mask, [inner])
    return _factory.composite(init_fn, update_fn, inner)


def torch_weight_decay(
    rule: Any,
    learning_rate: _protocol.ScalarOrSchedule,
    weight_decay: _protocol.ScalarOrSchedule,
    *,
    decouple: bool = True,
    fixed: bool = False,
    mask: Mask | None = None,
) -> _protocol.GradientTransformation:
    r"""A direction `rule` as an optimizer, with pytorch-optimizer's weight decay.

    - `decouple` (AdamW's): :math:`w \leftarrow w (1 - \eta\lambda) - \eta u`, as
      `chain(rule, add_decayed_weights(weight_decay), scale_by_learning_rate(learning_rate))`;
    - `decouple` and `fixed`: :math:`w \leftarrow w (1 - \lambda) - \eta u`, the decay not scaled by the
      rate (`decoupled_weight_decay` around the rest);
    - neither (L2): :math:`\lambda w` added to the gradient before `rule`.

    Each is the `apply_weight_decay` of pytorch-optimizer's base class, which its optimizers share; the
    frontier optimizers that reproduce one take these arguments under its names.
    """
    fn = "torch_weight_decay"
    _checks.check_bool(fn, "weight_decouple", decouple)
    _checks.check_bool(fn, "fixed_decay", fixed)
    rate = scale_by_learning_rate(learning_rate)
    if not decouple:
        return chain(add_decayed_weights(weight_decay, mask=mask), rule, rate)
    if fixed:
        return decoupled_weight_decay(chain(rule, rate), weight_decay, mask=mask)
    return chain(rule, add_decayed_weights(weight_decay, mask=mask), rate)

"""Sharpness-aware minimisation (optax's numbers): `sam`, `normalize`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import packed as _packed
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import rule_parts as _rule_parts
from gradtx._core import updates as _updates
from gradtx._core import walk as _walk


class SAMState(NamedTuple):
    """State of `sam` (optax's `SAMState`, field for field)."""

    steps_since_sync: jax.Array  # int32: adversarial steps taken since the last outer step
    opt_state: Any  # the outer optimizer's state
    adv_state: Any  # the adversarial optimizer's state
    cache: _protocol.Updates  # the params of the last outer step (None in opaque mode)


def _refuse_integers(fn: str, updates: Any, params: Any) -> None:
    """Refuse integer gradients or params (at trace time): every fractional update would round away."""
    leaves, treedef = jax.tree.flatten(updates, is_leaf=_walk.is_update_leaf)
    _rule_parts.refuse_integers(fn, updates, leaves, treedef, params, None)


@_registry.transform()
def normalize() -> _protocol.GradientTransformation:
    r"""Divide the updates by their global norm: a direction of unit length over all leaves together.

    .. math:: u \leftarrow u / \lVert u \rVert_2

    (no epsilon: a zero gradient gives NaN, as `optax.contrib.normalize`). SAM's adversarial
    optimizer is usually `chain(normalize(), sgd(rho))`: a step of length :math:`\rho` up the
    gradient. A row-sparse gradient is densified first.

    Args:
      (none)

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Raises:
      Nothing at construction.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.normalize()
        >>> tx.update({"a": jnp.array([3.0]), "b": jnp.array([4.0])}, tx.init(None))[0]
        {'a': Array([0.6], dtype=float32), 'b': Array([0.8], dtype=float32)}

    References:
      Foret, Kleiner, Mobahi, Neyshabur, *Sharpness-aware minimization for efficiently
      improving generalization*, ICLR 2021.
    """

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        _refuse_integers("normalize", updates, params)
        updates = sparse.densify(updates)
        norm = _formulas.global_norm(updates)
        return _walk.map_updates("normalize", lambda g: g / norm.astype(g.dtype), updates), state

    # per-leaf views of packed trees; its one reduction is `global_norm`'s (`_sliced.total`): ZeRO's slices
    return _protocol.SliceWise(*_packed.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn)))


@_registry.optimizer("SAM")
def sam(
    tx: Any,
    adv_tx: Any,
    sync_period: int = 2,
    reset_state: bool = True,
    opaque_mode: bool = False,
) -> _protocol.GradientTransformation:
    r"""Sharpness-aware minimisation: `sync_period - 1` adversarial steps, then one outer step from where
    they started.

    Each period of `sync_period` steps starts at the outer params :math:`w`. The adversarial
    optimizer (typically `chain(normalize(), sgd(rho))`) climbs: its updates are *negated*, so
    :math:`w_{adv} = w + \rho\, g / \lVert g \rVert` for SGD. The last step of the period
    gives the gradient :math:`g_{adv}` taken at the adversarial point to the outer optimizer,
    which steps from :math:`w`:

    .. math::
        w_{adv,0} = w, \quad w_{adv,i+1} = w_{adv,i} - \operatorname{adv}(g(w_{adv,i})), \quad
        w \leftarrow w + \operatorname{opt}(g(w_{adv,k-1}))

    With `opaque_mode=False` (transparent) each call is one of these steps: the params you
    train move to the adversarial points and back, the updates of the last step of a period
    being `cache - params + opt(g)` (the state's `cache` holds :math:`w`). With
    `opaque_mode=True` each call is a whole period: `update` must get the extra argument
    `grad_fn(params, i) -> gradients` and calls it `sync_period - 1` times (the `i`-th
    adversarial step); only outer steps reach your params (BatchNorm statistics stay in step
    with them). With `reset_state`, the adversarial optimizer's state starts afresh every
    period. Under `shard_map`/`pmap`, reduce the gradients inside `grad_fn`
    (`gradtx.parallel.mean_over`; `optax_compat`'s `sam` takes optax's `batch_axis_name` for
    that). The numbers of `optax.contrib.sam`. A row-sparse gradient is densified first.

    Args:
      tx: the outer optimizer (optax's `optimizer`).
      adv_tx: the adversarial optimizer (optax's `adv_optimizer`; its updates are negated: it climbs).
      sync_period: :math:`k`, the steps per period, an int >= 1 (1: no adversarial step).
      reset_state: re-initialise the adversarial optimizer's state after each outer step.
      opaque_mode: run a whole period per call (needs `grad_fn`), as above.

    Returns:
      A `GradientTransformation` with state `SAMState(steps_since_sync, opt_state, adv_state, cache)`.

    Raises:
      TypeError: for a non-transform optimizer, a non-int `sync_period` or non-bool flags;
        `MissingExtraArgError` (when traced, opaque mode) without `grad_fn`.
      ValueError: for `sync_period` < 1; at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sam(gradtx.sgd(0.1), gradtx.chain(gradtx.normalize(), gradtx.sgd(0.5)))
        >>> params = jnp.array([1.0])
        >>> state = tx.init(params)
        >>> u, state = tx.update(jnp.array([2.0]), state, params)  # adversarial: up by 0.5
        >>> params = params + u
        >>> u, state = tx.update(jnp.array([3.0]), state, params)  # outer: 1 - 0.1 * 3 from 1
        >>> params + u
        Array([0.7], dtype=float32)

    References:
      Foret, Kleiner, Mobahi, Neyshabur, *Sharpness-aware minimization for efficiently
      improving generalization*, ICLR 2021 (arXiv:2010.01412).
    """
    fn = "sam"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_transform(fn, "adv_tx", adv_tx)
    _checks.check_int(fn, "sync_period", sync_period, minimum=1)
    _checks.check_bool(fn, "reset_state", reset_state)
    _checks.check_bool(fn, "opaque_mode", opaque_mode)
    outer, adv = _factory.member(tx), _factory.member(adv_tx)

    def init_fn(params):
        cache = None if opaque_mode else jax.tree.map(lambda p: jnp.array(p, copy=True), params)
        return SAMState(_hyper.zero_count(), outer.init(params), adv.init(params), cache)

    def transparent(updates, state, params, grad_fn, extra_args):
        del grad_fn
        first, last = state.steps_since_sync == 0, state.steps_since_sync == sync_period - 1
        adv_updates, adv_state = adv.update(updates, state.adv_state, params, **extra_args)
        adv_updates = _walk.map_updates(fn, jnp.negative, adv_updates)
        opt_updates, opt_state = outer.update(updates, state.opt_state, state.cache, **extra_args)
        opt_updates = _walk.map_updates(fn, lambda u, c, p: c - p + u, opt_updates, state.cache, params)
        cache = _walk.where(first, params, state.cache)
        out = _walk.where(last, opt_updates, adv_updates)
        keep = adv.init(params) if reset_state else state.adv_state
        return out, SAMState(
            (state.steps_since_sync + 1) % sync_period,
            _walk.where(last, opt_state, state.opt_state),
            _walk.where(last, keep, adv_state),
            cache,
        )

    def opaque(updates, state, params, grad_fn, extra_args):
        if grad_fn is None:
            raise _protocol.missing_extra_arg(fn, "grad_fn", "lambda params, i: jax.grad(loss)(params)")
        adv_params, adv_state = params, state.adv_state
        for i in range(sync_period - 1):
            adv_updates, adv_state = adv.update(updates, adv_state, adv_params, **extra_args)
            adv_params = _updates.apply_updates(adv_params, _walk.map_updates(fn, jnp.negative, adv_updates))
            updates = sparse.densify(grad_fn(adv_params, i))
        if reset_state:
            adv_state = adv.init(params)
        out, opt_state = outer.update(updates, state.opt_state, params, **extra_args)
        return out, SAMState(jnp.zeros_like(state.steps_since_sync), opt_state, adv_state, None)

    def update_fn(updates, state, params=None, *, grad_fn=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        updates = sparse.densify(updates)
        return (opaque if opaque_mode else transparent)(updates, state, params, grad_fn, extra_args)

    return _factory.composite(init_fn, update_fn, outer, adv)


__all__ = ["SAMState", "normalize", "sam"]

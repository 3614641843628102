"""`agn` (AGNOptimizer): local steps, then one center step with the replicas' accumulated, normalized
gradients. The shared rules of the local-step wrappers are in `_averaging.py`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse
from gradtx.parallel import _axes
from gradtx.parallel._averaging import _plus, _start, _to_varying


class AGNState(NamedTuple):
    """State of `agn`."""

    count: _protocol.Count  # int32: local steps (TF's local_step)
    inner: _protocol.OptState  # the replica's own state of the wrapped transform (local steps)
    center_inner: (
        _protocol.OptState
    )  # the wrapped transform's state for the center (TF: the global vars' slots)
    global_center: _protocol.Updates  # TF's "global_center_variable" (identical on all replicas)
    grad_accum: _protocol.Updates  # TF's "grad_variable": gradients summed since the last communication


@_base.api
def agn(
    tx: Any, axis_name: _axes.AxisName, communication_period: int = 10
) -> _protocol.GradientTransformation:
    r"""Accumulated gradient normalization: local steps, then a center step with the averaged normalized sums.

    Each step `tx` updates the replica's parameters and the gradient is added to
    :math:`a_r`. When `count` divides by the period :math:`k`:

    .. math::
        c \leftarrow c + \mathrm{tx}_c\Big(\frac{1}{N}\sum_r \frac{a_r}{k}\Big), \qquad
        \theta_r \leftarrow c, \qquad a_r \leftarrow 0

    where :math:`\mathrm{tx}_c` is `tx` with its own state for the center (TF keeps
    separate slots for the global variables). TF's asynchronous workers apply their
    :math:`a_r / k` to the center one after another (N center steps per period: with SGD a
    move N times as long); here all replicas communicate at once and their normalized sums
    are averaged (one center step per period, the synchronous large-batch step: with
    `communication_period=1` it is `tx` on the mean gradient). With one replica this is
    TF's AGNOptimizer exactly. The reset to the center is returned as the update
    :math:`c - \theta_r`, so after `apply_updates` a replica holds :math:`c` up to the
    rounding of :math:`\theta_r + (c - \theta_r)` (exactly when the two are within a
    factor of two of each other); TF assigns :math:`c`.

    Args:
      tx: the optimizer for the local steps and the center (gradtx or optax).
      axis_name: the mapped axis (or tuple of axes) of the replicas.
      communication_period: local steps between communications, an int >= 1.

    Returns:
      A `GradientTransformation` with state `AGNState`; `update` needs `params`.

    Raises:
      ValueError: if `communication_period` < 1; at trace time, when `axis_name` is not
        bound or (under `check_vma=True`) the gradients are not per replica.
      TypeError: if `tx` is not a transform.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
        >>> tx = gradtx.parallel.agn(gradtx.sgd(0.1), "data", communication_period=2)
        >>> def run(g):
        ...     w, state = jnp.zeros(1), tx.init(jnp.zeros(1))
        ...     for _ in range(2):
        ...         u, state = tx.update(g, state, w)
        ...         w = gradtx.apply_updates(w, u)
        ...     return w
        >>> g = jax.device_put(-jnp.ones(jax.device_count()), jax.NamedSharding(mesh, P("data")))
        >>> w = np.asarray(jax.jit(jax.shard_map(run, mesh=mesh, in_specs=P("data"), out_specs=P("data")))(g))
        >>> np.unique(w)  # every replica holds the center after one center step of 0.1
        array([0.1], dtype=float32)

    References:
      Hermans, *Accumulated gradient normalization*, ACML 2017;
      `tf.contrib.opt.AGNOptimizer` (agn_optimizer.py).
    """
    fn = "agn"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_int(fn, "communication_period", communication_period, minimum=1)
    inner = _base.with_extra_args_support(tx)
    period = communication_period

    def init_fn(params):
        return AGNState(
            count=_tree.zero_count(),
            inner=inner.init(params),
            center_inner=inner.init(params),
            global_center=jax.tree.map(jnp.asarray, params),
            grad_accum=_tree.zeros_like(params),
        )

    def update_fn(updates, state, params=None, **extra_args):
        _, checked = _start(fn, axes, updates, params)
        u, new_inner = inner.update(updates, state.inner, params, **extra_args)
        u = sparse.densify(u)
        grads = sparse.densify(updates)
        accum = _tree.map_leaves(
            lambda a, g: a if g is None else (a + g).astype(a.dtype), state.grad_accum, grads
        )
        count = _tree.increment(state.count)
        keep = (_to_varying(u, axes, checked), state.center_inner, state.global_center, accum)

        def communicate(_):
            def normalized_mean(g, a):
                return None if g is None else jax.lax.pmean(a / jnp.asarray(period, a.dtype), axes)

            mean = _tree.map_leaves(normalized_mean, grads, accum)
            cu, center_inner = inner.update(mean, state.center_inner, state.global_center, **extra_args)
            cu = sparse.densify(cu)
            center = _tree.map_leaves(lambda c, x: c if x is None else _plus(c, x), state.global_center, cu)
            step = _tree.map_leaves(lambda uu, c, p: None if uu is None else c - p, u, center, params)
            reset = _tree.map_leaves(lambda g, a: a if g is None else jnp.zeros_like(a), grads, accum)
            return _axes.match_type((_to_varying(step, axes, checked), center_inner, center, reset), keep)

        u, center_inner, center, accum = jax.lax.cond(count % period == 0, communicate, lambda _: keep, None)
        return u, AGNState(
            count=count, inner=new_inner, center_inner=center_inner, global_center=center, grad_accum=accum
        )

    return _base.composite(init_fn, update_fn, inner)

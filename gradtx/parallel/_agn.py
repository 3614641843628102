"""`agn` (AGNOptimizer): local steps, then one center step with the replicas' accumulated, normalized
gradients. The shared rules of the local-step wrappers are in `_averaging.py`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx.parallel import _axes
from gradtx.parallel._averaging import _plus, _start, _to_varying


@jax.tree_util.register_pytree_with_keys_class
class Pull:
    """`agn`'s update of one parameter: add the local step `delta`, or, where `pull` holds, become `value`.

    TF assigns the center to each worker's variables after a communication; an additive
    update `center - param` cannot always give the center back exactly (`param + (center -
    param)` rounds), so the pull is an assignment that `apply_updates` (or optax's, through
    `param + update`) carries out. It is an update leaf for `apply_updates` only: put
    nothing after `agn` in a chain.
    """

    _gradtx_update_leaf = True
    __slots__ = ("delta", "value", "pull")
    delta: jax.Array
    value: jax.Array
    pull: jax.Array

    def __init__(self, delta: Any, value: Any, pull: Any):
        for name, x in (("delta", delta), ("value", value), ("pull", pull)):
            object.__setattr__(self, name, x)

    def tree_flatten_with_keys(self):
        """The children `delta`, `value`, `pull` with their key paths."""
        names = ("delta", "value", "pull")
        return tuple((jax.tree_util.GetAttrKey(n), getattr(self, n)) for n in names), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        del aux
        return cls(*children)

    @property
    def shape(self) -> tuple[int, ...]:
        """The parameter's shape."""
        return tuple(jnp.shape(self.delta))

    @property
    def dtype(self) -> Any:
        """The dtype of the local step."""
        return self.delta.dtype

    def applied_to(self, param: Any) -> jax.Array:
        """The new parameter: `value` where `pull` holds, else `param + delta` (in the parameter's dtype)."""
        param = jnp.asarray(param)
        return jnp.where(self.pull, self.value.astype(param.dtype), (param + self.delta).astype(param.dtype))

    def __radd__(self, param: Any) -> jax.Array:  # `param + update`, as optax.apply_updates writes it
        return self.applied_to(param)


class AGNState(NamedTuple):
    """State of `agn`."""

    count: _protocol.Count  # int32: local steps (TF's local_step)
    inner: _protocol.OptState  # the replica's own state of the wrapped transform (local steps)
    center_inner: (
        _protocol.OptState
    )  # the wrapped transform's state for the center (TF: the global vars' slots)
    global_center: _protocol.Updates  # TF's "global_center_variable" (identical on all replicas)
    grad_accum: _protocol.Updates  # TF's "grad_variable": gradients summed since the last communication


@_registry.wrapper("AGNOptimizer")
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
    TF's AGNOptimizer exactly, bit for bit: each update leaf is a `Pull`, which
    `apply_updates` (or `optax.apply_updates`) turns into the local step, or on a
    communicating step into the center itself (TF assigns :math:`c`; an additive
    :math:`c - \theta_r` would round). Apply the updates directly: nothing may follow `agn`
    in a chain.

    Args:
      tx: the optimizer for the local steps and the center (gradtx or optax).
      axis_name: the mapped axis (or tuple of axes) of the replicas.
      communication_period: local steps between communications, an int >= 1.

    Returns:
      A `GradientTransformation` with state `AGNState` whose updates are `Pull` leaves;
      `update` needs `params`.

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
    inner = _factory.member(tx)
    period = communication_period

    def init_fn(params):
        return AGNState(
            count=_hyper.zero_count(),
            inner=inner.init(params),
            center_inner=inner.init(params),
            global_center=jax.tree.map(jnp.asarray, params),
            grad_accum=_placement.zeros_like(params),
        )

    def update_fn(updates, state, params=None, **extra_args):
        _, checked = _start(fn, axes, updates, params)
        u, new_inner = inner.update(updates, state.inner, params, **extra_args)
        u = sparse.densify(u)
        grads = sparse.densify(updates)
        accum = _walk.map_leaves(
            lambda a, g: a if g is None else (a + g).astype(a.dtype), state.grad_accum, grads
        )
        count = _hyper.increment(state.count)
        pull = count % period == 0
        keep = (state.center_inner, state.global_center, accum)

        def communicate(_):
            def normalized_mean(g, a):
                return None if g is None else jax.lax.pmean(a / jnp.asarray(period, a.dtype), axes)

            mean = _walk.map_leaves(normalized_mean, grads, accum)
            cu, center_inner = inner.update(mean, state.center_inner, state.global_center, **extra_args)
            cu = sparse.densify(cu)
            center = _walk.map_leaves(lambda c, x: c if x is None else _plus(c, x), state.global_center, cu)
            reset = _walk.map_leaves(lambda g, a: a if g is None else jnp.zeros_like(a), grads, accum)
            return _axes.match_type((center_inner, center, reset), keep)

        center_inner, center, accum = jax.lax.cond(pull, communicate, lambda _: keep, None)
        u = _walk.map_leaves(
            lambda uu, c: None if uu is None else Pull(uu, c, pull), _to_varying(u, axes, checked), center
        )
        return u, AGNState(
            count=count, inner=new_inner, center_inner=center_inner, global_center=center, grad_accum=accum
        )

    return _factory.composite(init_fn, update_fn, inner)

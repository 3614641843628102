"""Cautious updates (Liang et al. 2024): `cautious_mask` (the formula) and the wrapper `cautious`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import packed as _packed
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import row_sparse as _row_sparse
from gradtx._core import sliced as _sliced
from gradtx._core import walk as _walk


def cautious_mask(u: jax.Array, g: jax.Array, path: Any = ()) -> jax.Array:
    r"""`u` where it agrees in sign with `g`, zero elsewhere, rescaled by :math:`n / (n_{agree} + 1)`.

    pytorch-optimizer's `apply_cautious` (the mask `u g > 0`, strictly, over one whole tensor), for real
    tensors. The count is taken in float32 at least; on ZeRO's slice of the leaf at `path`, :math:`n` and
    the count are the whole leaf's (`_sliced`).
    """
    agree = u * g > 0
    wide = jnp.promote_types(u.dtype, jnp.float32)
    kept = _sliced.total(jnp.sum(agree, dtype=wide))
    scale = jnp.asarray(_sliced.leaf_size(path, u), wide) / (kept + 1)
    return u * (agree.astype(wide) * scale).astype(u.dtype)


_REAL_ONLY = "the sign agreement of an update and a gradient is defined for real numbers"


class CautiousState(NamedTuple):
    """State of `cautious`."""

    inner_state: Any  # the wrapped transform's state


@_registry.wrapper()
def cautious(inner: Any, *, negated: bool = False) -> _protocol.GradientTransformation:
    r"""Cautious updates: zero each element of `inner`'s update that disagrees in sign with the gradient.

    .. math::
        \phi_t = \mathbb{1}[u_t \odot g_t > 0], \qquad
        \tilde u_t = u_t \odot \phi_t \, \frac{n}{\textstyle\sum_i \phi_{t,i} + 1}

    per parameter of :math:`n` elements: the kept elements are scaled up so that the update keeps
    its size on average. This is pytorch-optimizer's `apply_cautious` (its `cautious=True` of
    `Lion`, `AdEMAMix`, `LaProp`, `ADOPT`, `MARS`, ...): the paper's Algorithm 1 with its
    normalization :math:`n / (\operatorname{nnz}(\phi) + 1)`; heavyball's C-variants instead keep
    elements whose signs agree by sign bit (zeros included) and scale by :math:`n / \max(1,
    \operatorname{nnz}(\phi))`. `inner` gives a direction :math:`u` (the step is
    :math:`-\eta u`: `scale_by_adam`, `scale_by_lion`), or with `negated=True` the updates added to
    the params (`adamw(...)`), masked where they move along the gradient. The references apply
    their weight decay outside the mask: wrap the direction and add the decay after,
    `torch_weight_decay(cautious(rule), learning_rate, weight_decay)` or `chain(cautious(
    scale_by_adam()), add_decayed_weights(wd), scale_by_learning_rate(lr))`; wrapping a whole
    optimizer masks its decay too. A row-sparse gradient is densified before `inner` sees it.
    A NaN gradient makes the masked step NaN only where `inner`'s is. Complex parameters are refused
    (a sign agreement has no rotation-invariant meaning).

    Args:
      inner: the transform whose updates are masked.
      negated: `inner`'s updates are added to the params (an optimizer), not a direction.

    Returns:
      A `LeafWise` transform with state `CautiousState(inner_state)`.

    Raises:
      TypeError: if `inner` is not a transform or `negated` not a bool; at update time, for a complex
        gradient or parameter.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.cautious(gradtx.scale_by_lion())
        >>> u, state = tx.update(jnp.array([1.0, -2.0, 3.0]), tx.init(jnp.zeros(3)))
        >>> u  # every sign agrees: each element scaled by 3 / (3 + 1)
        Array([ 0.75, -0.75,  0.75], dtype=float32)

    References:
      Liang, Chen, Liu, Liu, *Cautious optimizers: improving training with one line of code* (2024),
      arXiv:2411.16085; pytorch-optimizer's `BaseOptimizer.apply_cautious` (the reference of the tests).
    """
    fn = "cautious"
    _checks.check_transform(fn, "inner", inner)
    _checks.check_bool(fn, "negated", negated)
    member = _factory.member(inner)

    def init_fn(params):
        return CautiousState(member.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        _factory.refuse_complex(fn, updates, params, why=_REAL_ONLY)
        grads = _row_sparse.densify(updates)
        out, inner_state = member.update(grads, state.inner_state, params, **extra_args)
        flat = jax.tree_util.tree_flatten_with_path(out, is_leaf=_walk.is_update_leaf)[0]
        paths = iter([k for k, u in flat if u is not None])  # `leaf` is called for these, in this order

        def leaf(u, g):
            g = g.astype(u.dtype)
            return cautious_mask(u, -g if negated else g, next(paths))

        masked = _walk.map_updates(fn, leaf, out, grads, names=("inner updates", "updates"))
        return masked, CautiousState(inner_state)

    raw = _packed.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))
    on_slices = isinstance(member, (_protocol.ElementWise, _protocol.SliceWise))
    return _protocol.SliceWise(*raw) if on_slices else raw  # the counts are whole leaves' on ZeRO's slices


__all__ = ["CautiousState", "cautious"]

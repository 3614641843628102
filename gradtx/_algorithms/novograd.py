"""NovoGrad (optax's numbers): `scale_by_novograd`, `novograd`."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, first_step, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByNovogradState(NamedTuple):
    """State of `scale_by_novograd`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the momentum of the normalised gradients (starts at 0)
    nu: _protocol.Updates  # per leaf, a scalar: the moving average of ||g||^2 (starts at ||g_1||^2)


# `v` is one scalar per leaf: only `m` is compared with the params' shapes (`_tree_checks.check_shapes`)
setattr(ScaleByNovogradState, "slots_shaped_like_params", ("m",))  # noqa: B010  (not a field)


def _novograd_leaf(g, m, v, w, h):
    """One leaf: `(update, m, v)`; `v` starts at the first step's `||g||^2`."""
    norm2 = (_formulas.leaf_norm(g) ** 2).astype(v.dtype)  # optax's `norm(g) ** 2`, its bits
    v = jnp.where(h.first, norm2, _formulas.optax_moment(v, norm2, h.b2))
    scaled = g / (jnp.sqrt(v + h.eps_root) + h.eps).astype(g.dtype)
    m = h.b1 * m + (scaled + h.weight_decay * w.astype(g.dtype)).astype(m.dtype)
    return m, m, v


def _scalar_slot(p, dtype=None):
    """A per-leaf scalar on the parameter's devices (in `dtype`, default the parameter's)."""
    return _placement.reduced(p, (), dtype)


@_registry.transform()
def scale_by_novograd(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.25,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""NovoGrad: momentum of the gradients divided by the root of a per-layer (per-leaf) second moment.

    For each leaf :math:`l`, with :math:`\lVert\cdot\rVert` the L2 norm of the whole leaf:

    .. math::
        v^l_1 = \lVert g^l_1\rVert^2, \qquad
        v^l_t = \beta_2 v^l_{t-1} + (1 - \beta_2) \lVert g^l_t\rVert^2, \\
        m^l_t = \beta_1 m^l_{t-1} + \frac{g^l_t}{\sqrt{v^l_t + \epsilon_{root}} + \epsilon}
        + \lambda w^l_t, \qquad u^l_t = m^l_t

    The second moment is one scalar per leaf, so the state costs one slot shaped like the
    params (`mu`). These are the numbers of `optax.scale_by_novograd`. A row-sparse
    gradient is densified first.

    Args:
      b1: decay of the momentum `mu`, in [0, 1].
      b2: decay of the per-leaf second moment `nu`, in [0, 1].
      eps: added to the root of `nu`, >= 0.
      eps_root: added to `nu` under the root, >= 0.
      weight_decay: :math:`\lambda`, the weight decay added to the normalised gradient, >= 0.
      mu_dtype: dtype of `mu` (default: each param's dtype).
      nu_dtype: dtype of the per-leaf `nu` (default: each param's dtype).

    Returns:
      A `GradientTransformation` with state `ScaleByNovogradState(count, mu, nu)`.

    Raises:
      ValueError: if a decay is outside [0, 1] or `eps`, `eps_root` or `weight_decay` is
        negative; at update time, if `params` is missing.
      TypeError: for a `mu_dtype` or `nu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_novograd(eps=0.0)
        >>> params = jnp.zeros(2)
        >>> u, state = tx.update(jnp.array([3.0, 4.0]), tx.init(params), params)
        >>> u, state.nu  # g / ||g||, and v = ||g||^2
        (Array([0.6, 0.8], dtype=float32), Array(25., dtype=float32))

    References:
      Ginsburg et al., *Stochastic gradient methods with layer-wise adaptive moments for
      training of deep networks*, 2019 (arXiv:1905.11286), Algorithm 1.
    """
    fn = "scale_by_novograd"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0)
    for name, value in (("eps", eps), ("eps_root", eps_root), ("weight_decay", weight_decay)):
        _checks.check_finite(fn, name, value)
        _checks.check_nonnegative(fn, name, value)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_float_dtype(fn, "nu_dtype", nu_dtype)

    return update_rule(
        fn,
        ScaleByNovogradState,
        _novograd_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root, "weight_decay": weight_decay},
        slots={
            "mu": Slot(0.0, mu_dtype),
            "nu": _scalar_slot if nu_dtype is None else functools.partial(_scalar_slot, dtype=nu_dtype),
        },
        reads_params=True,
        kind=_protocol.SliceWise,  # the second moment is the whole leaf's (`leaf_norm`, on ZeRO's slices too)
        prepare=first_step,
    )


@_registry.optimizer("NovoGrad")
def novograd(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.25,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""NovoGrad: momentum of gradients normalised by a per-layer second moment, plus weight decay.

    `chain(scale_by_novograd(b1, b2, eps, eps_root, weight_decay, mu_dtype=mu_dtype),
    scale_by_learning_rate(learning_rate))`: the numbers of `optax.novograd`. The second
    moment is one number per leaf (the moving average of :math:`\lVert g\rVert^2`), so the
    state is one slot shaped like the params. A row-sparse gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1].
      b2: decay of the per-leaf second moment, in [0, 1].
      eps: added to the root of the second moment, >= 0.
      eps_root: added under the root, >= 0.
      weight_decay: added to the normalised gradient as `weight_decay * params`, >= 0.
      mu_dtype: dtype of the momentum `m` (default: each param's dtype).
      nu_dtype: dtype of the per-leaf second moment `v` (default: each param's dtype).

    Returns:
      A `SliceWise` chain (on ZeRO's slices each leaf's norm is still the whole leaf's); its
      slots are `m` and `v` (one scalar per leaf).

    Raises:
      ValueError: for a decay outside [0, 1], or a negative `eps`, `eps_root`, weight decay or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.novograd(1.0, eps=0.0)
        >>> params = {"w": jnp.zeros(2)}
        >>> tx.update({"w": jnp.array([3.0, 4.0])}, tx.init(params), params)[0]["w"]  # -lr g / ||g||
        Array([-0.6, -0.8], dtype=float32)

    References:
      Ginsburg et al., *Stochastic gradient methods with layer-wise adaptive moments for
      training of deep networks*, 2019 (arXiv:1905.11286).
    """
    return chain(
        scale_by_novograd(b1, b2, eps, eps_root, weight_decay, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByNovogradState", "novograd", "scale_by_novograd"]

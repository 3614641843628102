"""SM3: `scale_by_sm3`, Adagrad with one accumulator per index of each axis instead of per element."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse
from gradtx.transforms._adafactor import reduced_zeros


class ScaleBySM3State(NamedTuple):
    """State of `scale_by_sm3`."""

    count: _protocol.Count  # int32: completed updates
    accumulators: _protocol.Updates  # per leaf, a list: one vector per axis (the leaf itself below 2 axes)
    momentum: _protocol.Updates  # the moving average of the scaled gradients (starts at 0)


def _cover_init(p) -> list[jax.Array]:
    """A leaf's accumulators: one per axis, placed like it; below two axes, one shaped like the leaf."""
    if p.ndim < 2:
        return [_tree.zeros_like(p)]
    return [reduced_zeros(p, (i,), p.dtype) for i in range(p.ndim)]


def _sm3_leaf(g, accumulators, m, b1, b2, eps):
    """One leaf: `(update, accumulators, momentum)`."""
    if g.ndim < 2:
        previous = accumulators[0]
    else:
        shapes = [[1] * i + [g.shape[i]] + [1] * (g.ndim - i - 1) for i in range(g.ndim)]
        previous = functools.reduce(
            jnp.minimum, [a.reshape(s) for a, s in zip(accumulators, shapes, strict=True)]
        )
    b2 = _tree.like(b2, g)
    nu = jnp.where(b2 == 1, jnp.ones_like(b2), 1 - b2) * (g * g) + b2 * previous
    scaled = g * jnp.where(nu > 0, jax.lax.rsqrt(nu + _tree.like(eps, nu)), 0.0)
    new_m = _tree.moment_blend(m, scaled, _tree.like(b1, m))
    if g.ndim < 2:
        new_accumulators = [nu]
    else:
        others = [tuple(j for j in range(g.ndim) if j != i) for i in range(g.ndim)]
        new_accumulators = [jnp.max(nu, axis=axes, initial=0.0) for axes in others]  # nu >= 0
    return (
        new_m.astype(g.dtype),
        [a.astype(o.dtype) for a, o in zip(new_accumulators, accumulators, strict=True)],
        new_m,
    )


@_base.api
@_base.real_only("its cover accumulators take maxima of real squares")
def scale_by_sm3(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 1.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""SM3: divide by the square root of a sum of squared gradients kept per index of each axis (a cover).

    For a leaf with axes :math:`r = 1..k` and accumulators :math:`\mu_r` (one entry per
    index along axis :math:`r`):

    .. math::
        \nu_t(i) = \beta_2' g_t(i)^2 + \beta_2 \min_{r} \mu_{r,t-1}(i_r), \qquad
        \mu_{r,t}(j) = \max_{i:\, i_r = j} \nu_t(i), \\
        m_t = \beta_1 m_{t-1} + (1-\beta_1)\, \frac{g_t}{\sqrt{\nu_t + \epsilon}}
        \;(0 \text{ where } \nu_t = 0), \qquad u_t = m_t

    with :math:`\beta_2' = 1 - \beta_2`, or 1 when :math:`\beta_2 = 1` (the paper's sum).
    Memory is the sum of the axes' lengths instead of their product. A leaf with fewer
    than two axes keeps one accumulator shaped like it (plain Adagrad, which the paper's
    cover of singletons gives). These are the numbers of `optax.scale_by_sm3` (which
    refuses scalar leaves; here they work like vectors). A row-sparse gradient is
    densified first.

    Args:
      b1: decay of the momentum `m`, in [0, 1].
      b2: decay of the accumulators, in [0, 1] (1: a sum, as in the paper).
      eps: added under the square root, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleBySM3State(count, accumulators, momentum)`.

    Raises:
      ValueError: if a decay is outside [0, 1] or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_sm3(b1=0.0)
        >>> state = tx.init(jnp.zeros((2, 3)))
        >>> [a.shape for a in state.accumulators]  # one per row, one per column
        [(2,), (3,)]
        >>> u, state = tx.update(jnp.full((2, 3), 2.0), state)
        >>> [round(float(x), 4) for x in u[0]]  # g / sqrt(g^2)
        [1.0, 1.0, 1.0]

    References:
      Anil, Gupta, Koren, Singer, *Memory-efficient adaptive optimization*, NeurIPS 2019
      (Algorithms SM3-I and SM3-II).
    """
    fn = "scale_by_sm3"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)

    def init_fn(params):
        return ScaleBySM3State(
            _tree.zero_count(), jax.tree.map(_cover_init, params), _tree.zeros_like(params)
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        b1_, b2_, eps_ = (_tree.resolve(h, state.count) for h in (b1, b2, eps))
        out, accumulators, momentum = _tree.split_map(
            fn,
            lambda g, a, m: _sm3_leaf(g, a, m, b1_, b2_, eps_),
            3,
            sparse.densify(updates),
            state.accumulators,
            state.momentum,
            names=("updates", "state.accumulators", "state.momentum"),
        )
        return out, ScaleBySM3State(_tree.increment(state.count), accumulators, momentum)

    return _protocol.GradientTransformation(init_fn, update_fn)

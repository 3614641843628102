"""SM3 (optax's numbers): `scale_by_sm3`, `sm3`."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleBySM3State(NamedTuple):
    """State of `scale_by_sm3`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # per leaf, a list: one vector per axis (the leaf itself below 2 axes)
    nu: _protocol.Updates  # the moving average of the scaled gradients (starts at 0)


def _cover_init(p, path=()) -> list[jax.Array]:
    """A leaf's accumulators: one per axis, placed like it; below two axes, one shaped like the leaf. For
    ZeRO's slice of a leaf, the whole leaf's accumulators."""
    shape = _sliced.whole_shape(path, p)
    if len(shape) < 2:
        return [_placement.filled(p, 0.0)]
    if shape != tuple(jnp.shape(p)):  # a slice: the whole leaf's accumulators, on its devices
        return [_placement.replicated_on(p, (d,)) for d in shape]
    return [_placement.reduced(p, (i,)) for i in range(len(shape))]


def _sm3_leaf(g, accumulators, m, h, *, path):
    """One leaf: `(update, accumulators, momentum)`; on ZeRO's slice of a leaf, the accumulators are the
    whole leaf's (`_sliced`)."""
    shape = _sliced.whole_shape(path, g)
    n = len(shape)
    if n < 2:
        previous = accumulators[0]
    else:
        cover = [a.reshape([1] * i + [shape[i]] + [1] * (n - i - 1)) for i, a in enumerate(accumulators)]
        previous = _sliced.leaf_part(path, g, lambda whole: functools.reduce(jnp.minimum, cover))
    nu = h.new_weight * (g * g) + h.b2 * previous
    m = _formulas.optax_moment(m, g * jnp.where(nu > 0, jax.lax.rsqrt(nu + h.eps), 0.0), h.b1)
    if n < 2:
        return m, [nu], m
    others = [tuple(j for j in range(n) if j != i) for i in range(n)]
    return m, _sliced.leaf_maxima(path, nu, others), m  # nu >= 0; an empty leaf's maximum is 0


def _new_weight(h, state, extra_args):
    """The weight of the new squared gradient: `1 - b2`, or 1 when `b2` is 1 (the paper's sum)."""
    del state, extra_args
    if isinstance(h.b2, jax.core.Tracer):
        return {"new_weight": jnp.where(h.b2 == 1, 1.0, 1 - h.b2)}
    return {"new_weight": 1.0 if h.b2 == 1 else 1 - h.b2}


@_registry.transform()
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
    densified first. On ZeRO's slices (`parallel.sharded_state` inside `shard_map`) the
    accumulators are the whole leaf's: one all-reduce (a maximum) of the per-axis maxima per leaf.

    Args:
      b1: decay of the momentum `m`, in [0, 1].
      b2: decay of the accumulators, in [0, 1] (1: a sum, as in the paper).
      eps: added under the square root, >= 0.

    Returns:
      A `GradientTransformation` with state `ScaleBySM3State(count, mu, nu)`.

    Raises:
      ValueError: if a decay is outside [0, 1] or `eps` is negative.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_sm3(b1=0.0)
        >>> state = tx.init(jnp.zeros((2, 3)))
        >>> [a.shape for a in state.mu]  # one per row, one per column
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

    return update_rule(
        fn,
        ScaleBySM3State,
        _sm3_leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"mu": _cover_init, "nu": 0.0},
        prepare=_new_weight,
        kind=_protocol.SliceWise,  # one accumulator per index of each axis, on ZeRO's slices too
        paths=True,
        real_only="its cover accumulators take maxima of real squares",
    )


@_registry.optimizer("SM3")
def sm3(
    learning_rate: _protocol.ScalarOrSchedule,
    momentum: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 1.0,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""SM3: Adagrad with accumulators per row and per column (per index of each axis), and momentum.

    `chain(scale_by_sm3(momentum, b2, eps), scale_by_learning_rate(learning_rate))`: the
    numbers of `optax.sm3` (whose `b2` and `eps` are fixed at these defaults). The memory
    of a matrix's statistics is its rows plus its columns. A row-sparse gradient is
    densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      momentum: decay of the momentum, in [0, 1].
      b2: decay of the accumulators, in [0, 1] (1: a running sum, as in the paper).
      eps: added under the root, >= 0.

    Returns:
      A `SliceWise` chain; its slots are `accumulators` (a list per leaf) and `momentum`.

    Raises:
      ValueError: for a decay outside [0, 1], or a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sm3(1.0, momentum=0.0)
        >>> params = {"w": jnp.zeros((2, 2))}
        >>> tx.update({"w": jnp.array([[3.0, 0.0], [0.0, 4.0]])}, tx.init(params), params)[0]["w"]
        Array([[-1., -0.],
               [-0., -1.]], dtype=float32)

    References:
      Anil, Gupta, Koren, Singer, *Memory-efficient adaptive optimization*, NeurIPS 2019.
    """
    _checks.check_in_range("sm3", "momentum", momentum, 0.0, 1.0)
    return chain(scale_by_sm3(momentum, b2, eps), scale_by_learning_rate(learning_rate))


__all__ = ["ScaleBySM3State", "scale_by_sm3", "sm3"]

"""GGT (tf.contrib's `GGTOptimizer`): `scale_by_ggt`, `ggt`."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx._core.scalars import at_least_float32
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByGGTState(NamedTuple):
    """State of `scale_by_ggt`.

    TF keeps these as non-slot variables holding the flattened concatenation of all
    variables; gradtx keeps them leaf by leaf (a leaf's part of TF's vector, shaped like
    the leaf), so they are sharded like the params. In float32 (float64 for a float64
    leaf), whatever the leaf's dtype.
    """

    count: _protocol.Count  # int32: completed updates (TF's own float "global_step" = count)
    moment1: _protocol.Updates  # TF non-slot "moment1": first moment of the gradient, shaped like the params
    grad_buffer: (
        _protocol.Updates
    )  # TF non-slot "grad_buffer": the last `window` first moments, [window, *shape] per leaf


# `grad_buffer` is [window, *shape]: only `moment1` is compared with the params' shapes
# (`_tree_checks.check_shapes`)
setattr(ScaleByGGTState, "slots_shaped_like_params", ("moment1",))  # noqa: B010  (not a field)


def _mm(a, b):
    """A matrix product in full precision (TPUs and TF32 GPUs would round float32 inputs otherwise)."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _dot(a, b, axes, out_sharding=None):
    """`tensordot` in full precision."""
    return jnp.tensordot(a, b, axes=axes, precision=jax.lax.Precision.HIGHEST, out_sharding=out_sharding)


def _compute_dtype(p: Any) -> Any:
    """float32, or float64 for a float64 parameter (under x64): bf16 leaves compute in float32."""
    dt = p.dtype if hasattr(p, "dtype") else jnp.result_type(p)
    return jax.dtypes.canonicalize_dtype(jnp.promote_types(dt, jnp.float32))


def _inner(a: jax.Array, b: jax.Array) -> jax.Array:
    """`a[i] . b[j]` over every element of a leaf: `a` [W, *shape] with `b` [W, *shape] or [*shape]; whole on
    every device (under Explicit axes: each device's partial sums, then one all-reduce)."""
    rest = tuple(range(1, a.ndim))
    axes = (rest, rest if b.ndim == a.ndim else tuple(range(b.ndim)))
    return _dot(a, b, axes, out_sharding=_placement.whole_sharding(a))


MAX_WINDOW = 4096
"""The largest `window`: 4096 copies of the params, and a 4096 x 4096 SVD per step."""


def _ggt_coefficients(mts, m1s, k, t, eps, svd_eps, sigma_eps, window):
    """The GGT direction as weights on the rows of `M^T`: `(head, tail)` with `u = M (head + tail / s_min)`.

    `mts` are the leaves' parts of :math:`M^T` ([W, *shape] each), `m1s` of :math:`m_t`; the
    W x W Gram matrix and :math:`M^T m_t` are sums over the leaves (one reduction each).
    """
    dt = mts[0].dtype
    gram = sum(_inner(a, a) for a in mts) + svd_eps * jnp.eye(window, dtype=dt)  # M^T M + svd_eps I
    u, sigma, _ = jnp.linalg.svd(gram)
    s = jnp.sqrt(sigma)
    s_min = jnp.min(s)
    proj = _mm(u.T, sum(_inner(a, m) for a, m in zip(mts, m1s, strict=True)))  # U^T M^T m1
    head = _mm(u, (1 / (s + sigma_eps) ** 3) * proj)
    # TF's tail m1 - M U diag(1/sigma) U^T M^T m1 cancels to ~svd_eps/sigma of m1 and is then divided by
    # s_min (1e-3 while the buffer fills): ~1e-4 lost in float32. As m1 = c M e_k (row k of the buffer),
    # it equals svd_eps c M (M^T M + svd_eps I)^-1 e_k = svd_eps c M U diag(1/sigma) U^T e_k: no cancellation.
    c = jnp.sqrt(jnp.minimum(t, jnp.asarray(window, dt)))
    tail = (svd_eps * c) * _mm(u, (1 / sigma) * u[k])
    return head, jnp.where(s_min > eps, tail / s_min, jnp.zeros_like(tail))


def _ggt_tree(gs, m1s, bufs, h, *, window):
    """One step over the leaves with a gradient: `(updates, moments, buffers)`, lists in leaf order, in the
    state's dtype (float32 for bf16 leaves)."""
    dt = functools.reduce(jnp.promote_types, [m.dtype for m in m1s])
    b1, eps, svd_eps, sigma_eps = (jnp.asarray(x, dt) for x in (h.b1, h.eps, h.svd_eps, h.sigma_eps))
    k = jnp.mod(h.count, window)
    t = h.t.astype(dt)
    c = jnp.sqrt(jnp.minimum(t, jnp.asarray(window, dt)))
    new_m1 = [_formulas.moment_blend(m.astype(dt), g.astype(dt), b1) for g, m in zip(gs, m1s, strict=True)]
    new_buf = [
        jax.lax.dynamic_update_index_in_dim(b.astype(dt), m, k, 0) for b, m in zip(bufs, new_m1, strict=True)
    ]
    mts = [b / c for b in new_buf]  # the leaves' parts of M^T
    head, tail = _ggt_coefficients(mts, new_m1, k, t, eps, svd_eps, sigma_eps, window)
    return [_dot(head, mt, 1) + _dot(tail, mt, 1) for mt in mts], new_m1, new_buf


@_registry.transform()
def scale_by_ggt(
    b1: _protocol.ScalarOrSchedule = 0.9,
    window: int = 10,
    eps: _protocol.ScalarOrSchedule = 1e-4,
    svd_eps: _protocol.ScalarOrSchedule = 1e-6,
    sigma_eps: _protocol.ScalarOrSchedule = 1e-2,
) -> _protocol.GradientTransformation:
    r"""GGT's preconditioned first moment, over all the elements of all leaves together.

    Full-matrix AdaGrad restricted to the span of the last `window` first moments, as
    contrib's `GGTOptimizer` computes it. With :math:`m_t` the first moment of the flat
    gradient, :math:`B` the buffer holding the last :math:`W` of them (slot
    :math:`(t-1) \bmod W`; zero rows until filled), :math:`M = B^T/\sqrt{\min(t, W)}` and
    :math:`U \operatorname{diag}(\sigma) U^T = \operatorname{svd}(M^T M + \epsilon_{svd} I)`:

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad
        h = M U \operatorname{diag}\big((\sqrt\sigma + \epsilon_\sigma)^{-3}\big) U^T M^T m_t,
        \quad r = m_t - M U \operatorname{diag}(\sigma^{-1}) U^T M^T m_t

        u_t = h + r / s_{min} \text{ if } s_{min} = \min\sqrt\sigma > \epsilon \text{, else } h

    Only the small :math:`W \times W` Gram matrix is decomposed. TF concatenates every
    variable into one vector; gradtx keeps the moments leaf by leaf and sums the Gram
    matrix and :math:`M^T m_t` over the leaves (under sharding, one reduction each: with
    Explicit mesh axes, each device's partial sums all-reduced, the moments and the buffer
    staying sharded like the params), which is the same quantity: the order of the leaves
    does not change the result. Element-wise
    in the sense of `gradtx.ElementWise` (every element is treated alike), so it runs on
    packed parameters as they are. The learning rate is separable: follow with
    `scale_by_learning_rate(lr)` for `var -= lr * u`.

    The arithmetic runs in float32 (float64 if a leaf is float64) and each leaf's update is
    cast back to its dtype. Row-sparse gradients are densified (TF raises for them).
    `None` leaves are skipped. While the buffer is filling, :math:`\sigma` contains
    `svd_eps`, so :math:`s_{min} = \sqrt{\epsilon_{svd}}` and the tail branch is taken.
    TF's literal tail is a near-cancellation divided by :math:`s_{min}` (TF float32 is off
    by up to ~1.5e-4); since :math:`m_t = c M e_k` (:math:`c = \sqrt{\min(t, W)}`, row
    :math:`k = (t-1) \bmod W` of the buffer), gradtx evaluates the identical
    :math:`r = \epsilon_{svd}\, c\, M U \operatorname{diag}(\sigma^{-1}) U^T e_k`, which
    has no cancellation: float32 stays within ~1e-6 of exact arithmetic.

    Args:
      b1: decay of the first moment, in [0, 1).
      window: the number of first moments kept (TF's `window`), an int in [1, 4096]: the
        state holds `window` copies of the params and each step decomposes a `window` x
        `window` matrix, so a larger one (from a config, say) is refused before anything is
        allocated.
      eps: the tail term is used when the smallest root singular value exceeds `eps`; >= 0.
      svd_eps: added to the diagonal of the Gram matrix before the SVD; >= 0.
      sigma_eps: added to the root singular values before the cube; >= 0.

    Returns:
      An `ElementWise` transform with state `ScaleByGGTState(count, moment1, grad_buffer)`.

    Raises:
      TypeError: for a non-integer `window` or a non-numeric hyperparameter.
      ValueError: for `b1` outside [0, 1), `window` outside [1, 4096], or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import scale_by_ggt
        >>> tx = scale_by_ggt(window=3)
        >>> params = {"w": jnp.zeros((2, 2)), "b": jnp.zeros(3)}
        >>> state = tx.init(params)
        >>> state.grad_buffer["w"].shape  # the last 3 first moments of "w"
        (3, 2, 2)
        >>> u, state = tx.update({"w": jnp.ones((2, 2)), "b": jnp.ones(3)}, state)
        >>> u["b"].shape, int(state.count)
        ((3,), 1)

    References:
      Agarwal, Bullins, Chen, Hazan, Singh, Zhang, Zhang, *Efficient full-matrix adaptive
      regularization*, ICML 2019 (section 2), arXiv:1806.02958.
    """
    fn = "scale_by_ggt"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_int(fn, "window", window, minimum=1, maximum=MAX_WINDOW)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "svd_eps", svd_eps)
    _checks.check_nonnegative(fn, "sigma_eps", sigma_eps)

    return update_rule(
        fn,
        ScaleByGGTState,
        functools.partial(_ggt_tree, window=window),
        hyper={"b1": b1, "eps": eps, "svd_eps": svd_eps, "sigma_eps": sigma_eps},
        slots={
            "moment1": lambda p: _placement.filled(p, 0.0, _compute_dtype(p)),
            "grad_buffer": lambda p: _placement.stacked(p, window, _compute_dtype(p)),
        },
        over="tree",  # the Gram matrix sums over every leaf
        real_only="its Gram matrix and SVD are of real vectors",
        tf_scalars=True,
        compute_dtype=at_least_float32,
    )


@_registry.optimizer("GGT")
def ggt(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    window: int = 10,
    eps: _protocol.ScalarOrSchedule = 1e-4,
    svd_eps: _protocol.ScalarOrSchedule = 1e-6,
    sigma_eps: _protocol.ScalarOrSchedule = 1e-2,
) -> _protocol.GradientTransformation:
    r"""GGT: `tf.contrib.opt.GGTOptimizer`, full-matrix AdaGrad over a window of first moments.

    `var -= lr * u`, where `u` preconditions the first moment of all the elements of all
    leaves together with the last `window` first moments (only a `window x window`
    matrix is decomposed). This is
    `chain(scale_by_ggt(b1, window, eps, svd_eps, sigma_eps), scale_by_learning_rate(learning_rate))`;
    see `scale_by_ggt` for the math. Row-sparse gradients are densified (TF raises for them).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1) (TF's `beta1`).
      window: the number of first moments kept, an int >= 1.
      eps: the tail term is used when the smallest root singular value exceeds `eps`; >= 0.
      svd_eps: added to the diagonal of the Gram matrix before the SVD; >= 0.
      sigma_eps: added to the root singular values before the cube; >= 0.

    Returns:
      An `ElementWise` transform; the state is `state[0].moment1` and `state[0].grad_buffer`
      (TF's non-slot variables, kept leaf by leaf).

    Raises:
      TypeError: for a non-integer `window` or a non-numeric hyperparameter.
      ValueError: for `b1` outside [0, 1), `window` < 1, or a negative epsilon or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.ggt(learning_rate=0.1, window=3)
        >>> params = {"w": jnp.zeros(2), "b": jnp.zeros(())}
        >>> u, state = tx.update({"w": jnp.array([1.0, 1.0]), "b": jnp.array(1.0)}, tx.init(params))
        >>> state[0].grad_buffer["w"].shape  # [window, *shape]
        (3, 2)
        >>> [round(float(x), 3) for x in u["w"]]
        [-0.049, -0.049]
    """
    return chain(scale_by_ggt(b1, window, eps, svd_eps, sigma_eps), scale_by_learning_rate(learning_rate))


__all__ = ["ScaleByGGTState", "ggt", "scale_by_ggt"]

"""Shampoo (tf.contrib's `ShampooOptimizer`): `scale_by_shampoo`, `shampoo`.

The rule's statistics, one per dimension of a leaf, and its slots are in `shampoo_statistics.py`, the
matrix roots in `shampoo_roots.py`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from gradtx._algorithms.shampoo_statistics import (
    _averaged,
    _compute_dtype,
    _Config,
    _diagonal_dimension,
    _dims,
    _is_number,
    _matrix_dimension,
    _roots,
    _Scalars,
    _statistics,
    _weighted_average,
    _work_key,
)
from gradtx._core import checks as _checks
from gradtx._core import matrix_work as _matrix_work
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.chain import chain
from gradtx._core.matrix_work import MatrixWork
from gradtx._core.rule import update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByShampooState(NamedTuple):
    """State of `scale_by_shampoo`.

    Per leaf of rank r, `mat_gbar` and `mat_h` hold a tuple with one entry per dimension
    i (a scalar leaf counts as shape `(1,)`). All arrays are float32 (float64 for float64
    leaves), whatever the leaf's dtype.
    """

    count: _protocol.Count  # int32: completed updates; contrib's `step` is count + 1
    gbar: _protocol.Updates  # TF slot "gbar": the averaged gradient (stays 0 when gbar_decay == 0)
    mat_gbar: (
        _protocol.Updates
    )  # TF slots "Gbar_<i>": [d_i, d_i] statistics, or [d_i] when d_i > max_matrix_size
    mat_h: (
        _protocol.Updates
    )  # TF slots "H_<i>": the last root [d_i, d_i] (from I) if svd_interval > 1, else None


def _shampoo_step(parts, *scalars, config, shape):
    """One leaf's step, from `parts`: its gradient (with its averaged gradient when the step writes it:
    one array, they move as one), its statistics, and its kept roots (those that are not None), all in
    the compute dtype.

    Returns the update (with the new averaged gradient, as one array), the new statistics and the new
    kept roots. A leaf with a matrix statistic runs it as its matrix work (`_shampoo_leaf`), the leaf
    whole. Each result is an array of its own: at depth, each costs a slice per leaf to compile."""
    lead, *mats = parts
    g, gbar = lead if _averaged(config) else (lead, None)
    scalars = _Scalars(*scalars)
    dims = _dims(shape)
    statistics, kept = mats[: len(dims)], iter(mats[len(dims) :])
    x = g.reshape(dims)
    pg, new_gbar = _weighted_average(
        None if gbar is None else gbar.reshape(dims),
        config.gbar_decay,
        scalars.gbar_decay,
        scalars.gbar_weight * x,
    )
    new_g, new_h = [], []
    for i, d in enumerate(dims):
        if d <= config.max_matrix_size:
            root = next(kept) if config.svd_interval > 1 else None
            pg, slot, root = _matrix_dimension(pg, x, i, statistics[i], root, scalars, config)
            new_h += [] if root is None else [root]
        else:
            pg, slot = _diagonal_dimension(pg, x, i, statistics[i], scalars, config)
        new_g.append(slot)
    update = pg.reshape(shape)
    return jnp.stack([update, new_gbar.reshape(shape)]) if _averaged(config) else update, *new_g, *new_h


def _shampoo_leaf(g, gbar, mat_g, mat_h, h, *, config):
    """One leaf's step: `(update, gbar, statistics, roots)` in the compute dtype (that of `gbar`: float32 for
    a bf16 leaf).

    A leaf with a matrix statistic is stepped whole as its matrix work (`_shampoo_step`: gathered under
    Explicit axes, or on one device of the mesh under `gradtx.parallel.split_matrix_work`), its results
    put back where its slots are; a leaf with diagonal statistics only stays sharded (its sums:
    all-reduces)."""
    if g.size == 0:
        return jnp.zeros(g.shape, g.dtype), gbar, mat_g, mat_h
    dt = gbar.dtype
    gd_t, gw_t, md_t, mw_t, eps_t, alpha_t = (  # (in `dt` already but for a gradient of another dtype)
        _scalars.cast(x, dt)
        for x in (h.gbar_decay, h.gbar_weight, h.mat_gbar_decay, h.mat_gbar_weight, h.eps, h.alpha)
    )
    dims = _dims(g.shape)
    alpha = config.alpha
    neg_alpha = np.asarray(-alpha / len(dims), dt) if _is_number(alpha) else -alpha_t / len(dims)
    scalars = _Scalars(gd_t, gw_t, md_t, mw_t, eps_t, neg_alpha, h.update_stats, h.update_roots)
    lead = jnp.stack([g.astype(dt), gbar]) if _averaged(config) else g.astype(dt)
    parts = (lead, *mat_g, *(r for r in mat_h if r is not None))
    step = functools.partial(_shampoo_step, config=config, shape=g.shape)
    if any(d <= config.max_matrix_size for d in dims):
        work = MatrixWork(step, _matrix_work.one(parts), _work_key(config), args=tuple(scalars))
        results = _matrix_work.only((yield work))
    else:
        results = step(parts, *scalars)
    lead, *rest = results
    update, new_gbar = lead if _averaged(config) else (lead, gbar)
    new_g = tuple(_placement.placed_like(a, b) for a, b in zip(rest[: len(dims)], mat_g, strict=True))
    roots = iter(rest[len(dims) :])
    new_h = tuple(None if r is None else _placement.placed_like(next(roots), r) for r in mat_h)
    return _placement.placed_like(update, g), _placement.placed_like(new_gbar, gbar), new_g, new_h


def _renewed(h, state, extra_args, *, config):
    """Whether this step renews the statistics and the roots (once per step, for every leaf)."""
    return {
        "update_stats": h.t % config.precond_update_interval == 0,
        "update_roots": h.t % config.svd_interval == 0,
    }


@_registry.transform()
def scale_by_shampoo(
    *,
    max_matrix_size: int = 768,
    gbar_decay: _protocol.ScalarOrSchedule = 0.0,
    gbar_weight: _protocol.ScalarOrSchedule = 1.0,
    mat_gbar_decay: _protocol.ScalarOrSchedule = 1.0,
    mat_gbar_weight: _protocol.ScalarOrSchedule = 1.0,
    svd_interval: int = 1,
    precond_update_interval: int = 1,
    eps: _protocol.ScalarOrSchedule = 0.1,
    alpha: _protocol.ScalarOrSchedule = 0.5,
    use_iterative_root: bool = False,
) -> _protocol.GradientTransformation:
    r"""Shampoo's preconditioned gradient: one matrix root per tensor dimension, as contrib computes it.

    For a leaf of rank r with gradient :math:`g` (step :math:`t` = count + 1), in order:

    .. math::
        \bar g = \bar g + (\delta_t - 1)\bar g + w_t g \quad
        (\delta = 0:\ \bar g = w_t g;\ \delta = 1:\ \bar g = \bar g + w_t g)

        G_i = G_i + (\mu_t - 1) G_i + k\,\nu_t\, g_{(i)} g_{(i)}^T \quad
        \text{when } t \bmod k = 0,\ k = \texttt{precond\_update\_interval}

        H_i = (G_i + \epsilon I)^{-\alpha/r} = V \max(s, \epsilon)^{-\alpha/r} U^T, \quad
        u = \bar g \times_0 H_0 \times_1 H_1 \cdots \times_{r-1} H_{r-1}

    where :math:`g_{(i)}` is :math:`g` unfolded along dimension i,
    :math:`(s, U, V) = \operatorname{svd}(G_i + \epsilon I)` and :math:`\times_i H` contracts
    dimension i with the first index of :math:`H`. :math:`H_i` is recomputed when
    :math:`t \bmod \texttt{svd\_interval} = 0` (every step for 1) and otherwise read from
    the `mat_h` slot, which starts at the identity. A dimension larger than
    `max_matrix_size` gets a diagonal statistic instead, updated every step (not gated by
    `precond_update_interval`, no factor k):
    :math:`G_i = \text{avg}(\sum_{\neg i} g^2)` and :math:`u \leftarrow u\,(G_i + \epsilon)^{-\alpha/r}`
    along that dimension. `use_iterative_root=True` replaces the SVD with the coupled
    Schur-Newton iteration (at most 100 iterations, stopping when
    :math:`\max|M - I| \le 10^{-6}`), which needs r/alpha to be an integer. A literal
    `gbar_decay` of 0 leaves the `gbar` slot unwritten and a literal `mat_gbar_decay` of 0
    leaves `mat_gbar` unwritten (as contrib), which matters only with
    `precond_update_interval` > 1.

    The learning rate is separable (`var -= lr * u`): follow with
    `scale_by_learning_rate(lr)`. Schedules see `count = t - 1` (gradtx's rule); contrib
    calls its lambdas with `t`, so TF's `lambda T: f(T)` is `lambda count: f(count + 1)`.
    A scalar leaf is treated as a vector of length 1 (contrib divides by the rank 0 and
    fails), which gives it Adagrad's step :math:`(G + \epsilon)^{-\alpha}\bar g`. Row-sparse
    gradients are densified. The arithmetic runs in float32 (float64 for float64 leaves);
    updates are cast back to each leaf's dtype. Under Explicit mesh axes (`jax.set_mesh`) a
    sharded leaf with a matrix statistic is gathered whole (its gradient, and an averaged
    `gbar`: one all-gather per sharded mesh axis each), computed on every device with no
    further communication and its update sliced back; diagonal-only leaves stay sharded.

    Args:
      max_matrix_size: dimensions up to this size get a full matrix; larger ones a diagonal.
      gbar_decay: decay of the averaged gradient, in [0, 1].
      gbar_weight: weight of the new gradient in the average, >= 0.
      mat_gbar_decay: decay of the statistics, in [0, 1].
      mat_gbar_weight: weight of the new outer products in the statistics, >= 0.
      svd_interval: recompute the roots every this many steps (int >= 1).
      precond_update_interval: update the matrix statistics every this many steps (int >= 1).
      eps: added to the statistics (times I) and floor of the singular values, >= 0.
      alpha: total power of the preconditioners, >= 0 (a number with the iterative root).
      use_iterative_root: use the Schur-Newton iteration instead of the SVD.

    Returns:
      A `GradientTransformation` with state `ScaleByShampooState(count, gbar, mat_gbar, mat_h)`.

    Raises:
      TypeError: for a non-integer size or interval, or a schedule `alpha` with the iterative root.
      ValueError: for a decay outside [0, 1], a negative weight, `eps` or `alpha`, an interval
        < 1; from `init`, with the iterative root, when a leaf's rank / `alpha` is not an integer.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import scale_by_shampoo
        >>> tx = scale_by_shampoo(eps=0.0)
        >>> g = jnp.array([[3.0, 0.0], [0.0, 4.0]])
        >>> u, state = tx.update(g, tx.init(g))
        >>> u.round(4)  # (G_0)^(-1/4) g (G_1)^(-1/4) with G_0 = G_1 = g g^T
        Array([[1., 0.],
               [0., 1.]], dtype=float32)

    References:
      Gupta, Koren, Singer, *Shampoo: preconditioned stochastic tensor optimization*,
      ICML 2018, arXiv:1802.09568; Guo, Higham, *A Schur-Newton method for the matrix p-th
      root and its inverse*, SIAM J. Matrix Anal. Appl. 28(3), 2006.
    """
    fn = "scale_by_shampoo"
    _checks.check_int(fn, "max_matrix_size", max_matrix_size, minimum=0)
    _checks.check_in_range(fn, "gbar_decay", gbar_decay, 0.0, 1.0)
    _checks.check_nonnegative(fn, "gbar_weight", gbar_weight)
    _checks.check_in_range(fn, "mat_gbar_decay", mat_gbar_decay, 0.0, 1.0)
    _checks.check_nonnegative(fn, "mat_gbar_weight", mat_gbar_weight)
    _checks.check_int(fn, "svd_interval", svd_interval, minimum=1)
    _checks.check_int(fn, "precond_update_interval", precond_update_interval, minimum=1)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "use_iterative_root", use_iterative_root)
    if use_iterative_root:
        _checks.check_number(fn, "alpha", alpha)
        _checks.check_positive(fn, "alpha", alpha)
    else:
        _checks.check_nonnegative(fn, "alpha", alpha)

    config = _Config(
        fn,
        max_matrix_size,
        gbar_decay,
        mat_gbar_decay,
        precond_update_interval,
        svd_interval,
        use_iterative_root,
        alpha,
    )
    return update_rule(
        fn,
        ScaleByShampooState,
        functools.partial(_shampoo_leaf, config=config),
        hyper={
            "gbar_decay": gbar_decay,
            "gbar_weight": gbar_weight,
            "mat_gbar_decay": mat_gbar_decay,
            "mat_gbar_weight": mat_gbar_weight,
            "eps": eps,
            "alpha": alpha,
        },
        slots={
            "gbar": lambda p: _placement.filled(p, 0.0, _compute_dtype(p)),
            "mat_gbar": functools.partial(_statistics, config=config),
            "mat_h": functools.partial(_roots, config=config),
        },
        kind=_protocol.LeafWise,  # per-dimension statistics of whole leaves
        real_only="its preconditioners are real symmetric matrices (a complex one would need conjugate "
        "transposes)",
        prepare=functools.partial(_renewed, config=config),
        tf_scalars=True,
        compute_dtype=_scalars.at_least_float32,  # float32 statistics for bf16 leaves
    )


@_registry.optimizer("Shampoo")
def shampoo(
    learning_rate: _protocol.ScalarOrSchedule = 1.0,
    *,
    max_matrix_size: int = 768,
    gbar_decay: _protocol.ScalarOrSchedule = 0.0,
    gbar_weight: _protocol.ScalarOrSchedule = 1.0,
    mat_gbar_decay: _protocol.ScalarOrSchedule = 1.0,
    mat_gbar_weight: _protocol.ScalarOrSchedule = 1.0,
    svd_interval: int = 1,
    precond_update_interval: int = 1,
    eps: _protocol.ScalarOrSchedule = 0.1,
    alpha: _protocol.ScalarOrSchedule = 0.5,
    use_iterative_root: bool = False,
) -> _protocol.GradientTransformation:
    r"""Shampoo: `tf.contrib.opt.ShampooOptimizer`, one matrix preconditioner per tensor dimension.

    `var -= lr * gbar x_0 H_0 ... x_{r-1} H_{r-1}` with `H_i = (G_i + eps I)^(-alpha/r)` and
    `G_i` the accumulated outer products of the gradient unfolded along dimension i
    (diagonal for dimensions above `max_matrix_size`). This is
    `chain(scale_by_shampoo(...), scale_by_learning_rate(learning_rate))`; see
    `scale_by_shampoo` for the math, the intervals and the gbar rules. Schedules see
    `count = t - 1` (contrib's lambdas get `t`). Row-sparse gradients are densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      max_matrix_size: dimensions up to this size get a full matrix; larger ones a diagonal.
      gbar_decay: decay of the averaged gradient, in [0, 1].
      gbar_weight: weight of the new gradient in the average, >= 0.
      mat_gbar_decay: decay of the statistics, in [0, 1].
      mat_gbar_weight: weight of the new outer products in the statistics, >= 0.
      svd_interval: recompute the roots every this many steps (int >= 1).
      precond_update_interval: update the matrix statistics every this many steps (int >= 1).
      eps: added to the statistics (times I) and floor of the singular values, >= 0 (TF's
        `epsilon`, whose default 0.1 this is; a rank-deficient statistic amplifies float32
        rounding by about :math:`\sqrt{|G| / \epsilon}`, so smaller values are less steady).
      alpha: total power of the preconditioners, >= 0.
      use_iterative_root: use the Schur-Newton iteration instead of the SVD (rank / alpha
        must then be an integer).

    Returns:
      A `GradientTransformation`; the slots are `state[0].gbar`, `state[0].mat_gbar` (TF's
      `Gbar_<i>`) and `state[0].mat_h` (TF's `H_<i>`); leaf-wise (a per-tensor rule).

    Raises:
      TypeError: for a non-integer size or interval, or a schedule `alpha` with the iterative root.
      ValueError: for a decay outside [0, 1], a negative weight, `eps`, `alpha` or rate, or
        an interval < 1.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.shampoo(learning_rate=0.1, eps=0.0)
        >>> g = jnp.array([[3.0, 0.0], [0.0, 4.0]])
        >>> u, state = tx.update(g, tx.init(g))
        >>> bool(jnp.allclose(u, -0.1 * jnp.eye(2)))  # -lr * G_0^(-1/4) g G_1^(-1/4), G_0 = G_1 = g g^T
        True
    """
    return chain(
        scale_by_shampoo(
            max_matrix_size=max_matrix_size,
            gbar_decay=gbar_decay,
            gbar_weight=gbar_weight,
            mat_gbar_decay=mat_gbar_decay,
            mat_gbar_weight=mat_gbar_weight,
            svd_interval=svd_interval,
            precond_update_interval=precond_update_interval,
            eps=eps,
            alpha=alpha,
            use_iterative_root=use_iterative_root,
        ),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["ScaleByShampooState", "scale_by_shampoo", "shampoo"]

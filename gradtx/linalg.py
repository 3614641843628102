"""Linear algebra for optimizers: power iteration, inverse p-th roots, non-negative least squares.

optax's `power_iteration`, `matrix_inverse_pth_root` and `nnls`, with optax's signatures and
numbers (`gradtx.optax_compat` gives them under the same names). The coupled Newton step of
the inverse root is also Shampoo's (`gradtx.scale_by_shampoo`'s iterative root).
"""

from __future__ import annotations

from typing import Any, Callable, cast

import jax
import jax.numpy as jnp
from jax import lax

from gradtx import tree
from gradtx._core import checks as _checks

__all__ = ["matrix_inverse_pth_root", "nnls", "power_iteration"]

_HIGHEST = lax.Precision.HIGHEST


def _normalized(x: Any) -> Any:
    return tree.scale(1.0 / tree.norm(x), x)


def _power_iteration_cond_fun(error_tolerance: Any, num_iters: Any, loop_vars: tuple) -> jax.Array:
    """Go on while `|A v - lambda v| / lambda` is at least `error_tolerance`, `num_iters` steps at most."""
    normalized_eigvec, unnormalized_eigvec, eig, iter_num = loop_vars
    residual = tree.sub(unnormalized_eigvec, tree.scale(eig, normalized_eigvec))
    converged = jnp.abs(tree.norm(residual) / eig) < error_tolerance
    return ~converged & (iter_num < num_iters)


def power_iteration(
    matrix: Any | Callable[[Any], Any],
    *,
    v0: Any = None,
    num_iters: Any = 100,
    error_tolerance: Any = 1e-6,
    precision: lax.Precision = _HIGHEST,
    key: jax.Array | None = None,
) -> tuple[jax.Array, Any]:
    r"""The dominant eigenvalue of a diagonalizable matrix and its eigenvector, by power iteration.

    .. math:: v_{k+1} = \frac{A v_k}{\lVert A v_k \rVert}, \qquad \lambda_k = v_k^\top A v_k

    until :math:`\lVert A v_k - \lambda_k v_k\rVert / |\lambda_k| <` `error_tolerance` or
    `num_iters` iterations. `matrix` is an `(n, n)` array or a function computing the product
    with a vector, which may be a pytree (a Hessian-vector product over parameters).

    Args:
      matrix: a square matrix, or a function `v -> A v` over trees shaped like `v0`.
      v0: the starting vector (a tree for a function); None: uniform in [-1, 1] drawn with `key`
        (an array `matrix` only).
      num_iters: the largest number of iterations.
      error_tolerance: stop once the relative residual is below it.
      precision: the matrix-vector products' precision (`jax.lax.Precision`), for an array `matrix`.
      key: the random key for `v0` (default `jax.random.key(0)`).

    Returns:
      `(eigenvalue, eigenvector)`, the eigenvector of unit norm shaped like `v0`.

    Raises:
      ValueError: for a function `matrix` without `v0`, or a non-square array `matrix`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> value, vector = gradtx.linalg.power_iteration(jnp.diag(jnp.array([1.0, 3.0])), v0=jnp.ones(2))
        >>> round(float(value), 4), [round(float(v), 3) for v in vector]
        (3.0, [0.0, 1.0])

    References:
      optax's `optax.power_iteration`; Wikipedia, *Power iteration*.
    """
    if callable(matrix):
        mvp = matrix
        if v0 is None:
            raise ValueError(
                "`power_iteration`: `v0` is required when `matrix` is a function (the shape of its "
                "input is not known); pass e.g. `v0=gradtx.tree.ones_like(params)`."
            )
    else:
        matrix = jnp.asarray(matrix)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"`power_iteration`: `matrix` must be square, got shape {matrix.shape}.")
        mvp = lambda v: jnp.matmul(matrix, v, precision=precision)  # noqa: E731
        if v0 is None:
            key = jax.random.key(0) if key is None else key
            v0 = jax.random.uniform(key, matrix.shape[-1:], matrix.dtype, minval=-1.0, maxval=1.0)

    def body(loop_vars):
        _, z, _, iter_num = loop_vars
        eigvec = _normalized(z)
        z = mvp(eigvec)
        return eigvec, z, tree.vdot(eigvec, z), iter_num + 1

    v0 = _normalized(v0)
    init = (v0, mvp(v0), jnp.asarray(0.0), jnp.asarray(0))
    cond = lambda loop_vars: _power_iteration_cond_fun(error_tolerance, num_iters, loop_vars)  # noqa: E731
    _, unnormalized, eigenvalue, _ = lax.while_loop(cond, body, init)
    return eigenvalue, _normalized(unnormalized)


def mat_power(mat: jax.Array, p: int, precision: lax.Precision = _HIGHEST) -> jax.Array:
    """`mat ** p` for an int `p >= 1`, by repeated squaring (contrib's order of products)."""
    power = None
    while p > 0:
        if p % 2 == 1:
            power = mat if power is None else jnp.matmul(mat, power, precision=precision)
        p //= 2
        if p > 0:
            mat = jnp.matmul(mat, mat, precision=precision)
    return cast(jax.Array, power)  # p >= 1: set at least once


def newton_root_step(
    mat_m: jax.Array, mat_h: jax.Array, alpha: Any, p: int, precision: lax.Precision = _HIGHEST
) -> tuple[jax.Array, jax.Array]:
    r"""One coupled Newton step towards :math:`A^{-1/p}`: `(M, H) -> (M_i^p M, H M_i)`.

    With :math:`M_i = (1 - \alpha) I + \alpha M`, :math:`M \to I` and :math:`H \to A^{\alpha}`
    (Guo and Higham 2006; Higham, *Functions of Matrices*, eq. 7.18). `p` is the power the
    step takes of :math:`M_i` (an int, by repeated squaring).
    """
    eye = jnp.eye(mat_m.shape[0], dtype=mat_m.dtype)
    mat_m_i = (1 - alpha) * eye + alpha * mat_m
    return (
        jnp.matmul(mat_power(mat_m_i, p, precision), mat_m, precision=precision),
        jnp.matmul(mat_h, mat_m_i, precision=precision),
    )


def inverse_pth_root(
    matrix: Any,
    p: int,
    num_iters: Any,
    ridge_epsilon: Any,
    error_tolerance: Any,
    precision: lax.Precision,
    *,
    power: int,
) -> tuple[jax.Array, jax.Array]:
    """`matrix_inverse_pth_root`, the Newton step taking `power`-th powers (`p` for the true root)."""
    _checks.check_int("matrix_inverse_pth_root", "p", p, minimum=1)
    _check_square("matrix_inverse_pth_root", matrix)
    matrix = jnp.asarray(matrix)
    n = matrix.shape[0]
    alpha = jnp.asarray(-1.0 / p, jnp.float32)
    identity = jnp.eye(n, dtype=jnp.float32)
    max_ev, _ = power_iteration(matrix, num_iters=100, error_tolerance=1e-6, precision=precision)
    ridge_epsilon = ridge_epsilon * jnp.maximum(max_ev, 1e-16)
    if n == 1:
        return (matrix + ridge_epsilon) ** alpha, jnp.asarray(0.0)

    def cond(state):
        i, _, _, _, error, run_step = state
        return (i < num_iters) & (error > error_tolerance) & run_step

    def body(state):
        i, mat_m, mat_h, _, error, _ = state
        new_m, new_h = newton_root_step(mat_m, mat_h, alpha, power, precision)
        new_error = jnp.max(jnp.abs(new_m - identity))
        return i + 1, new_m, new_h, mat_h, new_error, new_error < error * 1.2  # stop once the error grows

    damped = matrix + ridge_epsilon * identity
    z = (1 + p) / (2 * jnp.linalg.norm(damped))
    mat_m0 = damped * z
    mat_h0 = identity * jnp.power(z, 1.0 / p)
    init = (0, mat_m0, mat_h0, mat_h0, jnp.max(jnp.abs(mat_m0 - identity)), True)
    _, mat_m, mat_h, old_mat_h, _, ran = lax.while_loop(cond, body, init)
    error = jnp.max(jnp.abs(mat_m - identity))
    converged = jnp.asarray(ran, old_mat_h.dtype)
    root = converged * mat_h + (1 - converged) * old_mat_h  # the last iterate before the error grew
    return jnp.asarray(root, matrix.dtype), error


def matrix_inverse_pth_root(
    matrix: Any,
    p: int,
    num_iters: Any = 100,
    ridge_epsilon: Any = 1e-6,
    error_tolerance: Any = 1e-6,
    precision: lax.Precision = _HIGHEST,
) -> tuple[jax.Array, jax.Array]:
    r""":math:`(A + \epsilon \lambda_{\max} I)^{-1/p}` of a symmetric PSD matrix, by coupled Newton.

    The ridge is `ridge_epsilon` times the largest eigenvalue (by `power_iteration`). From
    :math:`M_0 = z (A + \epsilon I)`, :math:`H_0 = z^{1/p} I`, :math:`z = (1 + p) / (2 \lVert A
    + \epsilon I \rVert_F)`, the Newton steps (`newton_root_step`) run until
    :math:`\max |M - I| \le` `error_tolerance`, `num_iters` steps, or the error grows by more
    than 20% (the iterate before is returned then). Computed in float32, returned in
    `matrix`'s dtype.

    Args:
      matrix: a symmetric PSD `(n, n)` matrix.
      p: the root, an int >= 1.
      num_iters: the largest number of Newton steps.
      ridge_epsilon: the ridge, relative to the largest eigenvalue.
      error_tolerance: stop once :math:`\max |M - I|` is at most this.
      precision: the matrix products' precision (`jax.lax.Precision`).

    Returns:
      `(root, error)`: the inverse p-th root and the last :math:`\max |M - I|`.

    Raises:
      TypeError / ValueError: for a non-int `p` or `p < 1`, a non-square `matrix`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> root, error = gradtx.linalg.matrix_inverse_pth_root(jnp.diag(jnp.array([4.0, 16.0])), 2)
        >>> [round(float(x), 4) for x in jnp.diag(root)]
        [0.5, 0.25]

    References:
      optax's `optax.matrix_inverse_pth_root`; Higham, *Functions of Matrices*, SIAM 2008, eq. 7.18.
    """
    return inverse_pth_root(matrix, p, num_iters, ridge_epsilon, error_tolerance, precision, power=p)


def _check_square(fn: str, matrix: Any) -> None:
    shape = jnp.shape(matrix)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"`{fn}`: `matrix` must be square, got shape {shape}.")


def _spectral_radius_upper_bound(matrix: jax.Array) -> jax.Array:
    """`min(||M||_F, ||M||_1)`: at least the spectral radius of `M`."""
    a = jnp.linalg.matrix_norm(matrix, ord="fro")
    b = jnp.linalg.matrix_norm(matrix, ord=1) if matrix.size != 0 else 0
    return jnp.minimum(a, b)


def nnls(A: jax.Array, b: jax.Array, iters: int, unroll: int | bool = 1, L: Any = None) -> jax.Array:  # noqa: N803
    r"""Non-negative least squares, :math:`\arg\min_{x \ge 0} \lVert A x - b \rVert_2`, by projected gradient.

    Polyak's accelerated projected gradient on :math:`Q = A^\top A`, :math:`q = A^\top b`:

    .. math::
        c' = \tfrac{1 + \sqrt{1 + 4 c^2}}{2}, \quad
        x' = \max\!\big(p - (Q p - q) / L,\ 0\big), \quad
        p' = x' + \tfrac{c - 1}{c'} (x' - x)

    from :math:`x = p = 0`, :math:`c = 0`, for `iters` steps (`lax.scan`).

    Args:
      A: the `(M, N)` matrix.
      b: the `(M,)` vector or `(M, K)` matrix (K right-hand sides).
      iters: the number of steps.
      unroll: `lax.scan`'s `unroll`.
      L: an upper bound of the spectral radius of :math:`A^\top A` (default
        :math:`\min(\lVert Q \rVert_F, \lVert Q \rVert_1)`).

    Returns:
      The `(N,)` (or `(N, K)`) solution, in `b`'s dtype.

    Raises:
      ValueError: for an `A` that is not a matrix, a `b` of another rank than 1 or 2, or whose
        first dimension is not `a`'s.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> x = gradtx.linalg.nnls(jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([5.0, 6.0]), 1000)
        >>> [round(float(v), 2) for v in x]
        [0.0, 1.7]

    References:
      optax's `optax.nnls`; R. A. Polyak, *Projected gradient method for non-negative least
      square*, Contemporary Mathematics 636, 2015.
    """
    if jnp.ndim(A) != 2 or jnp.ndim(b) not in (1, 2) or jnp.shape(b)[0] != jnp.shape(A)[0]:
        raise ValueError(
            f"`nnls`: `A` must be a matrix (M, N) and `b` of shape (M,) or (M, K); got {jnp.shape(A)} "
            f"and {jnp.shape(b)}."
        )
    q_mat, q = A.mT @ A, A.mT @ b
    if L is None:
        L = _spectral_radius_upper_bound(q_mat)  # noqa: N806
    L = jnp.where(L == 0, 1, L)  # noqa: N806  (no division by zero below)

    def step(carry, _):
        x, p, c = carry
        cn = (1 + jnp.sqrt(1 + 4 * c**2)) / 2
        xn = (p - (q_mat @ p - q) / L).clip(0)
        return (xn, xn + (c - 1) / cn * (xn - x), cn), None

    x = jnp.zeros_like(b, shape=A.shape[-1:] + b.shape[1:])
    (x, _, _), _ = lax.scan(step, (x, x, 0.0), length=iters, unroll=unroll)
    return x

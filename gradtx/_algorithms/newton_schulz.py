"""Newton-Schulz orthogonalisation: the iteration that pushes a matrix's singular values towards 1 (Muon's),
its coefficients (one triple, or the named schedules of pytorch-optimizer: Polar Express's ...), optax's
scalings of the first iterate, and pytorch-optimizer's view of a leaf as one matrix."""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import placement as _placement
from gradtx._core.matrix_work import MatrixWork

NS_COEFFS = (3.4445, -4.7750, 2.0315)
"""Keller Jordan's quintic Newton-Schulz coefficients `(a, b, c)`: fast, not exactly orthogonal."""


NS_COEFFICIENT_SETS: dict[str, tuple[tuple[float, float, float], ...]] = {
    "original": (NS_COEFFS,),
    "quintic": (  # modded-nanogpt's tuned quintic schedule
        (4.0848, -6.8946, 2.9270),
        (3.9505, -6.3029, 2.6377),
        (3.7418, -5.5913, 2.3037),
        (2.8769, -3.1427, 1.2046),
        (2.8366, -3.0525, 1.2012),
    ),
    "polar_express": (  # Amsel et al.'s Polar Express, safety factor 1e-2
        (8.237312490495555, -23.157747414558198, 16.680568411445915),
        (4.082441999064835, -2.893047735332586, 0.5252849256975648),
        (3.9263479922546582, -2.8547468034765298, 0.5318022422894988),
        (3.2982187133085143, -2.424541981026706, 0.48632008358844075),
        (2.2970369434552573, -1.63662558125903, 0.4002628455953627),
        (1.8763805351440397, -1.2347896577722228, 0.35891887501668385),
        (1.8564423485617974, -1.2132449880935525, 0.3568003487825883),
        (1.8749994008682747, -1.2499988017229169, 0.3749994008546422),
    ),
    "polar_express_safer": (  # the same, safety factor 2e-2
        (8.156554524902461, -22.48329292557795, 15.878769915207462),
        (4.0429299351667245, -2.808917465908704, 0.5000178451051299),
        (3.8916678022926563, -2.7724841532176825, 0.5060648178503389),
        (3.285753657755658, -2.3681294933425394, 0.46449024233003117),
        (2.3005307116270983, -1.6111665557258408, 0.3833374427545273),
        (1.8631210546382593, -1.2042160621002727, 0.3421879560523383),
        (1.8382572152247512, -1.1779263289537742, 0.3396513038637379),
        (1.8749999923301852, -1.2499999836060613, 0.374999991275876),
    ),
}
"""The named coefficient schedules, one triple per iteration, as pytorch-optimizer 4.1.0 names them
(`pytorch_optimizer.optimizer.utils.matrix.NS_COEFFICIENTS`): Keller Jordan's triple, modded-nanogpt's
quintic schedule and the Polar Express schedules (Amsel et al., 2025: each iteration's odd quintic is the
minimax-optimal one for the singular values the previous iterations leave, slightly shrunk for safety)."""


def coefficient_schedule(
    fn: str, ns_coeffs: Any, ns_steps: int, *, extend: bool = False
) -> tuple[tuple[float, float, float], ...]:
    """The coefficients of each Newton-Schulz iteration.

    A name of `NS_COEFFICIENT_SETS` (any case) gives its schedule's first `ns_steps` triples, the last
    one repeated if the schedule is shorter (pytorch-optimizer's rule); one triple is used `ns_steps`
    times; a sequence of triples is one per iteration (`ns_steps` not used), or with `extend`
    pytorch-optimizer's rule as for a name. `ns_steps` must have been checked."""
    if isinstance(ns_coeffs, str):
        _checks.check_one_of(fn, "ns_coeffs", ns_coeffs.lower(), tuple(NS_COEFFICIENT_SETS))
        coeffs, extend = NS_COEFFICIENT_SETS[ns_coeffs.lower()], True
    else:
        coeffs = check_coeffs(fn, ns_coeffs)
    if len(coeffs) == 1 or extend:
        return tuple(coeffs[min(i, len(coeffs) - 1)] for i in range(ns_steps))
    return coeffs


def check_coeffs(fn: str, ns_coeffs: Any) -> tuple[tuple[float, float, float], ...]:
    """`ns_coeffs` as a tuple of triples: one triple (used every iteration) or one per iteration."""

    def is_triple(x):
        return (
            isinstance(x, Sequence)
            and len(x) == 3
            and all(isinstance(c, numbers.Real) and not isinstance(c, bool) and math.isfinite(c) for c in x)
        )

    if is_triple(ns_coeffs):
        return (tuple(float(c) for c in ns_coeffs),)  # type: ignore[return-value]
    if isinstance(ns_coeffs, Sequence) and ns_coeffs and all(is_triple(x) for x in ns_coeffs):
        return tuple(tuple(float(c) for c in x) for x in ns_coeffs)  # type: ignore[misc]
    raise ValueError(
        f"`{_checks.api_name(fn)}`: `ns_coeffs` must be three finite numbers (a, b, c) or a non-empty "
        f"sequence of such triples (one per iteration), got {ns_coeffs!r}."
    )


PRECONDITIONINGS = ("frobenius", "spectral", "aol", "schatten")
"""How the matrix is scaled before (or in) the first Newton-Schulz iteration: optax's four choices."""

_RESCALE_FLOOR = 1e-8
"""The least row sum (AOL) or Schatten-4 norm the first iteration divides by (optax's, whatever `eps`)."""


def _first_gram(x: jax.Array, preconditioning: str, eps: Any) -> tuple[jax.Array, jax.Array]:
    """`(x, x x^T)` for the first iteration, `x` scaled as `preconditioning` says.

    'frobenius' and 'spectral' divide `x` by its norm plus `eps`; 'aol' scales row `i` of `x` (and row and
    column `i` of the Gram matrix) by `1/sqrt(sum_j |A_ij|)`, which bounds every singular value by 1
    (Prach, Lampert); 'schatten' divides `x` by the square root of the Gram matrix's Frobenius norm (the
    Schatten-4 norm of `x`)."""
    if preconditioning in ("frobenius", "spectral"):
        x = x / (jnp.linalg.norm(x, ord="fro" if preconditioning == "frobenius" else 2) + eps)
        return x, x @ x.T
    gram = x @ x.T
    if preconditioning == "aol":
        s = jax.lax.rsqrt(jnp.clip(jnp.abs(gram).sum(axis=-1), min=_RESCALE_FLOOR))[:, None]
        return x * s, gram * s * s.T
    s = jax.lax.rsqrt(jnp.clip(jnp.linalg.norm(gram, ord="fro"), min=_RESCALE_FLOOR))
    return x * s, gram * s**2


def newton_schulz(
    x: jax.Array,
    coeffs: tuple[tuple[float, float, float], ...],
    eps: Any,
    preconditioning: str = "frobenius",
    *,
    floor: bool = False,
) -> jax.Array:
    """The Newton-Schulz iteration `x <- a x + (b A + c A^2) x`, `A = x x^T`, from `x` scaled by
    `_first_gram` (by default `x / (||x||_F + eps)`; with `floor`, pytorch-optimizer's
    `x / max(||x||_F, eps)`)."""
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    if floor:
        x = x / jnp.maximum(jnp.linalg.norm(x), eps)
        gram = x @ x.T
    else:
        x, gram = _first_gram(x, preconditioning, eps)
    for i, (a, b, c) in enumerate(coeffs):
        gram = gram if i == 0 else x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


TORCH_NS_EPS = 1e-7
"""The least Frobenius norm pytorch-optimizer's Newton-Schulz divides by (its `eps`)."""


def rows_work(u: jax.Array, coeffs: tuple[tuple[float, float, float], ...]) -> MatrixWork:
    """pytorch-optimizer's orthogonalisation of a leaf, as the matrix work a formula yields: `u` seen as one
    matrix of `u.shape[0]` rows (the other axes flattened), Newton-Schulz from `u / max(||u||_F, 1e-7)`.

    The formula receives the `(1, rows, cols)` result, whole on every device, and places what it makes of
    it like the parameter (`placement.placed_like`). A leaf of rank other than 2 is made whole first
    (Explicit axes: one all-gather): its axes are merged. `u` must not be empty."""
    x = u if u.ndim == 2 else _placement.whole(u)
    x = x.reshape(u.shape[0], math.prod(u.shape[1:]))
    return MatrixWork(
        functools.partial(newton_schulz, coeffs=coeffs, eps=TORCH_NS_EPS, floor=True),
        x[None],
        ("torch_newton_schulz", coeffs),
    )


def shape_ratio(shape: tuple[int, ...], use_adjusted_lr: bool) -> float:
    """pytorch-optimizer's `get_adjusted_lr` factor of a leaf with `shape[0]` output rows and the other axes
    as inputs: Moonlight's `0.2 sqrt(max(out, in))`, or Keller Jordan's `sqrt(max(1, out / in))`."""
    fan_out, fan_in = shape[0], math.prod(shape[1:])
    if use_adjusted_lr:
        return 0.2 * math.sqrt(max(fan_out, fan_in))
    return math.pow(max(1.0, fan_out / fan_in), 0.5)


__all__: list[str] = []

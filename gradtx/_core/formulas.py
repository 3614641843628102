"""The small formulas many rules share: the three forms of a moving average, thresholds, norms.

TF's kernels write an exponential moving average in two forms that round differently, and optax
in a third (the second's sum in the other order, which XLA's fused multiply-add rounds
differently); each optimizer uses the one of the code it reproduces. TF measures a row-sparse
gradient (IndexedSlices) by its values as they are, duplicates included; low-precision leaves are
summed in float32.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from gradtx._core import hyper as _hyper
from gradtx._core import sliced as _sliced
from gradtx._core.walk import is_row_sparse, values_of


def moment_increment(m: jax.Array, x: jax.Array, decay: jax.Array) -> jax.Array:
    """`m += (x - m) * (1 - decay)`: the form of ApplyAdam, ApplyRMSProp, ApplyAdaMax."""
    keep = 1 - decay
    if m.dtype == x.dtype == getattr(keep, "dtype", None):  # the same ops, traced without jnp's wrappers
        return lax.add(m, lax.mul(lax.sub(x, m), keep))
    return m + (x - m) * keep


def moment_blend(m: jax.Array, x: jax.Array, decay: jax.Array) -> jax.Array:
    """`m * decay + x * (1 - decay)`: the form of ApplyAdadelta, AddSign/PowerSign and sparse Adam."""
    return m * decay + x * (1 - decay)


def optax_moment(m: jax.Array, x: jax.Array, decay: ArrayLike) -> Any:
    """`(1 - decay) * x + decay * m`: optax's form (`optax.tree.update_moment`), of the rules from optax.

    `moment_blend`'s sum in the other order: under `jit`, XLA on CPU keeps one of the two products
    unrounded in a fused multiply-add, which one depends on the order, so only optax's order gives
    optax's bits (`moment_blend`'s differs from it in ~1/3 of the elements by 1 ulp).
    """
    return (1 - decay) * x + decay * m


def torch_debias(beta: Any, t: Any, dtype: Any = None) -> Any:
    """`1 - beta^t` as PyTorch optimizers form it: `-expm1(t log(beta))`, the log of a Python `beta` taken in
    double, at the 1-based step `t` (in `dtype`, if given).

    The power of a float32-rounded beta (optax's `1 - beta**t`) is off by 1e-5 relative for beta = 0.999
    at t = 1; torch (and pytorch-optimizer's `debias`) form it in double. A traced `beta` (a schedule's
    value), or one outside [0, 1) (StableSPAM's `gamma1 = -1`), gives `1 - beta**t` as it comes.
    """
    t = jnp.asarray(t, dtype)
    if isinstance(beta, (int, float)) and 0 <= beta < 1:
        if beta == 0:
            return jnp.ones((), dtype or jnp.result_type(float))
        return -jnp.expm1(t * math.log(beta))
    return 1 - jnp.asarray(beta, dtype) ** t


def torch_corrections(h: Any, state: Any, extra_args: Any) -> dict[str, Any]:
    """pytorch-optimizer's bias corrections at step `h.t` (a `prepare`): `bc1 = 1 - b1^t`, `bc2 = 1 - b2^t`
    (`torch_debias`)."""
    del state, extra_args
    return {"bc1": torch_debias(h.b1, h.t), "bc2": torch_debias(h.b2, h.t)}


def soft_threshold(x: jax.Array, threshold: jax.Array) -> jax.Array:
    """`sign(x) * max(|x| - threshold, 0)`: the L1 proximal step (FOBOS, AdagradDA's closed form)."""
    return jnp.sign(x) * jnp.maximum(jnp.abs(x) - threshold, 0.0)


def by_l1(l1: jax.Array, shrunk: jax.Array, plain: jax.Array) -> jax.Array:
    """TF's choice between the L1-shrunk and the plain proximal step: `shrunk` where `l1 > 0`, `plain` where
    `l1 == 0`, and NaN for a NaN or negative `l1` (a schedule's value: TF would step as if it were 0)."""
    return jnp.where(l1 > 0, shrunk, jnp.where(l1 == 0, plain, jnp.nan))


def _wide(x: jax.Array) -> jax.Array:
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def abs_sq(x: jax.Array) -> jax.Array:
    """`|x|**2` element by element: `x * x` for real `x`, `re**2 + im**2` (real) for complex `x`.

    The second moments of the adaptive rules are of `|g|**2`, as in optax; squaring a complex
    `g` itself would rotate the step.
    """
    if jnp.iscomplexobj(x):
        return jnp.real(x) ** 2 + jnp.imag(x) ** 2
    return x * x


def real_dtype(dtype: Any) -> Any:
    """float32 for complex64 (float64 for complex128); a real dtype is itself."""
    return jnp.finfo(dtype).dtype


def squared_norm(x: Any, axis: Any = None, keepdims: bool = False) -> jax.Array:
    """`sum(|x|**2)` of one leaf (over `axis`), real, in at least float32."""
    v = _wide(values_of(x))
    return jnp.sum(abs_sq(v), axis=axis, keepdims=keepdims)


def leaf_norm(x: Any) -> jax.Array:
    """The L2 norm of one whole leaf, real, in at least float32; exact on ZeRO's slices too (its sum of
    squares goes through `_sliced.total`)."""
    return jnp.sqrt(_sliced.total(squared_norm(x)))


def clip_to_norm(x: jax.Array, c: jax.Array, axis: Any = None) -> jax.Array:
    """`tf.clip_by_norm(x, c, axes)`: `x * c / max(||x||, c)`, the L2 norm taken over `axis`.

    The square root is taken only where the sum is positive (a finite gradient at 0).
    """
    l2sum = squared_norm(x, axis=axis, keepdims=True).astype(real_dtype(x.dtype))
    l2sum = l2sum if axis is not None else _sliced.total(l2sum)  # the whole leaf's on ZeRO's slices too
    norm = jnp.where(l2sum > 0, jnp.sqrt(jnp.where(l2sum > 0, l2sum, 1)), l2sum)
    return (x * c) / jnp.maximum(norm, c)


def global_norm(tree: Any) -> jax.Array:
    """TF's `tf.linalg.global_norm`: `sqrt(2 * sum(l2_loss(t)))`, `l2_loss(t) = sum(t**2) / 2`.

    `None` leaves are skipped; an empty tree has norm 0.
    """
    leaves = [x for x in jax.tree.leaves(tree, is_leaf=is_row_sparse) if x is not None]
    if not leaves:
        return jnp.zeros([], jnp.float32)
    halves = jnp.stack([squared_norm(x) / 2 for x in leaves])
    return jnp.sqrt(_sliced.total(jnp.sum(halves)) * 2)  # exact on ZeRO's slices too (`_sliced`)


@functools.partial(jax.jit, inline=True)
def correction(decay, t):
    """`1 - decay^t`: Adam's bias correction at step `t`, compiled even in an eager step (as optax's), so
    that eager and jitted steps share XLA's `pow` and its numbers."""
    return 1 - decay**t


def corrections(
    h, state, extra_args, *, b1: str | None = "b1", b2: str | None = "b2", nesterov: bool = False
):
    """Adam's bias corrections at step `h.t` (a `prepare`): `bc1 = 1 - b1^t`, `bc2 = 1 - b2^t`, and for
    Nesterov `bc1_next = 1 - b1^(t+1)`; `b1`, `b2` name the decays among the hyperparameters.

    The power is formed as optax forms it: a Python decay to an int32 step gives float32 (float64
    under x64), so it does not round to 1 in a low-precision leaf; each leaf divides in its dtype.
    """
    del state, extra_args
    out = {}
    if b1 is not None:
        out["bc1"] = correction(getattr(h, b1), h.t)
    if b2 is not None:
        out["bc2"] = correction(getattr(h, b2), h.t)
    if nesterov and b1 is not None:
        out["bc1_next"] = correction(getattr(h, b1), _hyper.increment(h.t))
    return out


def total_sum(xs: list[Any]) -> jax.Array:
    """`sum(xs)` of per-leaf partial sums, as the sum over every element (exact on ZeRO's slices too)."""
    return _sliced.total(sum(xs[1:], xs[0]))


def sq_norm(xs: list[Any]) -> jax.Array:
    """The squared L2 norm of all the arrays `xs` together (`optax.tree.norm(x, squared=True)`)."""
    return total_sum([jnp.sum(abs_sq(x)) for x in xs])

"""DP-SGD's per-example gradients: `per_example_global_norm_clip`, `differentially_private_aggregate`.

Unlike every other transform, these take per-example gradients: each leaf has a leading
batch axis (`jax.vmap(jax.grad(loss), in_axes=(None, 0))(params, batch)` gives them), and
what comes out is shaped like the parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree
from gradtx.combinators._gradients import add_noise


def _check_per_example(fn: str, grads: Any) -> int:
    """The batch size of per-example gradients: every leaf is an array with the same leading axis."""
    named = [(p, x) for p, x in zip(_tree.key_paths(grads), _tree.flatten_updates(fn, grads)[0], strict=True)]
    leaves = [x for _, x in named if x is not None]
    if any(_tree.is_row_sparse(x) for x in leaves):
        raise TypeError(f"`{fn}`: per-example gradients must be dense arrays, got a row-sparse gradient.")
    sizes = {jnp.shape(x)[0] if jnp.ndim(x) else -1 for x in leaves}
    if not leaves or len(sizes) != 1 or -1 in sizes:
        shapes = ", ".join(f"{p}: {jnp.shape(x)}" for p, x in named if x is not None)
        raise ValueError(
            f"`{fn}`: expects per-example gradients, every leaf with the same leading batch axis "
            f"(e.g. from `jax.vmap(jax.grad(loss), in_axes=(None, 0))`); got {shapes or 'no leaves'}."
        )
    return sizes.pop()


def _clip_and_sum(fn: str, grads: Any, l2_norm_clip: Any) -> tuple[Any, jax.Array]:
    _check_per_example(fn, grads)
    norms = jax.vmap(_tree.global_norm)(grads)  # one global norm per example
    factors = jnp.nan_to_num(jnp.minimum(jnp.asarray(l2_norm_clip, norms.dtype) / norms, 1.0), nan=1.0)

    def leaf(g):
        return jnp.tensordot(factors.astype(g.dtype), g, axes=1) if g is not None else None

    summed = jax.tree.map(leaf, grads, is_leaf=lambda x: x is None)
    return summed, jnp.sum(factors < 1.0, dtype=jnp.int32)


def per_example_global_norm_clip(grads: Any, l2_norm_clip: Any) -> tuple[Any, jax.Array]:
    r"""Clip each example's gradient to global norm `l2_norm_clip`, then sum over the examples (DP-SGD).

    .. math:: g = \sum_{b} g_b \min\!\Big(1, \frac{C}{\lVert g_b \rVert}\Big)

    `optax.per_example_global_norm_clip`: `grads` holds per-example gradients, each leaf
    with a leading batch axis `b`; each example's norm is taken over all its leaves
    together (`global_norm`). An example with norm 0 is kept as it is.

    Args:
      grads: per-example gradients, every leaf `[batch, *param_shape]`.
      l2_norm_clip: :math:`C`, the largest global norm of one example's gradient, >= 0.

    Returns:
      `(summed, num_clipped)`: the sum of the clipped gradients (shaped like the params) and
      the number of examples that were clipped (an int32 scalar).

    Raises:
      TypeError: for a non-number `l2_norm_clip` or a row-sparse leaf.
      ValueError: for a negative or non-finite `l2_norm_clip`, or leaves without one common leading axis.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> grads = [jnp.array([[0.0, 0.0, 0.0], [0.0, 3.0, 4.0], [4.0, 0.0, 3.0], [3.0, 4.0, 0.0]])]
        >>> summed, clipped = gradtx.per_example_global_norm_clip(grads, 1.25)  # norms 0, 5, 5, 5
        >>> summed, clipped
        ([Array([1.75, 1.75, 1.75], dtype=float32)], Array(3, dtype=int32))

    References:
      Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, *Deep Learning with
      Differential Privacy*, CCS 2016.
    """
    fn = "per_example_global_norm_clip"
    _checks.check_number(fn, "l2_norm_clip", l2_norm_clip)
    _checks.check_finite(fn, "l2_norm_clip", l2_norm_clip)
    _checks.check_nonnegative(fn, "l2_norm_clip", l2_norm_clip)
    return _clip_and_sum(fn, grads, l2_norm_clip)


@_base.api
@_base.per_example_grads
def differentially_private_aggregate(
    l2_norm_clip: _protocol.ScalarOrSchedule, noise_multiplier: _protocol.ScalarOrSchedule, seed: int = 0
) -> _protocol.GradientTransformation:
    r"""Turn per-example gradients into DP-SGD's noisy mean: clip each example, sum, add noise, divide.

    .. math::
        u = \frac{1}{B}\Big(\sum_{b=1}^{B} g_b \min\!\Big(1, \frac{C}{\lVert g_b \rVert}\Big)
            + \sigma C\, \xi\Big), \qquad \xi \sim N(0, I)

    `optax.contrib.differentially_private_aggregate`: the updates given to `update` are
    per-example gradients (each leaf `[B, *param_shape]`); the updates returned are shaped
    like the params. Put it first in a chain, e.g. DP-SGD is
    `chain(differentially_private_aggregate(C, sigma, seed), sgd(learning_rate))`
    (`optax.contrib.dpsgd`). The clipping is `per_example_global_norm_clip`, the noise
    `add_noise(sigma * C, seed, truncated=False)` (one normal draw per element, from
    `(seed, count, key path)`, or from the extra argument `key`). Gradient accumulation
    around it (`accumulate_gradients`) does not keep the privacy accounting: clip per
    example, not per accumulated batch.

    Args:
      l2_norm_clip: :math:`C`, the largest global norm of one example's gradient, >= 0
        (number, scalar array or schedule).
      noise_multiplier: :math:`\sigma`, the noise's standard deviation relative to
        :math:`C`, >= 0 (number, scalar array or schedule).
      seed: the integer seed of the noise.

    Returns:
      A `GradientTransformation` with state `AddNoiseState(count, key)`.

    Raises:
      TypeError: for a non-number argument or a non-integer seed.
      ValueError: for a negative or non-finite argument; at update time, for leaves without
        one common leading batch axis.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> params = {"w": jnp.zeros(2)}
        >>> per_example = {"w": jnp.array([[3.0, 4.0], [0.3, 0.4]])}  # 2 examples, norms 5 and 0.5
        >>> tx = gradtx.differentially_private_aggregate(1.0, noise_multiplier=0.0)
        >>> out, _ = tx.update(per_example, tx.init(params))
        >>> print([round(float(v), 4) for v in out["w"]])  # ([0.6, 0.8] + [0.3, 0.4]) / 2
        [0.45, 0.6]

    References:
      Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, *Deep Learning with
      Differential Privacy*, CCS 2016.
    """
    fn = "differentially_private_aggregate"
    for name, value in (("l2_norm_clip", l2_norm_clip), ("noise_multiplier", noise_multiplier)):
        _checks.check_finite(fn, name, value)
        _checks.check_nonnegative(fn, name, value)
    _checks.check_int(fn, "seed", seed)

    def std(count):
        return _tree.resolve(l2_norm_clip, count) * _tree.resolve(noise_multiplier, count)

    noise = add_noise(std, seed, truncated=False)
    name = _checks.api_name(fn)

    def init_fn(params):
        return noise.init(params)

    def update_fn(updates, state, params=None, **extra_args):
        batch = _check_per_example(name, updates)
        summed, _ = _clip_and_sum(name, updates, _tree.resolve(l2_norm_clip, state.count))
        noisy, state = noise.update(summed, state, params, **extra_args)
        return jax.tree.map(lambda g: (g / batch).astype(g.dtype), noisy), state

    return _protocol.GradientTransformation(init_fn, update_fn)

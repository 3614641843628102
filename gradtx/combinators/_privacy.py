"""DP-SGD's per-example gradients: `per_example_global_norm_clip`, `differentially_private_aggregate`.

Unlike every other transform, these take per-example gradients: each leaf has a leading
batch axis (`jax.vmap(jax.grad(loss), in_axes=(None, 0))(params, batch)` gives them), and
what comes out is shaped like the parameters.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx.combinators._gradients import add_noise
from gradtx.combinators._per_example import check_per_example as _check_per_example
from gradtx.combinators._per_example import clip_and_sum as _clip_and_sum


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


class DifferentiallyPrivateAggregateState(NamedTuple):
    """State of `differentially_private_aggregate(..., key=...)` (optax's, field for field)."""

    rng_key: jax.Array  # the typed PRNG key of the next step's noise


@_factory.api
@_factory.per_example_grads
def differentially_private_aggregate(
    l2_norm_clip: _protocol.ScalarOrSchedule,
    noise_multiplier: _protocol.ScalarOrSchedule,
    seed: int = 0,
    *,
    key: jax.Array | None = None,
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

    With `key` (a typed PRNG key, `jax.random.key(0)`), the noise is drawn as optax draws it:
    each step splits the state's key into the next one and one key per leaf
    (`jax.random.split(rng_key, n + 1)`, leaves in `jax.tree.leaves` order) and draws
    :math:`\xi` in each leaf's dtype; the state is then `DifferentiallyPrivateAggregateState(rng_key)`,
    which keeps no count, so `l2_norm_clip` and `noise_multiplier` must be numbers or arrays.

    Args:
      l2_norm_clip: :math:`C`, the largest global norm of one example's gradient, >= 0
        (number, scalar array or schedule).
      noise_multiplier: :math:`\sigma`, the noise's standard deviation relative to
        :math:`C`, >= 0 (number, scalar array or schedule).
      seed: the integer seed of the noise.
      key: a typed PRNG key: draw the noise from it as optax does (then `seed` is not read).

    Returns:
      A `GradientTransformation` with state `AddNoiseState(count, key)`, or
      `DifferentiallyPrivateAggregateState(rng_key)` with `key`.

    Raises:
      TypeError: for a non-number argument, a non-integer seed, a `key` that is not a typed PRNG
        key, or a schedule with `key`.
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
    if key is not None:
        return _keyed_aggregate(fn, l2_norm_clip, noise_multiplier, key)

    def std(count):
        return _hyper.resolve(l2_norm_clip, count) * _hyper.resolve(noise_multiplier, count)

    noise = add_noise(std, seed, truncated=False)
    name = _checks.api_name(fn)

    def init_fn(params):
        return noise.init(params)

    def update_fn(updates, state, params=None, **extra_args):
        batch = _check_per_example(name, updates)
        summed, _ = _clip_and_sum(name, updates, _hyper.resolve(l2_norm_clip, state.count))
        noisy, state = noise.update(summed, state, params, **extra_args)
        return jax.tree.map(lambda g: (g / batch).astype(g.dtype), noisy), state

    return _protocol.GradientTransformation(init_fn, update_fn)


def _keyed_aggregate(fn: str, l2_norm_clip: Any, noise_multiplier: Any, key: Any) -> Any:
    """`differentially_private_aggregate` with optax's noise: a key chain in the state, split every step."""
    if not (isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `key` must be a typed PRNG key (`jax.random.key(seed)`), got {key!r}."
        )
    for name, value in (("l2_norm_clip", l2_norm_clip), ("noise_multiplier", noise_multiplier)):
        if callable(value):
            raise TypeError(
                f"`{_checks.api_name(fn)}`: with `key`, `{name}` must be a number or an array (the state "
                f"keeps no count for a schedule), got {value!r}."
            )
    noise_std = l2_norm_clip * noise_multiplier  # in double for Python numbers, as optax computes it
    name = _checks.api_name(fn)

    def init_fn(params):
        del params
        return DifferentiallyPrivateAggregateState(key)

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        batch = _check_per_example(name, updates)
        summed, _ = _clip_and_sum(name, updates, l2_norm_clip)
        leaves, treedef = jax.tree.flatten(summed)
        new_key, *keys = jax.random.split(state.rng_key, len(leaves) + 1)
        noised = [
            (g + noise_std * jax.random.normal(k, g.shape, g.dtype)) / batch
            for g, k in zip(leaves, keys, strict=True)
        ]
        return treedef.unflatten(noised), DifferentiallyPrivateAggregateState(new_key)

    return _protocol.GradientTransformation(init_fn, update_fn)

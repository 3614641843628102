"""Per-tensor optimizers after TF1: Adafactor, LAMB, NovoGrad, SM3 and Muon, as chains (optax's numbers).

Each looks at whole leaves (a factored statistic, a layer's norm, a matrix's
orthogonalisation), so on packed parameters it gets per-leaf views
(`gradtx.packing.leaf_wise`). Schedule-free AdamW / SGD are in `_schedule_free.py`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain, partition
from gradtx.transforms import (
    clip_by_block_rms,
    ema,
    scale_by_bias_corrected_adam,
    scale_by_factored_rms,
    scale_by_learning_rate,
    scale_by_muon,
    scale_by_novograd,
    scale_by_param_block_rms,
    scale_by_shape,
    scale_by_sm3,
    scale_by_trust_ratio,
)
from gradtx.transforms._muon import NS_COEFFS, dims_by_leaf

_DESCEND = 1.0
"""The rate of Adafactor's last link: the step is complete (rate and scale included); it only turns it into an
update."""


@_factory.api
def adafactor(
    learning_rate: _protocol.ScalarOrSchedule | None = None,
    min_dim_size_to_factor: int = 128,
    decay_rate: _protocol.ScalarOrSchedule = 0.8,
    decay_offset: int = 0,
    clipping_threshold: _protocol.ScalarOrSchedule | None = 1.0,
    momentum: _protocol.ScalarOrSchedule | None = None,
    weight_decay: _protocol.ScalarOrSchedule | None = None,
    eps: _protocol.ScalarOrSchedule = 1e-30,
    *,
    multiply_by_parameter_scale: bool = True,
    factored: bool = True,
    mu_dtype: Any = jnp.float32,
    mask: Any = None,
    decay_rate_fn: Callable[[jax.Array, Any], Any] | None = None,
) -> _protocol.GradientTransformation:
    r"""Adafactor: factored second moments, update clipping and a step relative to each parameter's scale.

    The chain of `optax.adafactor`, with its defaults and numbers:
    `scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor, eps)`,
    then `clip_by_block_rms(clipping_threshold)` (unless None), the learning rate (unless
    None), `scale_by_param_block_rms()` (when `multiply_by_parameter_scale`: the paper's
    relative step), `ema(momentum, mu_dtype=mu_dtype)` (unless None), and
    `add_decayed_weights(weight_decay, mask=mask)` (unless None; not multiplied by the
    learning rate), and the descent. The paper's relative step size
    :math:`\rho_t = \min(10^{-2}, 1/\sqrt{t})` is
    `learning_rate=lambda count: jnp.minimum(1e-2, jax.lax.rsqrt(count + 1.0))`. Matrices
    whose two largest axes have at least `min_dim_size_to_factor` entries keep one
    statistic per row and per column; other leaves one per element. A row-sparse gradient
    is densified.

    Args:
      learning_rate: a factor on the step (number, scalar array or schedule), or None for none.
      min_dim_size_to_factor: factor a leaf only when its second largest axis is at least this long.
      decay_rate: the exponent :math:`c` of the second-moment decay :math:`1 - t^{-c}`, >= 0.
      decay_offset: subtracted from the step in that decay (fine-tuning), an int >= 0.
      clipping_threshold: the largest RMS of an update per leaf, > 0, or None for no clipping.
      momentum: the decay of an average of the updates, in [0, 1], or None for none.
      weight_decay: add `weight_decay * params` after the rate, >= 0, or None for none.
      eps: added to the squared gradient, > 0.
      multiply_by_parameter_scale: scale each leaf's step by its parameter's RMS (at least 1e-3).
      factored: factor the second moment of matrices.
      mu_dtype: dtype of the momentum (optax's `dtype_momentum`).
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      decay_rate_fn: `(count - decay_offset, decay_rate) -> beta2`, replacing the decay schedule.

    Returns:
      A `LeafWise` chain; the statistics are the slots `v_row`, `v_col` and `v`.

    Raises:
      ValueError: for a bad decay, threshold, momentum, weight decay or `eps`.
      TypeError: for non-int sizes or offsets, or non-bool flags.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adafactor(learning_rate=0.1, min_dim_size_to_factor=2)
        >>> params = {"w": jnp.ones((2, 3))}
        >>> u, state = tx.update({"w": jnp.full((2, 3), 0.5)}, tx.init(params), params)
        >>> u["w"][0]  # -lr * RMS(w) * g / |g|
        Array([-0.1, -0.1, -0.1], dtype=float32)

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*, ICML 2018.
    """
    fn = "adafactor"  # arguments named differently in the building blocks are checked under their names here
    _checks.check_bool(fn, "multiply_by_parameter_scale", multiply_by_parameter_scale)
    _checks.check_int(fn, "decay_offset", decay_offset, minimum=0)
    if clipping_threshold is not None:
        _checks.check_finite(fn, "clipping_threshold", clipping_threshold)
        _checks.check_positive(fn, "clipping_threshold", clipping_threshold)
    if momentum is not None:
        _checks.check_in_range(fn, "momentum", momentum, 0.0, 1.0)
    parts = [
        scale_by_factored_rms(
            factored, decay_rate, decay_offset, min_dim_size_to_factor, eps, decay_rate_fn=decay_rate_fn
        )
    ]
    if clipping_threshold is not None:
        parts.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        parts.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        parts.append(scale_by_param_block_rms())
    if momentum is not None:
        parts.append(ema(momentum, mu_dtype=mu_dtype))
    if weight_decay is not None:
        parts.append(add_decayed_weights(weight_decay, mask=mask))
    return chain(*parts, scale_by_learning_rate(_DESCEND))


@_factory.api
def lamb(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-6,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
    min_norm: _protocol.ScalarOrSchedule = 0.0,
) -> _protocol.GradientTransformation:
    r"""LAMB: Adam with weight decay, each layer's step scaled by its trust ratio (its norm over the step's).

    `chain(scale_by_bias_corrected_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay,
    mask=mask), scale_by_trust_ratio(min_norm), scale_by_learning_rate(learning_rate))`: the
    numbers of `optax.lamb`. Each leaf moves by about `learning_rate` times its own norm, so
    large batches train with one rate for all layers; a leaf never changes sign by itself
    (its steps shrink with its norm) unless `min_norm` > 0 floors both norms. A row-sparse
    gradient is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added under the root, >= 0.
      weight_decay: added to Adam's direction as `weight_decay * params`, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      min_norm: the trust ratio's floor on the parameter's and the step's norms, >= 0 (0: optax's).

    Returns:
      A `LeafWise` chain; its slots are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, `eps_root`, weight decay, `min_norm` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lamb(0.1)
        >>> params = {"w": jnp.array([3.0, 4.0])}  # norm 5
        >>> u, _ = tx.update({"w": jnp.array([1.0, -1.0])}, tx.init(params), params)
        >>> [round(float(x), 4) for x in u["w"]]  # Adam's first step is sign(g); scaled to norm 0.1 * 5
        [-0.3536, 0.3536]

    References:
      You et al., *Large batch optimization for deep learning: training BERT in 76 minutes*,
      ICLR 2020 (Algorithm 2).
    """
    return chain(
        scale_by_bias_corrected_adam(b1, b2, eps, eps_root),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_trust_ratio(min_norm),
        scale_by_learning_rate(learning_rate),
    )


@_factory.api
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
      A `LeafWise` chain; its slots are `m` and `v` (one scalar per leaf).

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


@_factory.api
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
      A `LeafWise` chain; its slots are `accumulators` (a list per leaf) and `momentum`.

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


def _muon_labels(params: Any) -> Any:
    """`"muon"` for matrices, `"fallback"` for the other leaves."""
    return jax.tree.map(lambda p: "muon" if jnp.ndim(p) == 2 else "fallback", params)


def _labels_by_dims(dims: Any) -> Any:
    """`"muon"` for the leaves `dims` gives dimension numbers, `"fallback"` for the others (optax's rule)."""

    def labels(params):
        by_leaf = dims_by_leaf(dims, params)
        flat, treedef = jax.tree_util.tree_flatten_with_path(params)
        return treedef.unflatten(["fallback" if by_leaf[path] is None else "muon" for path, _ in flat])

    return labels


@_factory.api
def muon(
    learning_rate: _protocol.ScalarOrSchedule,
    ns_coeffs: Sequence[float] | Sequence[Sequence[float]] = NS_COEFFS,
    ns_steps: int = 5,
    beta: _protocol.ScalarOrSchedule = 0.95,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
    nesterov: bool = True,
    adaptive: bool = False,
    consistent_rms: float | None = None,
    adam_b1: _protocol.ScalarOrSchedule = 0.9,
    adam_b2: _protocol.ScalarOrSchedule = 0.999,
    adam_eps_root: _protocol.ScalarOrSchedule = 0.0,
    adam_weight_decay: _protocol.ScalarOrSchedule = 0.0,
    adam_learning_rate: _protocol.ScalarOrSchedule | None = None,
    fallback: Any = None,
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    r"""Muon: momentum orthogonalised by Newton-Schulz for the matrices, AdamW for every other leaf.

    The matrices (2-D leaves) get `chain(scale_by_muon(ns_coeffs, ns_steps, beta, eps,
    nesterov=nesterov, adaptive=adaptive, mu_dtype=mu_dtype), scale_by_shape(consistent_rms),
    add_decayed_weights(weight_decay, mask=mask), scale_by_learning_rate(learning_rate))`;
    the other leaves (biases, norms' scales, scalars) get `fallback`, by default AdamW in
    optax's form: `chain(scale_by_bias_corrected_adam(adam_b1, adam_b2, eps, adam_eps_root,
    nesterov=nesterov, mu_dtype=mu_dtype), add_decayed_weights(adam_weight_decay),
    scale_by_learning_rate(adam_learning_rate or learning_rate))`. These are the numbers of
    `optax.contrib.muon` (both parts' weight decay multiplied by the rate). Embeddings and
    output heads, which the Muon authors also train with AdamW, can be routed with
    `gradtx.partition`. With `weight_dimension_numbers` (optax's
    `muon_weight_dimension_numbers`), the leaves given a `MuonDimensionNumbers` go to Muon, as
    stacks of matrices (conv kernels, stacked layers), and every other leaf, 2-D or not, to
    the fallback. A row-sparse gradient is densified.

    Args:
      learning_rate: the rate of the matrices (number, scalar array or schedule).
      ns_coeffs: the Newton-Schulz coefficients `(a, b, c)`, or one triple per iteration.
      ns_steps: the number of Newton-Schulz iterations, an int >= 1.
      beta: the momentum's decay, in [0, 1).
      eps: added to the Frobenius norm, and the fallback Adam's epsilon, >= 0.
      weight_decay: the matrices' decay, multiplied by the rate, >= 0.
      mask: which matrices decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the momenta (default: each param's dtype).
      nu_dtype: dtype of the fallback Adam's second moment (default: each param's dtype).
      nesterov: Nesterov's momentum, in Muon and in the fallback Adam.
      adaptive: scale by the inner product of the momentum and its orthogonalisation.
      consistent_rms: give every matrix update this RMS (0.2 matches AdamW's), or None for
        the width scaling :math:`\sqrt{\max(1, n_{out}/n_{in})}`.
      adam_b1: the fallback Adam's first-moment decay, in [0, 1).
      adam_b2: the fallback Adam's second-moment decay, in [0, 1).
      adam_eps_root: the fallback Adam's epsilon under the root, >= 0.
      adam_weight_decay: the fallback's decay, multiplied by its rate, >= 0.
      adam_learning_rate: the fallback's rate (default: `learning_rate`).
      fallback: the optimizer of the leaves that are not matrices, replacing the AdamW above.
      weight_dimension_numbers: a tree of `MuonDimensionNumbers` (None: the fallback's leaf)
        shaped like the params or a prefix of them, or a function of the params giving one;
        None: the 2-D leaves are Muon's.

    Returns:
      A `LeafWise` partition ``{"muon": ..., "fallback": ...}``; its slots are `momentum`
      (the matrices), `m` and `v` (the other leaves, with the default fallback).

    Raises:
      ValueError: for malformed Newton-Schulz coefficients or a bad decay, `eps` or rate.
      TypeError: for a `fallback` that is not a transform, or non-bool flags.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.muon(0.1)
        >>> params = {"w": jnp.zeros((2, 2)), "b": jnp.zeros(2)}
        >>> grads = {"w": jnp.array([[2.0, 0.0], [0.0, 0.5]]), "b": jnp.array([1.0, -2.0])}
        >>> u, _ = tx.update(grads, tx.init(params), params)
        >>> [[round(float(x), 3) for x in row] for row in u["w"]]  # U V^T = I; the quintic: ~0.74 I
        [[-0.074, -0.0], [-0.0, -0.074]]
        >>> [round(float(x), 3) for x in u["b"]]  # Nesterov Adam: -lr (1 + b1 / (1 + b1)) sign(g)
        [-0.147, 0.147]

    References:
      Jordan et al., *Muon: an optimizer for hidden layers in neural networks*, 2024
      (https://kellerjordan.github.io/posts/muon/); Liu et al., *Muon is scalable for LLM
      training*, 2025 (arXiv:2502.16982).
    """
    fn = "muon"  # the fallback Adam's arguments are checked under their names here
    _checks.check_in_range(fn, "adam_b1", adam_b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "adam_b2", adam_b2, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "adam_eps_root", adam_eps_root)
    _checks.check_nonnegative(fn, "adam_eps_root", adam_eps_root)
    _checks.check_nonnegative(fn, "adam_weight_decay", adam_weight_decay)
    if adam_learning_rate is not None:
        _checks.check_finite(fn, "adam_learning_rate", adam_learning_rate)
        _checks.check_nonnegative(fn, "adam_learning_rate", adam_learning_rate)
    if fallback is None:
        fallback = chain(
            scale_by_bias_corrected_adam(
                adam_b1, adam_b2, eps, adam_eps_root, nesterov=nesterov, mu_dtype=mu_dtype, nu_dtype=nu_dtype
            ),
            add_decayed_weights(adam_weight_decay),
            scale_by_learning_rate(learning_rate if adam_learning_rate is None else adam_learning_rate),
        )
    else:
        _checks.check_transform(fn, "fallback", fallback)
    matrices = chain(
        scale_by_muon(
            ns_coeffs,
            ns_steps,
            beta,
            eps,
            nesterov=nesterov,
            adaptive=adaptive,
            mu_dtype=mu_dtype,
            weight_dimension_numbers=weight_dimension_numbers,
        ),
        scale_by_shape(consistent_rms, weight_dimension_numbers=weight_dimension_numbers),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )
    labels = _muon_labels if weight_dimension_numbers is None else _labels_by_dims(weight_dimension_numbers)
    return partition({"muon": matrices, "fallback": fallback}, labels)

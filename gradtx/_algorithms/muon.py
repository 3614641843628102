"""Muon: momentum orthogonalised by Newton-Schulz (`scale_by_muon`, `muon`); the axes of a leaf's matrices
are given by `MuonDimensionNumbers`.

The width scaling `muon` chains (`scale_by_shape`) is in `muon_shape.py`, the dimension numbers in
`muon_dims.py`, the Newton-Schulz iteration in `newton_schulz.py`.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx._algorithms.adam import first_moment_estimate, scale_by_bias_corrected_adam
from gradtx._algorithms.muon_dims import (
    MuonDimensionNumbers,
    _as_matrices,
    _check_dims,
    _check_dims_tree,
    _with_dims,
    dims_by_leaf,
)
from gradtx._algorithms.muon_shape import scale_by_shape
from gradtx._algorithms.newton_schulz import NS_COEFFS, PRECONDITIONINGS, coefficient_schedule, newton_schulz
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.matrix_work import MatrixWork
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._masking import partition
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class ScaleByMuonState(NamedTuple):
    """State of `scale_by_muon`."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # the moving average of the gradients (starts at 0)


def _muon_leaf(g, m, h, *, coeffs, nesterov, adaptive, preconditioning, dims=None, path=None):
    """One leaf: `(update, momentum)`; matrices (as `dims` says, by key path) are orthogonalised, other leaves
    keep the momentum."""
    m = _formulas.optax_moment(m, g, h.beta)
    m_hat = first_moment_estimate(m, g, h.beta, h, nesterov)
    d = None if dims is None else dims.get(path)
    if d is None and g.ndim != 2:
        return m_hat, m
    d = MuonDimensionNumbers() if d is None else d
    if dims is not None:
        _check_dims("scale_by_muon", d, g.shape, path)
    stacked, back = _as_matrices(m_hat, d)
    ortho = yield MatrixWork(  # each matrix orthogonalised where the constructor runs the step's matrix work
        functools.partial(_orthogonalized, coeffs=coeffs, preconditioning=preconditioning),
        stacked,
        ("newton_schulz", coeffs, preconditioning),
        args=(h.eps,),
    )
    out = _placement.placed_like(back(ortho), m_hat)
    return (jnp.sum(m_hat * out) * out if adaptive else out), m


def _orthogonalized(x, eps, *, coeffs, preconditioning):
    return newton_schulz(x, coeffs, eps, preconditioning)


@_registry.transform()
def scale_by_muon(
    ns_coeffs: str | Sequence[float] | Sequence[Sequence[float]] = NS_COEFFS,
    ns_steps: int = 5,
    beta: _protocol.ScalarOrSchedule = 0.95,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    nesterov: bool = True,
    adaptive: bool = False,
    preconditioning: str = "frobenius",
    mu_dtype: Any = None,
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    r"""Muon: replace each matrix's (Nesterov) momentum by an approximately orthogonal matrix.

    With :math:`\hat m_t` the bias-corrected momentum of `scale_by_bias_corrected_adam`'s
    first moment (decay :math:`\beta`, Nesterov's form by default), a matrix leaf becomes

    .. math::
        X_0 = \frac{\hat m_t}{\lVert \hat m_t\rVert_F + \epsilon}, \qquad
        X_{k+1} = a X_k + \big(b\, A_k + c\, A_k^2\big) X_k, \quad A_k = X_k X_k^\top, \qquad
        u_t = X_K

    (on the transpose when it has more rows than columns; :math:`X_0` as shown for the
    default 'frobenius' `preconditioning`), which pushes every singular
    value of :math:`\hat m_t` towards 1: :math:`u_t \approx U V^\top` for
    :math:`\hat m_t = U S V^\top`. With `adaptive`, :math:`u_t \leftarrow \langle \hat m_t,
    u_t\rangle\, u_t`. Leaves that are not matrices get :math:`\hat m_t` itself (the `muon`
    alias gives them to another optimizer). With `weight_dimension_numbers`, a leaf given a
    `MuonDimensionNumbers` is seen as a stack of matrices (its batch axes), each orthogonalised
    on its own: conv kernels, stacked layers. `preconditioning` 'spectral' divides by the
    largest singular value instead of the Frobenius norm (an SVD per matrix); 'aol' scales
    each row :math:`i` of :math:`\hat m_t` by :math:`(\sum_j |A_{ij}|)^{-1/2}` inside the first
    iteration (Prach and Lampert's almost-orthogonal rescaling), 'schatten' by
    :math:`\lVert A\rVert_F^{-1/2}` (Schatten-4): both bound the singular values by 1 and let
    the first iteration reuse its Gram matrix. These are the numbers of
    `optax.contrib.scale_by_muon`. A row-sparse gradient is
    densified first. Under `jax.jit` with Explicit mesh axes (`jax.set_mesh`), a sharded
    matrix is gathered whole onto every device (one all-gather per sharded mesh axis), its
    iteration runs there without communication, and its update is sliced back to the
    parameter's sharding; with Auto axes XLA chooses.

    Args:
      ns_coeffs: :math:`(a, b, c)`, used in each of `ns_steps` iterations, a sequence of
        such triples, one per iteration (then `ns_steps` is not used), or the name of a
        schedule: 'original' (the default triple), 'quintic', 'polar_express' (Amsel et al.'s
        Polar Express) or 'polar_express_safer', whose first `ns_steps` triples are used (the
        last repeated), as pytorch-optimizer's `Muon` takes them.
      ns_steps: the number of Newton-Schulz iterations :math:`K`, an int >= 1.
      beta: the momentum's decay, in [0, 1).
      eps: added to the Frobenius norm, >= 0.
      nesterov: use Nesterov's form of the momentum.
      adaptive: scale by the inner product of the momentum and its orthogonalisation.
      preconditioning: how :math:`X_0` is scaled: 'frobenius' (by the Frobenius norm plus
        `eps`), 'spectral' (the largest singular value plus `eps`), 'aol' or 'schatten' (in
        the first iteration, floored at 1e-8).
      mu_dtype: dtype of the momentum (default: each param's dtype).
      weight_dimension_numbers: a tree of `MuonDimensionNumbers` (or None: a plain leaf)
        shaped like the params or a prefix of them, or a function of the updates giving one;
        None: every 2-D leaf is a matrix.

    Returns:
      A `GradientTransformation` with state `ScaleByMuonState(count, momentum)`.

    Raises:
      ValueError: for malformed `ns_coeffs`, `ns_steps` < 1, `beta` outside [0, 1), a
        negative `eps` or an unknown `preconditioning`.
      TypeError: for a non-int `ns_steps`, non-bool flags, a `mu_dtype` that is neither float nor complex
        or a dimension-numbers tree with other leaves; (when traced) ValueError for dimension
        numbers that do not fit their leaf.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_muon(ns_coeffs=(1.5, -0.5, 0.0), ns_steps=30)  # the classic cubic: exact
        >>> u, _ = tx.update(jnp.array([[3.0, 0.0], [0.0, 0.5]]), tx.init(jnp.zeros((2, 2))))
        >>> [[round(float(x), 3) for x in row] for row in u]  # U V^T of a diagonal matrix: the identity
        [[1.0, 0.0], [0.0, 1.0]]

    References:
      Jordan et al., *Muon: an optimizer for hidden layers in neural networks*, 2024
      (https://kellerjordan.github.io/posts/muon/); Bernstein, Newhouse, *Old optimizer, new
      norm: an anthology*, 2024 (arXiv:2409.20325); Amsel et al., *The Polar Express: optimal
      matrix sign methods and their application to the Muon algorithm*, 2025 (arXiv:2505.16932).
    """
    fn = "scale_by_muon"
    _checks.check_int(fn, "ns_steps", ns_steps, minimum=1)
    coeffs = coefficient_schedule(fn, ns_coeffs, ns_steps)
    _checks.check_in_range(fn, "beta", beta, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "nesterov", nesterov)
    _checks.check_bool(fn, "adaptive", adaptive)
    _checks.check_one_of(fn, "preconditioning", preconditioning, PRECONDITIONINGS)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _check_dims_tree(fn, weight_dimension_numbers)
    leaf = functools.partial(
        _muon_leaf, coeffs=coeffs, nesterov=nesterov, adaptive=adaptive, preconditioning=preconditioning
    )

    def rule(dims):
        return update_rule(
            fn,
            ScaleByMuonState,
            functools.partial(leaf, dims=dims),
            hyper={"beta": beta, "eps": eps},
            slots={"momentum": Slot(0.0, mu_dtype)},
            prepare=functools.partial(corrections, b1="beta", b2=None, nesterov=nesterov),
            kind=_protocol.LeafWise,  # matrices are orthogonalised whole
            real_only="its Newton-Schulz iteration orthogonalizes real matrices",
            paths=dims is not None,
        )

    return rule(None) if weight_dimension_numbers is None else _with_dims(rule, weight_dimension_numbers)


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


@_registry.optimizer("Muon")
def muon(
    learning_rate: _protocol.ScalarOrSchedule,
    ns_coeffs: str | Sequence[float] | Sequence[Sequence[float]] = NS_COEFFS,
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
    preconditioning: str = "frobenius",
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
    nesterov=nesterov, adaptive=adaptive, preconditioning=preconditioning, mu_dtype=mu_dtype),
    scale_by_shape(consistent_rms),
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
      ns_coeffs: the Newton-Schulz coefficients `(a, b, c)`, one triple per iteration, or a
        schedule's name ('original', 'quintic', 'polar_express', 'polar_express_safer').
      ns_steps: the number of Newton-Schulz iterations, an int >= 1.
      beta: the momentum's decay, in [0, 1).
      eps: added to the Frobenius norm, and the fallback Adam's epsilon, >= 0.
      weight_decay: the matrices' decay, multiplied by the rate, >= 0.
      mask: which matrices decay (tree of bools, function or key-path patterns); all if None.
      mu_dtype: dtype of the momenta (default: each param's dtype).
      nu_dtype: dtype of the fallback Adam's second moment (default: each param's dtype).
      nesterov: Nesterov's momentum, in Muon and in the fallback Adam.
      adaptive: scale by the inner product of the momentum and its orthogonalisation.
      preconditioning: the scaling before Newton-Schulz, as `scale_by_muon`'s.
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
            preconditioning=preconditioning,
            mu_dtype=mu_dtype,
            weight_dimension_numbers=weight_dimension_numbers,
        ),
        scale_by_shape(consistent_rms, weight_dimension_numbers=weight_dimension_numbers),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )
    labels = _muon_labels if weight_dimension_numbers is None else _labels_by_dims(weight_dimension_numbers)
    return partition({"muon": matrices, "fallback": fallback}, labels)


__all__ = ["ScaleByMuonState", "muon", "scale_by_muon"]

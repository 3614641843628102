"""optax.contrib's Muon under optax's names, signatures, defaults and state classes: `muon`, `scale_by_muon`,
`MuonState`, `MuonDimensionNumbers`.

`muon` is optax's partition of a Muon chain and AdamW built from gradtx's blocks, so its state reads as
optax's (`state.inner_states["muon"].inner_state[0].mu`). No math here. These names are optax's
`optax.contrib.*`, not top-level ones: `gradtx.optax_compat.contrib` re-exports them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import gradtx
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.optax_compat import _aliases_adam, _routing
from gradtx.optax_compat import _combinators as C
from gradtx.transforms import MuonDimensionNumbers, ScaleByMuonState
from gradtx.transforms._muon import NS_COEFFS, dims_by_leaf

__all__ = ["MuonDimensionNumbers", "MuonState", "muon", "scale_by_muon"]


class MuonState(NamedTuple):
    """optax.contrib's `MuonState`: the count, the momentum `mu` and the Newton-Schulz coefficients."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the momentum
    ns_coeffs: jax.Array  # (3,) or (n, 3): the coefficients, as optax keeps them


_NS_PRESETS = {
    "standard": NS_COEFFS,
    "dion": (
        (4.0848, -6.8946, 2.9270),
        (3.9505, -6.3029, 2.6377),
        (3.7418, -5.5913, 2.3037),
        (2.8769, -3.1427, 1.2046),
        (2.8366, -3.0525, 1.2012),
    ),
}
"""optax's named Newton-Schulz coefficient presets (`muon(ns_coeffs="dion")`)."""


def _frobenius_only(fn: str, preconditioning: str) -> None:
    if preconditioning != "frobenius":
        raise ValueError(
            f"`{fn}`: `preconditioning` {preconditioning!r} is not supported here: gradtx's Muon has optax's "
            "'frobenius' preconditioning only (its default)."
        )


def scale_by_muon(
    ns_coeffs: Any = NS_COEFFS,
    ns_steps: int = 5,
    beta: Any = 0.95,
    eps: Any = 1e-8,
    mu_dtype: Any = None,
    *,
    nesterov: bool = True,
    adaptive: bool = False,
    preconditioning: str = "frobenius",
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `scale_by_muon`: `gradtx.scale_by_muon` with its state as optax's `MuonState`.

    Args:
      ns_coeffs: the Newton-Schulz coefficients `(a, b, c)`, or one triple per iteration.
      ns_steps: the number of iterations.
      beta: the momentum's decay.
      eps: added to the Frobenius norm.
      mu_dtype: dtype of the momentum.
      nesterov: use Nesterov's momentum.
      adaptive: scale by the inner product of the momentum and its orthogonalisation.
      preconditioning: optax's; only "frobenius" (the default) here.
      weight_dimension_numbers: a tree of `MuonDimensionNumbers` or a function of the updates.

    Returns:
      A `GradientTransformation` with state `MuonState(count, mu, ns_coeffs)`.

    Raises:
      ValueError: for malformed coefficients or another `preconditioning`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _aliases_muon as contrib
        >>> tx = contrib.scale_by_muon()
        >>> tx.init(jnp.zeros((2, 2))).ns_coeffs
        Array([ 3.4445, -4.775 ,  2.0315], dtype=float32)
    """
    _frobenius_only("scale_by_muon", preconditioning)
    tx = gradtx.scale_by_muon(
        ns_coeffs, ns_steps, beta, eps, nesterov=nesterov, adaptive=adaptive, mu_dtype=mu_dtype,
        weight_dimension_numbers=weight_dimension_numbers,
    )  # fmt: skip

    def init_fn(params):
        state = tx.init(params)
        return MuonState(state.count, state.momentum, jnp.asarray(ns_coeffs))

    def update_fn(updates, state, params=None, **extra_args):
        updates, new = tx.update(updates, ScaleByMuonState(state.count, state.mu), params, **extra_args)
        return updates, MuonState(new.count, new.momentum, state.ns_coeffs)

    return _factory.composite(init_fn, update_fn, tx)


@_factory.api
def muon(
    learning_rate: Any,
    ns_coeffs: Any = NS_COEFFS,
    ns_steps: int = 5,
    beta: Any = 0.95,
    eps: Any = 1e-8,
    weight_decay: Any = 0.0,
    weight_decay_mask: Any = None,
    mu_dtype: Any = None,
    *,
    nesterov: bool = True,
    adaptive: bool = False,
    preconditioning: str = "frobenius",
    adam_b1: Any = 0.9,
    adam_b2: Any = 0.999,
    adam_eps_root: Any = 0.0,
    adam_weight_decay: Any = 0.0,
    adam_learning_rate: Any = None,
    muon_weight_dimension_numbers: Any = None,
    consistent_rms: Any = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `muon`: optax's partition of a Muon chain and AdamW, state and all.

    `partition({"muon": chain(scale_by_muon, scale_by_shape, add_decayed_weights(weight_decay,
    weight_decay_mask), scale_by_learning_rate), "adam": adamw(...)}, labels)`, the labels
    "muon" for the 2-D leaves, or with `muon_weight_dimension_numbers` for the leaves given a
    `MuonDimensionNumbers` (conv kernels, stacked layers: orthogonalised per matrix).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      ns_coeffs: the Newton-Schulz coefficients, a triple, one per iteration, or a preset
        name ("standard", "dion").
      ns_steps: the number of iterations.
      beta: the momentum's decay.
      eps: added to the Frobenius norm, and AdamW's epsilon.
      weight_decay: the matrices' decay (multiplied by the rate).
      weight_decay_mask: which matrices decay.
      mu_dtype: dtype of the momenta.
      nesterov: Nesterov's momentum, in Muon and AdamW.
      adaptive: scale by the inner product of the momentum and its orthogonalisation.
      preconditioning: optax's; only "frobenius" (the default) here.
      adam_b1: AdamW's first-moment decay.
      adam_b2: AdamW's second-moment decay.
      adam_eps_root: AdamW's epsilon under the root.
      adam_weight_decay: AdamW's decay.
      adam_learning_rate: AdamW's rate (default: `learning_rate`).
      muon_weight_dimension_numbers: a tree of `MuonDimensionNumbers` (None: AdamW's leaf), or
        a function of the params giving one; None: the 2-D leaves are Muon's.
      consistent_rms: give every matrix update this RMS, or None for the width scaling.

    Returns:
      A partition, state as optax's.

    Raises:
      ValueError: for an unknown preset, another `preconditioning` or bad hyperparameters.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _aliases_muon as contrib
        >>> dims = {"conv": contrib.MuonDimensionNumbers((0, 1), 2)}  # a conv kernel: (h * w) x channels
        >>> tx = contrib.muon(0.1, muon_weight_dimension_numbers=dims)
        >>> params = {"conv": jnp.ones((3, 3, 4))}
        >>> tx.init(params).inner_states["muon"].inner_state[0].mu["conv"].shape
        (3, 3, 4)
    """
    fn = "muon"
    _frobenius_only(fn, preconditioning)
    if isinstance(ns_coeffs, str):
        _checks.check_one_of(fn, "ns_coeffs", ns_coeffs, tuple(_NS_PRESETS))
        ns_coeffs = _NS_PRESETS[ns_coeffs]
    dims = muon_weight_dimension_numbers

    def labels(tree):
        if dims is None:
            return jax.tree.map(lambda x: "muon" if jnp.ndim(x) == 2 else "adam", tree)
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
        by_leaf = dims_by_leaf(dims, tree)
        return treedef.unflatten(["adam" if by_leaf[p] is None else "muon" for p, _ in flat])

    return _routing.partition(
        {
            "muon": gradtx.chain(
                scale_by_muon(
                    ns_coeffs,
                    ns_steps,
                    beta,
                    eps,
                    mu_dtype,
                    nesterov=nesterov,
                    adaptive=adaptive,
                    weight_dimension_numbers=dims,
                ),
                gradtx.scale_by_shape(consistent_rms, weight_dimension_numbers=dims),
                C.add_decayed_weights(weight_decay, weight_decay_mask),
                gradtx.scale_by_learning_rate(learning_rate),
            ),
            "adam": _aliases_adam.adamw(
                learning_rate if adam_learning_rate is None else adam_learning_rate,
                adam_b1,
                adam_b2,
                eps,
                adam_eps_root,
                mu_dtype,
                adam_weight_decay,
                nesterov=nesterov,
            ),
        },  # fmt: skip
        labels,
    )

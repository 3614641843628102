"""The table, `optax.contrib`'s matrix rules: Muon (with optax's named Newton-Schulz presets and its
`MuonState`) and GaLore (with optax's empty projectors).

As `_table.py`: each name is a gradtx factory in optax's signature and state classes, or the recipe
optax writes of them; `gradtx.optax_compat.contrib` gathers them under optax's address.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import gradtx
from gradtx._algorithms.muon import ScaleByMuonState
from gradtx._algorithms.muon_dims import dims_by_leaf
from gradtx._algorithms.newton_schulz import NS_COEFFS
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.optax_compat import _table_wrappers
from gradtx.optax_compat._mirror import forward, recipe
from gradtx.optax_compat._table import adamw, add_decayed_weights, scale_by_adam, scale_by_learning_rate


# --------------------------------------------------------------------------- optax's state class
class MuonState(NamedTuple):
    """optax's `MuonState`: the count, the momentum `mu` and the Newton-Schulz coefficients."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the momentum
    ns_coeffs: jax.Array  # (3,) or (n, 3): the coefficients, as optax keeps them


# --------------------------------------------------------------------------- Muon
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


@recipe("contrib.scale_by_muon", gradtx.scale_by_muon)
def scale_by_muon(a):
    """`gradtx.scale_by_muon` with its state as optax's `MuonState(count, mu, ns_coeffs)`."""
    tx = forward(gradtx.scale_by_muon, a)

    def init_fn(params):
        state = tx.init(params)
        return MuonState(state.count, state.momentum, jnp.asarray(a.ns_coeffs))

    def update_fn(updates, state, params=None, **extra_args):
        updates, new = tx.update(updates, ScaleByMuonState(state.count, state.mu), params, **extra_args)
        return updates, MuonState(new.count, new.momentum, state.ns_coeffs)

    return _factory.composite(init_fn, update_fn, tx)


@recipe("contrib.muon", scale_by_muon, gradtx.scale_by_shape, adamw)
def muon(a):
    """`partition({"muon": chain(scale_by_muon, scale_by_shape, add_decayed_weights(weight_decay,
    weight_decay_mask), scale_by_learning_rate), "adam": adamw(...)}, labels)`: "muon" for the 2-D leaves, or,
    with `muon_weight_dimension_numbers`, for the leaves given a `MuonDimensionNumbers`."""
    ns_coeffs = a.ns_coeffs
    if isinstance(ns_coeffs, str):
        _checks.check_one_of("muon", "ns_coeffs", ns_coeffs, tuple(_NS_PRESETS))
        ns_coeffs = _NS_PRESETS[ns_coeffs]
    dims = a.muon_weight_dimension_numbers

    def labels(tree):
        if dims is None:
            return jax.tree.map(lambda x: "muon" if jnp.ndim(x) == 2 else "adam", tree)
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
        by_leaf = dims_by_leaf(dims, tree)
        return treedef.unflatten(["adam" if by_leaf[p] is None else "muon" for p, _ in flat])

    muon_ = scale_by_muon(
        ns_coeffs, a.ns_steps, a.beta, a.eps, a.mu_dtype, nesterov=a.nesterov, adaptive=a.adaptive,
        preconditioning=a.preconditioning, weight_dimension_numbers=dims,
    )  # fmt: skip
    adam_rate = a.learning_rate if a.adam_learning_rate is None else a.adam_learning_rate
    adam = adamw(
        adam_rate,
        a.adam_b1,
        a.adam_b2,
        a.eps,
        a.adam_eps_root,
        a.mu_dtype,
        a.adam_weight_decay,
        nesterov=a.nesterov,
    )
    chain = gradtx.chain(
        muon_,
        gradtx.scale_by_shape(a.consistent_rms, weight_dimension_numbers=dims),
        add_decayed_weights(a.weight_decay, a.weight_decay_mask),
        scale_by_learning_rate(a.learning_rate),
    )
    return _table_wrappers.partition({"muon": chain, "adam": adam}, labels)


# --------------------------------------------------------------------------- GaLore
@recipe("contrib.scale_by_galore", gradtx.scale_by_galore)
def scale_by_galore(a):
    """`gradtx.scale_by_galore`, with optax's default base optimizer (its `scale_by_adam`) and optax's
    empty `(0, 0)` projector where gradtx keeps none."""
    base = scale_by_adam() if a.base_optimizer is None else a.base_optimizer
    return _empty_projectors(
        gradtx.scale_by_galore(a.rank, a.update_proj_gap, a.scale, base, a.weight_dimension_numbers)
    )


def _empty_projectors(tx: Any) -> _protocol.GradientTransformation:
    """`tx` (gradtx's galore) whose state keeps optax's `zeros((0, 0), dtype)` where gradtx's has `None`."""
    inner = _factory.member(tx)
    none = {"is_leaf": lambda x: x is None}

    def filled(state: Any, like: Any) -> Any:  # `like`: the params at init, the previous projectors after
        fill = lambda p, old: jnp.zeros((0, 0), old.dtype) if p is None and old is not None else p  # noqa: E731
        return state._replace(projector=jax.tree.map(fill, state.projector, like, **none))

    def init_fn(params):
        return filled(inner.init(params), params)

    def update_fn(updates, state, params=None, **extra_args):
        updates, new = inner.update(updates, state, params, **extra_args)  # (0, 0) is taken as None
        return updates, filled(new, state.projector)

    return _factory.composite(init_fn, update_fn, inner)


@recipe("contrib.galore", scale_by_galore, add_decayed_weights)
def galore(a):
    """`chain(scale_by_galore(...), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)`."""
    decay = forward(add_decayed_weights, a)
    return gradtx.chain(forward(scale_by_galore, a), decay, scale_by_learning_rate(a.learning_rate))

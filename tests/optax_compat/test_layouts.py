"""optax_compat's states node for node as optax's: the aliases' masked weight decay, `clip_by_global_norm`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx.optax_compat as compat
from gradtx.optax_compat import _table as _scalings

optax = pytest.importorskip("optax")


def _params():
    return {"w": jnp.linspace(-1.0, 1.0, 6).reshape(3, 2), "b": jnp.full(2, 0.5), "s": jnp.asarray(2.0)}


def _run(tx, steps=5):
    params = _params()
    state = tx.init(params)
    update = jax.jit(tx.update)
    for t in range(steps):
        grads = jax.tree.map(lambda p, t=t: jnp.sin(p * (t + 1)) + 0.1, params)
        updates, state = update(grads, state, params)
        params = jax.tree.map(lambda p, u: p + u, params, updates)
    return params, state


def _assert_same(ours, theirs):
    """The same tree, node classes included (by name: ours are gradtx's classes), shapes and numbers."""
    assert str(jax.tree.structure(ours)) == str(jax.tree.structure(theirs))
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        assert jnp.shape(a) == jnp.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _no_decay_on_vectors(params):
    return jax.tree.map(lambda p: p.ndim > 1, params)


# Each alias whose weight decay optax builds as `add_decayed_weights(weight_decay, mask)`, that is
# `masked(add_decayed_weights(weight_decay), mask)` for a mask: its state holds a `MaskedState`.
MASKED_DECAY = {
    "adamw": lambda lib, m: lib.adamw(1e-2, weight_decay=0.1, mask=m),
    "nadamw": lambda lib, m: lib.nadamw(1e-2, weight_decay=0.1, mask=m),
    "adamaxw": lambda lib, m: lib.adamaxw(1e-2, weight_decay=0.1, mask=m),
    "lion": lambda lib, m: lib.lion(1e-3, weight_decay=0.1, mask=m),
    "lamb": lambda lib, m: lib.lamb(1e-2, weight_decay=0.1, mask=m),
    "adan": lambda lib, m: lib.adan(1e-2, weight_decay=0.1, mask=m),
    "adadelta": lambda lib, m: lib.adadelta(1.0, weight_decay=0.1, weight_decay_mask=m),
    "lars": lambda lib, m: lib.lars(0.1, weight_decay=0.01, weight_decay_mask=m),
    "adafactor": lambda lib, m: lib.adafactor(
        1e-2, min_dim_size_to_factor=4, weight_decay_rate=0.1, weight_decay_mask=m
    ),
}


@pytest.mark.parametrize(
    "name, mask",
    [(name, _no_decay_on_vectors) for name in sorted(MASKED_DECAY)]
    + [("adamw", {"w": True, "b": False, "s": False}), ("lars", {"w": True, "b": False, "s": True})],
)
def test_a_masked_weight_decay_has_optax_s_masked_state(name, mask):
    ours, theirs = _run(MASKED_DECAY[name](compat, mask)), _run(MASKED_DECAY[name](optax, mask))
    assert "MaskedState" in str(jax.tree.structure(theirs[1]))
    _assert_same(ours, theirs)


def test_clip_by_global_norm_keeps_optax_s_empty_state():
    """gradtx's `clip_by_global_norm` keeps `ClipByGlobalNormState(count, global_norm)`; optax's nothing."""
    for max_norm in (0.5, 100.0):  # clipping, and not
        ours = compat.chain(_scalings.clip_by_global_norm(max_norm), compat.adam(1e-2))
        theirs = optax.chain(optax.clip_by_global_norm(max_norm), optax.adam(1e-2))
        _assert_same(_run(ours), _run(theirs))
    updates, state = _scalings.clip_by_global_norm(1.0).update({"a": jnp.ones(4)}, compat.EmptyState())
    np.testing.assert_allclose(updates["a"], 0.5)
    assert state == compat.EmptyState()


def test_clip_by_global_norm_refuses_what_optax_s_cannot_take():
    with pytest.raises(TypeError, match=r"`clip_by_global_norm`: optax's takes a number .* got the schedule"):
        _scalings.clip_by_global_norm(compat.linear_schedule(1.0, 0.1, 10))
    with pytest.raises(ValueError, match=r"`clip_by_global_norm`: `max_norm` must be >= 0, got -1.0"):
        _scalings.clip_by_global_norm(-1.0)
    grads = {"a": jnp.ones(4)}  # optax takes 0: the updates are zeros (eagerly and, injected, under jit)
    ours = _scalings.clip_by_global_norm(0.0).update(grads, compat.EmptyState())[0]
    theirs = optax.clip_by_global_norm(0.0).update(grads, optax.EmptyState())[0]
    np.testing.assert_array_equal(ours["a"], theirs["a"])
    np.testing.assert_array_equal(ours["a"], 0.0)


def test_optax_compat_exports_optax_s_clip_by_global_norm():
    assert compat.clip_by_global_norm is _scalings.clip_by_global_norm

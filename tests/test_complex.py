"""Complex parameters, registry-wide: every rule either treats them as optax does or refuses them.

A rule on complex numbers is right when it is built from `g`, `conj(g)` and `|g|**2`: then its
step turns with the phase of the gradients and params (rotate both by `e^{i theta}` and the
step rotates alike), and on complex numbers with no imaginary part it is the real rule. Squaring
`g` itself (`g * g`, where `|g|**2` is meant) breaks both. A rule that cannot be right (signs,
orderings, real matrix decompositions) raises `TypeError` at trace time, saying why.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import catalog
from tests import test_contract as contract

ENTRIES = catalog.entries()
ROTATION = np.complex64(np.exp(0.7j))
STEPS = 3


def _complex(tree, seed):
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: (x + 1j * rng.standard_normal(x.shape)).astype(np.complex64), tree)


def _trajectory(entry, tx):
    def run(params, grads):
        state = tx.init(params)
        for t, g in enumerate(grads):
            params, state = contract._apply(entry, tx, params, state, g, t)
        return params

    return run  # eager: four runs of three steps cost less than two compilations


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_complex_steps_turn_with_the_phase_or_are_refused(entry):
    real = contract._params()
    real_grads = [contract._grads(real, seed) for seed in range(1, STEPS + 1)]
    params, grads = _complex(real, 0), [_complex(g, s) for s, g in enumerate(real_grads, 1)]
    tx = contract._build(entry)
    run = _trajectory(entry, tx)
    try:
        out = run(params, grads)
    except TypeError as e:
        assert "is complex" in str(e) and "does not support" in str(e), e
        return
    turned = run(*jax.tree.map(lambda x: x * ROTATION, (params, grads)))
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(turned), strict=True):
        assert np.isfinite(np.asarray(a)).all()
        np.testing.assert_allclose(np.asarray(a) * ROTATION, b, rtol=2e-4, atol=2e-5)
    as_complex = jax.tree.map(lambda x: x.astype(np.complex64), (real, real_grads))
    embedded = run(*as_complex)
    expected = _trajectory(entry, tx)(real, real_grads)
    for a, b in zip(jax.tree.leaves(embedded), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.real(a), b, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(np.imag(a), 0, atol=1e-6)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (gradtx.adam(0.1), optax.adam(0.1)),
        (gradtx.adabelief(0.1), optax.adabelief(0.1)),
        (gradtx.nadamw(0.1), optax.nadamw(0.1)),
        (gradtx.clip_by_global_norm(0.25), optax.clip_by_global_norm(0.25)),
    ],
)
def test_complex_numbers_equal_optax(ours, theirs):
    g = jnp.array([0.3 + 0.4j, -1.0 + 2.0j], jnp.complex64)
    a = ours.update(g, ours.init(g), g)[0]
    b = theirs.update(g, theirs.init(g), g)[0]
    np.testing.assert_allclose(a, b, rtol=1e-5)
    assert not np.allclose(np.angle(a), 0)  # the step keeps the gradient's phase


def test_adam_steps_along_the_gradient_phase():
    """The issue's case: the gradient 0.3+0.4j gives the step -0.1 * (0.6+0.8j), not -0.1+0j."""
    g = jnp.array([0.3 + 0.4j], jnp.complex64)
    tx = gradtx.adam(0.1)
    np.testing.assert_allclose(tx.update(g, tx.init(g), g)[0], [-0.06 - 0.08j], rtol=1e-5)


def test_a_rule_that_cannot_be_complex_names_itself_the_leaf_and_why():
    tx = gradtx.addsign(0.1)
    params = {"w": jnp.zeros(2, jnp.complex64)}
    with pytest.raises(
        TypeError, match=r"`scale_by_addsign`: the gradient at \['w'\] is complex \(complex64\)"
    ):
        tx.update(params, tx.init(params), params)

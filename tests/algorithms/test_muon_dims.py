"""gradtx/_algorithms/muon_dims.py: Muon's dimension numbers (`MuonDimensionNumbers`, read by muon.py's
`scale_by_muon`, `scale_by_shape` and `muon`): conv kernels and stacked weights orthogonalised per matrix,
against optax.contrib.muon (20 steps, jitted) and against the plain 2-D rule applied to each matrix of the
stack.

Muon's tolerance is `helpers.MUON_TOLERANCE` (five quintic Newton-Schulz iterations magnify the float32
round-off of products compiled another way to ~2e-6); everything else is compared at 1e-6.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.optax_compat import contrib
from tests import helpers

SHAPES = {"conv": (3, 3, 4, 6), "stack": (3, 5, 4), "w": (6, 4), "b": (4,)}
DIMS = {
    "conv": gradtx.MuonDimensionNumbers((0, 1, 2), 3),  # (h * w * c_in) x c_out
    "stack": gradtx.MuonDimensionNumbers(1, 2),  # three 5 x 4 layers
    "w": gradtx.MuonDimensionNumbers(),
    "b": None,  # AdamW's
}


def _optax_dims(dims):
    return {k: None if d is None else optax.contrib.MuonDimensionNumbers(*d) for k, d in dims.items()}


def _problem(seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()} for _ in range(steps)
    ]
    return params, grads


def _by_shape(params):
    """A dimension-numbers function: kernels and stacks by rank, matrices by default, vectors to AdamW."""
    rules = {4: ((0, 1, 2), 3), 3: (1, 2), 2: (0, 1)}
    return jax.tree.map(
        lambda p: gradtx.MuonDimensionNumbers(*rules[p.ndim]) if p.ndim >= 2 else None, params
    )


CASES = {
    "compat-tree": (
        lambda: contrib.muon(0.05, weight_decay=0.01, muon_weight_dimension_numbers=DIMS),
        lambda: optax.contrib.muon(0.05, weight_decay=0.01, muon_weight_dimension_numbers=_optax_dims(DIMS)),
        True,
    ),
    "compat-adaptive-rms-negative-axes": (
        lambda: contrib.muon(
            0.05,
            adaptive=True,
            consistent_rms=0.2,
            muon_weight_dimension_numbers={**DIMS, "stack": gradtx.MuonDimensionNumbers(-2, -1)},
        ),
        lambda: optax.contrib.muon(
            0.05,
            adaptive=True,
            consistent_rms=0.2,
            muon_weight_dimension_numbers={
                **_optax_dims(DIMS),
                "stack": optax.contrib.MuonDimensionNumbers(-2, -1),
            },
        ),
        True,
    ),
    "gradtx-function": (
        lambda: gradtx.muon(0.05, weight_dimension_numbers=_by_shape),
        lambda: optax.contrib.muon(
            0.05,
            muon_weight_dimension_numbers=lambda p: jax.tree.map(
                lambda x: (
                    None if x.ndim < 2 else optax.contrib.MuonDimensionNumbers(*_by_shape({"x": x})["x"])
                ),
                p,
            ),
        ),
        False,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_muon_with_dimension_numbers_equals_optax(name):
    """Jitted only (jit and eager agree for Muon: test_contract's own test; an eager run of these stacks costs
    7 s)."""
    ours, theirs, same_layout = CASES[name]
    params, grads = _problem()
    actual, my_state = helpers.run(ours(), params, grads, jit=True)
    expected, ref_state = helpers.run(theirs(), params, grads, jit=True)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, **helpers.MUON_TOLERANCE, msg=f"{name}: step {t + 1}")
    if same_layout:
        assert str(jax.tree.structure(my_state)) == str(jax.tree.structure(ref_state))
        mine, ref = (
            my_state.inner_states["muon"].inner_state[0],
            ref_state.inner_states["muon"].inner_state[0],
        )
        helpers.assert_trees_close(mine.mu, ref.mu, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(mine.ns_coeffs, ref.ns_coeffs)


def test_a_stack_is_orthogonalised_matrix_by_matrix():
    """A (3, 5, 4) stack with dims (1, 2), and a (4, 3, 5) one with dims (2, 0) (batch axis in the middle),
    give each matrix what the 2-D rule gives it alone."""
    g = np.random.default_rng(1).standard_normal((3, 5, 4)).astype(np.float32)

    def update(tx, x):
        return tx.update(x, tx.init(x))[0]

    @jax.jit
    def both(g):
        plain = gradtx.scale_by_muon(beta=0.0, nesterov=False)
        alone = jnp.stack([update(plain, x) for x in g])
        outs = [
            update(
                gradtx.scale_by_muon(
                    beta=0.0, nesterov=False, weight_dimension_numbers=gradtx.MuonDimensionNumbers(*d)
                ),
                x,
            )
            for d, x in [((1, 2), g), ((2, 0), g.transpose(2, 0, 1))]
        ]
        return alone, outs[0], outs[1].transpose(1, 2, 0)

    alone, stacked, moved = both(jnp.asarray(g))
    np.testing.assert_allclose(stacked, alone, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(moved, alone, rtol=1e-5, atol=1e-6)


def test_scale_by_shape_uses_the_products_of_the_axes():
    tx = gradtx.scale_by_shape(
        weight_dimension_numbers={"k": gradtx.MuonDimensionNumbers((0, 1), 2), "b": None}
    )
    out, _ = tx.update({"k": jnp.ones((1, 2, 8)), "b": jnp.ones(3)}, tx.init(None))
    np.testing.assert_allclose(out["k"], 2.0 * np.ones((1, 2, 8)))  # sqrt(8 / (1 * 2))
    np.testing.assert_array_equal(out["b"], np.ones(3))


@pytest.mark.parametrize(
    "dims, shape, error, match",
    [
        (
            gradtx.MuonDimensionNumbers(0, 0),
            (4, 3),
            ValueError,
            r"`scale_by_muon`: .* must name distinct axes",
        ),
        (
            gradtx.MuonDimensionNumbers(0, 1),
            (4,),
            ValueError,
            r"the leaf at <root> has shape \(4,\); Muon's matrices",
        ),
        (gradtx.MuonDimensionNumbers(0, 3), (4, 3), ValueError, r"has an axis out of range"),
        ((0, 1), (4, 3), TypeError, r"`weight_dimension_numbers` must be None, a function of the"),
    ],
)
def test_dimension_numbers_that_do_not_fit_are_refused(dims, shape, error, match):
    with pytest.raises(error, match=match):
        tx = gradtx.scale_by_muon(weight_dimension_numbers=dims)
        jax.eval_shape(lambda g: tx.update(g, tx.init(g)), jnp.zeros(shape))


def test_muon_without_dimension_numbers_keeps_its_two_dimensional_rule():
    """Default labels: 2-D leaves are Muon's, the conv kernel and stack AdamW's (optax's rule)."""
    params, grads = _problem(steps=2)
    actual, _ = helpers.run(contrib.muon(0.05), params, grads, jit=True)
    expected, _ = helpers.run(optax.contrib.muon(0.05), params, grads, jit=True)
    helpers.assert_trees_close(actual[-1], expected[-1], **helpers.MUON_TOLERANCE)

"""gradtx/_algorithms/adadelta.py: scale_by_adadelta, TF's ApplyAdadelta as a building block, and the alias
`adadelta` against the float64 reference of TF's rule.

The alias (this block, then `scale_by_learning_rate(lr)`) is compared with TF in
tests/parity/test_adadelta.py. Here: the block's numbers in float64 (a row-sparse and a dense leaf in one
tree), its slots, its errors; the alias's numbers against tests/reference.py in float32 (TF's tolerance) and
float64 (1e-10), dense and row-sparse, and its errors.
"""

from __future__ import annotations

import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import ScaleByAdadeltaState, scale_by_adadelta
from tests import helpers, reference

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


def test_numbers_match_the_float64_reference_dense_and_row_sparse():
    """`chain(block, scale_by_learning_rate(1.0))` is ApplyAdadelta with lr = 1, here with a `rho` schedule
    (step t sees count t - 1); sparse: the touched rows (duplicates summed first), the other rows of both
    slots unchanged."""
    params, grads = _problem()
    ref = reference.Reference(
        reference.adadelta(1.0, 0.5, 1e-3).init,
        lambda var, g, s, t: reference.adadelta(1.0, 0.5 + 0.1 * (t - 1), 1e-3).step(var, g, s, t),
    )
    expected, ref_slots = reference.run(ref, params, grads)
    with jax.enable_x64(True):
        tx = gradtx.chain(
            scale_by_adadelta(lambda count: 0.5 + 0.1 * count, 1e-3), gradtx.scale_by_learning_rate(1.0)
        )
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    for slot in ("accum", "accum_update"):
        helpers.assert_trees_close(
            gradtx.get_slot(state, slot), [s[slot] for s in ref_slots], rtol=1e-10, atol=1e-10, msg=slot
        )
    assert int(state[0].count) == len(grads)


def test_state_has_tfs_slot_names_starting_at_zero():
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = scale_by_adadelta().init(params)
    assert type(state) is ScaleByAdadeltaState
    assert state._fields == ("count", "accum", "accum_update")
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    helpers.assert_trees_close(state.accum, jax.tree.map(np.zeros_like, params), rtol=0, atol=0)
    helpers.assert_trees_close(state.accum_update, jax.tree.map(np.zeros_like, params), rtol=0, atol=0)


def test_defaults_are_tfs():
    defaults = {k: p.default for k, p in inspect.signature(scale_by_adadelta).parameters.items()}
    assert defaults == {"rho": 0.95, "eps": 1e-8}


def test_eps_sits_inside_both_roots():
    """The first step is sqrt(0 + eps) / sqrt(A + eps) * g: with eps = 0 the block never moves (as TF's
    kernel), while `accum` still averages the squared gradients."""
    tx = scale_by_adadelta(rho=0.5, eps=0.0)
    state, update = tx.init(jnp.zeros(2)), jax.jit(tx.update)
    for g in ([1.0, -2.0], [3.0, 0.5]):
        u, state = update(jnp.array(g), state)
        np.testing.assert_array_equal(u, [0.0, 0.0])
    np.testing.assert_allclose(state.accum, [0.25 * 1 + 0.5 * 9, 0.25 * 4 + 0.5 * 0.25], rtol=1e-6)
    tx = scale_by_adadelta(rho=0.5, eps=1.0)
    u, _ = jax.jit(tx.update)(jnp.array([2.0]), tx.init(jnp.zeros(1)))
    np.testing.assert_allclose(u, [1.0 / math.sqrt(0.5 * 4 + 1.0) * 2.0], rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rho": 1.5}, r"`scale_by_adadelta`: `rho` must be in \[0.0, 1.0\], got 1.5\."),
        ({"rho": -0.1}, r"`scale_by_adadelta`: `rho` must be in \[0.0, 1.0\], got -0.1\."),
        ({"rho": float("nan")}, r"`scale_by_adadelta`: `rho` must be finite, got nan\."),
        ({"eps": -1e-8}, r"`scale_by_adadelta`: `eps` must be >= 0, got -1e-08\."),
        ({"eps": float("inf")}, r"`scale_by_adadelta`: `eps` must be finite, got inf\."),
    ],
)
def test_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scale_by_adadelta(**kwargs)


def test_bad_types():
    with pytest.raises(TypeError, match=r"`scale_by_adadelta`: `rho` must be a number, a scalar array or a"):
        scale_by_adadelta(rho="0.9")
    with pytest.raises(TypeError, match=r"`scale_by_adadelta`: `eps` must be a scalar, got an array"):
        scale_by_adadelta(eps=jnp.ones(2))


# --------------------------------------------------------------------------- the alias against TF's rule

# name -> (gradtx transform, float64 reference, slot names)
CASES = {
    "adadelta": (
        lambda: gradtx.adadelta(1.0, 0.5, 1e-3),
        lambda: reference.adadelta(1.0, 0.5, 1e-3),
        ["accum", "accum_update"],
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


def _check(name, sparse, *, x64):
    make_tx, make_ref, slots = CASES[name]
    helpers.compare_to_reference(
        make_tx,
        make_ref,
        sparse=sparse,
        x64=x64,
        slots=slots,
        atol32=5e-6 if name.startswith("adam") else 1e-6,
    )


@SPARSE
@pytest.mark.parametrize("name", list(CASES))
def test_float32_matches_the_float64_reference(name, sparse):
    _check(name, sparse, x64=False)


@SPARSE
@pytest.mark.parametrize("name", list(CASES))
def test_float64_matches_the_reference_formula_exactly(name, sparse):
    _check(name, sparse, x64=True)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.adadelta, {"rho": 1.5}, r"`adadelta`: `rho` must be in \[0.0, 1.0\], got 1.5"),
        (gradtx.adadelta, {"eps": -1e-8}, r"`adadelta`: `eps` must be >= 0"),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)

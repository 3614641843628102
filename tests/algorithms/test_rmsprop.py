"""gradtx/_algorithms/rmsprop.py: scale_by_rmsprop, TF's ApplyRMSProp / ApplyCenteredRMSProp as a building
block, and the alias `rmsprop` against the float64 reference of TF's rule.

The alias is compared with TF in tests/parity/test_rmsprop.py. Here: the block's numbers in float64 (a
row-sparse and a dense leaf in one tree) with a learning-rate schedule, plain and centered, the rate inside
the momentum accumulator, the slots (`rms` starts at ones), and the errors; the alias's numbers against
tests/reference.py in float32 (TF's tolerance) and float64 (1e-10), dense and row-sparse, and its errors.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.transforms import ScaleByRmspropState, scale_by_rmsprop
from tests import helpers, reference

SHAPES = [(6, 3), (5,)]
ROWS = [[0, 2, 2, 5], [1, 1, 3, 0], [4, 0, 4, 4], [5, 3, 2, 5]]  # one step each; every step repeats a row


def _problem(seed=0):
    """Params [(6, 3) table, (5,) vector], 4 steps of gradients: row-sparse for the table, dense for the
    vector."""
    params, grads = helpers.problem(seed, shapes=SHAPES, steps=len(ROWS))
    return params, [[(np.asarray(r, np.int32), g[:4]), v] for r, (g, v) in zip(ROWS, grads, strict=True)]


@pytest.mark.parametrize("centered", [False, True], ids=["plain", "centered"])
def test_numbers_match_the_float64_reference_dense_and_row_sparse(centered):
    """lr_t = 0.05 * 0.8^(t-1) inside the kernel, decay 0.7, momentum 0.6, eps 1e-4; sparse: touched rows."""
    slots = ["rms", "momentum"] + (["mg"] if centered else [])

    def ref_step(var, g, s, t):
        return reference.rmsprop(0.05 * 0.8 ** (t - 1), 0.7, 0.6, 1e-4, centered).step(var, g, s, t)

    params, grads = _problem()
    init = reference.rmsprop(0.05, centered=centered).init
    expected, ref_slots = reference.run(reference.Reference(init, ref_step), params, grads)
    with jax.enable_x64(True):
        block = scale_by_rmsprop(lambda count: 0.05 * 0.8**count, 0.7, 0.6, 1e-4, centered=centered)
        tx = gradtx.chain(block, gradtx.scale_by_learning_rate(1.0))
        p64 = [np.asarray(p, np.float64) for p in params]
        actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, SHAPES, np.float64))
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10, msg=f"params after step {t + 1}")
    for slot in slots:
        helpers.assert_trees_close(
            gradtx.get_slot(state, slot), [s[slot] for s in ref_slots], rtol=1e-10, atol=1e-10, msg=slot
        )


def test_the_rate_is_inside_the_momentum_accumulator():
    """The momentum slot keeps lr_t * g / sqrt(.) of past steps: when the rate drops to 0 the steps go on,
    decaying by `momentum` (a rate applied after the block would stop them)."""
    tx = scale_by_rmsprop(lambda count: jnp.where(count < 2, 1.0, 0.0), decay=0.5, momentum=0.5)
    state, update, steps = tx.init(jnp.zeros(1)), jax.jit(tx.update), []
    for _ in range(4):
        u, state = update(jnp.ones(1), state)
        steps.append(float(u[0]))
    assert steps[2] == 0.5 * steps[1] and steps[3] == 0.25 * steps[1] and steps[3] > 0
    np.testing.assert_array_equal(state.momentum, [steps[3]])


def test_state_has_tfs_slot_names_and_initial_values():
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    state = scale_by_rmsprop(0.1).init(params)
    assert type(state) is ScaleByRmspropState and state._fields == ("count", "rms", "momentum", "mg")
    assert state.count.dtype == jnp.int32 and int(state.count) == 0
    helpers.assert_trees_close(state.rms, jax.tree.map(np.ones_like, params), atol=0)  # TF1: ones
    helpers.assert_trees_close(state.momentum, jax.tree.map(np.zeros_like, params), atol=0)
    assert state.mg is None
    centered = scale_by_rmsprop(0.1, centered=True).init(params)
    helpers.assert_trees_close(centered.mg, jax.tree.map(np.zeros_like, params), atol=0)
    assert gradtx.slot_names(centered) == ["mg", "momentum", "rms"]


def test_defaults_are_tf1s():
    defaults = {k: p.default for k, p in inspect.signature(scale_by_rmsprop).parameters.items()}
    assert defaults == {
        "learning_rate": inspect.Parameter.empty,
        "decay": 0.9,
        "momentum": 0.0,
        "eps": 1e-10,
        "centered": False,
    }


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"learning_rate": -1.0}, r"`scale_by_rmsprop`: `learning_rate` must be >= 0, got -1.0\."),
        ({"decay": 1.1}, r"`scale_by_rmsprop`: `decay` must be in \[0.0, 1.0\], got 1.1\."),
        ({"momentum": -0.1}, r"`scale_by_rmsprop`: `momentum` must be in \[0.0, 1.0\], got -0.1\."),
        ({"eps": -1.0}, r"`scale_by_rmsprop`: `eps` must be >= 0, got -1.0\."),
        ({"eps": float("inf")}, r"`scale_by_rmsprop`: `eps` must be finite, got inf\."),
    ],
)
def test_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scale_by_rmsprop(**{"learning_rate": 0.1, **kwargs})


def test_bad_types():
    with pytest.raises(TypeError, match=r"`scale_by_rmsprop`: `centered` must be True or False, got 'yes'"):
        scale_by_rmsprop(0.1, centered="yes")
    with pytest.raises(TypeError, match=r"`scale_by_rmsprop`: `decay` must be a number, a scalar array or"):
        scale_by_rmsprop(0.1, decay=[0.9])


@pytest.mark.parametrize("centered", [False, True])
def test_momentum_none_keeps_no_slot_and_steps_as_momentum_zero(centered):
    """`momentum=None` (optax's default) gives TF's momentum-0 steps without the momentum slot TF keeps."""
    params = {"w": jnp.asarray(np.random.default_rng(0).standard_normal((3, 2)), jnp.float32)}
    grads = [jax.tree.map(lambda p, s=s: p * (s + 1.0), params) for s in range(4)]
    none, state = helpers.run(scale_by_rmsprop(0.1, momentum=None, centered=centered), params, grads)
    zero, _ = helpers.run(scale_by_rmsprop(0.1, momentum=0.0, centered=centered), params, grads)
    helpers.assert_trees_close(none, zero, rtol=0, atol=0)
    assert state.momentum is None and "momentum" not in gradtx.slot_names(state)


# --------------------------------------------------------------------------- the alias against TF's rule

# name -> (gradtx transform, float64 reference, slot names)
CASES = {
    "rmsprop": (
        lambda: gradtx.rmsprop(0.01, 0.8, 0.7, 1e-6),
        lambda: reference.rmsprop(0.01, 0.8, 0.7, 1e-6),
        ["rms", "momentum"],
    ),
    "rmsprop-centered": (
        lambda: gradtx.rmsprop(0.01, 0.8, 0.0, 1e-6, centered=True),
        lambda: reference.rmsprop(0.01, 0.8, 0.0, 1e-6, centered=True),
        ["rms", "momentum", "mg"],
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
        (gradtx.rmsprop, {"learning_rate": 0.1, "decay": 1.1}, r"`rmsprop`: `decay` must be in \[0.0, 1.0\]"),
        (
            gradtx.rmsprop,
            {"learning_rate": 0.1, "momentum": -0.1},
            r"`rmsprop`: `momentum` must be in \[0.0, 1.0\]",
        ),
        (gradtx.rmsprop, {"learning_rate": 0.1, "eps": -1.0}, r"`rmsprop`: `eps` must be >= 0"),
    ],
)
def test_bad_values_raise_value_error_naming_function_and_argument(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.rmsprop,
            {"learning_rate": 0.1, "centered": "yes"},
            r"`rmsprop`: `centered` must be True or False",
        ),
    ],
)
def test_bad_types_raise_type_error(factory, kwargs, match):
    with pytest.raises(TypeError, match=match):
        factory(**kwargs)

"""The tf.contrib.opt aliases (gradtx/optimizers/_contrib.py) against float64 references of their rules."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.sparse import RowSparse
from tests import helpers, reference
from tests import reference_contrib as ref

CASES = {
    "adamax": (
        lambda: gradtx.adamax(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.adamax(0.05, 0.8, 0.95, 1e-3),
        ["m", "v"],
        None,
    ),
    "nadam": (
        lambda: gradtx.nadam(0.05, 0.8, 0.95, 1e-3),
        lambda: reference.adam(0.05, 0.8, 0.95, 1e-3, nesterov=True),
        ["m", "v"],
        None,
    ),
    "lazy_adam": (
        lambda: gradtx.lazy_adam(0.05, 0.8, 0.95, 1e-3),
        lambda: reference.adam(0.05, 0.8, 0.95, 1e-3, lazy=True),
        ["m", "v"],
        None,
    ),
    "adam_gs": (
        lambda: gradtx.adam_gs(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.adam_gs(0.05, 0.8, 0.95, 1e-3),
        ["m", "v"],
        lambda t: {"global_step": t},
    ),
    "lazy_adam_gs": (
        lambda: gradtx.lazy_adam_gs(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.adam_gs(0.05, 0.8, 0.95, 1e-3, lazy=True),
        ["m", "v"],
        lambda t: {"global_step": t},
    ),
    "adamw": (
        lambda: gradtx.adamw(0.05, weight_decay=0.1, b1=0.8, b2=0.95, eps=1e-3),
        lambda: ref.adamw(0.05, 0.1, 0.8, 0.95, 1e-3),
        [],
        None,
    ),
    "adamw-lr-scaled": (
        lambda: gradtx.adamw(
            0.05, weight_decay=0.1, b1=0.8, b2=0.95, eps=1e-3, scale_decay_by_learning_rate=True
        ),
        lambda: ref.adamw(0.05, 0.1, 0.8, 0.95, 1e-3, scaled=True),
        [],
        None,
    ),
    "momentumw": (lambda: gradtx.momentumw(0.05, 0.9, 0.1), lambda: ref.momentumw(0.05, 0.9, 0.1), [], None),
    "momentumw-nesterov": (
        lambda: gradtx.momentumw(0.05, 0.9, 0.1, nesterov=True),
        lambda: ref.momentumw(0.05, 0.9, 0.1, nesterov=True),
        [],
        None,
    ),
    "lars": (
        lambda: gradtx.lars(0.5, 0.9, 1e-3, 0.01, 1e-4),
        lambda: ref.lars(0.5, 0.9, 1e-3, 0.01, 1e-4),
        ["momentum"],
        None,
    ),
    "lars-nesterov": (
        lambda: gradtx.lars(0.5, 0.9, 1e-3, 0.01, nesterov=True),
        lambda: ref.lars(0.5, 0.9, 1e-3, 0.01, nesterov=True),
        ["momentum"],
        None,
    ),
    "reg_adagrad": (
        lambda: gradtx.reg_adagrad(0.1, 0.3),
        lambda: reference.adagrad(0.1, 0.3),
        ["accumulator"],
        None,
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


@SPARSE
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_the_reference(name, sparse, x64):
    make_tx, make_ref, slots, extra = CASES[name]
    helpers.compare_to_reference(
        make_tx, make_ref, sparse=sparse, x64=x64, slots=slots, extra_args=extra, atol32=5e-6
    )


def test_lars_skip_list_uses_the_plain_rate():
    params = {"dense": {"kernel": jnp.ones(3), "bias": jnp.ones(3)}}
    grads = {"dense": {"kernel": jnp.full(3, 0.5), "bias": jnp.full(3, 0.5)}}
    tx = gradtx.lars(0.1, momentum=0.0, weight_decay=0.0, eeta=0.01, skip=["bias"])
    out, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(out["dense"]["bias"], -0.05 * np.ones(3), rtol=1e-6)
    np.testing.assert_allclose(
        out["dense"]["kernel"], -0.1 * 0.01 * 2.0 * 0.5 * np.ones(3), rtol=1e-6
    )  # trust = 0.02


def test_reg_adagrad_can_skip_the_slot_update():
    tx = gradtx.reg_adagrad(1.0, initial_accumulator_value=4.0)
    state = tx.init(jnp.zeros(2))
    u, state = jax.jit(lambda g, s: tx.update(g, s, update_slots=False))(jnp.ones(2), state)
    np.testing.assert_array_equal(u, [-0.5, -0.5])
    np.testing.assert_array_equal(gradtx.get_slot(state, "accumulator"), [4.0, 4.0])
    u, state = tx.update(jnp.ones(2), state)
    np.testing.assert_allclose(u, -1 / np.sqrt(5.0) * np.ones(2), rtol=1e-6)
    u, state = tx.update(RowSparse(jnp.array([1]), jnp.ones((1,)), (2,)), state, update_slots=False)
    np.testing.assert_array_equal(gradtx.get_slot(state, "accumulator"), [5.0, 5.0])


def test_adamw_decays_only_the_masked_params():
    params = {"w": jnp.ones(2), "b": jnp.ones(2)}
    tx = gradtx.adamw(0.1, weight_decay=0.5, mask=["w"])
    out, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    np.testing.assert_allclose(out["w"], [-0.5, -0.5])
    np.testing.assert_array_equal(out["b"], [0.0, 0.0])


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            gradtx.lars,
            {"learning_rate": 0.1, "momentum": -0.1},
            r"`lars`: `momentum` must be in \[0.0, 1.0\], got -0.1",
        ),
        (gradtx.lars, {"learning_rate": 0.1, "weight_decay": -1.0}, r"`lars`: `weight_decay` must be >= 0"),
        (gradtx.adamw, {"weight_decay": -0.1}, r"`adamw`: `weight_decay` must be >= 0, got -0.1"),
        (
            gradtx.momentumw,
            {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": -1.0},
            r"`momentumw`: `weight_decay` must be >= 0",
        ),
        (gradtx.adamax, {"b1": 1.0}, r"`adamax`: `b1` must be in \[0.0, 1.0\), got 1.0"),
        (gradtx.nadam, {"eps": -1.0}, r"`nadam`: `eps` must be >= 0"),
        (
            gradtx.reg_adagrad,
            {"learning_rate": 0.1, "initial_accumulator_value": 0.0},
            r"`reg_adagrad`: `initial_accumulator_value` must be > 0",
        ),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


def test_bad_types():
    with pytest.raises(TypeError, match=r"`lars`: `skip` must be a list, tuple or set of strings"):
        gradtx.lars(0.1, skip="bias")
    with pytest.raises(TypeError, match=r"`lars`: `skip` must be a list, tuple or set of strings .*got 5\."):
        gradtx.lars(0.1, skip=5)  # was `'int' object is not iterable`
    with pytest.raises(TypeError, match=r"`adamw`: `scale_decay_by_learning_rate` must be True or False"):
        gradtx.adamw(weight_decay=0.1, scale_decay_by_learning_rate=1)

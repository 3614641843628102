"""RETURNN's optimizers (gradtx/optimizers/_returnn.py) and per_leaf against float64 references of RETURNN's
rules."""

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers
from tests import reference_contrib as ref

CASES = {
    "amsgrad": (
        lambda: gradtx.amsgrad(0.05, 0.8, 0.9, 1e-6),
        lambda: ref.amsgrad(0.05, 0.8, 0.9, 1e-6),
        ["m", "v", "v_hat"],
    ),
    "amsgrad-decay": (
        lambda: gradtx.amsgrad(0.05, 0.8, 0.9, 1e-6, decay=True),
        lambda: ref.amsgrad(0.05, 0.8, 0.9, 1e-6, decay=True),
        ["v_hat"],
    ),
    "neural_optimizer1": (
        lambda: gradtx.neural_optimizer1(0.1, 0.8, 0.2),
        lambda: ref.neural_optimizer1(0.1, 0.8, 0.2),
        ["m"],
    ),
    "grad_variance_scaled": (
        lambda: gradtx.grad_variance_scaled(0.1, 0.8, 0.9, 1e-4),
        lambda: ref.grad_variance_scaled(0.1, 0.8, 0.9, 1e-4),
        ["m", "v"],
    ),
    "normalized_sgd": (lambda: gradtx.normalized_sgd(0.1), lambda: ref.normalized_sgd(0.1), []),
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_returnns_rule(name, sparse, x64):
    make_tx, make_ref, slots = CASES[name]
    helpers.compare_to_reference(make_tx, make_ref, sparse=sparse, x64=x64, slots=slots)


def _custom_adam(learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8):
    """RETURNN's CustomAdamOptimizer written with per_leaf, exactly as per_leaf's docstring shows it."""

    def init(p):
        return {"m": jnp.zeros_like(p), "v": jnp.zeros_like(p)}

    def apply(g, p, s, count, learning_rate, beta1, beta2, epsilon):
        t = (count + 1).astype(g.dtype)
        lr = learning_rate * jnp.sqrt(1 - beta2**t) / (1 - beta1**t)
        m = beta1 * s["m"] + (1 - beta1) * g
        v = beta2 * s["v"] + (1 - beta2) * (g * g)
        return lr * (m / (jnp.sqrt(v) + epsilon)), {"m": m, "v": v}

    return gradtx.per_leaf(
        init, apply, learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon
    )


@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
def test_per_leaf_custom_adam_is_returnns_custom_adam(x64):
    helpers.compare_to_reference(
        lambda: _custom_adam(0.05, 0.8, 0.95, 1e-3),
        lambda: ref.custom_adam(0.05, 0.8, 0.95, 1e-3),
        sparse=False,
        x64=x64,
    )


def test_per_leaf_custom_sgd_is_sgd_and_densifies_sparse_gradients():
    custom = gradtx.per_leaf(
        lambda p: {},
        lambda g, p, s, count, learning_rate: (learning_rate * g, s),
        learning_rate=lambda count: 0.1,
    )
    params, grads = helpers.problem(0, sparse=True)
    a, _ = helpers.run(custom, params, helpers.to_gradtx(grads))
    b, _ = helpers.run(gradtx.sgd(0.1), params, helpers.to_gradtx(grads))
    helpers.assert_trees_close(a, b, rtol=1e-6, atol=1e-7)


def test_per_leaf_slots_are_visible_by_name():
    state = _custom_adam(0.1).init({"w": jnp.zeros(3)})
    assert gradtx.slot_names(state) == ["m", "v"]
    np.testing.assert_array_equal(gradtx.get_slot(state, "m", "w"), np.zeros(3))


def test_per_leaf_errors():
    with pytest.raises(TypeError, match=r"`per_leaf`: `apply` must be callable"):
        gradtx.per_leaf(lambda p: {}, None)
    with pytest.raises(TypeError, match=r"`per_leaf`: `learning_rate` must be a number"):
        gradtx.per_leaf(lambda p: {}, lambda *a: a, learning_rate="fast")
    bad = gradtx.per_leaf(lambda p: {"m": p}, lambda g, p, s, c: (g, {}))
    with pytest.raises(ValueError, match=r"`per_leaf`: `apply` must return the slots \['m'\], got \[\]"):
        bad.update(jnp.ones(2), bad.init(jnp.ones(2)), jnp.ones(2))


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.amsgrad, {"b2": 1.0}, r"`amsgrad`: `b2` must be in \[0.0, 1.0\), got 1.0"),
        (
            gradtx.neural_optimizer1,
            {"learning_rate": 0.1, "decrease_factor": -1.0},
            r"`neural_optimizer1`: `decrease_factor` must be >= 0",
        ),
        (
            gradtx.grad_variance_scaled,
            {"learning_rate": 0.1, "b1": 2.0},
            r"`grad_variance_scaled`: `b1` must be in",
        ),
        (gradtx.normalized_sgd, {"learning_rate": -1.0}, r"`normalized_sgd`: `learning_rate` must be >= 0"),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)

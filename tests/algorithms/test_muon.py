"""gradtx/_algorithms/muon.py and muon_shape.py: Muon's building blocks against their definitions (the
Newton-Schulz iteration orthogonalises: U V^T from NumPy's SVD; other leaves get the bias-corrected momentum;
`scale_by_shape` scales by the matrix's shape), and the alias `muon` against optax.contrib's, 20 steps on the
same gradients, its fallback for leaves that are not matrices, its config names and its errors.

Muon's tolerance against optax is `helpers.MUON_TOLERANCE`; its dimension numbers (conv kernels, stacked
weights): test_muon_dims.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib
import pytest

import gradtx
from tests import catalog, helpers
from tests.algorithms import _references

CUBIC = (1.5, -0.5, 0.0)  # the classic Newton-Schulz step, which converges to U V^T


@pytest.mark.parametrize("shape", [(4, 7), (7, 4), (5, 5)])
def test_newton_schulz_with_the_cubic_converges_to_the_polar_factor(shape):
    g = np.random.default_rng(sum(shape)).standard_normal(shape)
    u, _, vt = np.linalg.svd(g, full_matrices=False)
    tx = gradtx.scale_by_muon(CUBIC, ns_steps=60, beta=0.0, nesterov=False)
    out, _ = tx.update(jnp.asarray(g, jnp.float32), tx.init(jnp.zeros(shape)))
    np.testing.assert_allclose(out, u @ vt, atol=2e-4)


@pytest.mark.parametrize("preconditioning", ["spectral", "aol", "schatten"])
def test_every_preconditioning_bounds_the_first_iterate_and_reaches_the_polar_factor(preconditioning):
    """Each scaling leaves the first iterate with singular values <= 1, so the classic cubic converges to its
    polar factor U V^T (that of x itself for the scalar scalings; AOL's row scaling changes the factor)."""
    from gradtx._algorithms.newton_schulz import _first_gram
    from gradtx._algorithms.newton_schulz import newton_schulz as _newton_schulz

    x = jnp.asarray(np.random.default_rng(3).standard_normal((4, 6)), jnp.float32) * 7.0
    x0, gram = _first_gram(x, preconditioning, 1e-8)
    np.testing.assert_allclose(gram, x0 @ x0.T, rtol=1e-5, atol=1e-6)  # the Gram matrix of the scaled x
    assert float(jnp.linalg.norm(x0, ord=2)) <= 1.0 + 1e-5
    u, _, vt = np.linalg.svd(np.asarray(x0, np.float64), full_matrices=False)
    out = _newton_schulz(x, ((1.5, -0.5, 0.0),) * 60, 1e-8, preconditioning)
    np.testing.assert_allclose(out, u @ vt, atol=1e-4)


def test_the_default_quintic_puts_every_singular_value_near_one():
    g = np.random.default_rng(0).standard_normal((16, 32)) * np.logspace(-0.5, 0.5, 16)[:, None]  # 10x spread
    tx = gradtx.scale_by_muon(beta=0.0, nesterov=False)
    out, _ = tx.update(jnp.asarray(g, jnp.float32), tx.init(jnp.zeros(g.shape)))
    singular = np.linalg.svd(np.asarray(out, np.float64), compute_uv=False)
    assert 0.6 < singular.min() and singular.max() < 1.25, singular


def test_leaves_that_are_not_matrices_get_the_bias_corrected_nesterov_momentum():
    beta, grads = 0.8, [np.array([1.0, -2.0]), np.array([0.5, 4.0])]
    tx = gradtx.scale_by_muon(beta=beta)
    state = tx.init(jnp.zeros(2))
    m = np.zeros(2)
    for t, g in enumerate(grads, start=1):
        out, state = tx.update(jnp.asarray(g, jnp.float32), state)
        m = beta * m + (1 - beta) * g
        expected = beta * m / (1 - beta ** (t + 1)) + (1 - beta) * g / (1 - beta**t)
        np.testing.assert_allclose(out, expected, rtol=1e-6)
        np.testing.assert_allclose(state.momentum, m, rtol=1e-6)


@pytest.mark.parametrize(
    "consistent_rms, shape, factor",
    [(None, (2, 8), 2.0), (None, (8, 2), 1.0), (0.2, (4, 9), 0.6)],
)
def test_scale_by_shape(consistent_rms, shape, factor):
    tx = gradtx.scale_by_shape(consistent_rms)
    out, _ = tx.update({"w": jnp.ones(shape), "b": jnp.ones(3)}, tx.init(None))
    np.testing.assert_allclose(out["w"], factor * np.ones(shape), rtol=1e-6)
    np.testing.assert_array_equal(out["b"], np.ones(3))  # not a matrix: unchanged


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"ns_coeffs": ((1.0, 2.0, 3.0), (1.0, 2.0))},
            ValueError,
            r"`scale_by_muon`: `ns_coeffs` must be three",
        ),
        ({"ns_coeffs": (1.0, float("inf"), 0.0)}, ValueError, r"`ns_coeffs` must be three finite numbers"),
        ({"ns_steps": 2.0}, TypeError, r"`scale_by_muon`: `ns_steps` must be an integer"),
        ({"eps": -1.0}, ValueError, r"`scale_by_muon`: `eps` must be >= 0"),
        ({"adaptive": "yes"}, TypeError, r"`scale_by_muon`: `adaptive` must be True or False"),
        (
            {"preconditioning": "polar"},
            ValueError,
            r"`scale_by_muon`: `preconditioning` must be one of 'frobenius', 'spectral', 'aol', "
            r"'schatten'; got 'polar'",
        ),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.scale_by_muon(**kwargs)


def test_scale_by_shape_refuses_a_schedule_or_a_non_positive_rms():
    with pytest.raises(TypeError, match=r"`scale_by_shape`: `consistent_rms` must be a number"):
        gradtx.scale_by_shape(lambda count: 0.2)
    with pytest.raises(ValueError, match=r"`scale_by_shape`: `consistent_rms` must be > 0"):
        gradtx.scale_by_shape(-0.2)


# --------------------------------------------------------------------------- the alias against optax

SHAPES = {"w": (6, 4), "b": (5,), "conv": (2, 3, 4), "head": (3, 7)}
DION = (  # five per-iteration Newton-Schulz triples (optax's "dion" preset)
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
)


def _problem(shapes=SHAPES, seed=0, steps=helpers.STEPS):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    grads = [
        {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()} for _ in range(steps)
    ]
    return params, grads


CASES = {
    "muon": (
        lambda: gradtx.muon(0.05, weight_decay=0.01, adam_weight_decay=0.02),
        lambda: optax.contrib.muon(
            0.05,
            beta=0.95,
            adam_b1=0.9,
            adam_b2=0.999,
            weight_decay=0.01,
            adam_weight_decay=0.02,
        ),
        SHAPES,
    ),
    "muon-plain-adaptive-rms-dion": (
        lambda: gradtx.muon(
            0.05, DION, beta=0.9, nesterov=False, adaptive=True, consistent_rms=0.2, adam_learning_rate=0.01
        ),
        lambda: optax.contrib.muon(
            0.05,
            DION,
            beta=0.9,
            nesterov=False,
            adaptive=True,
            consistent_rms=0.2,
            adam_learning_rate=0.01,
            adam_b1=0.9,
            adam_b2=0.999,
        ),
        SHAPES,
    ),
}
for _pc in ("spectral", "aol", "schatten"):  # optax's other scalings before Newton-Schulz
    CASES[f"muon-{_pc}"] = (
        lambda pc=_pc: gradtx.muon(0.05, weight_decay=0.01, preconditioning=pc),
        lambda pc=_pc: optax.contrib.muon(
            0.05, weight_decay=0.01, preconditioning=pc, adam_b1=0.9, adam_b2=0.999
        ),
        SHAPES,
    )


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax(name, jit):
    ours, theirs, shapes = CASES[name]
    params, grads = _problem(shapes)
    if not jit:  # eager: 5 steps (jit and eager agree for every optimizer: test_contract's own test)
        grads = grads[:5]
    actual, _ = helpers.run(ours(), params, grads, jit=jit)
    expected, _ = helpers.run(theirs(), params, grads, jit=jit)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, **helpers.tolerance(name), msg=f"{name}: step {t + 1}")


def test_muon_sends_matrices_to_muon_and_the_rest_to_a_fallback():
    params, grads = _problem()
    tx = gradtx.muon(0.05, fallback=gradtx.sgd(0.5))
    updates, state = tx.update(grads[0], tx.init(params), params)
    np.testing.assert_allclose(updates["b"], -0.5 * grads[0]["b"], rtol=1e-6)  # the fallback: plain SGD
    np.testing.assert_allclose(updates["conv"], -0.5 * grads[0]["conv"], rtol=1e-6)
    singular = np.linalg.svd(np.asarray(updates["w"]) / -0.05, compute_uv=False)
    assert 0.5 < singular.min() and singular.max() < 1.3  # orthogonalised (the quintic's band around 1)
    momentum = gradtx.get_slot(state, "momentum")
    assert momentum["b"] is None and momentum["w"].shape == (6, 4)


CONFIGS = [
    ({"class": "Muon", "learning_rate": 0.1, "beta": 0.9}, "muon", {"beta": 0.9}),
]


@pytest.mark.parametrize("config, name, kwargs", CONFIGS, ids=[c[0]["class"] for c in CONFIGS])
def test_from_config_and_get_take_the_names_and_tf_arguments(config, name, kwargs):
    """The class names and TF's argument names reach the factory (`get`'s numbers: tests/test_contract.py)."""
    arguments = {k: v for k, v in config.items() if k != "class"}
    assert catalog.entry(config["class"]).name == name
    assert kwargs.items() <= gradtx.registry.translate_kwargs(config["class"], arguments).items()
    params = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}
    expected = getattr(gradtx, name)(**gradtx.registry.translate_kwargs(name, arguments)).init(params)
    for built in (gradtx.from_config(config), gradtx.get(config["class"], **arguments)):
        assert helpers.shape_dtypes(built.init(params)) == helpers.shape_dtypes(expected)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (
            gradtx.muon,
            {"learning_rate": 0.1, "ns_coeffs": (1.0, 2.0)},
            ValueError,
            r"`muon`: `ns_coeffs` must be three",
        ),
        (gradtx.muon, {"learning_rate": 0.1, "ns_steps": 0}, ValueError, r"`muon`: `ns_steps` must be >= 1"),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "beta": 1.0},
            ValueError,
            r"`muon`: `beta` must be in \[0.0, 1.0\)",
        ),
        (gradtx.muon, {"learning_rate": 0.1, "adam_b2": 1.0}, ValueError, r"`muon`: `adam_b2` must be in"),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "consistent_rms": 0.0},
            ValueError,
            r"`muon`: `consistent_rms` must be > 0",
        ),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "adam_learning_rate": -1.0},
            ValueError,
            r"`adam_learning_rate` must be >= 0",
        ),
        (
            gradtx.muon,
            {"learning_rate": 0.1, "fallback": 3},
            TypeError,
            r"`muon`: `fallback` must be a gradient",
        ),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(**kwargs)


@pytest.mark.parametrize("preconditioning", ["frobenius", "spectral", "aol", "schatten"])
def test_optax_compat_muon_takes_every_preconditioning_with_optax_s_numbers_and_state(preconditioning):
    from gradtx.optax_compat import contrib as compat

    params, grads = _problem(steps=5)
    ours = compat.muon(0.05, weight_decay=0.01, preconditioning=preconditioning)
    theirs = optax.contrib.muon(0.05, weight_decay=0.01, preconditioning=preconditioning)
    actual, state = helpers.run(ours, params, grads, jit=True)
    expected, expected_state = helpers.run(theirs, params, grads, jit=True)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, **helpers.MUON_TOLERANCE, msg=f"{preconditioning}: step {t + 1}")
    assert str(jax.tree.structure(state)) == str(jax.tree.structure(expected_state))


# pytorch-optimizer's Muon (tools/references/muon.py): its named Newton-Schulz schedules ('polar_express',
# ...) through `gradtx.muon`. "Muon" is gradtx.muon's own name (optax's), so the test builds it from the
# reference's arguments: non-Nesterov momentum (gradtx's bias correction is a scale the iteration
# normalises away), the reference's `shape[0]` output rows as dimension numbers, its AdamW for the vector.


def _muon_as_pytorch_optimizer(kwargs):
    from gradtx._algorithms.adam import scale_by_bias_corrected_adam

    k = {
        "lr": 2e-2, "momentum": 0.95, "weight_decay": 0.0, "ns_steps": 5, "ns_coeffs": "original",
        "use_adjusted_lr": False, "adamw_lr": 3e-4, "adamw_betas": (0.9, 0.95), "adamw_wd": 0.0,
        "adamw_eps": 1e-10,
    } | kwargs  # fmt: skip
    assert k.pop("nesterov") is False
    dims = gradtx.MuonDimensionNumbers
    fallback = gradtx.chain(
        scale_by_bias_corrected_adam(*k["adamw_betas"], k["adamw_eps"]),
        gradtx.add_decayed_weights(k["adamw_wd"]),
        gradtx.scale_by_learning_rate(k["adamw_lr"]),
    )
    return gradtx.muon(
        k["lr"],
        k["ns_coeffs"],
        k["ns_steps"],
        k["momentum"],
        1e-7,
        k["weight_decay"],
        nesterov=False,
        consistent_rms=0.2 if k["use_adjusted_lr"] else None,
        fallback=fallback,
        weight_dimension_numbers={"conv": dims((1, 2, 3), 0), "matrix": dims(1, 0), "vector": None},
    )


@pytest.mark.parametrize("case", _references.cases("muon"), ids=repr)
def test_muon_with_pytorch_optimizers_schedules_equals_its_muon(case):
    _references.check_case(case, tx=_muon_as_pytorch_optimizer(case.kwargs))


def test_the_named_schedules_are_pytorch_optimizers_numbers():
    from gradtx._algorithms.newton_schulz import NS_COEFFICIENT_SETS, coefficient_schedule

    assert set(NS_COEFFICIENT_SETS) == {"original", "quintic", "polar_express", "polar_express_safer"}
    pe = NS_COEFFICIENT_SETS["polar_express"]
    assert len(pe) == 8 and pe[0] == (8.237312490495555, -23.157747414558198, 16.680568411445915)
    # a name gives its first ns_steps triples, the last repeated past its end (the reference's rule)
    assert coefficient_schedule("muon", "Polar_Express", 3) == pe[:3]
    assert coefficient_schedule("muon", "polar_express", 10) == pe + pe[-1:] * 2
    assert coefficient_schedule("muon", "original", 2) == ((3.4445, -4.7750, 2.0315),) * 2
    # a sequence of triples is one per iteration, whatever ns_steps
    assert coefficient_schedule("muon", [(1.0, 0.0, 0.0), (2.0, 0.0, 0.0)], 5) == (
        (1.0, 0.0, 0.0),
        (2.0, 0.0, 0.0),
    )
    with pytest.raises(ValueError, match="`ns_coeffs` must be one of 'original'"):
        gradtx.muon(0.1, ns_coeffs="polar")


def test_polar_express_puts_every_singular_value_nearer_one_than_the_original_triple():
    g = np.random.default_rng(0).standard_normal((16, 32)) * np.logspace(-1.5, 0, 16)[:, None]  # 30x spread

    def spread(coeffs, steps):
        tx = gradtx.scale_by_muon(coeffs, steps, beta=0.0, nesterov=False)
        out, _ = tx.update(jnp.asarray(g, jnp.float32), tx.init(jnp.zeros(g.shape)))
        s = np.linalg.svd(np.asarray(out, np.float64), compute_uv=False)
        return float(np.max(np.abs(s - 1.0)))

    assert spread("polar_express", 8) < 0.05 < spread("original", 8)

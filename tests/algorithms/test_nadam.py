"""gradtx/_algorithms/nadam.py: `nadam` (tf.contrib.opt's NadamOptimizer) against float64 references of its
rule, and `nadamw` against optax.

Its building block with TF's scalar dtypes is checked with the rest of the Adam family in test_adam.py. Here:
NAdam's numbers against tests/reference.py in float32 and float64, dense and row-sparse, and its errors;
NAdamW's 20 steps beside optax's on the same gradients (jitted and eagerly, Python-float hyperparameters on
both sides: gradtx combines them in double precision as optax does), its config names and its errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import catalog, helpers, reference

CONTRIB_CASES = {
    "nadam": (
        lambda: gradtx.nadam(0.05, 0.8, 0.95, 1e-3),
        lambda: reference.adam(0.05, 0.8, 0.95, 1e-3, nesterov=True),
        ["m", "v"],
        None,
    ),
}
SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


@SPARSE
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CONTRIB_CASES))
def test_matches_the_reference(name, sparse, x64):
    make_tx, make_ref, slots, extra = CONTRIB_CASES[name]
    helpers.compare_to_reference(
        make_tx, make_ref, sparse=sparse, x64=x64, slots=slots, extra_args=extra, atol32=5e-6
    )


@SPARSE
@pytest.mark.parametrize(
    "block, nesterov, lazy", [(gradtx.scale_by_nesterov_adam, True, False)], ids=["nadam-sparse"]
)
def test_adam_sparse_variants_match_the_reference(sparse, block, nesterov, lazy):
    tx = gradtx.chain(block(0.8, 0.95, 1e-3), gradtx.scale_by_learning_rate(0.05))
    params, grads = helpers.problem(4, sparse=sparse)
    expected, _ = reference.run(
        reference.adam(0.05, 0.8, 0.95, 1e-3, nesterov=nesterov, lazy=lazy), params, grads
    )
    with jax.enable_x64(True):
        actual, _ = helpers.run(
            tx, [np.asarray(p, np.float64) for p in params], helpers.to_gradtx(grads, dtype=np.float64)
        )
    for a, e in zip(actual, expected, strict=True):
        helpers.assert_trees_close(a, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.nadam, {"eps": -1.0}, r"`nadam`: `eps` must be >= 0"),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


# --------------------------------------------------------------------------- NAdamW against optax

SHAPES = {"w": (6, 4), "b": (5,), "s": ()}
MASK = {"w": True, "b": False, "s": False}


def _problem(seed=0, steps=helpers.STEPS, scale=1.0):
    rng = np.random.default_rng(seed)
    params = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
    grads = [
        {k: jnp.asarray(scale * rng.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
        for _ in range(steps)
    ]
    return params, grads


def _decaying(count):
    return 0.1 * 0.9**count


CASES = {
    "nadamw": (lambda: gradtx.nadamw(0.05), lambda: optax.nadamw(0.05, 0.9, 0.999)),
    "nadamw-mask": (
        lambda: gradtx.nadamw(_decaying, 0.8, 0.99, weight_decay=0.1, mask=MASK),
        lambda: optax.nadamw(_decaying, 0.8, 0.99, weight_decay=0.1, mask=MASK),
    ),
}


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("name", CASES)
def test_twenty_steps_equal_optax(name, jit):
    ours, theirs = CASES[name]
    params, grads = _problem()
    if not jit:  # eager: 5 steps (jit and eager agree for every optimizer: test_contract's own test)
        grads = grads[:5]
    actual, _ = helpers.run(ours(), params, grads, jit=jit)
    expected, _ = helpers.run(theirs(), params, grads, jit=jit)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")


CONFIGS = [
    ({"class": "NAdamW", "learning_rate": 0.1, "weight_decay": 0.01}, "nadamw", {"weight_decay": 0.01}),
]


@pytest.mark.parametrize("config, name, kwargs", CONFIGS, ids=[c[0]["class"] for c in CONFIGS])
def test_from_config_and_get_take_the_names_and_tf_arguments(config, name, kwargs):
    """The class names and TF's argument names reach the factory (`get`'s numbers: tests/test_contract.py)."""
    arguments = {k: v for k, v in config.items() if k != "class"}
    assert catalog.entry(config["class"]).name == name
    assert kwargs.items() <= gradtx.registry.translate_kwargs(config["class"], arguments).items()
    params, grads = {"w": jnp.ones((3, 2))}, {"w": jnp.full((3, 2), 0.5)}
    expected = getattr(gradtx, name)(**gradtx.registry.translate_kwargs(name, arguments))
    want = expected.update(grads, expected.init(params), params)[0]
    for built in (gradtx.from_config(config), gradtx.get(config["class"], **arguments)):
        helpers.assert_trees_close(built.update(grads, built.init(params), params)[0], want, rtol=0, atol=0)


@pytest.mark.parametrize(
    "factory, kwargs, error, match",
    [
        (gradtx.nadamw, {"b1": 1.0}, ValueError, r"`nadamw`: `b1` must be in \[0.0, 1.0\)"),
        (gradtx.nadamw, {"weight_decay": float("inf")}, ValueError, r"`nadamw`: `weight_decay` must be"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    if factory is not gradtx.rprop or "learning_rate" not in kwargs:
        kwargs = {"learning_rate": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        factory(**kwargs)

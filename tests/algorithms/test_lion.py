"""gradtx/_algorithms/lion.py: Lion against optax's and Tiger against pytorch-optimizer's, 20 steps on the
same gradients, its config names, its errors, and which optimizers of optax's newer families are element-wise.

Both are given the hyperparameters as users write them, Python floats: gradtx combines them in double
precision as optax does (`gradtx.update_rule`'s dtype policy), jitted and eagerly.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from tests import catalog, helpers
from tests.algorithms import _references

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
    "lion": (lambda: gradtx.lion(0.01), lambda: optax.lion(0.01, 0.9, 0.99)),
    "lion-mask-schedule-wd": (
        lambda: gradtx.lion(_decaying, 0.8, 0.95, weight_decay=0.1, mask=MASK),
        lambda: optax.lion(_decaying, 0.8, 0.95, weight_decay=0.1, mask=MASK),
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


ELEMENT_WISE = {
    "lion": lambda **kw: gradtx.lion(0.1, **kw),
    "adan": lambda **kw: gradtx.adan(0.1, **kw),
    "nadamw": lambda **kw: gradtx.nadamw(0.1, **kw),
    "radam": lambda **kw: gradtx.radam(0.1),
    "adabelief": lambda **kw: gradtx.adabelief(0.1),
    "yogi": lambda **kw: gradtx.yogi(0.1),
    "sign_sgd": lambda **kw: gradtx.sign_sgd(0.1),
    "signum": lambda **kw: gradtx.signum(0.1),
    "rprop": lambda **kw: gradtx.rprop(0.1),
}


def test_all_are_element_wise_unless_a_decay_mask_looks_at_paths():
    for name, make in ELEMENT_WISE.items():
        assert isinstance(make(), gradtx.ElementWise), name
    for name in ("lion", "adan", "nadamw"):
        assert isinstance(ELEMENT_WISE[name](mask=["w"]), gradtx.LeafWise), name


CONFIGS = [
    ({"class": "Lion", "learning_rate": 0.1, "beta1": 0.8}, "lion", {"b1": 0.8}),
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
        (gradtx.lion, {"b1": 1.5}, ValueError, r"`lion`: `b1` must be in \[0.0, 1.0\], got 1.5"),
        (gradtx.lion, {"weight_decay": -1.0}, ValueError, r"`lion`: `weight_decay` must be >= 0"),
        (gradtx.lion, {"mu_dtype": jnp.int32}, TypeError, r"`lion`: `mu_dtype` must be None or a floating"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(factory, kwargs, error, match):
    if factory is not gradtx.rprop or "learning_rate" not in kwargs:
        kwargs = {"learning_rate": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        factory(**kwargs)


# --- Tiger: pytorch-optimizer's trajectories (tools/references/lion.py) ---------------------------


@pytest.mark.parametrize("case", _references.cases("lion"), ids=repr)
def test_tiger_equals_pytorch_optimizer(case):
    _references.check_case(case)


def test_tiger_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("lion", "tiger")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("Tiger", maximize=True)
    with pytest.raises(TypeError, match="unknown argument `betas`"):
        gradtx.get("Tiger", betas=(0.9, 0.99))


def test_tiger_is_lion_with_one_beta():
    g = jnp.array([0.3, -2.0, 1e-4])
    p = jnp.array([1.0, -1.0, 0.5])
    a, b = gradtx.tiger(0.1, 0.8, 0.0), gradtx.lion(0.1, 0.8, 0.8, 0.0)
    sa, sb = a.init(p), b.init(p)
    for _ in range(3):
        ua, sa = a.update(g, sa, p)
        ub, sb = b.update(g, sb, p)
        np.testing.assert_array_equal(ua, ub)

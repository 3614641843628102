"""`tf_update` without TF: refusals, the legacy flags' order, and each applied key changing the numbers.

The numbers against RETURNN's own updater are in tests/parity/test_returnn_tf_updater.py.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import returnn
from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._tf_backend import tf_update
from gradtx.returnn._tf_optimizer import optimizer_choice, resolve_class
from tests import catalog

PARAMS = {"b": jnp.array([0.5, -1.0]), "w": jnp.array([[1.0, -2.0, 3.0], [0.25, 0.0, -1.5]])}
GRADS = [
    {"b": jnp.array([3.0, -4.0]), "w": jnp.array([[0.5, -0.1, 2.0], [1.5, -2.5, 0.2]])},
    {"b": jnp.array([-1.0, 0.5]), "w": jnp.array([[-0.3, 0.8, -1.2], [0.1, 3.0, -0.7]])},
    {"b": jnp.array([0.2, 2.0]), "w": jnp.array([[1.1, -0.4, 0.6], [-2.0, 0.9, 0.3]])},
]


def run(config: dict[str, Any], grads=GRADS, *, rate: float = 0.1, l2: Any = None) -> np.ndarray:
    """The params after the steps, flattened."""
    tx = tf_update(config, l2=l2).factory(rate)
    params, state = PARAMS, tx.init(PARAMS)
    for g in grads:
        u, state = tx.update(g, state, params)
        params = gradtx.apply_updates(params, u)
    return np.concatenate([np.ravel(x) for x in jax.tree.leaves(params)])


def same_as(tx: gradtx.GradientTransformation, grads=GRADS) -> np.ndarray:
    params, state = PARAMS, tx.init(PARAMS)
    for g in grads:
        u, state = tx.update(g, state, params)
        params = gradtx.apply_updates(params, u)
    return np.concatenate([np.ravel(x) for x in jax.tree.leaves(params)])


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "config, match",
    [
        ({"optimizer": {"class": "adam", "learning_rate": 0.1}}, r"learning_rate will be set implicitly"),
        ({"optimizer": {"epsilon": 1e-8}}, r'must be a dict with "class"'),
        ({"optimizer": {"class": "adamm"}}, r"optimizer\[\"class\"\].*unknown optimizer.*'adam'"),
        ({"optimizer": {"class": "lazy_adam"}}, r"no class RETURNN's TF updater knows.*'lazyadam'"),
        ({"optimizer": {"class": "sgd"}}, r"Keras optimizer under TF2 only.*GradientDescent"),
        ({"optimizer": {"class": "Lion"}}, r"Keras optimizer under TF2 only"),
        ({"optimizer": {"class": "DropStaleGradientOptimizer"}}, r"wrapper of another optimizer"),
        ({"optimizer": {"class": "AdamGSOptimizer"}}, r"global_step"),
        ({"optimizer": {"class": "adagradda"}}, r"global_step"),
        ({"adam": True, "momentum": 0.9}, r"`momentum` = 0.9 with `adam`: RETURNN refuses"),
        (
            {"dynamic_learning_rate": {"interval": 5}},
            r'`dynamic_learning_rate` must be the dict \{"interval"',
        ),
        ({"dynamic_learning_rate": {"interval": 0, "decay": 0.5}}, r'"interval"\]` must be an int >= 1'),
        ({"global_norm_tag": "enc"}, r"`global_norm_tag` = 'enc'.*no layers"),
        ({"gradient_clip_global_norm_tag": "enc"}, r"`gradient_clip_global_norm_tag`"),
        ({"maximize_grad_norm": 0.1}, r"`maximize_grad_norm`.*second backprop"),
        ({"decouple_constraints": True}, r"pass `l2=`"),
        ({"gradient_clip": -1.0}, r"`gradient_clip` must be > 0"),
        ({"accum_grad_multiple_step": -2}, r"`accum_grad_multiple_step` must be an int >= 0"),
    ],
)
def test_refused(config, match):
    with pytest.raises(ReturnnConfigError, match=match):
        tf_update(config)


@pytest.mark.parametrize(
    "config, same, match",
    [
        (
            {"optimizer": {"class": "adam"}, "momentum": 0.9},
            {"optimizer": {"class": "adam"}},
            "takes no `momentum`",
        ),
        (
            {"optimizer": {"class": "momentum", "momentum": 0.5}, "momentum": 0.9},
            {"optimizer": {"class": "momentum", "momentum": 0.5}},
            "the dict sets `momentum`",
        ),
        (
            {"optimizer": {"class": "adam", "epsilon": 1e-3}, "optimizer_epsilon": 1e-8},
            {"optimizer": {"class": "adam", "epsilon": 1e-3}},
            "the dict sets `epsilon`",
        ),
        ({"momentum": 0.9, "optimizer_epsilon": 1e-8}, {"momentum": 0.9}, "momentum optimizer takes none"),
        ({"adagrad": True, "optimizer_epsilon": 1e-8}, {"adagrad": True}, "adagrad optimizer takes none"),
        (
            {"adam": True, "rmsprop": True},
            {"adam": True},
            r"`rmsprop` = True has no effect: .*legacy flag, `adam`",
        ),
        (
            {"adam": True, "nadam": True},
            {"adam": True},
            r"`nadam` = True has no effect: .*legacy flag, `adam`",
        ),
        (
            {"optimizer": {"class": "adam"}, "nadam": True},
            {"optimizer": {"class": "adam"}},
            "`optimizer` dict",
        ),
    ],
)
def test_keys_returnn_runs_without_are_dropped_as_returnn_drops_them_with_a_warning(config, same, match):
    """RETURNN's TF updater reads these and does nothing with them (its `_create_optimizer` sets `epsilon`
    and `momentum` by `setdefault`, for classes that take them; the first legacy flag wins)."""
    with pytest.warns(
        returnn.ReturnnConfigWarning, match=f"{match}.*RETURNN runs without it, and so does gradtx"
    ):
        got = run(config)
    np.testing.assert_array_equal(got, run(same))


def test_l2_without_decouple_constraints_is_refused():
    with pytest.raises(ReturnnConfigError, match=r"`l2` has no effect without `decouple_constraints = True`"):
        tf_update({"adam": True}, l2=0.01)


@pytest.mark.parametrize(
    "config, l2, match",
    [
        ({"optimizer": {"class": 3}}, None, r'`optimizer\["class"\]` must be a class name'),
        ({"gradient_clip": "big"}, None, r"`gradient_clip` must be a number"),
        ({"gradient_noise": 0.1, "random_seed": "x"}, None, r"`random_seed` must be an int"),
        ({"decouple_constraints": True}, {"w": "big"}, r"`l2` must be a float >= 0"),
        ({"dynamic_learning_rate": {"interval": 2, "decay": "x"}}, None, r'"decay"\]` must be a number'),
    ],
)
def test_wrong_types(config, l2, match):
    with pytest.raises(TypeError, match=match):
        tf_update(config, l2=l2).factory(0.1)


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"class": "adam", "betaa1": 0.5}, r"`optimizer` \(adam\).*unknown argument `betaa1`"),
        (
            {"class": "adamw", "epsilon": 1e-13},
            r"`optimizer` \(adamw\).*`adamw` needs `weight_decay` \(no default\)",
        ),
    ],
)
def test_optimizer_arguments_the_class_does_not_take_or_needs(spec, match):
    with pytest.raises(ReturnnConfigError, match=match):
        tf_update({"optimizer": spec}).factory(0.1)


def test_l2_tree_not_matching_params():
    tx = tf_update({"decouple_constraints": True}, l2={"c": 0.1}).factory(0.1)
    with pytest.raises(ValueError, match=r"`tf_update`: l2 and params must match"):
        tx.update(GRADS[0], tx.init(PARAMS), PARAMS)


# --------------------------------------------------------------------------- the optimizer RETURNN picks


@pytest.mark.parametrize(
    "config, name, kwargs",
    [
        ({}, "sgd", {}),
        ({"adam": True, "rmsprop": False}, "adam", {"epsilon": 1e-16}),
        ({"nadam": 1}, "nadam", {"epsilon": 1e-16}),
        ({"adadelta": True, "optimizer_epsilon": 1e-6}, "adadelta", {"epsilon": 1e-6}),
        ({"rmsprop": True, "momentum": 0.5}, "rmsprop", {"decay": 0.9, "momentum": 0.5, "epsilon": 1e-16}),
        (
            {"rmsprop": 0.0},
            "rmsprop",
            {"decay": 0.0, "momentum": 0.0, "epsilon": 1e-16},
        ),  # a float: the decay
        ({"momentum": 0.9}, "momentum", {"momentum": 0.9}),
        ({"optimizer": "adam", "adam": False}, "adam", {"epsilon": 1e-16}),
        (
            {"optimizer": {"class": "LARSOptimizer"}, "momentum": 0.8},
            "lars",
            {"epsilon": 1e-16, "momentum": 0.8},
        ),
        ({"optimizer": {"class": "ggt"}}, "ggt", {}),  # GGT's argument is `eps`: RETURNN sets no epsilon
        (
            {"optimizer": {"class": "AdamWOptimizer", "weight_decay": 0.01}},
            "adamw",
            {"weight_decay": 0.01, "epsilon": 1e-16},
        ),
    ],
)
def test_optimizer_choice(config, name, kwargs):
    choice = optimizer_choice(config)
    assert (choice.name, dict(choice.kwargs)) == (name, kwargs)


def test_class_lookup_is_returnns():
    assert resolve_class("NadamOptimizer").name == "nadam"  # RETURNN's own (contrib's numbers)
    adamax = catalog.entry(resolve_class("adamax").name)
    assert adamax.reference == "tf.contrib.opt.AdaMaxOptimizer"  # contrib, not Keras
    assert resolve_class("CustomGradientDescentOptimizer").name == "sgd"
    assert resolve_class("GradientDescent").name == "sgd"


def test_nadam_flag_is_contribs_nadam_and_amsgrad_class_gets_optimizer_epsilon():
    np.testing.assert_allclose(run({"nadam": True}), same_as(gradtx.nadam(0.1, eps=1e-16)), rtol=1e-6)
    np.testing.assert_allclose(
        run({"optimizer": {"class": "amsgrad"}}), same_as(gradtx.amsgrad(0.1, eps=1e-16)), rtol=1e-6
    )


def test_keys_and_locking():
    config = {"adam": True, "gradient_clip": 0.0, "optimizer_use_locking": True, "learning_rate": 0.1}
    assert tf_update(config).keys == {"adam", "gradient_clip", "optimizer_use_locking"}
    np.testing.assert_array_equal(run(config), run({"adam": True}))


# ------------------------------------------------------------------ every applied key changes the numbers


BASE = {"optimizer": {"class": "adam"}}
CHANGES = {
    "optimizer": ({}, {"optimizer": {"class": "adagrad"}}),
    "optimizer-args": (BASE, {"optimizer": {"class": "adam", "beta1": 0.5}}),
    "learning_rate_multiplier": (BASE, {"optimizer": {"class": "adam", "learning_rate_multiplier": 0.5}}),
    "adam": ({}, {"adam": True}),
    "nadam": ({"adam": True}, {"nadam": True}),
    "adadelta": ({}, {"adadelta": True}),
    "adagrad": ({}, {"adagrad": True}),
    "rmsprop": ({"rmsprop": True}, {"rmsprop": 0.5}),
    "momentum": ({"rmsprop": True}, {"rmsprop": True, "momentum": 0.9}),
    "optimizer_epsilon": (BASE, {**BASE, "optimizer_epsilon": 1.0}),
    "accum_grad_multiple_step": (BASE, {**BASE, "accum_grad_multiple_step": 2}),
    "gradient_noise": (BASE, {**BASE, "gradient_noise": 0.1}),
    "random_seed": ({**BASE, "gradient_noise": 0.1}, {**BASE, "gradient_noise": 0.1, "random_seed": 1}),
    "gradient_clip": ({}, {"gradient_clip": 1.0}),
    "gradient_clip_norm": ({}, {"gradient_clip_norm": 1.0}),
    "gradient_clip_avg_norm": ({}, {"gradient_clip_avg_norm": 0.5}),
    "gradient_clip_global_norm": (
        {"gradient_clip": 1.0},
        {"gradient_clip": 1.0, "gradient_clip_global_norm": 3.0},
    ),
    "grad_norm_to_clip_to_zero": ({}, {"grad_norm_to_clip_to_zero": 5.0}),
    "dynamic_learning_rate": ({}, {"dynamic_learning_rate": {"interval": 2, "decay": 0.5}}),
}


@pytest.mark.parametrize("key", list(CHANGES))
def test_each_key_changes_the_numbers(key):
    before, after = CHANGES[key]
    assert not np.allclose(run(before), run(after), rtol=1e-5, atol=1e-6)


def test_gradient_clip_global_norm_uses_the_raw_norm():
    """After a value clip to 1 the norm is below 3, the raw norm is not: RETURNN clips by the raw one."""
    clipped_norm = gradtx.global_norm(jax.tree.map(lambda g: jnp.clip(g, -1, 1), GRADS[0]))
    assert clipped_norm < 3.0 < gradtx.global_norm(GRADS[0])
    got = run({"gradient_clip": 1.0, "gradient_clip_global_norm": 3.0}, GRADS[:1])
    scale = 3.0 / gradtx.global_norm(GRADS[0])
    want = jax.tree.map(lambda p, g: p - 0.1 * jnp.clip(g, -1, 1) * scale, PARAMS, GRADS[0])
    np.testing.assert_allclose(got, np.concatenate([np.ravel(x) for x in jax.tree.leaves(want)]), rtol=1e-6)


def test_nan_inf_filter_zeroes_nan_and_inf():
    grads = [{"b": jnp.array([jnp.nan, jnp.inf]), "w": GRADS[0]["w"]}]
    got = run({"gradient_nan_inf_filter": True}, grads)
    np.testing.assert_allclose(got[:2], [0.5, -1.0])
    assert np.all(np.isfinite(got))
    # and with a NaN raw norm, grad_norm_to_clip_to_zero zeroes everything
    got = run({"gradient_nan_inf_filter": True, "grad_norm_to_clip_to_zero": 100.0}, grads)
    np.testing.assert_allclose(got, np.concatenate([np.ravel(x) for x in jax.tree.leaves(PARAMS)]))


def test_decouple_constraints_decays_by_twice_l2_before_the_optimizer():
    """`param -= param * 2 * l2` on the parameters with an L2 (a prefix tree), not scaled by the rate."""
    got = run({"decouple_constraints": True}, GRADS[:1], l2={"b": 0.25, "w": None})
    want_b = PARAMS["b"] * (1 - 0.5) - 0.1 * GRADS[0]["b"]
    want_w = PARAMS["w"] - 0.1 * GRADS[0]["w"]
    np.testing.assert_allclose(got, np.concatenate([np.ravel(want_b), np.ravel(want_w)]), rtol=1e-6)
    assert not np.allclose(run({"decouple_constraints": True}, l2=0.1), run({}))
    # RETURNN's TF updater computes `decouple_constraints_factor` but never uses it
    config = {"decouple_constraints": True, "decouple_constraints_factor": 0.5}
    np.testing.assert_array_equal(run(config, l2=0.1), run({"decouple_constraints": True}, l2=0.1))


def test_accumulation_sums_and_applies_every_nth_step():
    got = run({"accum_grad_multiple_step": 3}, GRADS)
    total = jax.tree.map(lambda *g: sum(g), *GRADS)
    want = jax.tree.map(lambda p, g: p - 0.1 * g, PARAMS, total)
    np.testing.assert_allclose(got, np.concatenate([np.ravel(x) for x in jax.tree.leaves(want)]), rtol=1e-6)
    np.testing.assert_array_equal(run({"accum_grad_multiple_step": 3}, GRADS[:2]), run({}, []))


def test_traced_rate_under_inject_hyperparams_and_jit():
    config = {"momentum": 0.9, "dynamic_learning_rate": {"interval": 2, "decay": 0.5}}
    tx = gradtx.inject_hyperparams(tf_update(config).factory)(learning_rate=0.1)
    params, state = PARAMS, tx.init(PARAMS)
    step = jax.jit(tx.update)
    for g in GRADS:
        u, state = step(g, state, params)
        params = gradtx.apply_updates(params, u)
    got = np.concatenate([np.ravel(x) for x in jax.tree.leaves(params)])
    np.testing.assert_allclose(got, run(config), rtol=1e-6)


def test_the_class_table_is_the_catalogue_s_tf_and_returnn_classes():
    """RETURNN's lookup reaches exactly the TF1, tf.contrib and RETURNN classes that gradtx reproduces."""
    from gradtx.returnn._tf_optimizer import _CLASSES

    reproduced = {}
    for e in catalog.entries():
        for prefix in ("tf.compat.v1.train.", "tf.contrib.opt.", "RETURNN "):
            if e.reference.startswith(prefix):
                reproduced[e.reference.removeprefix(prefix)] = e.name
    assert _CLASSES == reproduced

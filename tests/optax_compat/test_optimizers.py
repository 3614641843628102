"""gradtx.optax_compat against optax itself: the same numbers over 20 steps and the same state layout."""

from __future__ import annotations

import enum
import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx.optax_compat as compat

optax = pytest.importorskip("optax")

STEPS = 20

# (name, positional args, keyword args): Python-float arguments, as users write them.
CASES = [
    ("sgd", (0.1,), {}),
    ("sgd", (0.1,), {"momentum": 0.9}),
    ("sgd", (0.1,), {"momentum": 0.9, "nesterov": True}),
    ("adam", (1e-2,), {}),
    ("adam", (1e-2,), {"b1": 0.8, "eps_root": 1e-8, "nesterov": True}),
    ("adamw", (1e-2,), {}),
    ("adamw", (1e-2, 0.8, 0.99), {"weight_decay": 0.1}),
    ("nadam", (1e-2,), {}),
    ("nadamw", (1e-2,), {"weight_decay": 0.05}),
    ("radam", (1e-2,), {}),
    ("adabelief", (1e-2,), {}),
    ("yogi", (1e-2,), {}),
    ("lion", (1e-3,), {}),
    ("lion", (1e-3,), {"weight_decay": 0.0}),
    ("novograd", (1e-2,), {"weight_decay": 0.01}),
    ("lamb", (1e-2,), {"weight_decay": 0.01}),
    ("sm3", (1e-2,), {}),
    ("adafactor", (1e-2,), {"min_dim_size_to_factor": 4}),
    ("adafactor", (), {"min_dim_size_to_factor": 4, "momentum": 0.9, "weight_decay_rate": 0.01}),
    ("adan", (1e-2,), {"weight_decay": 0.01}),
    ("sign_sgd", (1e-2,), {}),
    ("amsgrad", (1e-2,), {}),
    ("amsgrad", (1e-2,), {"eps_root": 1e-8, "bias_correction_mu": False, "bias_correction_nu": False}),
    ("adamax", (1e-2,), {}),
    ("adamaxw", (1e-2,), {"weight_decay": 0.05}),
    ("adadelta", (1.0,), {}),
    ("adadelta", (0.5,), {"rho": 0.8, "weight_decay": 0.01}),
    ("lars", (0.1,), {}),
    (
        "lars",
        (0.1,),
        {"weight_decay": 0.01, "nesterov": True, "trust_ratio_mask": {"w": True, "b": False, "s": False}},
    ),
    ("rmsprop", (1e-2,), {}),
    ("rmsprop", (1e-2,), {"momentum": 0.9, "nesterov": True, "eps_in_sqrt": False}),
    ("rmsprop", (1e-2,), {"centered": True, "bias_correction": True, "initial_scale": 0.1}),
    ("rmsprop", (1e-2,), {"centered": True, "momentum": 0.5}),
    ("rmsprop", (1e-2,), {"bias_correction": True}),
    ("adagrad", (1e-1,), {}),
    ("adagrad", (1e-1,), {"initial_accumulator_value": 0.0, "eps": 1e-6}),
    ("signum", (1e-2,), {}),
    ("scale_by_adam", (), {}),
    ("scale_by_radam", (), {"threshold": 6.0}),
    ("scale_by_belief", (), {}),
    ("scale_by_yogi", (), {}),
    ("scale_by_lion", (), {}),
    ("scale_by_lion", (0.5, 0.9), {"mode": "smooth", "smooth_beta": 2.0}),
    ("scale_by_lion", (), {"mode": "refined"}),
    ("scale_by_novograd", (), {}),
    ("scale_by_sm3", (), {}),
    ("scale_by_adan", (), {}),
    ("scale_by_factored_rms", (), {"min_dim_size_to_factor": 4}),
    ("scale_by_rms", (), {}),
    ("scale_by_amsgrad", (), {}),
    ("scale_by_adamax", (), {}),
    ("scale_by_adadelta", (), {}),
    ("scale_by_stddev", (), {"bias_correction": True, "initial_scale": 0.1}),
    ("scale_by_rss", (), {}),
    ("trace", (0.9,), {}),
    ("trace", (0.9,), {"nesterov": True}),
    ("ema", (0.9,), {}),
    ("ema", (0.9,), {"debias": False}),
]
IDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)]


def _params(scalar=True):
    """Params of three ranks (optax's SM3 fails on a scalar leaf: no scalar for it)."""
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w": jax.random.normal(k[0], (6, 5)), "b": jax.random.normal(k[1], (5,))}
    return {**params, "s": jax.random.normal(k[2], ())} if scalar else params


def _grads(step, params):
    """A fresh gradient each step, of the quadratic's kind (depends on the params) plus noise."""
    key = jax.random.fold_in(jax.random.PRNGKey(1), step)
    leaves, treedef = jax.tree.flatten(params)
    noise = [
        jax.random.normal(k, p.shape) for k, p in zip(jax.random.split(key, len(leaves)), leaves, strict=True)
    ]
    return treedef.unflatten([p * 0.5 + n for p, n in zip(leaves, noise, strict=True)])


def _run(tx, apply, jit, scalar):
    params = _params(scalar)
    state = tx.init(params)

    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return apply(p, u), s

    step = jax.jit(step) if jit else step
    for t in range(STEPS):
        params, state = step(params, state, _grads(t, params))
    return params, state


def _paths(tree):
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize(("name", "args", "kwargs"), CASES, ids=IDS)
def test_twenty_steps_equal_optax(name, args, kwargs, jit):
    ours = getattr(compat, name)(*args, **kwargs)
    theirs = getattr(optax, name)(*args, **kwargs)
    if name.startswith("scale_by") or name in ("trace", "ema"):  # a building block: step with a rate
        ours, theirs = compat.chain(ours, compat.scale(-1e-2)), optax.chain(theirs, optax.scale(-1e-2))
    scalar = "sm3" not in name
    p_ours, s_ours = _run(ours, compat.apply_updates, jit, scalar)
    p_theirs, s_theirs = _run(theirs, optax.apply_updates, jit, scalar)
    for a, b in zip(jax.tree.leaves(p_ours), jax.tree.leaves(p_theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert _paths(s_ours) == _paths(s_theirs)
    for a, b in zip(jax.tree.leaves(s_ours), jax.tree.leaves(s_theirs), strict=True):
        assert jnp.asarray(a).dtype == jnp.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


FUNCTIONS = sorted(n for n in compat.__all__ if inspect.isfunction(getattr(compat, n)))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_signatures_are_optax_s(name):
    """Every function: optax's parameter names, kinds and defaults (a `*args` may be named otherwise); a
    keyword-only argument optax lacks, with a default, is a superset's (`apply_updates(..., key=None)`)."""
    ours, theirs = inspect.signature(getattr(compat, name)), inspect.signature(getattr(optax, name))
    extra = [
        p
        for p in ours.parameters.values()
        if p.name not in theirs.parameters and p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None
    ]

    def shape(sig):
        return [
            ("*", p.kind) if p.kind is inspect.Parameter.VAR_POSITIONAL else (p.name, p.kind)
            for p in sig.parameters.values()
            if p not in extra
        ]

    assert shape(ours) == shape(theirs)
    for p in theirs.parameters.values():
        if p.default is not inspect.Parameter.empty and not callable(p.default):
            if isinstance(p.default, optax.GradientTransformation):  # lbfgs' default line search
                assert isinstance(ours.parameters[p.name].default, compat.GradientTransformation), p.name
                continue
            if isinstance(p.default, enum.Enum):  # microbatch's AccumulationType: gradtx's enum, by name
                assert ours.parameters[p.name].default.name == p.default.name, p.name
                continue
            assert ours.parameters[p.name].default == p.default, p.name


def test_state_fields_read_as_optax_s():
    state = compat.adamw(1e-3).init({"w": jnp.ones(3)})
    assert state[0].mu["w"].shape == (3,) and state[0].nu["w"].shape == (3,)
    assert optax.tree.get(state, "nu")["w"].shape == (3,)


def test_a_missing_name_says_so():
    with pytest.raises(AttributeError, match="optax_compat` has no `not_an_optimizer`"):
        compat.not_an_optimizer  # noqa: B018


def test_optax_s_losses_are_there_at_both_addresses():
    import gradtx

    assert compat.l2_loss is compat.losses.l2_loss is gradtx.losses.l2_loss
    assert not hasattr(compat, "dice_loss")  # optax has it in `optax.losses` only


def test_errors_name_the_function_called():
    with pytest.raises(ValueError, match="`adam`.*`b1`"):
        compat.adam(1e-3, b1=1.5)
    with pytest.raises(ValueError, match="`scale_by_lion`: `mode`"):
        compat.scale_by_lion(mode="sideways")


def test_radam_refuses_a_threshold_that_would_give_nan():
    """A deliberate difference: optax takes `threshold` < 4, where the rectification's root is of a
    negative number for the steps between 4 and the threshold (NaN updates); gradtx refuses it."""
    with pytest.raises(ValueError, match="`radam`: `threshold` must be in"):
        compat.radam(1e-3, threshold=3.0)


def test_rprop_keeps_optax_s_state_and_returns_this_step_s_update():
    """A documented difference: optax 0.2.8's `scale_by_rprop` returns the previous step's update (zero at
    the first step); gradtx returns the update it stores. The states are optax's, step for step."""
    ours, theirs = compat.scale_by_rprop(0.1), optax.scale_by_rprop(0.1)
    params = jnp.zeros(4)
    s_ours, s_theirs = ours.init(params), theirs.init(params)
    for t in range(8):
        g = jax.random.normal(jax.random.PRNGKey(t), (4,))
        u_ours, s_ours = ours.update(g, s_ours)
        _, s_theirs = theirs.update(g, s_theirs)
        assert type(s_ours).__name__ == type(s_theirs).__name__ == "ScaleByRpropState"
        chex.assert_trees_all_close(tuple(s_ours), tuple(s_theirs), rtol=1e-6)
        np.testing.assert_allclose(u_ours, s_theirs.prev_updates, rtol=1e-6)


WRAPPED = {
    "inject_hyperparams": lambda lib: lib.inject_hyperparams(lib.adam)(learning_rate=1e-2, b1=0.8),
    "apply_if_finite": lambda lib: lib.apply_if_finite(lib.adamw(1e-2), max_consecutive_errors=2),
    "masked": lambda lib: lib.chain(
        lib.masked(lib.add_decayed_weights(0.1), {"w": True, "b": False, "s": False}), lib.sgd(1e-2)
    ),
    "add_decayed_weights": lambda lib: lib.chain(
        lib.add_decayed_weights(0.1, lambda p: {k: k != "s" for k in p}), lib.sgd(1e-2, 0.9)
    ),
}


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_wrappers_with_optax_s_signatures_equal_optax(name, jit):
    p_ours, s_ours = _run(WRAPPED[name](compat), compat.apply_updates, jit, True)
    p_theirs, s_theirs = _run(WRAPPED[name](optax), optax.apply_updates, jit, True)
    for a, b in zip(jax.tree.leaves(p_ours), jax.tree.leaves(p_theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert _paths(s_ours) == _paths(s_theirs)

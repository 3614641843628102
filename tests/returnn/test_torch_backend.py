"""RETURNN's PyTorch-backend updater (`gradtx.returnn._torch_backend`) against a float64 NumPy reference of
RETURNN's `Updater.step` and the torch engine's accumulation, and its refusals (parameter groups:
test_torch_groups.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx.returnn import _torch_backend, _torch_optim
from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._torch_backend import torch_update

# --------------------------------------------------------------------------- trees and the reference

SHAPES = {
    "Dense_0/kernel": (3, 2),
    "Dense_0/bias": (2,),
    "LayerNorm_0/scale": (2,),
    "LayerNorm_0/bias": (2,),
    "Embed_0/embedding": (4, 2),
}


def nest(flat):
    out: dict = {}
    for name, value in flat.items():
        module, param = name.split("/")
        out.setdefault(module, {})[param] = value
    return out


def flatten(tree):
    return {f"{m}/{p}": np.asarray(v, np.float64) for m, sub in tree.items() for p, v in sub.items()}


def draws(n, seed=0, scale=0.1):
    rng = np.random.default_rng(seed)
    return [{k: rng.normal(0, scale, s) for k, s in SHAPES.items()} for _ in range(n)]


PARAMS = draws(1, seed=99, scale=1.0)[0]


def ref_adamw(p, g, s, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    """torch.optim.AdamW's step (float64)."""
    t = s["t"] + 1
    p = p * (1 - lr * wd)
    m = b1 * s["m"] + (1 - b1) * g
    v = b2 * s["v"] + (1 - b2) * g * g
    p = p - lr / (1 - b1**t) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    return p, {"t": t, "m": m, "v": v}


def ref_run(grads, *, lr, opts, clip=0.0, clip_norm=0.0, allowed=None, accum=1):
    """RETURNN-torch (engine accumulation + `Updater.step` + AdamW per param group), float64.

    `opts`: param name -> AdamW options (`wd`, `b1`, ..., and `mult`, the learning-rate multiplier).
    Returns the params after every step (None where RETURNN would raise).
    """
    p = dict(PARAMS)
    state = {k: {"t": 0, "m": 0.0, "v": 0.0} for k in p}
    acc = {k: 0.0 for k in p}
    count = n = 0
    out = []
    for g in grads:
        acc = {k: acc[k] + g[k] for k in p}
        n += 1
        if n < accum:
            out.append(dict(p))
            continue
        g, acc, n = acc, {k: 0.0 for k in p}, 0
        if clip:
            g = {k: np.clip(v, -clip, clip) for k, v in g.items()}
        norm = None
        if clip_norm:
            norm = np.sqrt(sum(np.linalg.norm(v.ravel()) ** 2 for v in g.values()))
            coef = min(clip_norm / (norm + 1e-6), 1.0)
            g = {k: v * coef for k, v in g.items()}
        if allowed is not None:
            norm = np.sqrt(sum(np.linalg.norm(v.ravel()) ** 2 for v in g.values())) if norm is None else norm
            if not np.isfinite(norm):
                count += 1
                out.append(None if count > allowed else dict(p))
                continue
            count = 0
        for k in p:
            o = dict(opts[k])
            mult = o.pop("mult", 1.0)
            p[k], state[k] = ref_adamw(p[k], g[k], state[k], lr * mult, **o)
        out.append(dict(p))
    return out


def run(config, grads, *, lr=0.01, epochs=None, jit=True, **kwargs):
    """The params after each step of `torch_update(config).factory(lr)` (float32), and the last state."""
    tx = torch_update(config, **kwargs).factory(lr)
    params = nest({k: jnp.asarray(v, jnp.float32) for k, v in PARAMS.items()})
    state = tx.init(params)
    update = jax.jit(tx.update) if jit else tx.update
    out = []
    for i, g in enumerate(grads):
        extra = {} if epochs is None else {"epoch": epochs[i]}
        u, state = update(
            nest({k: jnp.asarray(v, jnp.float32) for k, v in g.items()}), state, params, **extra
        )
        params = gradtx.apply_updates(params, u)
        out.append(flatten(params))
    return out, state


def assert_close(got, want, rtol=2e-5, atol=2e-6):
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)


NO_WD = {"wd": 0.0}
WD = {"wd": 0.1, "b1": 0.8, "b2": 0.99, "eps": 1e-3}


# --------------------------------------------------------------------------- against the reference


def test_clip_value_clip_norm_adamw_default_blacklist_match_reference():
    config = {
        "optimizer": {"class": "adamw", "weight_decay": 0.1, "betas": (0.8, 0.99), "epsilon": 1e-3},
        "gradient_clip": 0.15,
        "gradient_clip_global_norm": 0.3,
    }
    grads = draws(6)
    got, _ = run(config, grads)
    # biases, LayerNorm_0 and Embed_0 get weight_decay 0 (RETURNN's default blacklist)
    opts = {k: dict(WD, wd=0.1 if k == "Dense_0/kernel" else 0.0) for k in SHAPES}
    want = ref_run(grads, lr=0.01, opts=opts, clip=0.15, clip_norm=0.3)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
    # the clipping was active: without it the numbers differ
    plain = ref_run(grads, lr=0.01, opts=opts)
    assert np.abs(plain[-1]["Dense_0/kernel"] - want[-1]["Dense_0/kernel"]).max() > 1e-4


def test_accumulation_sums_and_steps_every_nth():
    config = {"optimizer": {"class": "adamw", "weight_decay": 0.0}, "accum_grad_multiple_step": 3}
    grads = draws(7, seed=2)
    got, state = run(config, grads)
    want = ref_run(grads, lr=0.01, opts={k: NO_WD for k in SHAPES}, accum=3)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
    np.testing.assert_array_equal(got[0]["Dense_0/kernel"], np.float32(PARAMS["Dense_0/kernel"]))
    assert int(state.inner.mini_step) == 1


def test_invalid_gradient_skips_then_fails_visibly():
    config = {
        "optimizer": {"class": "adamw", "weight_decay": 0.0},
        "num_allowed_consec_invalid_gradient_steps": 1,
    }
    grads = draws(6, seed=3)
    for i in (1, 3, 4):
        grads[i] = dict(grads[i], **{"LayerNorm_0/scale": np.array([np.nan, 0.0])})
    got, state = run(config, grads)
    want = ref_run(grads, lr=0.01, opts={k: NO_WD for k in SHAPES}, allowed=1)
    assert want[4] is None  # RETURNN raises at the second invalid step in a row
    for i in (0, 1, 2, 3):
        assert_close(got[i], want[i])
    assert_close(got[1], got[0], rtol=0, atol=0)  # skipped: unchanged
    assert all(np.isnan(v).all() for v in got[4].values())
    # the epoch's start resets the count (RETURNN's set_current_train_step): no failure then
    got, state = run(config, grads[:5], epochs=[1, 1, 1, 1, 2])
    assert_close(got[4], want[2])
    assert int(state.invalid_count) == 1


def test_accumulation_drops_the_partial_sum_at_a_new_epoch():
    config = {"optimizer": {"class": "adamw", "weight_decay": 0.0}, "accum_grad_multiple_step": 2}
    grads = draws(3, seed=4)
    got, _ = run(config, grads, epochs=[1, 2, 2])
    want = ref_run(grads[1:], lr=0.01, opts={k: NO_WD for k in SHAPES}, accum=2)
    assert_close(got[-1], want[-1])


def test_grad_scaler_skips_non_finite_gradients():
    grads = draws(2, seed=5)
    grads[1] = dict(grads[1], **{"Dense_0/bias": np.array([np.inf, 0.0])})
    got, state = run({"optimizer": {"class": "adamw"}, "torch_amp": "bfloat16"}, grads)
    assert_close(got[1], got[0], rtol=0, atol=0)
    assert int(state.invalid_count) == 0  # only the invalid-gradient check counts
    got, _ = run(
        {"optimizer": {"class": "adamw"}, "torch_amp": {"dtype": "bfloat16", "grad_scaler": None}}, grads
    )
    assert np.isnan(got[1]["Dense_0/bias"]).any()


def test_traced_learning_rate_gives_the_float_numbers():
    update = torch_update({"optimizer": {"class": "adamw"}, "gradient_clip_global_norm": 0.3})
    params = nest({k: jnp.asarray(v, jnp.float32) for k, v in PARAMS.items()})
    grads = nest({k: jnp.asarray(v, jnp.float32) for k, v in draws(1)[0].items()})
    state = update.factory(0.01).init(params)
    want, _ = jax.jit(lambda: update.factory(0.01).update(grads, state, params))()
    got, _ = jax.jit(lambda lr: update.factory(lr).update(grads, state, params))(jnp.float32(0.01))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


# --------------------------------------------------------------------------- noise


def test_gradient_noise_is_torch_truncated_normal():
    tx = torch_update({"optimizer": {"class": "sgd"}, "gradient_noise": 0.1}).factory(1.0)
    zeros = {"a": jnp.zeros(20000)}
    noise = -np.asarray(tx.update(zeros, tx.init(zeros), zeros)[0]["a"])
    # N(0, 0.1) cut at +-2 std: std 0.1 * 0.8796, nothing beyond 0.2
    assert abs(noise.std() - 0.08796) < 0.003 and abs(noise.mean()) < 0.003
    assert np.abs(noise).max() <= 0.2 and np.abs(noise).max() > 0.19
    other = torch_update({"optimizer": {"class": "sgd"}, "gradient_noise": 0.1, "random_seed": 7}).factory(
        1.0
    )
    assert not np.allclose(noise, -np.asarray(other.update(zeros, other.init(zeros), zeros)[0]["a"]))
    exact = torch_update({"optimizer": {"class": "sgd"}, "gradient_noise": 0.0}).factory(0.5)
    g = {"a": jnp.array([0.3, -1.7])}
    np.testing.assert_array_equal(exact.update(g, exact.init(g), g)[0]["a"], np.float32([-0.15, 0.85]))


# --------------------------------------------------------------------------- every applied key matters

BASE = {"optimizer": {"class": "adamw", "weight_decay": 0.1}}
CHANGES = [
    {"gradient_noise": 0.05},
    {"gradient_noise": 0.05, "random_seed": 1},
    {"gradient_clip": 0.05},
    {"gradient_clip_global_norm": 0.1},
    {"accum_grad_multiple_step": 2},
    {"optimizer": {"class": "adamw", "weight_decay": 0.1, "epsilon": 0.1}},
    {
        "optimizer": {
            "class": "adamw",
            "weight_decay": 0.1,
            "weight_decay_modules_blacklist": ["torch.nn.LayerNorm"],
        }
    },
    {"optimizer": {"class": "sgd"}},
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: ",".join(c))
def test_each_applied_key_changes_the_numbers(change):
    grads = draws(2, seed=6)
    base_config = dict(BASE, gradient_noise=0.05) if "random_seed" in change else BASE
    base, _ = run(base_config, grads, jit=False)
    got, _ = run({**BASE, **change}, grads, jit=False)
    assert max(np.abs(got[-1][k] - base[-1][k]).max() for k in SHAPES) > 1e-6


def test_invalid_gradient_and_grad_scaler_keys_change_the_numbers():
    grads = [{k: np.full(s, np.nan) for k, s in SHAPES.items()}]
    plain, _ = run(BASE, grads, jit=False)
    assert np.isnan(plain[0]["Dense_0/kernel"]).all()
    for key, value in (("num_allowed_consec_invalid_gradient_steps", 1), ("grad_scaler", {})):
        got, _ = run({**BASE, key: value}, grads, jit=False)
        assert_close(got[0], {k: np.float32(v) for k, v in PARAMS.items()}, rtol=0, atol=0)  # skipped


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({}, "needs to be set explicitely for the Torch backend"),
        ({"optimizer": "adam"}, r"must of type dict.*Write \{'class': 'adam'\}"),
        ({"optimizer": {"betas": (0.9, 0.99)}}, "'class' field of 'optimizer' dict was not set"),
        ({"optimizer": {"class": None}}, "give the torch.optim class by its name"),
        ({"optimizer": {"class": "adam", "lr": 0.1}}, "'learning_rate' should be set outside"),
        ({"optimizer": {"class": "adam", "learning_rate_multiplier": 2.0}}, "from a parameter group only"),
        ({"optimizer": {"class": "adamw", "param_groups_custom": "f"}}, "param_groups=.*mask, options"),
        (
            {"optimizer": {"class": "adamw", "weight_decay": 0.1, "weight_decay_custom_include_check": "f"}},
            "weight_decay_mask=",
        ),
        (
            {"optimizer": {"class": "adamw", "weight_decay_modules_blacklist": []}},
            "only when the optimizer takes a",
        ),
        (
            {
                "optimizer": {
                    "class": "adamw",
                    "weight_decay": 0.1,
                    "weight_decay_modules_blacklist": ["nn.X"],
                }
            },
            "starts with 'torch.' or 'rf.'",
        ),
        ({"optimizer": {"class": "adamw"}, "decouple_constraints": False}, "decoupled in PyTorch"),
        ({"optimizer": {"class": "adamw", "beta": (0.9, 0.9)}}, r"`optimizer`: .*did you mean 'betas'"),
        ({"optimizer": {"class": "sgd", "epsilon": 1e-3}}, r"config `optimizer`: .*unknown option 'epsilon'"),
        ({"optimizer": {"class": "adamax2"}}, "(?i)did you mean 'adamax'"),
        ({"optimizer": {"class": "adamw"}, "gradient_clip": -1.0}, "`gradient_clip`: must be >= 0"),
        (
            {"optimizer": {"class": "adamw"}, "accum_grad_multiple_step": "f"},
            "`accum_grad_multiple_step`.*an int",
        ),
        ({"optimizer": {"class": "adamw"}, "num_allowed_consec_invalid_gradient_steps": -1}, "must be >= 0"),
        ({"optimizer": {"class": "adamw"}, "grad_scaler": {"init_scal": 2.0}}, "did you mean 'init_scale'"),
        ({"optimizer": {"class": "adamw"}, "torch_amp": {"dtyp": "float16"}}, "did you mean 'dtype'"),
        ({"optimizer": {"class": "adamw"}, "grad_clip": 1.0}, "called gradient_clip_global_norm"),
        ({"optimizer": {"class": "adamw"}, "dynamic_learning_rate": "f"}, "read, not executed"),
        *[
            ({"optimizer": {"class": "adamw"}, key: 1.0}, f"`{key}`.*NotImplementedError")
            for key in (
                "gradient_clip_norm",
                "global_norm_tag",
                "gradient_nan_inf_filter",
                "maximize_grad_norm",
            )
        ],
    ],
)
def test_refusals(config, match):
    with pytest.raises(ReturnnConfigError, match=match):
        torch_update(config)


def test_refused_keys_set_to_zero_are_accepted():
    update = torch_update({"optimizer": {"class": "adamw"}, "gradient_nan_inf_filter": False, "grad_clip": 0})
    assert "optimizer" in update.keys and "gradient_clip_global_norm" in update.keys


def test_weight_decay_refused_for_a_class_without_it(monkeypatch):
    no_wd = _torch_optim.TorchOptimizer("X", {"eps": 1e-8}, lambda lr, opts, init_lr: gradtx.sgd(lr))
    monkeypatch.setattr(_torch_backend, "_torch_class", lambda name: no_wd)
    with pytest.raises(ReturnnConfigError, match="weight_decay not accepted by the chosen optimizer"):
        torch_update({"optimizer": {"class": "x", "weight_decay": 0.1}})

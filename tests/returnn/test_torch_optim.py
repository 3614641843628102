"""torch.optim's optimizers (`gradtx.returnn._torch_optim`) against float64 references of torch's code."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradtx._core.formulas import torch_debias
from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._torch_optim import OPTIMIZERS, torch_class
from tests.returnn import torch_reference

STEPS = 10
LION = "returnn.torch.optim.lion.lion"

_rng = np.random.default_rng(0)
PARAMS = {"w": _rng.normal(size=(3, 4)).astype(np.float32), "b": _rng.normal(size=(4,)).astype(np.float32)}
GRADS = [
    {k: (_rng.normal(size=v.shape) * 0.5 + 0.1).astype(np.float32) for k, v in PARAMS.items()}
    for _ in range(STEPS)
]

CASES = [  # (name, lr, options): each optimizer at its defaults and with its main options
    ("sgd", 0.1, {}),
    ("sgd", 0.1, {"momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1}),
    ("sgd", 0.1, {"momentum": 0.9, "nesterov": True, "maximize": True}),
    ("adam", 0.01, {}),
    ("adam", 0.01, {"amsgrad": True, "weight_decay": 0.1, "betas": (0.8, 0.99)}),
    ("adam", 0.01, {"decoupled_weight_decay": True, "weight_decay": 0.5, "maximize": True}),
    ("adamw", 0.01, {}),
    ("adamw", 0.01, {"amsgrad": True, "weight_decay": 0.3, "eps": 1e-3}),
    ("radam", 0.01, {}),
    ("radam", 0.01, {"decoupled_weight_decay": True, "weight_decay": 0.3, "betas": (0.9, 0.9), "eps": 0.1}),
    ("radam", 0.01, {"weight_decay": 0.2, "maximize": True, "betas": (0.5, 0.95)}),
    ("nadam", 0.01, {}),
    ("nadam", 0.01, {"decoupled_weight_decay": True, "weight_decay": 0.3, "momentum_decay": 0.5}),
    ("nadam", 0.01, {"weight_decay": 0.2, "maximize": True}),
    ("adamax", 0.01, {}),
    ("adamax", 0.01, {"weight_decay": 0.2, "eps": 0.1, "maximize": True}),
    ("adagrad", 0.1, {}),
    ("adagrad", 0.1, {"lr_decay": 0.5, "initial_accumulator_value": 0.3, "weight_decay": 0.1, "eps": 1e-3}),
    ("rmsprop", 0.01, {}),
    ("rmsprop", 0.01, {"centered": True, "momentum": 0.9, "alpha": 0.9}),
    ("rmsprop", 0.01, {"weight_decay": 0.2, "maximize": True, "momentum": 0.5}),
    ("adadelta", 1.0, {}),
    ("adadelta", 0.5, {"rho": 0.5, "eps": 1e-2, "weight_decay": 0.1, "maximize": True}),
    (LION, 0.01, {}),
    (LION, 0.01, {"weight_decay": 0.5, "betas": (0.5, 0.9)}),
    (LION, 0.01, {"weight_decay": 0.5, "decoupled_weight_decay": True}),
]


def _trajectory(tx, lr_arg=None):
    """The updates of the STEPS steps, as one jitted scan (`lr_arg`: traced into a factory)."""

    def go(lr):
        t = tx(lr) if lr_arg is not None else tx
        params = {k: jnp.asarray(v) for k, v in PARAMS.items()}
        grads = jax.tree.map(lambda *xs: jnp.stack(xs), *GRADS)

        def step(carry, g):
            p, s = carry
            u, s = t.update(g, s, p)
            p = jax.tree.map(jnp.add, p, u)
            return (p, s), u

        return jax.lax.scan(step, (params, t.init(params)), grads)[1]

    return jax.jit(go)(lr_arg)


def _check(got, want, lr):
    """Each step's update of each param against the reference's change of it: rtol 1e-5 (float32's digits),
    atol 1e-6 of the step's largest change (an element that cancels to ~0 keeps float32's absolute error)."""
    prev = {k: np.asarray(v, np.float64) for k, v in PARAMS.items()}
    for i, w in enumerate(want):
        for k in w:
            delta = w[k] - prev[k]
            atol = 1e-6 * np.abs(delta).max()
            np.testing.assert_allclose(
                np.asarray(got[k][i]), delta, rtol=1e-5, atol=atol, err_msg=f"step {i + 1} {k}"
            )
        prev = w


@pytest.mark.parametrize(
    ("name", "lr", "options"), CASES, ids=lambda x: str(x) if not isinstance(x, dict) else ""
)
def test_trajectory_equals_torch_reference(name, lr, options):
    got = _trajectory(OPTIMIZERS[name](lr=lr, **options))
    want = torch_reference.run("lion" if name == LION else name, PARAMS, GRADS, lr=lr, **options)
    _check(got, want, lr)
    assert np.abs(np.asarray(got["w"])).min() > 0, "every step moves every param"


def test_options_change_the_numbers():
    base = _trajectory(OPTIMIZERS["adam"](lr=0.01))["w"]
    for opts in (
        {"amsgrad": True},
        {"weight_decay": 0.1},
        {"maximize": True},
        {"eps": 0.1},
        {"betas": (0.5, 0.9)},
    ):
        assert not np.allclose(_trajectory(OPTIMIZERS["adam"](lr=0.01, **opts))["w"], base, rtol=1e-4), opts


def test_traced_lr_equals_float_lr():
    for name, opts in (
        ("nadam", {"weight_decay": 0.1}),
        (LION, {"weight_decay": 0.5, "decoupled_weight_decay": True}),
    ):
        want = _trajectory(OPTIMIZERS[name](lr=0.01, **opts))
        got = _trajectory(
            lambda lr, n=name, o=opts: OPTIMIZERS[n](lr=lr, init_lr=0.01, **o), jnp.float32(0.01)
        )
        for k in PARAMS:
            atol = 1e-6 * np.abs(np.asarray(want[k])).max()
            np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]), rtol=1e-5, atol=atol)


def test_lion_decoupled_decay_uses_the_constructor_rate():
    opts = {"weight_decay": 0.2, "decoupled_weight_decay": True}
    got = _trajectory(OPTIMIZERS[LION](lr=0.02, init_lr=0.01, **opts))
    want = torch_reference.run("lion", PARAMS, GRADS, lr=0.02, init_lr=0.01, **opts)
    _check(got, want, 0.02)
    with pytest.raises(TypeError, match="pass `init_lr=`"):
        jax.jit(lambda lr: OPTIMIZERS[LION](lr=lr, **opts).init(PARAMS))(0.01)


def test_state_has_torch_names():
    state = OPTIMIZERS["adam"](lr=0.1, amsgrad=True).init(PARAMS)
    assert state[0]._fields == ("count", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    nadam = OPTIMIZERS["nadam"](lr=0.1).init(PARAMS)
    assert float(nadam[0].mu_product) == 1.0
    sgd = OPTIMIZERS["sgd"](lr=0.1, momentum=0.9).init(PARAMS)
    assert sgd[0]._fields == ("count", "momentum_buffer")
    assert OPTIMIZERS["sgd"](lr=0.1).init(PARAMS)[0].momentum_buffer is None
    assert OPTIMIZERS["adagrad"](lr=0.1, initial_accumulator_value=0.3).init(PARAMS)[0].sum["b"][
        0
    ] == np.float32(0.3)


def test_bias_correction_keeps_torchs_digits():
    got = float(torch_debias(0.999, jnp.int32(1), jnp.float32))
    assert abs(got / (1 - 0.999) - 1) < 1e-6  # a float32-rounded 0.999 gives 1.3e-5


def test_radam_rho_series_and_closed_form():
    from gradtx._algorithms.radam import _rho

    rho = jax.jit(_rho, static_argnums=(1, 2))
    for b2 in (0.999, 0.9, 0.99999):
        t = np.array([1, 2, 5, 6, 7, 50, 900, 1100, 5000, 99_000, 101_000, 10**6], np.int32)
        want = 2 / (1 - b2) - 1 - 2 * t * b2**t / (1 - b2**t)
        np.testing.assert_allclose(np.asarray(rho(jnp.asarray(t), b2, jnp.float32)), want, rtol=5e-7)


def test_unknown_option_suggests_a_close_name():
    with pytest.raises(TypeError, match=r"torch.optim.Adam`: unknown option 'beta'.*did you mean 'betas'"):
        OPTIMIZERS["adam"](lr=0.1, beta=(0.9, 0.99))
    with pytest.raises(TypeError, match="unknown option 'decoupled_weight_decay'"):
        OPTIMIZERS["adamw"](lr=0.1, decoupled_weight_decay=True)
    with pytest.raises(TypeError, match="unknown option 'maximize'"):
        OPTIMIZERS[LION](lr=0.1, maximize=True)
    with pytest.raises(TypeError, match="`lr` is required"):
        OPTIMIZERS["sgd"](momentum=0.9)


def test_no_effect_options_are_accepted():
    a = _trajectory(
        OPTIMIZERS["adam"](lr=0.01, foreach=True, fused=False, capturable=True, differentiable=False)
    )
    b = _trajectory(OPTIMIZERS["adam"](lr=0.01))
    np.testing.assert_array_equal(np.asarray(a["w"]), np.asarray(b["w"]))
    assert "eps" in OPTIMIZERS["adam"].keys and "eps" not in OPTIMIZERS[LION].keys


@pytest.mark.parametrize(
    ("name", "options", "match"),
    [
        (
            "adam",
            {"betas": (1.0, 0.9)},
            r"`betas\[0\]` must be in \[0, 1\).*Invalid beta parameter at index 0",
        ),
        ("nadam", {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1"),
        ("adamw", {"eps": -1.0}, "Invalid epsilon value"),
        ("radam", {"weight_decay": -0.1}, "Invalid weight_decay value"),
        ("sgd", {"momentum": -0.5}, "Invalid momentum value"),
        (
            "sgd",
            {"nesterov": True, "momentum": 0.9, "dampening": 0.1},
            "Nesterov momentum requires a momentum",
        ),
        ("nadam", {"momentum_decay": -1.0}, "Invalid momentum_decay value"),
        ("adagrad", {"lr_decay": -1.0}, "Invalid lr_decay value"),
        ("adagrad", {"initial_accumulator_value": -1.0}, "Invalid initial_accumulator_value value"),
        ("rmsprop", {"alpha": -0.5}, "Invalid alpha value"),
        ("adadelta", {"rho": 1.5}, "Invalid rho value"),
        (LION, {"betas": (0.9, 1.5)}, r"`betas\[1\]` must be in \[0, 1\]"),
        ("adam", {}, "Invalid learning rate"),
    ],
)
def test_torch_value_checks(name, options, match):
    with pytest.raises(ValueError, match=match):
        OPTIMIZERS[name](lr=-1.0 if not options else 0.1, **options)


def test_type_checks():
    with pytest.raises(TypeError, match="`betas` must be a pair"):
        OPTIMIZERS["adam"](lr=0.1, betas=0.9)
    with pytest.raises(TypeError, match="`amsgrad` must be True or False"):
        OPTIMIZERS["adam"](lr=0.1, amsgrad="yes")
    with pytest.raises(TypeError, match="`eps` must be a number"):
        OPTIMIZERS["rmsprop"](lr=0.1, eps="1e-8")


def test_torch_class_resolves_names():
    assert torch_class("AdamW") is OPTIMIZERS["adamw"]
    assert torch_class("rmsprop") is OPTIMIZERS["rmsprop"]
    assert torch_class("torch.optim.NAdam") is OPTIMIZERS["nadam"]
    assert torch_class("returnn.torch.optim.lion.Lion") is OPTIMIZERS[LION]


def test_torch_class_refusals():
    with pytest.raises(ReturnnConfigError, match=r"unknown torch optimizer 'adamm'.*Did you mean 'adam'"):
        torch_class("adamm")
    with pytest.raises(
        ReturnnConfigError, match=r"torch.optim.Rprop .* closest gradtx optimizer is gradtx.rprop"
    ):
        torch_class("Rprop")
    with pytest.raises(ReturnnConfigError, match="torch.optim.ASGD .*gradtx has none"):
        torch_class("ASGD")
    with pytest.raises(ReturnnConfigError, match="reads the class by its name"):
        torch_class(object)  # type: ignore[arg-type]

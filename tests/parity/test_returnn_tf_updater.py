"""`tf_update` against RETURNN's own TF updater (`returnn.tf.updater.Updater`, graph mode) on fed gradients.

Importing `returnn.tf` switches TF to graph mode for the whole process (`returnn/tf/compat.py`
calls `disable_eager_execution`, `disable_control_flow_v2`), which would break the eager TF
tests sharing this pytest worker; so RETURNN runs all cases once, in a subprocess (this file run
as a script), exactly as it runs in training, and the tests compare with its results.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

PARAMS = [
    np.array([1.0, -2.0, 3.0], np.float32),
    np.array([[0.5, -1.5, 2.0], [-0.25, 1.0, -3.0]], np.float32),
]
RATE = 0.01
TOL = {"rtol": 1e-6, "atol": 1e-7}
ROOT = Path(__file__).resolve().parents[2]


def _grads(steps: int, seed: int = 0) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.normal(size=p.shape).astype(np.float32) for p in PARAMS] for _ in range(steps)]


def returnn_run(
    config: dict[str, Any], grads: list[list[np.ndarray]], rates: list[float], l2: float | None = None
) -> list[list[np.ndarray]]:
    """The variables after each step of RETURNN's Updater fed `grads` (loss `sum(var * fed)`) at `rates`."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.updater import Updater

    v1 = tf.compat.v1

    graph = tf.Graph()
    with graph.as_default():
        variables = [v1.get_variable(f"w{i}", initializer=p) for i, p in enumerate(PARAMS)]
        if l2 is not None:
            variables[0].RETURNN_constraint_L2 = l2
        step = v1.get_variable("global_step", initializer=np.int64(0), trainable=False)
        feeds = [v1.placeholder(tf.float32, p.shape) for p in PARAMS]
        loss = tf.add_n([tf.reduce_sum(v * f) for v, f in zip(variables, feeds, strict=True)])
        up = Updater(
            Config(dict(config)), objective=loss, global_train_step_var=step, initial_learning_rate=RATE
        )
        up.set_trainable_vars(variables)
        op = up.get_optim_op()
        out = []
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            for g, rate in zip(grads, rates, strict=True):
                up.set_learning_rate(rate, sess)
                sess.run(op, feed_dict=dict(zip(feeds, g, strict=True)))
                out.append(sess.run(variables))
    return out


def gradtx_run(
    config: dict[str, Any], grads: list[list[np.ndarray]], rates: list[float], l2: Any = None
) -> list[list[np.ndarray]]:
    """The params after each step of `tf_update(config).factory` under `inject_hyperparams`, at `rates[i]`."""
    import jax  # here, not at the top: the RETURNN subprocess imports this file and needs neither

    import gradtx
    from gradtx.returnn._tf_backend import tf_update

    tx = gradtx.inject_hyperparams(tf_update(config, l2=l2).factory)(learning_rate=rates[0])
    params = [jax.numpy.asarray(p) for p in PARAMS]
    state = tx.init(params)
    step = jax.jit(tx.update)
    out = []
    for g, rate in zip(grads, rates, strict=True):
        state.hyperparams["learning_rate"] = rate
        u, state = step([jax.numpy.asarray(x) for x in g], state, params)
        params = gradtx.apply_updates(params, u)
        out.append([np.asarray(p) for p in params])
    return out


class Case(NamedTuple):
    """One run: the config, the fed gradients, the rate per step, the L2 of the first variable for RETURNN
    (`RETURNN_constraint_L2`) and the `l2` tree for gradtx."""

    config: dict[str, Any]
    grads: list[list[np.ndarray]]
    rates: list[float]
    l2: float | None = None
    gradtx_l2: Any = None


def _case(config: dict[str, Any], steps: int = 6, *, grads=None, rates=None, **l2: Any) -> Case:
    grads = grads if grads is not None else _grads(steps)
    return Case(config, grads, rates if rates is not None else [RATE] * len(grads), **l2)


def _bad_grads() -> list[list[np.ndarray]]:
    grads = _grads(5, seed=3)
    grads[1][0] = np.array([np.nan, 1.0, -np.inf], np.float32)  # filtered, and the raw norm is NaN: zeroed
    grads[3] = [g * 10 for g in grads[3]]  # above the threshold: zeroed
    return grads


def _nan_grads() -> list[list[np.ndarray]]:
    grads = _grads(4, seed=4)
    grads[1][1][0, 1] = np.nan
    return grads


CASES = {
    "sgd-default": _case({}),
    "adam-flag": _case({"adam": True}),
    "adadelta-flag-eps": _case({"adadelta": True}),
    "adagrad-flag": _case({"adagrad": True}),
    "rmsprop-float-momentum": _case({"rmsprop": 0.8, "momentum": 0.5, "optimizer_epsilon": 1e-6}),
    "rmsprop-bool": _case({"rmsprop": True}),
    "momentum-flag": _case({"momentum": 0.9}),
    "adam-dict": _case(
        {"optimizer": {"class": "Adam", "epsilon": 1e-3, "beta1": 0.5, "learning_rate_multiplier": 2.0}}
    ),
    "momentum-nesterov-global": _case(
        {"optimizer": {"class": "MomentumOptimizer", "use_nesterov": True}, "momentum": 0.7}
    ),
    "rmsprop-dict": _case({"optimizer": {"class": "rmsprop", "momentum": 0.9, "centered": True}}),
    "adadelta-dict": _case({"optimizer": {"class": "adadelta", "rho": 0.5}}),
    "normalized-sgd": _case({"optimizer": {"class": "NormalizedSGD"}}),
    "neural-optimizer1": _case({"optimizer": {"class": "NeuralOptimizer1", "beta1": 0.5}}),
    "grad-variance-scaled": _case({"optimizer": {"class": "GradVarianceScaledOptimizer"}}),
    "ftrl-l1": _case({"optimizer": {"class": "Ftrl", "l1_regularization_strength": 0.01}}),
    "custom-adam-eps": _case({"optimizer": {"class": "CustomAdam"}, "optimizer_epsilon": 1e-4}),
    "clips": _case({"optimizer": {"class": "adagrad"}, "gradient_clip": 0.8, "gradient_clip_norm": 1.5}),
    "avg-norm": _case({"gradient_clip_avg_norm": 0.5}),
    "global-norm-of-raw-grads": _case({"gradient_clip": 0.3, "gradient_clip_global_norm": 1.0}),
    "dynamic-lr": _case(
        {
            "optimizer": {"class": "momentum", "momentum": 0.9},
            "dynamic_learning_rate": {"interval": 4, "decay": 0.5},
        }
    ),
    "accum-adam-dynamic-lr": _case(
        {"adam": True, "accum_grad_multiple_step": 3, "dynamic_learning_rate": {"interval": 2, "decay": 0.5}},
        9,
    ),
    "rate-per-epoch": _case({"optimizer": {"class": "adam"}}, rates=[0.01, 0.01, 0.01, 0.05, 0.05, 0.002]),
    "decouple": _case(
        {"optimizer": {"class": "adam"}, "decouple_constraints": True}, l2=0.01, gradtx_l2=[0.01, None]
    ),
    "decouple-accum": _case(
        {"momentum": 0.9, "decouple_constraints": True, "accum_grad_multiple_step": 2},
        l2=0.05,
        gradtx_l2=[0.05, 0.0],
    ),
    "nan-filter-zero-on-high-norm": _case(
        {"adam": True, "gradient_nan_inf_filter": True, "grad_norm_to_clip_to_zero": 6.0}, grads=_bad_grads()
    ),
    "nan-filter": _case(
        {"optimizer": {"class": "adam"}, "gradient_nan_inf_filter": True}, grads=_nan_grads()
    ),
    "noise-off": _case({"adam": True, "gradient_noise": 0.0}),
}


@pytest.fixture(scope="module")
def returnn_results(tmp_path_factory) -> dict[str, Any]:
    """Every case's trajectory under RETURNN's Updater (or its error), from one subprocess."""
    if importlib.util.find_spec("returnn") is None:
        pytest.skip("RETURNN is not installed")
    out = tmp_path_factory.mktemp("returnn") / "results.pkl"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.parity.test_returnn_tf_updater", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return pickle.loads(out.read_bytes())


@pytest.mark.parametrize("case_id", list(CASES))
def test_config_equals_returnn(case_id, returnn_results):
    want = returnn_results[case_id]
    assert not isinstance(want, str), f"RETURNN failed: {want}"
    case = CASES[case_id]
    got = gradtx_run(case.config, case.grads, case.rates, l2=case.gradtx_l2)
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        for a, b in zip(w, g, strict=True):
            np.testing.assert_allclose(b, a, **TOL, err_msg=f"{case_id}: step {i}")


def test_gradient_noise_statistics():
    """The noise (RETURNN's `truncated_normal(stddev=gradient_noise)`): its shape, mean, bound and std."""
    from gradtx.returnn._tf_backend import tf_update

    tx = tf_update({"gradient_noise": 0.3, "random_seed": 7}).factory(1.0)
    zeros = [np.zeros((400, 50), np.float32)]
    u, _ = tx.update(zeros, tx.init(zeros), zeros)
    noise = -np.asarray(u[0])
    assert noise.shape == (400, 50)
    assert abs(noise.mean()) < 0.01 and np.abs(noise).max() <= 0.6 + 1e-6
    np.testing.assert_allclose(
        noise.std(), 0.8796 * 0.3, rtol=0.02
    )  # a normal cut at 2 std: std 0.8796 sigma


def _main(path: str) -> None:
    results: dict[str, Any] = {}
    for case_id, case in CASES.items():
        try:
            results[case_id] = returnn_run(case.config, case.grads, case.rates, l2=case.l2)
        except Exception as err:  # noqa: BLE001 -- reported by the test of that case
            results[case_id] = f"{type(err).__name__}: {err}"
    Path(path).write_bytes(pickle.dumps(results))


if __name__ == "__main__":
    _main(sys.argv[1])

"""The benchmark suite keeps working: smoke-sized run, floors that compute the same numbers, committed
results."""

import json
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import contenders, report, run, sharding, workloads
from gradtx import packing
from tests import fast_xla

ROOT = pathlib.Path(__file__).parent.parent


def _steps(contender, params, grads, n=3):
    grads = contender.grads if contender.grads is not None else grads
    params = contender.params if contender.params is not None else params
    state = contender.init(params)
    step = jax.jit(contender.step)
    for _ in range(n):
        params, state = step(params, state, grads)
    return packing.unpack(params)


def _louder(grads):
    """Gradients 10^4 times larger (the global-norm clip then acts; epsilon's placement stops mattering)."""
    return jax.tree.map(lambda x: x * 1e4 if jnp.issubdtype(x.dtype, jnp.floating) else x, grads)


@pytest.mark.parametrize("name", sorted(workloads.ALL))
def test_every_contender_computes_the_same_parameters(name, monkeypatch):
    # the hand-written floors and the optax rows are only a fair comparison if they do the same math;
    # a larger rate and decay make every term visible in three steps, and a negligible epsilon hides
    # the one real difference (TF adds epsilon-hat after the bias correction, optax before)
    for module in (workloads, contenders):  # the workloads' optimizers and the hand-written steps
        monkeypatch.setattr(module, "LR", 0.1)
        monkeypatch.setattr(module, "WD", 0.5)
        monkeypatch.setattr(module, "EPS", 1e-30)
    w = workloads.ALL[name](workloads.SMOKE)
    results = {}
    for c in w.contenders:
        if c.same_math:
            c.grads = None if c.grads is None else _louder(c.grads)
            results[c.name] = _steps(c, w.params, _louder(w.grads))
    assert len(results) >= 3
    reference = results[w.contenders[0].name]
    for who, params in results.items():
        jax.tree.map(
            lambda a, b, who=who: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=who),
            params,
            reference,
        )


def test_smoke_run_writes_results_and_report(tmp_path, monkeypatch):
    # its subprocesses (the first calls) compile with the suite's fast options: the smoke run checks that
    # every suite runs and reports, not its timings
    flags = fast_xla.xla_flags(os.environ.get("XLA_FLAGS"))
    if flags is not None:
        monkeypatch.setenv("XLA_FLAGS", flags)
    # the sharding suite in this process (it has 8 devices, and the suite's compile cache); the 6 lines that
    # run it in a process of its own are all `make bench` adds
    monkeypatch.setattr(run, "sharding", sharding.measure)
    out = run.main(
        [
            "--sizes",
            "smoke",
            "--rounds",
            "2",
            "--min-round-ms",
            "1",
            "--json",
            str(tmp_path / "cpu.json"),
            "--no-report",
        ]
    )
    assert [w["name"] for w in out["workloads"]] == list(workloads.ALL)
    for w in out["workloads"]:
        for row in w["rows"].values():
            assert row["min_ms"] > 0 and row["median_ms"] >= row["min_ms"] and row["compile_s"] > 0
            assert row["peak_bytes"] >= row["live_bytes"]  # the step holds at least its arguments
    labels = [t["label"] for t in out["targets"]]
    # the workloads' 17, the catalogue's 3 pairs and optax_compat's 2 (step and compile each), the
    # program's 3 (HLO of the optimizer and the step, first call), the tracing case's 1, depth's 1 (muon),
    # low-bit state's 3 (8 bits' bytes, step and loss: the smoke run measures float32 and 8 bits)
    assert (
        any("peak memory" in label for label in labels) and len(labels) == 17 + 3 * 2 + 2 * 2 + 3 + 1 + 1 + 3
    )
    assert len(out["catalogue"]["rows"]) == 3 and len(out["tracing"]["rows"]) == 1
    assert [r["optimizer"] for r in out["depth"]["rows"]] == ["muon"] and out["depth"]["rows"][0]["ratio"] > 0
    assert len(out["compat"]["rows"]) == 2 and set(out["programs"]) == {"hlo", "first_call_s"}
    frontier = out["frontier"]["rows"]  # optax's AdamW and Muon, gradtx's Muon
    assert len(frontier) == 3 and frontier["adamw (optax)"]["state_ratio"] == 1.0
    assert all(r["min_ms"] > 0 and r["state_bytes"] > 0 and r["step_ratio"] > 0 for r in frontier.values())
    low = out["lowbit"]["rows"]  # every format beside float32 and optax's AdamW, and the LM trained with each
    assert list(low) == ["adamw, float32", "adamw, 8bit"]
    assert all(r["min_ms"] > 0 and r["step_memory"] > 0 and r["bytes_per_param"] > 0 for r in low.values())
    trained = out["lowbit"]["convergence"]["rows"]
    assert list(trained) == ["adamw, float32", "adamw, 8bit"] and all(
        np.isfinite(r["held_out"]) for r in trained.values()
    )
    for row in out["catalogue"]["rows"].values():
        assert row["step_ratio"] > 0 and row["gradtx_compile_s"] > 0 and row["optax_compile_s"] > 0
    assert all(r["gradtx_min_s"] > 0 and r["ratio"] > 0 for r in out["tracing"]["rows"])
    adam = out["sharding"]["transforms"]["adam"]
    assert adam["gradtx"] == adam["optax"] and adam["gradtx explicit"] == adam["optax explicit"]
    assert all(isinstance(r["gradtx explicit"], dict) for r in out["sharding"]["transforms"].values())
    for row in out["sharding"]["state_bytes"].values():  # bytes per device
        assert row["zero"] <= row["gradtx"] < row["replicated"] / 3
        assert row["zero, params replicated"] < row["replicated"] / 3
    pod = out["sharding"]["matrix_work"]["rows"]  # Muon's matrix work split: 1/8 of the FLOPs per device
    assert len(pod) == 6 and all(r["step_ms"] > 0 for r in pod.values())
    assert all(r["ratio"] <= 1.2 for name, r in pod.items() if name.startswith("split_matrix_work"))
    # ZeRO in shard_map: the matrices split too; the momentum, element-wise, runs whole on every replica
    assert pod["sharded_state(muon, gather_state=True), shard_map"]["ratio"] <= 1.3
    zero = out["sharding"]["zero_in_shard_map"]["rows"]  # ZeRO in shard_map: 1/8 of the state per device
    assert list(zero) == ["adam", "adafactor"] and not any(r["gather_state"] for r in zero.values())
    for r in zero.values():
        assert r["per_device"] * 8 >= r["unsharded"] > r["per_device"] * 4 and r["collective_bytes"] > 0
        assert r["collectives"]["reduce-scatter"] > 0  # the gradients, on slices
    text = report.main(["--results", str(tmp_path), "--out", str(tmp_path / "RESULTS.md")])
    assert "### ZeRO-1 inside shard_map" in text
    assert "### Collectives per step on a 2-D mesh" in text and "### Matrix work on a pod" in text
    assert "### Optimizer state per device on a 2-D mesh" in text
    assert "### Every optimizer optax also has" in text and "### Tracing and lowering" in text
    assert "### Beyond optax: the frontier optimizers beside AdamW" in text
    assert "### Optimizer state in fewer bits" in text and "| adamw, 8bit |" in text
    assert "### optax_compat beside optax" in text and "### An optax program, import switched" in text
    assert (tmp_path / "cpu.png").stat().st_size > 10_000
    for name in workloads.ALL:
        assert f"### {name}" in text


def test_only_keeps_the_other_workloads(tmp_path):
    path = tmp_path / "cpu.json"
    args = [
        "--sizes",
        "smoke",
        "--rounds",
        "1",
        "--min-round-ms",
        "1",
        "--json",
        str(path),
        "--no-report",
        "--no-sharding",
    ]
    run.main(args + ["--only", "big_adam", "sparse", "tracing"])
    out = run.main(args + ["--only", "sparse"])
    assert [w["name"] for w in out["workloads"]] == ["big_adam", "sparse"]
    assert out["tracing"]["rows"] and out["catalogue"] is None  # kept from the first run; never run


def test_committed_results_match_the_committed_report(tmp_path):
    committed = ROOT / "benchmarks" / "results"
    assert (committed / "cpu.json").exists(), "run `make bench` and commit benchmarks/results"
    cpu = json.loads((committed / "cpu.json").read_text())
    assert cpu["sizes"] == "full" and [w["name"] for w in cpu["workloads"]] == list(workloads.ALL)
    text = report.main(
        ["--results", str(committed), "--charts", str(tmp_path), "--out", str(tmp_path / "R.md")]
    )
    assert text == (ROOT / "benchmarks" / "RESULTS.md").read_text(), (
        "re-render with `python -m benchmarks.report`"
    )

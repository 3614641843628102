"""`gradtx.optax_compat` beside optax: every optax optimizer of the same name on the transformer-like tree
(step and compile time), and the optax programs' compile size and first call.

- The catalogue: each optax optimizer (top level and `optax.contrib`) whose first argument is the learning
  rate and whose step needs no extra argument, called with the same rate on both sides
  (`compat.<name>(lr)` vs `optax.<name>(lr)`); measured as `benchmarks.catalogue` measures gradtx's names.
- The programs: the linen CNN of tests/optax_compat/programs (`cnn_optax.py` and its one-line twin
  `cnn_gradtx.py`): the optimized HLO instructions of its optimizer, `apply_if_finite(inject_hyperparams(
  adam))`, and of its whole train step, and the first call of the train step (trace, compile, run), each
  side in fresh processes, alternating, the best of a few.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import time
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
import optax.contrib

import gradtx.optax_compat as compat

LR = 1e-3
GOAL = 1.10
"""The programs' targets: compat / optax at most, for the HLO size and the first call."""


def _is_optimizer(fn: Any) -> bool:
    if not callable(fn) or isinstance(fn, type):
        return False
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] == "learning_rate"


def _steps_alone(tx: Any) -> bool:
    """Whether `tx` steps on a small tree without extra arguments (`value`, `value_fn`, ...)."""
    params = {"w": jnp.ones((4, 3)), "b": jnp.ones(3)}
    try:
        state = jax.eval_shape(tx.init, params)
        jax.eval_shape(lambda s: tx.update(params, s, params), state)
    except Exception:  # noqa: BLE001 -- any failure: not a pair for this table
        return False
    return True


def pairs() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """`{name: (compat's, optax's)}` for every optax optimizer that builds from a rate and steps alone."""
    out = {}
    for where, theirs_module, ours_module in (
        ("", optax, compat),
        ("contrib.", optax.contrib, compat.contrib),
    ):
        for name in sorted(dir(theirs_module)):
            theirs = getattr(theirs_module, name)
            ours = getattr(ours_module, name, None)
            if name.startswith("_") or ours is None or not _is_optimizer(theirs):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated names warn on both sides
                try:
                    built = theirs(LR), ours(LR)
                except Exception:  # noqa: BLE001 -- needs more than a rate
                    continue
                if all(_steps_alone(tx) for tx in built):
                    out[f"{where}{name}"] = (lambda f=ours: f(LR), lambda f=theirs: f(LR))
    return out


# --------------------------------------------------------------------------- the programs


def _program(lib: str) -> Any:
    import importlib

    return importlib.import_module(f"tests.optax_compat.programs.cnn_{lib}")


def _instructions(compiled_text: str) -> int:
    return sum(1 for line in compiled_text.splitlines() if re.match(r"\s+(ROOT )?%?[\w.\-]+ = ", line))


def hlo_sizes() -> dict[str, dict[str, int]]:
    """Optimized HLO instructions of the CNN program's optimizer step and whole train step, per side."""
    out = {}
    for lib in ("optax", "gradtx"):
        program = _program(lib)
        images, labels = program.digits()
        state = program.make_state(images)
        tx = state.tx
        update = jax.jit(lambda g, s, p, tx=tx: tx.update(g, s, p))
        optimizer = update.lower(state.params, state.opt_state, state.params).compile().as_text()
        step = program.train_step.lower(state, images[:64], labels[:64]).compile().as_text()
        out[lib] = {"optimizer": _instructions(optimizer), "train_step": _instructions(step)}
    return out


def first_call(lib: str) -> float:
    """Seconds of the CNN program's first train step (trace, compile, run), in this fresh process."""
    program = _program(lib)
    images, labels = program.digits()
    state = program.make_state(images)
    x, y = images[:64], labels[:64]
    jax.block_until_ready((state, x, y))
    start = time.perf_counter()
    jax.block_until_ready(program.train_step(state, x, y))
    return time.perf_counter() - start


def first_calls(repeats: int) -> dict[str, float]:
    """The best first call of each side over `repeats` fresh processes each, alternating."""
    times: dict[str, list[float]] = {"optax": [], "gradtx": []}
    for i in range(repeats):
        for lib in ("optax", "gradtx") if i % 2 else ("gradtx", "optax"):
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.compat", "--first-call", lib],
                capture_output=True,
                text=True,
                check=True,
            )
            times[lib].append(float(done.stdout.strip().splitlines()[-1]))
    return {lib: min(t) for lib, t in times.items()}


def measure_programs(repeats: int) -> dict:
    sizes = hlo_sizes()
    calls = first_calls(repeats)
    result = {"hlo": sizes, "first_call_s": calls}
    print(
        f"  programs: optimizer HLO {sizes['gradtx']['optimizer']} vs {sizes['optax']['optimizer']}, "
        "train step "
        f"{sizes['gradtx']['train_step']} vs {sizes['optax']['train_step']}, first call "
        f"{calls['gradtx']:.2f} s vs {calls['optax']:.2f} s",
        flush=True,
    )
    return result


def program_targets(result: dict) -> list[dict]:
    hlo, calls = result["hlo"], result["first_call_s"]
    values = {
        "linen CNN program, apply_if_finite(inject_hyperparams(adam)): optimized HLO instructions, "
        "optax_compat / optax": hlo["gradtx"]["optimizer"] / hlo["optax"]["optimizer"],
        "linen CNN program, train step: optimized HLO instructions, optax_compat / optax": (
            hlo["gradtx"]["train_step"] / hlo["optax"]["train_step"]
        ),
        "linen CNN program, train step: first call, optax_compat / optax": calls["gradtx"] / calls["optax"],
    }
    return [
        {
            "label": label,
            "metric": "ratio",
            "op": "<=",
            "goal": GOAL,
            "workload": "programs",
            "value": value,
            "met": bool(round(value, 2) <= GOAL),
            "reason": None,
        }
        for label, value in values.items()
    ]


def program_table(result: dict) -> list[str]:
    hlo, calls = result["hlo"], result["first_call_s"]
    return [
        "The linen CNN of tests/optax_compat/programs (`cnn_optax.py`, and `cnn_gradtx.py`, the same file "
        "but "
        "its import line), each side compiled in this process (HLO) or run in fresh processes, alternating "
        "(first call: the best of a few).",
        "",
        "| | optax_compat | optax | optax_compat / optax |",
        "| --- | ---: | ---: | ---: |",
        f"| optimizer step, optimized HLO instructions | {hlo['gradtx']['optimizer']:,} "
        f"| {hlo['optax']['optimizer']:,} | {hlo['gradtx']['optimizer'] / hlo['optax']['optimizer']:.2f}x |",
        f"| train step, optimized HLO instructions | {hlo['gradtx']['train_step']:,} "
        f"| {hlo['optax']['train_step']:,} "
        f"| {hlo['gradtx']['train_step'] / hlo['optax']['train_step']:.2f}x |",
        f"| train step, first call (s) | {calls['gradtx']:.2f} | {calls['optax']:.2f} "
        f"| {calls['gradtx'] / calls['optax']:.2f}x |",
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--first-call"]:
        print(first_call(sys.argv[2]))

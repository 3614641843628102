"""Reference trajectories recorded by tools/record_references.py, replayed through gradtx.

A fixture `references/<module>.npz` holds, per case, the reference optimizer's class and keyword
arguments, the gradients it saw at every step and its parameters after every step. `replay` feeds
the same gradients to gradtx's optimizer, built from the same arguments under the class's name
(`gradtx.get("SOAP", **kwargs)`), and `check_case` compares the parameters step by step.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import os
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import gradtx
from gradtx import registry

FIXTURES = Path(os.environ.get("GRADTX_REFERENCE_FIXTURES") or Path(__file__).parent / "references")
"""The committed fixtures; `make references` points $GRADTX_REFERENCE_FIXTURES at trajectories it has just
recorded on this machine and runs the tests that read them (tools/record_references.py)."""
RTOL = 1e-5
"""Params within 1e-5 of the reference, relative to the leaf's largest magnitude."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One recorded reference run."""

    label: str
    path: str
    kwargs: dict[str, Any]
    init: dict[str, np.ndarray]
    curv: dict[str, np.ndarray]
    grads: list[dict[str, np.ndarray]]
    params: list[dict[str, np.ndarray]]
    draws: list[np.ndarray]

    @property
    def class_name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    def __repr__(self) -> str:  # short ids in pytest's output
        return f"{self.class_name}[{self.label}]"


@functools.cache
def _load(module: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with np.load(FIXTURES / f"{module}.npz") as f:
        arrays = {k: f[k] for k in f.files}
    return json.loads(str(arrays.pop("meta"))), arrays


def meta(module: str) -> dict[str, Any]:
    """The fixture's metadata: cases, the reference classes' signatures, the library versions."""
    return _load(module)[0]


def cases(module: str) -> list[Case]:
    """The recorded cases of `references/<module>.npz`, in recording order."""
    m, a = _load(module)
    leaves = sorted({k.split("/")[-1] for k in a if k.startswith("problem/init/")})
    init = {k: a[f"problem/init/{k}"] for k in leaves}
    curv = {k: a[f"problem/curv/{k}"] for k in leaves}
    out = []
    for label, c in m["cases"].items():
        steps = c["steps"]
        out.append(
            Case(
                label,
                c["path"],
                c["kwargs"],
                init,
                curv,
                [{k: a[f"{label}/grads/{t}/{k}"] for k in leaves} for t in range(steps)],
                [{k: a[f"{label}/params/{t}/{k}"] for k in leaves} for t in range(steps)],
                [a[f"{label}/draws/{i}"] for i in range(sum(k.startswith(f"{label}/draws/") for k in a))],
            )
        )
    return out


def loss(
    params: dict[str, jax.Array], curv: dict[str, Any], noise: dict[str, Any] | None = None
) -> jax.Array:
    """The problem's loss, without its noise term unless given: for Hessian-vector products."""
    total = sum(jnp.sum(0.5 * curv[k] * p * p + 0.025 * p**4) for k, p in params.items())
    if noise is not None:
        total = total + sum(jnp.sum(noise[k] * p) for k, p in params.items())
    return total


def replay(
    tx: gradtx.GradientTransformation,
    case: Case,
    extra_args: Callable[[int, Any, Any], dict] | None = None,
) -> list[dict[str, np.ndarray]]:
    """gradtx's params after each step, fed the recorded gradients; `extra_args(t, params, grads)` gives
    `update`'s extra arguments at step t (random draws, Hessian-vector products)."""
    params = {k: jnp.asarray(v) for k, v in case.init.items()}
    state = tx.init(params)

    @jax.jit
    def step(params, state, grads, extra):
        updates, state = tx.update(grads, state, params, **extra)
        return gradtx.apply_updates(params, updates), state

    out = []
    for t, g in enumerate(case.grads):
        grads = {k: jnp.asarray(v) for k, v in g.items()}
        extra = extra_args(t, params, grads) if extra_args else {}
        params, state = step(params, state, grads, extra)
        out.append(jax.tree.map(np.asarray, params))
    return out


def check_case(
    case: Case, tx: gradtx.GradientTransformation | None = None, extra_args=None, rtol: float = RTOL
):
    """gradtx's trajectory equals the reference's at every step, within `rtol` of each leaf's scale.

    `tx` defaults to `gradtx.get(<class name>, **case.kwargs)`: the reference's own configuration.
    """
    tx = gradtx.get(case.class_name, **case.kwargs) if tx is None else tx
    ours = replay(tx, case, extra_args)
    for t, (mine, ref) in enumerate(zip(ours, case.params, strict=True)):
        for k in ref:
            scale = float(np.max(np.abs(ref[k])))
            np.testing.assert_allclose(
                mine[k],
                ref[k],
                rtol=rtol,
                atol=rtol * scale,
                err_msg=f"{case!r}: leaf {k!r} after step {t + 1}",
            )


def check_signature(module: str, name: str) -> None:
    """The registry entry `name`'s `Reference` covers its class's signature: every argument is mapped, fixed
    or free, and each default (the `Reference`'s, else the factory's) equals the reference's."""
    entry = registry.entry(name)
    ref = entry.reference
    assert ref is not None, f"{name} has no Reference"
    signature = meta(module)["signatures"][ref.path]
    params = inspect.signature(entry.factory).parameters
    for arg, default in signature.items():
        if arg in ref.free:
            continue
        if arg in ref.fixed:
            assert repr(ref.fixed[arg]) == default, (
                f"{ref.path}({arg}=...): fixed at {ref.fixed[arg]!r}, reference {default}"
            )
            continue
        assert arg in ref.arguments, f"{ref.path}: argument {arg!r} is neither mapped, fixed nor free"
        if arg in ref.defaults:
            ours = ref.defaults[arg]
        else:
            target = ref.arguments[arg]
            assert isinstance(target, str), f"{ref.path}({arg}): give its default in Reference.defaults"
            ours = params[target].default
            assert ours is not inspect.Parameter.empty, (
                f"{ref.path}({arg}): {target} has no default; give one"
            )
        try:
            theirs = ast.literal_eval(default)
        except (ValueError, SyntaxError):
            theirs = default
        assert _same(ours, theirs), (
            f"{ref.path}({arg}=...): gradtx's default {ours!r}, the reference's {default}"
        )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b or (isinstance(a, str) and a == repr(b)) or repr(a) == b

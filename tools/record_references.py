"""Record the reference optimizers' trajectories into tests/algorithms/references/<module>.npz.

Runs every case of tools/references/<module>.py (see that package's docstring) with the reference
library itself: pytorch-optimizer, heavyball (PyTorch, CPU) or psgd-jax. The tests replay the recorded
gradients through gradtx and compare the parameters, so `make test` needs none of these libraries.

    .venv-ref/bin/python tools/record_references.py            # every module
    .venv-ref/bin/python tools/record_references.py soap kron  # some
    .venv-ref/bin/python tools/record_references.py --check DIR  # re-record into DIR, compare

`make references` builds .venv-ref (torch's CPU wheel, the pinned reference libraries), runs `--check` and
then the tests that read the fixtures against the trajectories just recorded (GRADTX_REFERENCE_FIXTURES=DIR):
gradtx equals the reference libraries as they run on this machine. CI runs it as a step of its own.

The committed trajectories are float32 runs on the CPU that recorded them; another CPU's roundoff moves
them (torch picks SIMD kernels and MKL code paths by CPU), so `--check` holds the cases, the problem and the
first step's gradients to the committed files and reports, without judging, how far the rest moved.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import json
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import references  # noqa: E402
from tools.references import SHAPES, Case  # noqa: E402

OUT = ROOT / "tests" / "algorithms" / "references"
LIBRARIES = ("torch", "pytorch_optimizer", "heavyball", "psgd_jax", "jax", "numpy")


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(references.__path__) if not m.name.startswith("_"))


def _versions() -> dict[str, str]:
    out = {}
    for lib in LIBRARIES:
        with contextlib.suppress(ImportError):
            out[lib] = str(getattr(importlib.import_module(lib), "__version__", "?"))
    return out


def _class(path: str) -> Any:
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def _signature(cls: Any) -> dict[str, str]:
    """The class's keyword arguments -> repr of their defaults (`"<required>"` for none)."""
    out = {}
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.name in ("self", "params", "model") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        out[p.name] = "<required>" if p.default is p.empty else repr(p.default)
    return out


@contextlib.contextmanager
def _capturing(names: tuple[str, ...], library: str, store: list):
    """Patch each `torch.fn` (or `torch.Tensor.method_`) so that its results are appended to `store`."""
    import torch

    undo = []
    for name in names:
        parts = name.split(".")
        owner = torch if parts[:-1] == ["torch"] else _class(".".join(parts[:-1]))
        original = getattr(owner, parts[-1])

        def wrapped(*args, __original=original, **kwargs):
            out = __original(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                store.append(out.detach().cpu().numpy().copy())
            return out

        targets = [owner] + [
            m
            for n, m in list(sys.modules.items())
            if n.split(".")[0] == library and getattr(m, parts[-1], None) is original
        ]
        for t in targets:
            undo.append((t, parts[-1], original))
            setattr(t, parts[-1], wrapped)
    try:
        yield
    finally:
        for t, attr, original in reversed(undo):
            setattr(t, attr, original)


def _run_torch(case: Case, prob: dict[str, Any]) -> dict[str, np.ndarray]:
    import torch

    torch.manual_seed(0)
    named = {k: torch.nn.Parameter(torch.tensor(prob["init"][k])) for k in SHAPES}
    curv = {k: torch.tensor(prob["curv"][k]) for k in SHAPES}
    cls = _class(case.path)
    opt = (
        case.build(cls, named, dict(case.kwargs)) if case.build else cls(list(named.values()), **case.kwargs)
    )
    out: dict[str, np.ndarray] = {}
    draws: list[np.ndarray] = []
    library = case.path.split(".")[0]
    with _capturing(case.capture, library, draws):
        for t in range(case.steps):
            opt.zero_grad()
            noise = {k: torch.tensor(prob["noise"][t][k]) for k in SHAPES}
            loss = sum(
                (0.5 * curv[k] * p * p + references.QUARTIC * p**4 + noise[k] * p).sum()
                for k, p in named.items()
            )
            loss.backward(create_graph=case.create_graph)
            for k, p in named.items():
                out[f"{case.label}/grads/{t}/{k}"] = p.grad.detach().numpy().copy()
            opt.step()
            for k, p in named.items():
                out[f"{case.label}/params/{t}/{k}"] = p.detach().numpy().copy()
    for i, d in enumerate(draws):
        out[f"{case.label}/draws/{i}"] = d
    return out


def record(module: str, out_dir: Path) -> Path:
    """Run every case of tools/references/<module>.py; write `out_dir/<module>.npz`."""
    spec = importlib.import_module(f"tools.references.{module}")
    prob = references.problem()
    arrays: dict[str, np.ndarray] = {}
    for k in SHAPES:
        arrays[f"problem/init/{k}"] = prob["init"][k]
        arrays[f"problem/curv/{k}"] = prob["curv"][k]
    cases, signatures = {}, {}
    for case in spec.CASES:
        run = getattr(spec, "run", None) or _run_torch
        with contextlib.redirect_stdout(io.StringIO()):
            arrays.update(run(case, prob))
        cases[case.label] = {"path": case.path, "kwargs": case.kwargs, "steps": case.steps}
        if case.path not in signatures:
            signatures[case.path] = _signature(_class(case.path))
    meta = {"module": module, "cases": cases, "signatures": signatures, "versions": _versions()}
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{module}.npz"
    np.savez_compressed(path, **arrays)
    return path


_TRAJECTORY = re.compile(r"[^/]+/(grads/[1-9]\d*|params/\d+|draws/\d+)(/|$)")
"""Keys that follow the reference's float32 trajectory: the gradients after the first step, the params and
the random or decomposition draws. Another CPU's roundoff (other SIMD widths, MKL code paths) moves them,
and the closed loop (gradients from the params) carries it on: SOAP's eigenvectors of nearly equal
eigenvalues turn, and its params move by 1e-2 of their scale. The replayed tests judge them instead."""


def _compare(new: Path, old: Path) -> tuple[list[str], float]:
    """The differences that make the committed fixture stale, and the trajectories' largest difference
    relative to each leaf's largest magnitude (reported, not judged)."""
    if not old.exists():
        return [f"{old.name}: not committed"], 0.0
    a, b = np.load(new), np.load(old)
    problems = [f"{old.name}: {k} only in one file" for k in sorted(set(a.files) ^ set(b.files))]
    drift = 0.0
    for k in sorted(set(a.files) & set(b.files)):
        if k == "meta":
            ma, mb = json.loads(str(a[k])), json.loads(str(b[k]))
            ma.pop("versions"), mb.pop("versions")
            if ma != mb:
                problems.append(f"{old.name}: meta differs")
        elif a[k].dtype.kind in "USO" or b[k].dtype.kind in "USO" or a[k].shape != b[k].shape:
            if a[k].shape != b[k].shape or not np.array_equal(a[k], b[k]):
                problems.append(f"{old.name}: {k} differs")
        elif _TRAJECTORY.match(k):
            scale = max(float(np.max(np.abs(b[k]), initial=0.0)), np.finfo(np.float32).tiny)
            drift = max(drift, float(np.max(np.abs(a[k] - b[k]), initial=0.0)) / scale)
        elif not np.allclose(a[k], b[k], rtol=1e-6, atol=1e-7, equal_nan=True):
            problems.append(f"{old.name}: {k} differs by {np.max(np.abs(a[k] - b[k])):.3g}")
    return problems, drift


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help="modules of tools/references (default: all)")
    parser.add_argument(
        "--check",
        metavar="DIR",
        type=Path,
        help="re-record into DIR and compare with the committed files; then run the tests that read the "
        "fixtures with GRADTX_REFERENCE_FIXTURES=DIR (make references does both)",
    )
    args = parser.parse_args(argv)
    modules = args.modules or _modules()
    if args.check is None:
        for m in modules:
            print("wrote", record(m, OUT).relative_to(ROOT))
        return 0
    problems: list[str] = []
    for m in modules:
        found, drift = _compare(record(m, args.check), OUT / f"{m}.npz")
        problems += found
        print(f"{m}: trajectories within {drift:.2g} of each leaf's scale of the committed ones")
    for p in problems:
        print(p)
    verdict = f"{len(problems)} differences" if problems else "the same cases, problem and first gradients"
    print(f"{len(modules)} reference modules re-recorded into {args.check}: {verdict}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

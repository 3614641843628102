"""Release check: the sdist and the wheel build, their metadata is valid, and the wheel installs clean.

Run as `make release` (or `.venv/bin/python tools/release_check.py`, with `build` and `twine` installed).
In a temporary folder it

1. builds the sdist, and the wheel from the sdist (`python -m build`), so a file the sdist forgets
   fails here rather than for a user installing from it;
2. runs `twine check --strict` over both (the metadata PyPI would show);
3. checks the sdist holds the package (every module of `gradtx/`), `py.typed`, README, pyproject and the
   license file if the project has one, and the wheel holds the package and nothing else (no tests,
   notebooks, benchmarks, docs, examples or tools);
4. installs the wheel, not editable and with no extras, into a fresh venv and, from a folder outside
   this checkout, imports gradtx, steps `gradtx.adam(1e-3)` under `jax.jit` on a small pytree, checks that
   none of the optional packages (optax, flax, orbax, tensorflow, returnn, ...) was imported, imports
   every subpackage the same way, and steps `gradtx.optax_compat.adam` (built from gradtx: no optax needed).

Every problem is listed at the end; the exit status is 1 if there was one. `--keep` keeps the folder.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "gradtx"
# Top-level folders of the checkout that must never land in the wheel.
NOT_IN_WHEEL = ("tests", "notebooks", "benchmarks", "docs", "examples", "tools", "artifacts")
LICENSE_NAMES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING", "NOTICE")

# What runs inside the clean venv. It prints one line per finding starting with "FAIL " and ends with "OK".
SMOKE = textwrap.dedent(
    r"""
    import importlib, os, pkgutil, sys

    OPTIONAL = ("optax", "flax", "orbax", "tensorflow", "keras", "returnn", "chex", "equinox",
                "tree", "sklearn", "matplotlib", "torch")
    failures = []

    def loaded_optional(where):
        found = sorted({m.split(".")[0] for m in sys.modules} & set(OPTIONAL))
        if found:
            failures.append(f"{where} imported optional package(s) {found}")

    import jax, jax.numpy as jnp
    import gradtx

    here = os.path.dirname(gradtx.__file__)
    if "site-packages" not in here:
        failures.append(f"gradtx was imported from {here}, not from the installed wheel")
    loaded_optional("`import gradtx`")

    tx = gradtx.adam(1e-3)
    params = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2), "layers": [jnp.full((4,), 2.0), jnp.ones(())]}
    state = tx.init(params)

    @jax.jit
    def step(params, state):
        grads = jax.grad(lambda p: sum(jnp.sum(x**2) for x in jax.tree.leaves(p)))(params)
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    new_params, state = step(params, state)
    new_params, state = step(new_params, state)
    pairs = zip(jax.tree.leaves(new_params), jax.tree.leaves(params))
    moved = [float(jnp.max(jnp.abs(a - b))) for a, b in pairs]
    expected = [0.0, 2e-3, 2e-3, 2e-3]  # each of Adam's first steps moves an entry with a gradient by ~lr
    for got, want, path in zip(moved, expected, ["b", "layers[0]", "layers[1]", "w"]):
        if abs(got - want) > 1e-5:
            failures.append(f"adam step moved {path} by {got}, expected {want}")
    if int(state[0].count) != 2:
        failures.append(f"adam's count is not 2 after two steps: {state[0]}")
    loaded_optional("`import gradtx` and a jitted adam step")

    # Every public subpackage imports without the optional packages (an optax_compat module that needs optax
    # must say so with an ImportError naming it).
    needs = {}
    for info in pkgutil.walk_packages(gradtx.__path__, "gradtx."):
        name = info.name
        if any(part.startswith("_") for part in name.split(".")[1:]):
            continue
        before = set(sys.modules)
        try:
            importlib.import_module(name)
        except ImportError as e:
            needs[name] = e
            continue
        new = sorted({m.split(".")[0] for m in set(sys.modules) - before} & set(OPTIONAL))
        if new:
            failures.append(f"`import {name}` imported optional package(s) {new}")
    for name, e in needs.items():
        missing = getattr(e, "name", None) or ""
        if name.startswith("gradtx.optax_compat") and missing.split(".")[0] == "optax":
            print(f"note: `import {name}` without optax raises {type(e).__name__}: {e}")
            continue
        failures.append(f"`import {name}` failed without the optional packages: {type(e).__name__}: {e}")

    # The registry (what a TF config goes through) works without extras too.
    config = {"class": "momentum", "learning_rate": 0.1, "momentum": 0.9, "use_nesterov": True}
    tx2 = gradtx.from_config(config)
    u, _ = tx2.update(params, tx2.init(params), params)
    loaded_optional("the registry")

    # optax_compat is built from gradtx: optax's names and numbers without optax installed.
    import gradtx.optax_compat as ox

    tx3 = ox.adam(1e-3)
    u, _ = jax.jit(tx3.update)(params, tx3.init(params), params)
    if abs(float(u["w"][0, 0]) + 1e-3) > 1e-6:
        failures.append(f"optax_compat.adam's first update is {float(u['w'][0, 0])}, expected -1e-3")
    loaded_optional("gradtx.optax_compat.adam")

    print(f"gradtx {getattr(gradtx, '__version__', '?')} from {here}; jax {jax.__version__}")
    for f in failures:
        print("FAIL", f)
    print("OK" if not failures else f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
    """
)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    shown = " ".join(c if len(c) < 200 else "<script>" for c in map(str, cmd))
    print("+", shown, flush=True)
    return subprocess.run(cmd, text=True, capture_output=True, **kwargs)


class Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.t0 = time.monotonic()

    def fail(self, msg: str) -> None:
        print("  FAIL", msg, flush=True)
        self.problems.append(msg)

    def step(self, title: str) -> None:
        print(f"\n== {title}  [{time.monotonic() - self.t0:.0f}s]", flush=True)

    def ok(self, proc: subprocess.CompletedProcess, what: str) -> bool:
        if proc.returncode != 0:
            self.fail(f"{what} exited with {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
            return False
        return True


def package_modules() -> set[str]:
    """The package's files in this checkout, as relative paths: every module and py.typed."""
    modules = (p for p in (ROOT / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts)
    files = {p.relative_to(ROOT).as_posix() for p in modules}
    return files | {f"{PACKAGE}/py.typed"}


def check_sdist(c: Checker, sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    prefix = names[0].split("/")[0] + "/"
    inside = {n[len(prefix) :] for n in names if n.startswith(prefix)}
    need = package_modules() | {"README.md", "pyproject.toml", "PKG-INFO"}
    need |= {name for name in LICENSE_NAMES if (ROOT / name).exists()}
    missing = sorted(need - inside)
    if missing:
        c.fail(f"the sdist lacks {len(missing)} file(s): {missing[:20]}")
    if not any((ROOT / name).exists() for name in LICENSE_NAMES):
        print(f"  note: the project has no license file ({', '.join(LICENSE_NAMES)}) to check in the sdist")
    print(f"  sdist: {len(inside)} files, {sdist.stat().st_size // 1024} KiB")


def check_wheel(c: Checker, wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    extra = sorted(tops - {PACKAGE} - dist_info)
    if extra:
        c.fail(f"the wheel holds more than the package: {extra}")
    stray = sorted(n for n in names if any(f"/{d}/" in f"/{n}" for d in NOT_IN_WHEEL))
    if stray:
        c.fail(f"the wheel holds test/notebook/docs files: {stray[:20]}")
    missing = sorted(package_modules() - names)
    if missing:
        c.fail(f"the wheel lacks {len(missing)} package file(s): {missing[:20]}")
    if any(n.endswith((".pyc", ".ipynb")) for n in names):
        c.fail("the wheel holds .pyc or .ipynb files")
    print(f"  wheel: {len(names)} files, {wheel.stat().st_size // 1024} KiB, top level {sorted(tops)}")


def check_metadata(c: Checker, venv_python: Path) -> None:
    """The installed distribution declares what pyproject.toml says."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    code = (
        "import importlib.metadata as m, json; d = m.distribution('gradtx'); "
        "print(json.dumps({'version': d.version, 'requires_python': d.metadata['Requires-Python'], "
        "'requires': d.requires or [], 'summary': d.metadata['Summary']}))"
    )
    proc = run([str(venv_python), "-c", code], cwd=tempfile.gettempdir())
    if not c.ok(proc, "reading the installed metadata"):
        return
    import json

    meta = json.loads(proc.stdout)
    if meta["version"] != project["version"]:
        c.fail(f"installed version {meta['version']} != pyproject's {project['version']}")
    if (meta["requires_python"] or "").replace(" ", "") != project["requires-python"].replace(" ", ""):
        c.fail(f"Requires-Python {meta['requires_python']!r} != pyproject's {project['requires-python']!r}")
    core = sorted(r.replace(" ", "") for r in meta["requires"] if "extra ==" not in r)
    want = sorted(r.replace(" ", "") for r in project["dependencies"])
    if core != want:
        c.fail(f"the wheel's core requirements {core} != pyproject's {want}")
    print(f"  metadata: {meta['version']}, Requires-Python {meta['requires_python']}, requires {core}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    ap.add_argument("--python", default=shutil.which("python3") or sys.executable, help="its venv")
    args = ap.parse_args()

    c = Checker()
    tmp = Path(tempfile.mkdtemp(prefix="gradtx-release-"))
    print(f"working in {tmp}")
    try:
        c.step("build the sdist, and the wheel from it")
        dist = tmp / "dist"
        built = run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)])
        if not c.ok(built, "python -m build"):
            return report(c)
        sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
        if len(sdists) != 1 or len(wheels) != 1:
            c.fail(f"expected one sdist and one wheel, got {[p.name for p in dist.iterdir()]}")
            return report(c)
        sdist, wheel = sdists[0], wheels[0]
        print(f"  built {sdist.name}, {wheel.name}")
        if not wheel.name.endswith("-py3-none-any.whl"):
            c.fail(f"the wheel is not pure Python: {wheel.name}")

        c.step("twine check --strict")
        twine = [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)]
        c.ok(run(twine), "twine check")

        c.step("contents of the sdist and the wheel")
        check_sdist(c, sdist)
        check_wheel(c, wheel)

        c.step("install the wheel (no extras, not editable) into a fresh venv")
        venv = tmp / "venv"
        if not c.ok(run([args.python, "-m", "venv", str(venv)]), "python -m venv"):
            return report(c)
        vpy = venv / "bin" / "python"
        pip = [str(vpy), "-m", "pip", "--disable-pip-version-check", "-q"]
        if not c.ok(run([*pip, "install", str(wheel)], cwd=tmp), "pip install <wheel>"):
            return report(c)
        c.ok(run([*pip, "check"], cwd=tmp), "pip check")
        check_metadata(c, vpy)
        listed = run([str(vpy), "-m", "pip", "list", "--format=freeze"], cwd=tmp).stdout.split()
        print(f"  installed: {' '.join(listed)}")

        c.step("import gradtx and step adam there, with no optional package")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS")}
        env["JAX_PLATFORMS"] = "cpu"
        proc = run([str(vpy), "-c", SMOKE], cwd=tmp, env=env)
        print(textwrap.indent(proc.stdout.rstrip(), "  "))
        if proc.returncode != 0:
            c.fail(f"the smoke test in the clean venv failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return report(c)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        for leftover in glob.glob(str(ROOT / "build" / "bdist.*")):
            shutil.rmtree(leftover, ignore_errors=True)


def report(c: Checker) -> int:
    took = time.monotonic() - c.t0
    if c.problems:
        print(f"\nrelease check: {len(c.problems)} problem(s) in {took:.0f}s:")
        for p in c.problems:
            print(" -", p.splitlines()[0])
        return 1
    print(f"\nrelease check: OK in {took:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

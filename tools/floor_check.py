"""Dependency floor: the core suite on the oldest versions pyproject.toml allows.

Run as `make floor` (or `python3 tools/floor_check.py`). It reads the `>=` floors of `[project]
dependencies` and of the test packages the core suite imports (the `test` extra), pins each to its floor,
pins jax's own dependencies (ml_dtypes, scipy) to the floors jax declares, installs exactly those into a
venv of its own (`.venv-floor`, reused while the pins are unchanged) and runs the core suite there: the
contract tests and the numbers of every optimizer, transform and combinator. Parity (TensorFlow), the
notebooks and sharding stay on the newest versions (`make test`).

A requirement written without a `>=` floor, or a pin pip cannot install together with the declared
requirements, fails the check: the floor pyproject.toml states is the floor that is tested.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-floor"
# The test packages the core suite imports (the rest of the `test` extra serves parity, notebooks, demo).
TEST_PACKAGES = ("pytest", "pytest-xdist", "hypothesis", "chex", "equinox", "optax", "flax")
# jax's own requirements at its floor (jax 0.9.0: ml_dtypes>=0.5.0, scipy>=1.13): pinned there too.
TRANSITIVE_FLOORS = {"ml_dtypes": "0.5.0", "scipy": "1.13.0"}
CORE_SUITE = ("tests/test_contract.py", "tests/algorithms", "tests/combinators")


def floor_pins() -> tuple[list[str], list[str]]:
    """The requirements as pyproject.toml writes them, and each one pinned to its floor."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    test = {
        re.split(r"[<>=!~ \[;]", r, maxsplit=1)[0].lower(): r
        for r in project["optional-dependencies"]["test"]
    }
    missing = [p for p in TEST_PACKAGES if p not in test]
    if missing:
        sys.exit(f"floor_check: the test extra has no {missing}; update TEST_PACKAGES in {__file__}")
    requirements = list(project["dependencies"]) + [test[p] for p in TEST_PACKAGES]
    pins = []
    for req in requirements:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*", req)
        if not m:
            sys.exit(f"floor_check: {req!r} has no plain `name>=version` floor to test")
        pins.append(f"{m.group(1)}=={m.group(2)}")
    pins += [f"{name}=={version}" for name, version in TRANSITIVE_FLOORS.items()]
    return requirements, pins


def sh(cmd: list[str], **kwargs) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=shutil.which("python3") or sys.executable, help="python of the venv")
    ap.add_argument("pytest_args", nargs="*", help="instead of the core suite (e.g. one test file)")
    args = ap.parse_args()
    t0 = time.monotonic()

    requirements, pins = floor_pins()
    stamp = VENV / ".floor-pins"
    want = "\n".join(pins) + "\n"
    vpy = VENV / "bin" / "python"
    if not (vpy.exists() and stamp.exists() and stamp.read_text() == want):
        shutil.rmtree(VENV, ignore_errors=True)
        sh([args.python, "-m", "venv", str(VENV)])
        constraints = VENV / "floor-constraints.txt"
        constraints.write_text(want)
        # The declared requirements, constrained to their floors: pip fails if a floor cannot be installed.
        sh(
            [str(vpy), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(constraints)]
            + requirements
        )
        sh([str(vpy), "-m", "pip", "check"])
        stamp.write_text(want)
    installed = time.monotonic() - t0
    print(f"floor venv {VENV} ready in {installed:.0f}s: {' '.join(pins)}", flush=True)

    env = dict(os.environ, PYTHONPATH=str(ROOT))  # gradtx from this checkout, its dependencies at the floor
    cmd = [str(vpy), "-m", "pytest", *(args.pytest_args or [*CORE_SUITE, "-n", "2"])]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    verdict = "OK" if rc == 0 else "FAILED"
    print(f"floor check: {verdict}; install {installed:.0f}s, total {time.monotonic() - t0:.0f}s")
    return rc


if __name__ == "__main__":
    sys.exit(main())

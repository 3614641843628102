"""Generate `gradtx/optax_compat/_signatures.py`: optax's signatures of the functions the mirror builds.

`gradtx.optax_compat` is a table of optax's names -> gradtx factories (`_table.py`); the functions
it builds take optax's signatures from the generated file, read here from the installed optax, so
that no signature is retyped. tests/optax_compat/test_optimizers.py compares every function's
signature with optax's; tests/optax_compat/test_mirror.py fails when this file is stale.

    python tools/optax_signatures.py           # print the file
    python tools/optax_signatures.py --write   # write it
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = ROOT / "gradtx" / "optax_compat" / "_signatures.py"

HEADER = '''"""optax's signatures of the functions `gradtx.optax_compat` builds from gradtx's factories.

Generated from optax {version} by tools/optax_signatures.py: do not edit. Each entry is optax's
parameter list (names, kinds, defaults); a default that is no literal is written `"<parameter>"`
and the table gives it (a dtype, a function, optax's default line search).
"""

# ruff: noqa: E501  (one signature per line)

SIGNATURES = {{
'''


def _default(name: str, value: object) -> str:
    """A default as source: a literal as it is, anything else (a dtype, an enum, a function, a transform) as
    the marker `"<name>"` of its parameter, which the table gives."""
    literal = (bool, int, float, str, type(None))
    if isinstance(value, literal) and not isinstance(value, enum.Enum):
        return repr(value)
    if isinstance(value, tuple) and all(isinstance(v, literal) for v in value):
        return repr(value)
    return repr(f"<{name}>")


def render_signature(fn: object) -> str:
    """The parameter list of `fn` as source text (`learning_rate, b1=0.9, *, nesterov=False`)."""
    parts: list[str] = []
    star = False
    for p in inspect.signature(fn).parameters.values():  # type: ignore[arg-type]
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind is p.POSITIONAL_ONLY:
            raise ValueError(f"{fn}: positional-only parameters are not mirrored")
        parts.append(p.name if p.default is p.empty else f"{p.name}={_default(p.name, p.default)}")
    return ", ".join(parts)


def optax_object(path: str) -> object:
    """`optax.<path>` (`"adam"`, `"contrib.muon"`, `"schedules.sgdr_schedule"`)."""
    module, _, name = ("optax." + path).rpartition(".")
    return getattr(importlib.import_module(module), name)


def mirrored() -> set[str]:
    """The optax paths the table builds: the first argument of each `name = block(...)`, `@recipe(...)`,
    `@schedule(...)` in optax_compat's modules (read as text: a stale signature file does not stop it)."""
    found: set[str] = set()
    pattern = r"(?m)^(?:@|\w+ = )(?:block|recipe|schedule)\(\s*\"([\w.]+)\""
    for table in sorted((ROOT / "gradtx" / "optax_compat").glob("*.py")):
        found.update(re.findall(pattern, table.read_text()))
    return found


def render() -> str:
    import optax

    lines = [HEADER.format(version=optax.__version__)]
    for path in sorted(mirrored()):
        lines.append(f'    "{path}": "{render_signature(optax_object(path))}",\n')
    lines.append("}\n")
    return "".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--write" in argv:
        TARGET.write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The imports a config's expressions may use, numpy's constructors and math's functions (`ModuleRef`,
`module_attr`), and numpy results as plain Python values (`to_plain`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gradtx.returnn._safe_eval_limits import refusal

NUMPY = frozenset(
    "linspace logspace geomspace arange array asarray concatenate repeat ones zeros full "
    "pi e inf nan float32 float64 int32 int64".split()
)
MATH = frozenset("sqrt exp log log2 log10 pow pi e inf nan tau floor ceil cos sin".split())


_PLAIN = frozenset({int, float, bool, complex, str, type(None)})


@dataclasses.dataclass(frozen=True)
class ModuleRef:
    """An imported module (or `from` import) as the config names it; only numpy's and math's are usable."""

    path: str  # e.g. "numpy", "numpy.linspace", "os.path"


def to_plain(value: Any) -> Any:
    """`value` with numpy arrays as lists and numpy scalars as Python scalars, inside lists, tuples and dicts;
    a container with nothing to convert is returned itself (so `b = a` aliases as in Python)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _PLAIN:  # nothing to convert, found at C speed
            return value
        items = [to_plain(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(to_plain(k), to_plain(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value


def module_attr(base: ModuleRef, attr: str, line: int | None) -> Any:
    allowed = {"numpy": NUMPY, "math": MATH}.get(base.path)
    if allowed is None or attr not in allowed:
        raise refusal(f"`{base.path}.{attr}` is not read (of the imports, only numpy's and math's are)", line)
    value = getattr(np if base.path == "numpy" else math, attr)
    return value if not callable(value) or isinstance(value, type) else ModuleRef(f"{base.path}.{attr}")


def module_function(ref: ModuleRef, line: int | None) -> Callable[..., Any]:
    module, _, attr = ref.path.partition(".")
    value = module_attr(ModuleRef(module), attr, line) if attr else None
    if not isinstance(value, ModuleRef):
        raise refusal(f"calling `{ref.path}` is not read", line)
    return getattr(np if module == "numpy" else math, attr)

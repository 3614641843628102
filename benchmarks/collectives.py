"""Collective instructions of a compiled program, by kind: what the sharding and pod tables count."""

from __future__ import annotations

import math
import re

KINDS = ("all-gather", "all-reduce", "reduce-scatter", "collective-permute", "all-to-all")
_INSTRUCTION = re.compile(rf"\b({'|'.join(KINDS)})(?:-start)?\(")


def count(hlo: str) -> dict[str, int]:
    """Collective instructions of a compiled HLO module, by kind (an asynchronous start/done pair counts
    once)."""
    found = _INSTRUCTION.findall(hlo)
    return {k: found.count(k) for k in KINDS}


_RESULT = re.compile(rf"= (\(?[^=]*?\)?) ({'|'.join(KINDS)})\(")
_ARRAY = re.compile(r"\b(pred|[a-z]+\d+)\[([\d,]*)\]")


def _bytes(dtype: str, dims: str) -> int:
    width = 1 if dtype == "pred" else int(re.sub(r"\D", "", dtype)) // 8
    return width * math.prod(int(d) for d in dims.split(",") if d)


def whole_bytes(hlo: str, devices: int) -> int:
    """The bytes of the whole arrays the compiled module's collectives combine: an all-reduce's result, an
    all-gather's, a reduce-scatter's times `devices` (its input). What a step moves through collectives
    is this up to each kind's algorithm (XLA:CPU's are synchronous: one instruction, its result)."""
    total = 0
    for result, kind in _RESULT.findall(hlo):
        whole = sum(_bytes(dtype, dims) for dtype, dims in _ARRAY.findall(result))
        total += whole * devices if kind == "reduce-scatter" else whole
    return total

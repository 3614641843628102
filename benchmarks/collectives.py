"""Collective instructions of a compiled program, by kind: what the sharding and pod tables count."""

from __future__ import annotations

import re

KINDS = ("all-gather", "all-reduce", "reduce-scatter", "collective-permute", "all-to-all")
_INSTRUCTION = re.compile(rf"\b({'|'.join(KINDS)})(?:-start)?\(")


def count(hlo: str) -> dict[str, int]:
    """Collective instructions of a compiled HLO module, by kind (an asynchronous start/done pair counts
    once)."""
    found = _INSTRUCTION.findall(hlo)
    return {k: found.count(k) for k in KINDS}

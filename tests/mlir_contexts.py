"""One MLIR context for many lowerings, in the suite's own process.

JAX makes a new MLIR context for every program it lowers, loading and registering its dialects afresh
(about 2 ms each). The suite lowers tens of thousands of small programs (every eager op of a new shape,
every `jit` of a new function), and that setup was a tenth of its time. Here each context serves
`USES` lowerings before a new one is made: the programs are the same (a context only owns the
uniqued types and attributes the modules are built from), and a context's memory stays bounded.
`GRADTX_TEST_FRESH_MLIR_CONTEXTS=1` keeps JAX's own behaviour.
"""

from __future__ import annotations

import threading
from typing import Any

USES = 500
"""Lowerings per context."""


def reuse() -> None:
    """Make JAX's `make_ir_context` hand out one context `USES` times (per thread) before a new one."""
    from jax._src.interpreters import mlir

    fresh = mlir.make_ir_context
    local = threading.local()

    def make_ir_context() -> Any:
        uses = getattr(local, "uses", USES)
        if uses >= USES:
            local.context, uses = fresh(), 0
        local.uses = uses + 1
        return local.context

    mlir.make_ir_context = make_ir_context

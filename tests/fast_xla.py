"""XLA's CPU backend without its expensive passes, for the suite's own programs and processes.

The suite's programs are tiny and compiling them is most of its time: these options about halve
it (no fast math: NaN stays NaN). `GRADTX_TEST_XLA_DEFAULT=1` runs everything with XLA's defaults.
"""

from __future__ import annotations

import os

OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}
"""As `compiler_options` of one compilation (`jax.jit(f, compiler_options=OPTIONS)`)."""

FLAGS = " ".join(f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in OPTIONS.items())
"""As `XLA_FLAGS`, for a whole process."""


def wanted() -> bool:
    """Whether the suite compiles with these options (unless GRADTX_TEST_XLA_DEFAULT is set)."""
    return not os.environ.get("GRADTX_TEST_XLA_DEFAULT")


def xla_flags(flags: str | None) -> str | None:
    """`XLA_FLAGS` with these options added to `flags` (as they are when not `wanted`)."""
    return f"{flags or ''} {FLAGS}".strip() if wanted() else flags

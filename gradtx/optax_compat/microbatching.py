"""`optax.microbatching` under `gradtx.optax_compat`: `microbatch`, `micro_vmap`, `micro_grad` and their
accumulators, which are gradtx's own (`gradtx.combinators`), with optax's signatures and numbers."""

from __future__ import annotations

from typing import Any

from gradtx.combinators._micro_grad import micro_grad, micro_vmap
from gradtx.combinators._microbatch import AccumulationType, Accumulator, microbatch, reshape_batch_axis
from gradtx.optax_compat import _mirror

__all__ = ["AccumulationType", "Accumulator", "micro_grad", "micro_vmap", "microbatch", "reshape_batch_axis"]


def __getattr__(name: str) -> Any:
    raise _mirror.missing("gradtx.optax_compat.microbatching", name)

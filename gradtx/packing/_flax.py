"""Packed trees in `flax.serialization` (registered when Flax is installed): stored leaf by leaf, by name.

A `Packed` becomes the state dict of its unpacked tree, so a Flax `TrainState` with packed
parameters serializes like one without, and bytes written by either restore into the other.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import jax

from gradtx._core.packed import Packed, pack, unpack


def _to_state_dict(packed: Packed) -> Any:
    from flax import serialization

    return serialization.to_state_dict(unpack(packed))


def _from_state_dict(target: Packed, state: Any) -> Packed:
    from flax import serialization

    leaves = serialization.from_state_dict(jax.eval_shape(unpack, target), state)
    return pack(leaves, layout=target.layout)


def register() -> bool:
    """Register `Packed` with `flax.serialization` if Flax is installed; whether it was."""
    if importlib.util.find_spec("flax") is None:
        return False
    from flax import serialization

    serialization.register_serialization_state(Packed, _to_state_dict, _from_state_dict, override=True)
    return True

"""bfloat16 kept unbiased: stochastic rounding, and bfloat16 with an int8 error correction.

Rounding a float32 to the nearest bfloat16 loses every change smaller than half a bfloat16 step
(1/256 of the value): a moment that moves by less than that each step never moves. Two ways out, both
slots of 16 or 24 bits instead of 32:

- `StochasticBF16`: each value rounds up with the probability of its distance to the bfloat16 below,
  down otherwise, so the stored value is right on average (`stochastic_round`).
- `CorrectedBF16`: the nearest bfloat16 plus an int8 holding the rest in 1/254ths of a step (heavyball's
  `ecc="bf16+8"`): about 15 bits of mantissa in 3 bytes. The correction rounds stochastically too.

Both slots carry a PRNG key (two uint32) that each step splits, so a step is a pure function of the
state, and the bits differ from step to step and from slot to slot (`lowbit.slot_index`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import lowbit as _lowbit

_IMPL = "threefry2x32"


def _split(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The key a slot keeps for its next step, and a key for this one (raw uint32 key data both)."""
    keep, use = jax.random.split(jax.random.wrap_key_data(key, impl=_IMPL))
    return jax.random.key_data(keep), use


def initial_key(seed: int, index: int) -> jax.Array:
    return jax.random.key_data(jax.random.fold_in(jax.random.key(seed, impl=_IMPL), index))


def stochastic_round(x: Any, key: Any) -> jax.Array:
    """`x` rounded to bfloat16 stochastically: up with probability (x - below) / (above - below).

    The float32 bits below bfloat16's 16 get a uniform 16-bit number added before they are cut, so a
    value a fraction f of the way to the next bfloat16 carries into it with probability f. NaN stays NaN;
    values past bfloat16's largest may round to infinity as round-to-nearest does.
    """
    x = jnp.asarray(x, jnp.float32)
    noise = jax.random.bits(key, x.shape, jnp.uint16).astype(jnp.uint32)
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    cut = (bits + noise) & np.uint32(0xFFFF0000)
    rounded = jax.lax.bitcast_convert_type(cut, jnp.float32)
    return jnp.where(jnp.isnan(x), x, rounded).astype(jnp.bfloat16)


def _half_step_exponent(narrow: jax.Array) -> jax.Array:
    """log2 of half a bfloat16 step at each value (heavyball's `_log_ulp(x) - 1`)."""
    exponent = (jax.lax.bitcast_convert_type(narrow, jnp.uint16).astype(jnp.int32) & 0x7FFF) >> 7
    return jnp.where(exponent == 0, 1 - 127 - 7, exponent - (127 + 7)) - 1


_CORRECTION_MAX = 127.0


@jax.tree_util.register_pytree_node_class
class Rounded(_lowbit.Stored):
    """A slot of `dtype` stored in bfloat16, rounded stochastically at each store."""

    def __init__(self, values: Any, key: Any, shape: tuple[int, ...], dtype: Any):
        self.values, self.key = values, key
        self.shape, self.dtype = tuple(shape), jnp.dtype(dtype)

    def tree_flatten(self) -> tuple[tuple[Any, Any], tuple[Any, ...]]:
        return (self.values, self.key), (self.shape, self.dtype)

    @classmethod
    def tree_unflatten(cls, aux: tuple[Any, ...], children: tuple[Any, Any]) -> Rounded:
        return cls(*children, *aux)

    def dequantize(self) -> jax.Array:
        return self.values.astype(self.dtype)

    def replaced(self, new: Any) -> Rounded:
        keep, use = _split(self.key)
        return Rounded(stochastic_round(new, use), keep, self.shape, self.dtype)

    def __repr__(self) -> str:
        return f"Rounded(bfloat16, shape={self.shape}, dtype={self.dtype.name})"


@jax.tree_util.register_pytree_node_class
class Corrected(_lowbit.Stored):
    """A slot of `dtype` stored as its nearest bfloat16 and an int8 correction in 1/254ths of a step."""

    def __init__(self, values: Any, correction: Any, key: Any, shape: tuple[int, ...], dtype: Any):
        self.values, self.correction, self.key = values, correction, key
        self.shape, self.dtype = tuple(shape), jnp.dtype(dtype)

    def tree_flatten(self) -> tuple[tuple[Any, Any, Any], tuple[Any, ...]]:
        return (self.values, self.correction, self.key), (self.shape, self.dtype)

    @classmethod
    def tree_unflatten(cls, aux: tuple[Any, ...], children: tuple[Any, Any, Any]) -> Corrected:
        return cls(*children, *aux)

    def dequantize(self) -> jax.Array:
        half = _half_step_exponent(self.values)
        rest = jnp.ldexp(self.correction.astype(jnp.float32) / np.float32(_CORRECTION_MAX), half)
        return (self.values.astype(jnp.float32) + rest).astype(self.dtype)

    def replaced(self, new: Any) -> Corrected:
        keep, use = _split(self.key)
        return _corrected(new, use, keep, self.dtype)

    def __repr__(self) -> str:
        return f"Corrected(bfloat16 + int8, shape={self.shape}, dtype={self.dtype.name})"


def _corrected(x: Any, use: jax.Array, keep: jax.Array, dtype: Any) -> Corrected:
    """heavyball's `_ULPState.encode`: the nearest bfloat16, then the rest in units of 1/127 of half a step
    (at most half a step, as the rounding was to nearest), rounded down after a uniform [0, 1) is added."""
    x = jnp.asarray(x, jnp.float32)
    narrow = x.astype(jnp.bfloat16)
    rest = jnp.ldexp(x - narrow.astype(jnp.float32), -_half_step_exponent(narrow))
    rest = jnp.where(jnp.isfinite(rest), jnp.clip(rest, -1.0, 1.0), 0.0) * np.float32(_CORRECTION_MAX)
    correction = jnp.floor(rest + jax.random.uniform(use, x.shape, jnp.float32)).astype(jnp.int8)
    return Corrected(narrow, correction, keep, x.shape, dtype)


class StochasticBF16(NamedTuple):
    """Slots in bfloat16, rounded stochastically (`stochastic_round`); keys from `seed`."""

    seed: int = 0

    def store(self, x: Any, dtype: Any = None, *, zeros: bool = False) -> Rounded:
        x = _real(x, "bfloat16 with stochastic rounding")
        key = initial_key(self.seed, _lowbit.slot_index())
        keep, use = _split(key)
        return Rounded(stochastic_round(x, use), keep, x.shape, x.dtype if dtype is None else dtype)


class CorrectedBF16(NamedTuple):
    """Slots in bfloat16 with an int8 error correction (heavyball's `ecc="bf16+8"`); keys from `seed`."""

    seed: int = 0

    def store(self, x: Any, dtype: Any = None, *, zeros: bool = False) -> Corrected:
        x = _real(x, "bfloat16 with an int8 correction")
        keep, use = _split(initial_key(self.seed, _lowbit.slot_index()))
        return _corrected(x, use, keep, x.dtype if dtype is None else dtype)


def _real(x: Any, what: str) -> jax.Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"a slot in {what} holds real floats; got a slot of dtype {x.dtype}.")
    return x

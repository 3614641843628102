"""bfloat16 kept unbiased: stochastic rounding, and bfloat16 with an int8 error correction.

Rounding a float32 to the nearest bfloat16 loses every change smaller than half a bfloat16 step
(1/256 of the value): a moment that moves by less than that each step never moves. Two ways out, both
slots of 16 or 24 bits instead of 32:

- `StochasticBF16`: each value rounds up with the probability of its distance to the bfloat16 below,
  down otherwise, so the stored value is right on average (`stochastic_round`).
- `CorrectedBF16`: the nearest bfloat16 plus an int8 holding the rest in 1/254ths of a step (heavyball's
  `ecc="bf16+8"`): about 15 bits of mantissa in 3 bytes. The correction rounds stochastically too.

Both slots carry a PRNG key (two uint32) that each step splits, so a step is a pure function of the
state, and the bits differ from step to step and from slot to slot (`slot_formats.slot_index`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import lowbit as _lowbit
from gradtx._core import placement as _placement
from gradtx._core import slot_formats as _slot_formats

_IMPL = "threefry2x32"


def _split(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The key a slot keeps for its next step, and a key for this one (raw uint32 key data both)."""
    keep, use = jax.random.split(jax.random.wrap_key_data(key, impl=_IMPL))
    return jax.random.key_data(keep), use


def initial_key(seed: int, index: int, like: Any) -> jax.Array:
    """Slot `index`'s key from `seed`, on the devices of `like` (replicated there, as a scalar statistic)."""
    key = jax.random.key_data(jax.random.fold_in(jax.random.key(seed, impl=_IMPL), index))
    return key + _placement.reduced(like, (), jnp.uint32)


def _mix(h: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finalizer: a bijection of uint32, each output bit depending on every input bit."""
    h = (h ^ (h >> 16)) * np.uint32(0x85EBCA6B)
    h = (h ^ (h >> 13)) * np.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def random_bits(key: Any, shape: tuple[int, ...]) -> jax.Array:
    """Uniform uint32 bits of `shape` from `key`: each element's position hashed with the key's two words.

    A counter-based generator of a dozen integer operations per element, a tenth of threefry's cost on a
    CPU, for rounding noise (not for sampling). `key`: a typed PRNG key or its raw uint32 data.
    """
    words = jnp.ravel(jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key)
    words = words.astype(jnp.uint32)
    position = jax.lax.iota(jnp.uint32, math.prod(shape)).reshape(shape)
    return _mix(_mix(position * np.uint32(0x9E3779B9) ^ words[0]) ^ words[-1])


def stochastic_round(x: Any, key: Any) -> jax.Array:
    """`x` rounded to bfloat16 stochastically: up with probability (x - below) / (above - below).

    The float32 bits below bfloat16's 16 get a uniform 16-bit number added before they are cut, so a
    value a fraction f of the way to the next bfloat16 carries into it with probability f. NaN stays NaN;
    values past bfloat16's largest may round to infinity as round-to-nearest does.
    """
    x = jnp.asarray(x, jnp.float32)
    noise = random_bits(key, x.shape) >> 16
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    cut = (bits + noise) & np.uint32(0xFFFF0000)
    rounded = jax.lax.bitcast_convert_type(cut, jnp.float32)
    return jnp.where(jnp.isnan(x), x, rounded).astype(jnp.bfloat16)


def _half_step(narrow: jax.Array) -> jax.Array:
    """Half a bfloat16 step at each value (heavyball's `2 ** (_log_ulp(x) - 1)`), as a float32 built from its
    exponent: 2**(e - 135) for a bfloat16 of biased exponent e (1 - 135 for subnormals), subnormal below
    2**-126."""
    exponent = (jax.lax.bitcast_convert_type(narrow, jnp.uint16).astype(jnp.int32) & 0x7FFF) >> 7
    power = jnp.maximum(exponent, 1) - 135
    normal = jnp.maximum(power + 127, 1) << 23
    subnormal = 1 << jnp.clip(power + 149, 0, 22)
    return jax.lax.bitcast_convert_type(jnp.where(power >= -126, normal, subnormal), jnp.float32)


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

    def rows(self, index: jax.Array) -> jax.Array:
        return _placement.take_rows(self.values, index).astype(self.dtype)

    def with_rows(self, index: jax.Array, rows: jax.Array) -> Rounded:
        keep, use = _split(self.key)
        values = _set_rows(self.values, index, stochastic_round(rows, use))
        return Rounded(values, keep, self.shape, self.dtype)

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
        # the fraction first: half a step over 127 is subnormal for values under 1e-36, and XLA flushes those
        rest = (self.correction.astype(jnp.float32) / np.float32(_CORRECTION_MAX)) * _half_step(self.values)
        return (self.values.astype(jnp.float32) + rest).astype(self.dtype)

    def replaced(self, new: Any) -> Corrected:
        keep, use = _split(self.key)
        return _corrected(new, use, keep, self.dtype)

    def rows(self, index: jax.Array) -> jax.Array:
        values = _placement.take_rows(self.values, index)
        correction = _placement.take_rows(self.correction, index)
        return Corrected(values, correction, self.key, values.shape, self.dtype).dequantize()

    def with_rows(self, index: jax.Array, rows: jax.Array) -> Corrected:
        keep, use = _split(self.key)
        new = _corrected(rows, use, keep, self.dtype)
        values = _set_rows(self.values, index, new.values)
        correction = _placement.put_rows(self.correction, index, new.correction)
        return Corrected(values, correction, keep, self.shape, self.dtype)

    def __repr__(self) -> str:
        return f"Corrected(bfloat16 + int8, shape={self.shape}, dtype={self.dtype.name})"


def _corrected(x: Any, use: jax.Array, keep: jax.Array, dtype: Any) -> Corrected:
    """heavyball's `_ULPState.encode`: the nearest bfloat16, then the rest in units of 1/127 of half a step
    (at most half a step, as the rounding was to nearest), rounded down after a uniform [0, 1) is added."""
    x = jnp.asarray(x, jnp.float32)
    narrow = x.astype(jnp.bfloat16)
    rest = (x - narrow.astype(jnp.float32)) / _half_step(narrow)  # exact: a power of 2
    rest = jnp.where(jnp.isfinite(rest), jnp.clip(rest, -1.0, 1.0), 0.0) * np.float32(_CORRECTION_MAX)
    uniform = (random_bits(use, x.shape) >> 8).astype(jnp.float32) * np.float32(2.0**-24)  # [0, 1)
    correction = jnp.floor(rest + uniform).astype(jnp.int8)
    return Corrected(narrow, correction, keep, x.shape, dtype)


def _set_rows(values: jax.Array, index: jax.Array, rows: jax.Array) -> jax.Array:
    """bfloat16 `values` with rows `index` set, as their bits (XLA:CPU scatters bfloat16 through float32:
    a pass over the whole table)."""
    bits = jax.lax.bitcast_convert_type(values, jnp.uint16)
    new = _placement.put_rows(bits, index, jax.lax.bitcast_convert_type(rows, jnp.uint16))
    return jax.lax.bitcast_convert_type(new, jnp.bfloat16)


class StochasticBF16(NamedTuple):
    """Slots in bfloat16, rounded stochastically (`stochastic_round`); keys from `seed`."""

    seed: int = 0

    def store(self, x: Any, dtype: Any = None, *, fill: float | None = None) -> Rounded:
        x = _lowbit.real_slot(x, "bfloat16 with stochastic rounding")
        keep, use = _split(initial_key(self.seed, _slot_formats.slot_index(), x))
        return Rounded(stochastic_round(x, use), keep, x.shape, x.dtype if dtype is None else dtype)


class CorrectedBF16(NamedTuple):
    """Slots in bfloat16 with an int8 error correction (heavyball's `ecc="bf16+8"`); keys from `seed`."""

    seed: int = 0

    def store(self, x: Any, dtype: Any = None, *, fill: float | None = None) -> Corrected:
        x = _lowbit.real_slot(x, "bfloat16 with an int8 correction")
        keep, use = _split(initial_key(self.seed, _slot_formats.slot_index(), x))
        return _corrected(x, use, keep, x.dtype if dtype is None else dtype)

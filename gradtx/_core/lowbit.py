"""Slots in fewer bits: blockwise-quantized codes with one scale per block.

A `Quantized` slot is a pytree of two arrays: `codes` (one uint8 per element for 8 bits, one per
pair of elements for 4 bits) and `scales` (one float32 per block: the block's largest magnitude).
A value is `code_map[code] * scale`. Blocks run along the fewest trailing axes that hold one
(flattened; the last block of a row may be short), and the leading axes are kept: a slot's codes
are `[*leading axes, trailing elements]` (4 bits: half as many, rounded up) and its scales
`[*leading axes, blocks]`, placed along the leading axes as the parameter is (under Explicit axes, a
flattened sharded axis is placed as `placement.flattened` says). Where the trailing
length is a multiple of `block_size` the blocks are torchao's and bitsandbytes' (blocks of the
flattened array). A block's scale is its largest magnitude (at least 1e-12), and
each value divided by it takes the nearest entry of the map, exactly as torchao's low-bit
optimizers quantize (a binary search for the entry below, then up when at least halfway to the
next; bitsandbytes' CPU kernel differs only on such exact ties).

`update_rule` keeps a quantized slot quantized, as it keeps a bf16 slot bf16: the formula sees
the dequantized float32 value, and the new value is quantized again with the same format.

Quantizing and dequantizing are traced in `gradtx._core.sliced.BLOCK_SCOPE`, the scope in which
`sharded_state`'s check of an update on a replica's flat slices lets them mix a block's elements: a
slice holds the leaf's own blocks, as `gradtx._core.slot_formats.format_for` made sure.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import code_maps as _code_maps
from gradtx._core import placement as _placement
from gradtx._core import sliced as _sliced


class Format(NamedTuple):
    """How a slot is stored: `bits` (8 or 4) per element, blocks of `block_size` (along the trailing axes,
    `split`), and the map of codes (`signed`: a map with negative values, for slots that change sign)."""

    bits: int
    block_size: int
    signed: bool

    @property
    def code_map(self) -> np.ndarray:
        return _code_maps.code_map(self.bits, self.signed)

    def quantize(self, x: Any, dtype: Any = None) -> Quantized:
        """`x` (a real float array) in this format, its values standing for an array of `dtype` (default:
        `x`'s)."""
        x = real_slot(x, f"{self.bits} bits")
        shape, dtype = tuple(x.shape), x.dtype if dtype is None else dtype
        lead, trail = split(shape, self.block_size)
        with jax.named_scope(_sliced.BLOCK_SCOPE):
            x32 = x.astype(jnp.float32)
            placed = _placement.flattened(x, len(lead), self.block_size, pairs=self.bits == 4)
            if placed is not None:
                x32 = jax.sharding.reshard(x32, placed.local)
            flat = jnp.reshape(x32, (*lead, trail), out_sharding=placed and placed.flat)
            if placed is not None:
                flat = jax.sharding.reshard(flat, placed.blocks)
            scales = jnp.maximum(_absmax(_blocks(flat, self.block_size)), np.float32(1e-12))
            scales = scales.reshape(*lead, -1)
            normed = x32 / _spread(scales, self.block_size, trail).reshape(shape)
            codes = jnp.reshape(_nearest(normed, self), (*lead, trail), out_sharding=placed and placed.flat)
            if placed is not None:
                codes = jax.sharding.reshard(codes, placed.codes)
            if self.bits == 4:
                codes = _pack_pairs(codes)
        return Quantized(codes, scales, self, shape, dtype)

    def store(self, x: Any, dtype: Any = None, *, fill: float | None = None) -> Quantized:
        """`x` as a slot in this format (`quantize`; every slot format has `store`). `fill`: a number that
        every element of `x` is (a new slot). 0 is stored as torchao makes a new slot, codes 0 and scales 0,
        so that every value is exactly 0 (quantized, a zero block's scale is 1e-12, and the 4-bit unsigned
        map has no 0); another number is what `quantize` gives, each block's scale the number's magnitude
        and every code that of +-1, written without the quantizing, which XLA would otherwise fold as a
        constant at compile time (seconds per million elements)."""
        q = self.quantize(x, dtype)
        odd = self.bits == 4 and split(q.shape, self.block_size)[1] % 2  # a padded last nibble: code 0
        if fill is None or not math.isfinite(fill) or (odd and fill != 0):
            return q
        value = float(np.asarray(fill, jnp.result_type(x)).astype(np.float32))  # as `x` holds it
        if 0 < abs(value) < 1e-12:  # under the least scale: not +-1 once divided by it
            return q
        code, scale = 0, abs(value)  # (0: torchao's new slot)
        if value:
            unit = np.array([math.copysign(1.0, value)], np.float32)  # each value over its block's scale
            code = int(_code_maps.nearest_reference(unit, self.code_map)[0])
            code = code * 17 if self.bits == 4 else code  # both nibbles
        # made from the quantized slot, so that GSPMD places them as it under Auto axes, then drops it
        codes = jnp.where(False, q.codes, np.uint8(code))
        scales = jnp.where(False, q.scales, np.float32(scale))
        return Quantized(codes, scales, self, q.shape, q.dtype)


def real_slot(x: Any, what: str) -> jax.Array:
    """`x` as an array of real floats, the values a slot in `what` can hold (a complex one would lose its
    imaginary parts): refused otherwise."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"a slot in {what} holds real floats; got a slot of dtype {x.dtype}.")
    return x


DEFAULT_BLOCK_SIZE = {8: 256, 4: 128}
"""torchao's block sizes (bitsandbytes' 8-bit optimizers use 256 too)."""


def blockwise(
    bits: int = 8, block_size: int | None = None, signed: bool = True, *, fn: str = "blockwise"
) -> Format:
    """A low-bit format: `bits` (8 or 4) per element, blocks of `block_size` (default: 256 for 8 bits,
    128 for 4), a signed map (first moments, momenta) or an unsigned one (second moments); `fn` names
    the function the user called in errors."""
    if bits not in DEFAULT_BLOCK_SIZE:
        raise ValueError(f"`{fn}`: `bits` must be 8 or 4, got {bits!r}.")
    size = DEFAULT_BLOCK_SIZE[bits] if block_size is None else block_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 2 or size % 2:
        raise ValueError(f"`{fn}`: `block_size` must be an even int >= 2, got {block_size!r}.")
    if not isinstance(signed, bool):
        raise TypeError(f"`{fn}`: `signed` must be a bool, got {signed!r}.")
    return Format(bits, size, signed)


def split(shape: tuple[int, ...], block_size: int) -> tuple[tuple[int, ...], int]:
    """The leading axes a slot keeps, and the length of the rest flattened, along which it is blocked: the
    fewest trailing axes that hold a block (all of them for a smaller array; a scalar is one element)."""
    for k in range(1, len(shape) + 1):
        if math.prod(shape[-k:]) >= block_size:
            return shape[:-k], math.prod(shape[-k:])
    return (), math.prod(shape)


def _blocks(x: jax.Array, block_size: int) -> jax.Array:
    """`x` with its last axis cut into blocks of `block_size` (zero-padded): `[..., blocks, block_size]`, or
    `[..., block_size]` where the axis holds one block. XLA:CPU plans an axis of one block badly: the step
    then keeps a slot's old values and the new values' magnitudes in temporaries of their own (2.5x the
    time)."""
    n = x.shape[-1]
    pad = -n % block_size
    if pad:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])
    if n + pad == block_size:
        return x
    return x.reshape(*x.shape[:-1], (n + pad) // block_size, block_size)


def _spread(scales: jax.Array, block_size: int, trail: int) -> jax.Array:
    """Each block's scale (`scales`: `[..., blocks]`) at each of its elements: `[..., trail]`. Values are
    scaled where they lie, in the parameter's shape: XLA:CPU kept two more temporaries per slot for values
    padded and sliced back, or flattened across rows."""
    wide = jnp.broadcast_to(scales[..., None], (*scales.shape, block_size))
    return wide.reshape(*scales.shape[:-1], -1)[..., :trail]


def _absmax(blocks: jax.Array) -> jax.Array:
    """The largest magnitude of each block (the last axis of `blocks`), taken over runs of 16 first: the
    same values, and XLA:CPU then fuses the magnitudes into the reduction. With one reduction over the block
    it writes them to a temporary and keeps the slot's old values dequantized in another (16 bytes per
    element for AdamW's two moments, 8 bytes this way)."""
    size = blocks.shape[-1]
    if size > 16 and size % 16 == 0:
        runs = jnp.max(jnp.abs(blocks.reshape(*blocks.shape[:-1], size // 16, 16)), axis=-1)
        return jnp.max(runs, axis=-1)
    return jnp.max(jnp.abs(blocks), axis=-1)


def _nearest(normed: jax.Array, fmt: Format) -> jax.Array:
    """The code of each value in [-1, 1] (`code_maps.nearest_reference`'s, as uint8): two table reads per
    value, indexed by its top 16 bits (`code_maps.lookup`), instead of a binary search's eight."""
    base, threshold = _code_maps.lookup(fmt.bits, fmt.signed)
    top = (jax.lax.bitcast_convert_type(normed, jnp.uint32) >> 16).astype(jnp.int32)
    # the negative values' buckets follow the positive ones; arithmetic, not a select, which XLA:CPU compiles
    # to a branch where 4-bit codes are paired (a mispredicted branch per value of random sign: 3x slower)
    negative = top >> 15
    index = jnp.minimum(top - negative * (0x8000 - _code_maps.POSITIVE), 2 * _code_maps.POSITIVE - 1)
    return _read(base, index) + (normed >= _read(threshold, index)).astype(jnp.uint8)


def _read(table: np.ndarray, index: jax.Array) -> jax.Array:
    """`table[index]`, placed as `index` is (under Explicit axes a gather must be told)."""
    return jnp.asarray(table).at[index].get(out_sharding=_placement.explicit_sharding(index))


def _pack_pairs(codes: jax.Array) -> jax.Array:
    """4-bit codes two to a byte along the last axis (the first in the high nibble, torchao's order). A sum
    over each pair (`16 first + second`, exact): XLA:CPU compiles the rounding to codes into a reduction's
    loop well, where reading the pairs' halves apart took it twice the time."""
    if codes.shape[-1] % 2:
        codes = jnp.pad(codes, [(0, 0)] * (codes.ndim - 1) + [(0, 1)])
    pairs = codes.reshape(*codes.shape[:-1], -1, 2) * np.array([16, 1], np.uint8)
    return jax.lax.reduce(pairs, np.uint8(0), jax.lax.add, (pairs.ndim - 1,))


def _unpack_pairs(packed: jax.Array, n: int) -> jax.Array:
    both = jnp.stack([packed >> 4, packed & 15], axis=-1)
    return both.reshape(*packed.shape[:-1], -1)[..., :n]


class Stored:
    """A slot kept in another form than an array of its dtype: `dequantize` gives its values,
    `replaced(new)` the same slot holding `new` (in the same form). `update_rule` hands a rule the values
    and stores what it returns with `replaced`; `Quantized` (here) and `gradtx._core.rounding`'s bfloat16
    slots are the forms."""

    shape: tuple[int, ...]
    dtype: Any

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dequantize(self) -> jax.Array:
        raise NotImplementedError

    def replaced(self, new: Any) -> Stored:
        raise NotImplementedError

    def rows(self, index: jax.Array) -> jax.Array:
        """The values of rows `index` (axis 0; zeros for an index out of range): a row-sparse step's
        gather. This default dequantizes the whole slot; a form that keeps rows apart reads only those."""
        return _placement.take_rows(self.dequantize(), index)

    def with_rows(self, index: jax.Array, rows: jax.Array) -> Stored:
        """The slot with rows `index` set to `rows` (out-of-range indices dropped): a row-sparse step's
        scatter. This default stores the whole slot again."""
        return self.replaced(_placement.put_rows(self.dequantize(), index, rows))


@jax.tree_util.register_pytree_node_class
class Quantized(Stored):
    """A slot stored as `codes` and `scales` in a `Format`; `shape` and `dtype` are the slot's own."""

    def __init__(self, codes: Any, scales: Any, format: Format, shape: tuple[int, ...], dtype: Any):
        self.codes, self.scales = codes, scales
        self.format, self.shape, self.dtype = format, tuple(shape), jnp.dtype(dtype)

    def tree_flatten(self) -> tuple[tuple[Any, Any], tuple[Any, ...]]:
        return (self.codes, self.scales), (self.format, self.shape, self.dtype)

    @classmethod
    def tree_unflatten(cls, aux: tuple[Any, ...], children: tuple[Any, Any]) -> Quantized:
        return cls(*children, *aux)

    def dequantize(self) -> jax.Array:
        """The slot's values, in its own dtype."""
        fmt, shape = self.format, self.shape
        lead, trail = split(shape, fmt.block_size)
        with jax.named_scope(_sliced.BLOCK_SCOPE):
            codes = _unpack_pairs(self.codes, trail) if fmt.bits == 4 else self.codes
            values = _read(fmt.code_map, codes.astype(jnp.int32)).reshape(shape)
            scaled = values * _spread(self.scales, fmt.block_size, trail).reshape(shape)
            return scaled.astype(self.dtype)

    def replaced(self, new: Any) -> Quantized:
        return self.format.quantize(new, self.dtype)

    def _rows_apart(self) -> bool:
        """Each row (index of axis 0) holds whole blocks: its codes and scales are rows of theirs."""
        return len(split(self.shape, self.format.block_size)[0]) >= 1

    def _rows_per_block(self) -> int:
        """How many rows a block holds where rows are shorter than a block and a block is whole rows (an
        embedding of width 64 in blocks of 256: 4); 0 otherwise. A row's codes are then a row of the codes
        seen as `[rows, codes per row]`, and its scale that of its block, `row // rows per block`."""
        row, size = math.prod(self.shape[1:]), self.format.block_size
        odd = self.format.bits == 4 and row % 2  # a row's 4-bit codes would share a byte with the next's
        if self._rows_apart() or self.ndim < 2 or row == 0 or size % row or odd:
            return 0
        return size // row

    def _read_rows(self, index: jax.Array, per_block: int) -> jax.Array:
        """The float32 values of rows `index` (`[n, row]`; 0 for an index past the last row), reading only
        their codes and their blocks' scales."""
        fmt, n = self.format, self.shape[0]
        codes = _placement.take_rows(self.codes.reshape(n, -1), index)
        if fmt.bits == 4:
            codes = _unpack_pairs(codes, 2 * codes.shape[-1])
        scales = _placement.take_rows(self.scales, index // per_block)
        values = _read(fmt.code_map, codes.astype(jnp.int32)) * scales[:, None]
        return jnp.where((index < n)[:, None], values, 0)

    def _with_rows_of_blocks(self, index: jax.Array, rows: jax.Array, per_block: int) -> Quantized:
        """The slot with rows `index` set to `rows`, its touched blocks quantized again (their other rows
        read back), the others as they are: O(touched rows x rows per block)."""
        n, width, count = self.shape[0], math.prod(self.shape[1:]), index.shape[0]
        last = self.scales.shape[-1]  # past the last block: a padding entry's
        block = jnp.where(index < n, index // per_block, last)
        touched = jnp.unique(block, size=count, fill_value=last)
        members = (touched[:, None] * per_block + jnp.arange(per_block)).reshape(-1)  # their rows
        values = self._read_rows(members, per_block).reshape(count, per_block, width)
        at = jnp.where(index < n, jnp.searchsorted(touched, block), count)  # each row's block, or dropped
        rows = rows.reshape(count, width).astype(jnp.float32)
        values = values.at[at, index % per_block].set(rows, mode="drop")
        new = self.format.quantize(values.reshape(count, -1), self.dtype)
        new_codes = new.codes.reshape(count * per_block, -1)
        codes = _placement.put_rows(self.codes.reshape(n, -1), members, new_codes)
        scales = _placement.put_rows(self.scales, touched, new.scales[:, 0])
        return Quantized(codes.reshape(self.codes.shape), scales, self.format, self.shape, self.dtype)

    def rows(self, index: jax.Array) -> jax.Array:
        per_block = self._rows_per_block()
        if per_block:
            return self._read_rows(index, per_block).reshape(-1, *self.shape[1:]).astype(self.dtype)
        if not self._rows_apart():
            return super().rows(index)
        codes = _placement.take_rows(self.codes, index)
        scales = _placement.take_rows(self.scales, index)
        shape = (index.shape[0], *self.shape[1:])
        return Quantized(codes, scales, self.format, shape, self.dtype).dequantize()

    def with_rows(self, index: jax.Array, rows: jax.Array) -> Stored:
        per_block = self._rows_per_block()
        if per_block:
            return self._with_rows_of_blocks(index, rows, per_block)
        if not self._rows_apart():
            return super().with_rows(index, rows)
        new = self.format.quantize(rows, self.dtype)  # only the touched rows are quantized
        codes = _placement.put_rows(self.codes, index, new.codes)
        scales = _placement.put_rows(self.scales, index, new.scales)
        return Quantized(codes, scales, self.format, self.shape, self.dtype)

    def __repr__(self) -> str:
        return f"Quantized({self.format.bits}-bit, shape={self.shape}, dtype={self.dtype.name})"


def is_format(x: Any) -> bool:
    """A slot format: a `Format` or one of `gradtx._core.rounding`'s (named tuples with `store(x, dtype)`)."""
    return isinstance(x, tuple) and callable(getattr(x, "store", None))


def is_stored(x: Any) -> bool:
    return isinstance(x, Stored)


def values(x: Any) -> Any:
    """A slot's values: a `Stored` one dequantized, any other as it is."""
    return x.dequantize() if is_stored(x) else x


def dequantized(tree: Any) -> Any:
    """`tree` with every `Stored` slot replaced by its values."""
    return jax.tree.map(values, tree, is_leaf=is_stored)


def relabeled(tree: Any, like: Any) -> Any:
    """`tree` with each `Stored` slot holding its arrays as `like`'s slot at its place says (its shape and
    format): a replica's flat slice of a leaf (`sharded_state` inside `shard_map`) or the whole leaf."""

    def one(slot: Any, target: Any) -> Any:
        return (
            jax.tree.unflatten(jax.tree.structure(target), jax.tree.leaves(slot)) if is_stored(slot) else slot
        )

    return jax.tree.map(one, tree, like, is_leaf=is_stored)


def as_slices(tree: Any, length: Callable[[int], int]) -> Any:
    """`tree` with each `Stored` slot holding its arrays as a replica's flat slice of `length(size)` of its
    leaf (of `size` elements) does."""

    def one(slot: Any) -> Any:
        if not is_stored(slot):
            return slot
        sliced = copy.copy(slot)
        sliced.shape = (length(math.prod(slot.shape)),)
        return sliced

    return jax.tree.map(one, tree, is_leaf=is_stored)

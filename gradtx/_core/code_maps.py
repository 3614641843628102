"""The maps of codes of 8- and 4-bit slots (`gradtx._core.lowbit`), and the tables that round to them.

A code stands for an entry of a sorted map of values in [-1, 1] (times its block's scale): Dettmers'
dynamic map for 8 bits and for 4-bit first moments, torchao's linear map for 4-bit second moments. A value
takes the nearest entry as torchao's low-bit optimizers find it (`nearest_reference`); `lookup` gives the
same codes as two tables read by the value's top 16 bits.
"""

from __future__ import annotations

import functools

import numpy as np


def _linspace32(start: float, end: float, steps: int) -> np.ndarray:
    """`torch.linspace(start, end, steps)` in float32, value for value: the first half stepped up from
    `start`, the second down from `end`, each value one fused multiply-add (exact in float64, then
    rounded once), as PyTorch's CPU kernel computes it."""
    start32, end32 = np.float32(start), np.float32(end)
    step = np.float64((end32 - start32) / np.float32(steps - 1))
    i = np.arange(steps, dtype=np.float64)
    up = step * i + np.float64(start32)
    down = np.float64(end32) - step * (steps - 1 - i)
    return np.where(i < steps // 2, up, down).astype(np.float32)


@functools.cache
def dynamic_map(signed: bool = True, max_exponent_bits: int = 7, total_bits: int = 8) -> np.ndarray:
    """Dettmers' dynamic quantization map (bitsandbytes' `create_dynamic_map`), sorted, float32.

    Each exponent :math:`e` (a decade :math:`10^{e - (E - 1)}`) holds the midpoints of a linear split of
    [0.1, 1], more of them for larger exponents; signed maps mirror them; 0 and 1 complete the
    :math:`2^{bits}` entries. 8 bits, 7 exponent bits: bitsandbytes' and torchao's 8-bit map; 4 bits, 3
    exponent bits: torchao's 4-bit map of first moments.
    """
    data: list[float] = []
    non_sign = total_bits - 1
    extra = 2 ** (non_sign - max_exponent_bits) - 1
    i = 0
    for i in range(max_exponent_bits):
        n = 2 ** (i + non_sign - max_exponent_bits + (0 if signed else 1)) + 1
        data += _decade(i, max_exponent_bits, n, signed)
    if extra > 0:
        data += _decade(i, max_exponent_bits, extra + 1, signed)
    data += [0.0, 1.0]
    assert len(data) == 2**total_bits, (signed, max_exponent_bits, total_bits)
    return np.sort(np.asarray(data, np.float32))


def _decade(i: int, max_exponent_bits: int, n: int, signed: bool) -> list[float]:
    bounds = _linspace32(0.1, 1.0, n)
    means = (bounds[:-1] + bounds[1:]) / np.float32(2.0)
    scaled = (np.float32(10.0 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    return scaled + ([-v for v in scaled] if signed else [])


@functools.cache
def linear_unsigned_map(bits: int = 4) -> np.ndarray:
    """torchao's 4-bit map of second moments: :math:`k / 2^{bits}` for :math:`k = 1..2^{bits}` (no zero)."""
    return _linspace32(0.0, 1.0, 2**bits + 1)[1:]


@functools.cache
def code_map(bits: int, signed: bool) -> np.ndarray:
    """The map of a slot of `bits` (8 or 4) per element: signed for slots that change sign."""
    if bits == 8:
        return dynamic_map(signed)
    return dynamic_map(True, 3, 4) if signed else linear_unsigned_map(4)


def nearest_reference(normed: np.ndarray, code_map: np.ndarray) -> np.ndarray:
    """torchao's rounding to the map, in NumPy float32: a binary search for the last entry at or below each
    value, then the next entry where the value is at least halfway to it (`x - down >= (up - down) / 2`)."""
    x, table = np.asarray(normed, np.float32), np.asarray(code_map, np.float32)
    codes = np.zeros(x.shape, np.int64)
    step = len(table) // 2
    while step:
        codes = codes + np.where(x >= table[codes + step], step, 0)
        step //= 2
    up = np.minimum(codes + 1, len(table) - 1)
    down_value, up_value = table[codes], table[up]
    with np.errstate(invalid="ignore"):
        return np.where(x - down_value >= (up_value - down_value) * np.float32(0.5), up, codes)


POSITIVE = 0x3F81
"""Buckets of [0, 1]: the top 16 bits of a float32 (a bfloat16's bits) from 0 to 1.0's, 0x3F80."""


@functools.cache
def lookup(bits: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """`nearest_reference` as two tables over the buckets of values in [-1, 1] that share their top 16 bits:
    the code of the bucket's smallest value, and the value from which the code is one more (inf where
    the code is the same throughout; no bucket holds two steps, as the maps' entries are further apart
    than a bucket is wide). The code is non-decreasing in the value, so the tables give the same codes."""
    table = code_map(bits, signed)
    bucket = np.arange(2 * POSITIVE, dtype=np.uint32)
    top = np.where(bucket < POSITIVE, bucket, bucket - POSITIVE + 0x8000).astype(np.uint32) << 16
    negative = top >= 0x80000000

    def code(low: np.ndarray) -> np.ndarray:
        x = np.clip((top | low.astype(np.uint32)).view(np.float32), -1.0, 1.0)
        return nearest_reference(x, table)

    zero, full = code(np.zeros_like(top)), code(np.full_like(top, 0xFFFF))
    base = np.where(negative, full, zero)
    steps = np.abs(full - zero)
    assert steps.max() <= 1, "a bucket holds two steps of the map"
    # the first low half with the code of the bucket's other end, by bisection over all buckets at once
    lo, hi = np.zeros(top.shape, np.int64), np.full(top.shape, 0xFFFF, np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        reached = code(mid) == full
        lo, hi = np.where(reached, lo, mid + 1), np.where(reached, mid, hi)
    first = np.where(negative, lo - 1, lo)  # a negative bucket: the last value before the step down
    threshold = np.clip((top | np.maximum(first, 0).astype(np.uint32)).view(np.float32), -1.0, 1.0)
    threshold = np.where(steps == 1, threshold, np.float32(np.inf)).astype(np.float32)
    return base.astype(np.uint8), threshold

"""Any optimizer's per-parameter state in fewer bits, by one argument: `low_bit_state`."""

from __future__ import annotations

from typing import Any

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import lowbit as _lowbit
from gradtx._core import protocol as _protocol
from gradtx._core import rounding as _rounding
from gradtx._core import slot_formats as _slot_formats

FORMATS = ("8bit", "4bit", "bf16+sr", "bf16+8")
_QUANTIZED_MIN_SIZE = 4096  # bitsandbytes' and torchao's: smaller slots stay as they are


def low_bit_state(
    tx: _protocol.GradientTransformation,
    format: str = "8bit",
    *,
    block_size: int | None = None,
    min_size: int | None = None,
    seed: int = 0,
) -> _protocol.GradientTransformation:
    """`tx` with the slots of its element-wise rules (moments, momenta, accumulators) stored in fewer bits.

    Every slot that a rule of `update_rule` keeps shaped like its parameter -- Adam's and Lion's moments,
    momentum, RMSProp's and Adagrad's accumulators, AdEMAMix's, ... -- is stored in `format` from `init`
    on, and each step stores its new value the same way. The rule sees the slot's values in the
    parameter's dtype (as `gradtx.get_slot` returns them), so the update is the rule's own formula on
    slightly rounded state.

    Formats, with the bytes a float32 slot takes per element:

    - `"8bit"`: blockwise quantization, one uint8 code per element and one float32 scale per block of
      `block_size` (default 256): the dynamic maps of bitsandbytes' and torchao's 8-bit optimizers, the
      signed one for slots that change sign and the unsigned one, twice as fine, for slots the rule
      declares non-negative (second moments). Codes and scales equal torchao's. 1.02 bytes.
    - `"4bit"`: torchao's 4-bit scheme: two codes per byte, blocks of 128 (default), a dynamic signed
      map and a linear unsigned one. 0.53 bytes.
    - `"bf16+sr"`: bfloat16, each store rounded stochastically (unbiased on average, so that small
      steps of a moment are not lost), with a PRNG key per slot. 2 bytes.
    - `"bf16+8"`: bfloat16 plus an int8 error correction (heavyball's `ecc="bf16+8"`): about 15
      bits of mantissa. 3 bytes.

    Slots of another shape (Shampoo's statistics, Adafactor's factors), slots given a dtype (`mu_dtype`),
    counters and the states of other transforms stay as they are; so do the slots of integer or complex
    parameters and of parameters with fewer than `min_size` elements.

    Args:
      tx: the optimizer (any transform; its `update_rule` rules take the format).
      format: `"8bit"`, `"4bit"`, `"bf16+sr"` or `"bf16+8"`.
      block_size: the block of one scale (8 or 4 bits only; an even int >= 2). Default: 256 for 8 bits,
        128 for 4 bits.
      min_size: parameters with fewer elements keep their slots in the parameter's dtype. Default: 4,096
        for 8 and 4 bits (the scales would outweigh the codes), 1 for bfloat16.
      seed: the stochastic rounding's stream (bfloat16 formats): each slot draws its own from it.

    Returns:
      A transform with `tx`'s `update`, whose `init` stores the slots in `format`.

    Raises:
      ValueError: for an unknown `format`, a `block_size` with a bfloat16 format or out of range, a
        negative `min_size`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.low_bit_state(gradtx.adam(1e-3), "8bit")
        >>> state = tx.init({"w": jnp.zeros((64, 128))})
        >>> gradtx.get_slot(state, "v")["w"].shape
        (64, 128)
    """
    fn = "low_bit_state"
    if format not in FORMATS:
        raise ValueError(f"`{fn}`: `format` must be one of {', '.join(map(repr, FORMATS))}; got {format!r}.")
    _checks.check_int(fn, "seed", seed, minimum=0)
    quantized = format in ("8bit", "4bit")
    if block_size is not None and not quantized:
        raise ValueError(f"`{fn}`: `block_size` is for the 8- and 4-bit formats; {format!r} has no blocks.")
    if min_size is None:
        min_size = _QUANTIZED_MIN_SIZE if quantized else 1
    _checks.check_int(fn, "min_size", min_size, minimum=0)
    signed: Any
    unsigned: Any
    if quantized:
        bits = 8 if format == "8bit" else 4
        signed = _lowbit.blockwise(bits, block_size, True, fn=fn)
        unsigned = _lowbit.blockwise(bits, block_size, False, fn=fn)
    else:
        signed = unsigned = (_rounding.StochasticBF16 if format == "bf16+sr" else _rounding.CorrectedBF16)(
            seed
        )

    member = _factory.member(tx)

    def init_fn(params: Any) -> Any:
        with _slot_formats.storing(signed, unsigned, min_size):
            return member.init(params)

    # the same update and state as `tx`'s; a combinator that unwraps it (`sharded_state`) finds this `init`
    return _factory.wrapped_once(fn, type(member)(init_fn, member.update))

"""Which slots `update_rule`'s `init` stores in another form (`gradtx.low_bit_state`): the formats of a
`storing` block, the slot's format by its parameter (`format_for`), and each slot's own random stream.

Given a replica's flat slice of a leaf (`gradtx.parallel.sharded_state` inside `shard_map`), a slot
is stored or not as the whole leaf's is (`min_size` counts the whole leaf's elements), and blocked
along the slice: the same blocks as the whole leaf's where its blocks are those of the flattened
leaf and the slice's length is a multiple of `block_size` (`format_for` refuses a slice otherwise).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any, Iterator, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import sliced as _sliced
from gradtx._core.lowbit import Format, split


class _Storing(NamedTuple):
    signed: Any
    unsigned: Any
    min_size: int
    made: list[int]


_STORING: contextvars.ContextVar[_Storing | None] = contextvars.ContextVar(
    "gradtx_stored_slots", default=None
)


@contextlib.contextmanager
def storing(signed: Any, unsigned: Any, min_size: int) -> Iterator[None]:
    """Within this block, `update_rule`'s `init` stores its slots shaped like their parameters with
    `signed`'s or `unsigned`'s `store` (a `Format`, or a `gradtx._core.rounding` format; `format_for`)."""
    token = _STORING.set(_Storing(signed, unsigned, min_size, [0]))
    try:
        yield
    finally:
        _STORING.reset(token)


def slot_index() -> int:
    """How many slots this `storing` block stored before (0 outside one): each slot's own random stream."""
    active = _STORING.get()
    if active is None:
        return 0
    active.made[0] += 1
    return active.made[0] - 1


def format_for(param: Any, nonnegative: bool, path: Any = ()) -> Any:
    """The format of a slot shaped like `param` (the leaf at `path`) inside a `storing` block: the unsigned
    one for a slot its rule declares non-negative, else the signed one; None outside the block, for a
    parameter that is not a real float or whose whole leaf has fewer than `min_size` elements.

    Raises:
      ValueError: for a blockwise format and a replica's slice of the leaf whose blocks would not be the
        whole leaf's (see the module's docstring).
    """
    active = _STORING.get()
    if active is None:
        return None
    whole = _sliced.leaf_shape(path, param)
    size = math.prod(np.shape(param) if whole is None else whole)
    if size < active.min_size or not jnp.issubdtype(jnp.result_type(param), jnp.floating):
        return None
    fmt = active.unsigned if nonnegative else active.signed
    if isinstance(fmt, Format) and whole != tuple(np.shape(param)):
        _check_slice_blocks(fmt, whole, int(np.size(param)), path)
    return fmt


def _check_slice_blocks(fmt: Format, whole: tuple[int, ...] | None, length: int, path: Any) -> None:
    """Refuse a slice (`length` elements of the flattened leaf of shape `whole`) whose blocks of the format
    are not the whole leaf's: a leaf blocked row by row with rows of a length that is not a multiple of the
    block size, a slice of a length that is not one, or a slice of a leaf unknown (`whole` None)."""
    where = jax.tree_util.keystr(tuple(path)) or "<root>"
    if whole is None:
        raise ValueError(
            f"`low_bit_state`: a {fmt.bits}-bit slot is made for a slice of {length} elements at {where}, "
            f"which is not a slice of the parameter there: a combinator between `sharded_state` and "
            f"`low_bit_state` changed the tree. Put `low_bit_state` directly in `sharded_state`'s chain, or "
            f"use `sharded_state(..., gather_state=True)`."
        )
    lead, trail = split(whole, fmt.block_size)
    by_rows = lead != () and trail % fmt.block_size != 0
    if not by_rows and length % fmt.block_size == 0:
        return
    why = (
        f"its blocks run along rows of {trail} elements, not a multiple of {fmt.block_size}"
        if by_rows
        else f"{length} is not a multiple of its blocks' {fmt.block_size}"
    )
    raise ValueError(
        f"`low_bit_state`: the {fmt.bits}-bit slot of the parameter at {where} (shape {whole}) cannot be "
        f"kept on a replica's flat slice of {length} of its elements (`sharded_state` inside `shard_map`) in "
        f"the parameter's blocks: {why}. Use `sharded_state(..., gather_state=True)`, `sharded_state(..., "
        f"mesh=mesh)` under `jax.jit`, a `block_size` that divides the rows and the slice, or a `min_size` "
        f"above the parameter's size."
    )

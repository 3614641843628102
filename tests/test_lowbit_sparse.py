"""Row-sparse steps on low-bit state: the touched rows are read and stored, the others are not touched.

An embedding's slot in 8 or 4 bits keeps each row's codes and scales apart (a row of at least a block
holds whole blocks), or each block's rows together (rows that divide a block), so TF's `SparseApply*`
rules (Adagrad, momentum, RMSProp, FTRL, LazyAdam) cost O(touched rows) as they do in float32; bfloat16
slots are rows of their own arrays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._core import lowbit
from gradtx.sparse import RowSparse

TABLE = (1000, 256)
TOUCHED = [3, 7, 998]


def _state_and_grad(fmt):
    rng = np.random.default_rng(0)
    params = {"embed": jnp.asarray(rng.standard_normal(TABLE), jnp.float32)}
    tx = gradtx.low_bit_state(gradtx.adagrad(0.1), fmt)  # SparseApplyAdagrad: the touched rows only
    state = tx.init(params)
    _, state = jax.jit(tx.update)({"embed": jnp.asarray(rng.standard_normal(TABLE), jnp.float32)}, state)
    values = jnp.asarray(rng.standard_normal((4, TABLE[1])), jnp.float32)
    grads = {"embed": RowSparse(jnp.asarray([3, 7, 7, 998]), values, TABLE)}  # row 7 twice
    return tx, params, state, grads


@pytest.mark.parametrize("fmt", ["8bit", "4bit", "bf16+sr", "bf16+8"])
def test_a_row_sparse_step_stores_the_touched_rows_and_no_other(fmt):
    tx, params, state, grads = _state_and_grad(fmt)
    updates, new = jax.jit(tx.update)(grads, state, params)
    assert isinstance(updates["embed"], RowSparse)
    untouched = np.setdiff1d(np.arange(TABLE[0]), TOUCHED)
    for old, now in zip(jax.tree.leaves(state), jax.tree.leaves(new), strict=True):
        if now.ndim == 2:  # codes, scales, bfloat16 values and corrections: one row per row of the table
            np.testing.assert_array_equal(np.asarray(now)[untouched], np.asarray(old)[untouched])
    # the touched rows: the accumulator plus the squared (summed) gradient, within its format's rounding
    before = gradtx.get_slot(state, "accumulator")["embed"]
    after = gradtx.get_slot(new, "accumulator")["embed"]
    summed = grads["embed"].deduplicated()
    expected = before[jnp.asarray(TOUCHED)] + summed.values[:3] ** 2
    # (4 bits: 16 linear steps of the block's largest value, half a step off at most)
    atol = float(jnp.max(expected)) / 32 if fmt == "4bit" else 0.02
    np.testing.assert_allclose(after[jnp.asarray(TOUCHED)], expected, rtol=0.02, atol=atol)


@pytest.mark.parametrize("fmt", ["8bit", "bf16+8"])
def test_a_row_sparse_step_holds_no_array_of_the_tables_size_in_float32(fmt):
    tx, params, state, grads = _state_and_grad(fmt)
    hlo = jax.jit(tx.update).lower(grads, state, params).compile().as_text()
    entry = hlo[hlo.index("\nENTRY") :]  # the program's buffers (a fusion may read a table element-wise)
    assert f"f32[{TABLE[0]},{TABLE[1]}]" not in entry  # neither the slot's values nor its new ones
    odd = lowbit.Format(8, 256, False).quantize(jnp.zeros((10, 100)))  # rows that do not divide a block
    assert not odd._rows_apart() and not odd._rows_per_block()  # stored again whole: O(table), still correct


NARROW = {"8bit": (1000, 64), "4bit": (1001, 32)}  # 4 rows to a block of 256 (8 bits) or 128 (4 bits)


@pytest.mark.parametrize("fmt", ["8bit", "4bit"])
def test_rows_shorter_than_a_block_store_only_their_blocks(fmt):
    # an embedding narrower than a block: its blocks are whole rows, so a step reads the touched rows and
    # quantizes the touched blocks again (their other rows read back), in O(touched rows)
    shape = NARROW[fmt]
    rng = np.random.default_rng(1)
    params = {"embed": jnp.asarray(rng.standard_normal(shape), jnp.float32)}
    tx = gradtx.low_bit_state(gradtx.adagrad(0.1), fmt)
    _, state = jax.jit(tx.update)(
        {"embed": jnp.asarray(rng.standard_normal(shape), jnp.float32)}, tx.init(params)
    )
    values = jnp.asarray(rng.standard_normal((5, shape[1])), jnp.float32)
    rows = [
        6,
        5,
        998,
        shape[0] - 1,
        5,
    ]  # 5 and 6 share a block, 5 twice; the last row's block is short in 4 bits
    grads = {"embed": RowSparse(jnp.asarray(rows), values, shape)}
    step = jax.jit(tx.update)
    updates, new = step(grads, state, params)
    old_slot, new_slot = state[0].accumulator["embed"], new[0].accumulator["embed"]
    assert old_slot._rows_per_block() == 4
    blocks = sorted({r // 4 for r in rows})
    touched = np.isin(np.arange(shape[0]) // 4, blocks)
    codes = [np.asarray(x.codes).reshape(shape[0], -1) for x in (old_slot, new_slot)]
    np.testing.assert_array_equal(codes[1][~touched], codes[0][~touched])  # the other blocks as they were
    scales = [np.asarray(x.scales) for x in (old_slot, new_slot)]
    others = np.setdiff1d(np.arange(scales[0].size), blocks)
    np.testing.assert_array_equal(scales[1][others], scales[0][others])
    # the touched blocks: as the whole slot dequantized, its rows set and quantized again would hold them
    before = old_slot.dequantize()
    summed = grads["embed"].deduplicated()
    expected = before.at[summed.indices].add(summed.values**2, mode="drop")
    again = lowbit.Stored.with_rows(old_slot, jnp.arange(shape[0]), expected)
    got = np.asarray(new_slot.dequantize())[touched]
    np.testing.assert_array_equal(got, np.asarray(again.dequantize())[touched])
    np.testing.assert_array_equal(  # the rows read are the slot's own
        np.asarray(new_slot.rows(jnp.asarray([5, 998, shape[0]]))),
        np.asarray(new_slot.dequantize())[[5, 998, 0]] * [[1], [1], [0]],
    )
    entry = step.lower(grads, state, params).compile().as_text()
    entry = entry[entry.index("\nENTRY") :]
    assert f"f32[{shape[0]},{shape[1]}]" not in entry  # no float32 array of the table's size

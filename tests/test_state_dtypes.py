"""Registry-wide: a state keeps its dtypes and shapes through `update` (issue 14's dtype contract).

For every f32/f16/bf16 pair of params and gradients, the state after `update` has the dtypes
and shapes it had after `init`, so it can be the carry of `lax.scan`, `lax.cond` or
`lax.while_loop`; traced with `jax.eval_shape` (no compilation), and one real scan.
"""

from __future__ import annotations

import itertools

import chex
import jax
import jax.numpy as jnp
import pytest

import gradtx
from tests.test_contract import BY_ENTRY, _built, _grads, _params

FLOATS = {"f32": jnp.float32, "f16": jnp.float16, "bf16": jnp.bfloat16}


@BY_ENTRY
def test_the_state_keeps_its_dtypes_and_shapes_for_every_params_and_grads_dtype(entry):
    """After `update` the state has the dtypes and shapes it had after `init` (a `lax.scan` /
    `lax.cond` / `while_loop` carry), for every f32/f16/bf16 pair of params and gradients."""
    entry, tx, _ = _built(entry.name)
    for (pn, pd), (gn, gd) in itertools.product(FLOATS.items(), FLOATS.items()):
        params = _params(pd)
        grads = jax.tree.map(lambda x, gd=gd: x.astype(gd), _grads(_params()))
        state = jax.eval_shape(tx.init, params)
        _, new_state = jax.eval_shape(
            lambda g, s, p: tx.update(g, s, p, **entry.extra(0)), grads, state, params
        )
        chex.assert_trees_all_equal_shapes_and_dtypes(
            new_state, state, custom_message=f"params {pn}, grads {gn}"
        )


@pytest.mark.parametrize("name", ["adam", "rmsprop", "adagrad", "ftrl", "accumulate_gradients"])
def test_a_bf16_state_is_a_scan_carry_with_f32_gradients(name):
    entry, tx, _ = _built(name)
    params = _params(jnp.bfloat16)
    grads = jax.tree.map(lambda *xs: jnp.stack(xs), *[_grads(_params(), s) for s in (1, 2, 3)])

    def body(carry, g):
        p, s = carry
        u, s = tx.update(g, s, p, **entry.extra(0))
        return (gradtx.apply_updates(p, u), s), None

    (p, s), _ = jax.lax.scan(body, (params, tx.init(params)), grads)
    chex.assert_trees_all_equal_shapes_and_dtypes(s, tx.init(params))

"""Pytree utilities: `optax.tree`'s names, signatures and numbers (`gradtx.optax_compat.tree` is this module).

Arithmetic over whole trees (`add`, `sub`, `scale`, `add_scale`, `vdot`, `norm`, `sum`,
`max`, ...), trees of constants and dtypes (`zeros_like`, `full_like`, `cast`, `dtype`),
random trees (`random_like`, `split_key_like`), the moving averages optax's building blocks
keep (`update_moment`, `bias_correction`, ...), and values of a state found by name (`get`,
`set`, `get_all_with_path`) or by being shaped like the parameters (`map_params`). Each
function does what `optax.tree`'s of the same name does, with its defaults and results,
bit for bit (tests/tree/ compares each with optax's, and runs optax's own tests of the state,
dtype and random helpers), on optax's states, `gradtx.optax_compat`'s and gradtx's own:

    state = gradtx.tree.set(state, learning_rate=1e-4)   # through chain, MultiSteps, apply_if_finite
    specs = gradtx.tree.map_params(tx, lambda _, spec: spec, state, param_specs)
"""

from gradtx.tree._dtypes import cast, cast_like, dtype, full_like, ones_like, zeros_like
from gradtx.tree._map_params import map_params
from gradtx.tree._math import (
    add,
    add_scale,
    batch_shape,
    clip,
    conj,
    div,
    mul,
    real,
    scale,
    sub,
    where,
)
from gradtx.tree._moments import (
    bias_correction,
    update_infinity_moment,
    update_moment,
    update_moment_per_elem_norm,
)
from gradtx.tree._random import random_like, split_key_like, unwrap_random_key_data
from gradtx.tree._reductions import allclose, max, min, norm, size, sum, vdot
from gradtx.tree._state import get, get_all_with_path, set

__all__ = [
    "add",
    "add_scale",
    "allclose",
    "batch_shape",
    "bias_correction",
    "cast",
    "cast_like",
    "clip",
    "conj",
    "div",
    "dtype",
    "full_like",
    "get",
    "get_all_with_path",
    "map_params",
    "max",
    "min",
    "mul",
    "norm",
    "ones_like",
    "random_like",
    "real",
    "scale",
    "set",
    "size",
    "split_key_like",
    "sub",
    "sum",
    "unwrap_random_key_data",
    "update_infinity_moment",
    "update_moment",
    "update_moment_per_elem_norm",
    "vdot",
    "where",
    "zeros_like",
]

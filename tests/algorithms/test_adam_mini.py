"""gradtx/_algorithms/adam_mini.py: Adam-mini against pytorch-optimizer's `AdamMini`
(tools/references/adam_mini.py), its key-path blocks, its arguments and errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


def _names(case):
    """The torch parameter names the reference run gave the problem's leaves (recorded in the fixture)."""
    with np.load(_references.FIXTURES / "adam_mini.npz") as f:
        return {k: f[f"{case.label}/names/{k}"].tobytes().decode() for k in case.init}


def _nest(tree, names):
    out = {}
    for leaf, name in names.items():
        *path, last = name.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[last] = tree[leaf]
    return out


def _flat(tree, names):
    out = {}
    for leaf, name in names.items():
        node = tree
        for part in name.split("."):
            node = node[part]
        out[leaf] = node
    return out


def _under_torch_names(tx, names):
    """`tx` run on the tree whose key paths are the torch names (`a.b.c` -> `a/b/c`), as the flat problem."""

    def init(params):
        return tx.init(_nest(params, names))

    def update(updates, state, params=None, **extra):
        nested = None if params is None else _nest(params, names)
        out, state = tx.update(_nest(updates, names), state, nested, **extra)
        return _flat(out, names), state

    return gradtx.GradientTransformation(init, update)


@pytest.mark.parametrize("case", _references.cases("adam_mini"), ids=repr)
def test_adam_mini_equals_pytorch_optimizer(case):
    tx = gradtx.get("AdamMini", **case.kwargs)
    _references.check_case(case, tx=_under_torch_names(tx, _names(case)))


def test_adam_mini_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("adam_mini", "adam_mini")
    with pytest.raises(ValueError, match="model_sharding=False"):
        gradtx.get("AdamMini", model_sharding=True)


def test_the_blocks_follow_the_key_paths():
    tx = gradtx.adam_mini(0.1, num_embeds=4, num_heads=2, num_query_groups=1)
    params = {
        "wte": {"weight": jnp.zeros((3, 2))},
        "layer": {"q_proj": {"weight": jnp.zeros((4, 4))}, "attn": {"qkv": {"weight": jnp.zeros((6, 2))}}},
        "norm": jnp.zeros(5),
    }
    partitioned = tx.init(params)[0]  # {blocking: ScaleByAdamMiniState}, each with its leaves only
    shapes = {
        "embed": (3, 2),  # per element
        "heads": (2,),  # 16 elements in heads of num_embeds**2 / num_heads = 8
        "attn": (1, 4),  # 1 query group: 2 queries, a key, a value
        "whole": (),
    }
    for label, shape in shapes.items():
        assert [v.shape for v in jax.tree.leaves(partitioned[label].v_mean)] == [shape], label


def test_a_leaf_that_its_heads_do_not_divide_is_refused_at_init():
    tx = gradtx.adam_mini(0.1, num_embeds=4, num_heads=2)
    with pytest.raises(ValueError, match="does not split into heads blocks"):
        tx.init({"q_proj": {"weight": jnp.zeros((3, 3))}})


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"b1": 1.0}, ValueError, r"`adam_mini`: `b1` must be in \[0.0, 1.0\)"),
        ({"num_heads": 0}, ValueError, r"`adam_mini`: `num_heads` must be >= 1"),
        ({"num_embeds": 10, "num_heads": 4}, ValueError, r"must be a multiple of `num_heads`"),
        ({"num_heads": 4, "num_query_groups": 3}, ValueError, r"`num_heads` of `num_query_groups`"),
        ({"qk_blocks": "q_proj"}, TypeError, r"`qk_blocks` must be a sequence of key-path patterns"),
    ],
)
def test_bad_hyperparameters_are_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.adam_mini(0.1, **kwargs)

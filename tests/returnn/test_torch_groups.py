"""RETURNN's PyTorch parameter groups in `gradtx.returnn._torch_backend`: the weight-decay split by key path
(RETURNN's module blacklist), `param_groups` with their options and rate multipliers, and their refusals."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from gradtx.returnn import _torch_groups
from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._torch_backend import torch_update
from tests.returnn.test_torch_backend import SHAPES, assert_close, draws, nest, ref_run, run


def test_weight_decay_not_in_dict_is_torch_default_on_every_param():
    # RETURNN splits only when the dict sets weight_decay: AdamW's default 0.01 then decays all params
    grads = draws(3)
    got, _ = run({"optimizer": {"class": "adamw"}}, grads)
    want = ref_run(grads, lr=0.01, opts={k: {"wd": 0.01} for k in SHAPES})
    assert_close(got[-1], want[-1])


def test_param_groups_with_learning_rate_multipliers_match_reference():
    groups = [
        (["Dense_0"], {"learning_rate_multiplier": 0.5}),
        (
            lambda path, leaf: not _torch_groups.is_blacklisted(path, ["dense"]),
            {"betas": (0.7, 0.9), "eps": 1e-4},
        ),
    ]
    config = {"optimizer": {"class": "adamw", "weight_decay": 0.1}}
    grads = draws(5, seed=1)
    got, _ = run(config, grads, lr=0.02, param_groups=groups)
    opts = {
        k: {"wd": 0.1, "mult": 0.5}
        if k.startswith("Dense")
        else {"wd": 0.1, "b1": 0.7, "b2": 0.9, "eps": 1e-4}
        for k in SHAPES
    }
    want = ref_run(grads, lr=0.02, opts=opts)
    assert_close(got[-1], want[-1])


def decayed(params, blacklist=None, mask=None):
    labels = _torch_groups.weight_decay_labels(params, _torch_groups.blacklist_names(blacklist), mask)
    return sorted(
        _torch_groups._masks.path_str(p) for p, x in jax.tree_util.tree_leaves_with_path(labels) if x == 0
    )


def test_default_blacklist_on_flax_and_haiku_trees():
    flax = nest({k: 0.0 for k in SHAPES})
    assert decayed(flax) == ["Dense_0/kernel"]
    haiku = {
        "mlp/~/linear_0": {"w": 0.0, "b": 0.0},
        "mlp/~/layer_norm": {"scale": 0.0, "offset": 0.0},
        "embed": {"embeddings": 0.0},
        "ln_1": {"scale": 0.0},
        "conv1_d": {"w": 0.0},
    }
    assert decayed(haiku) == ["conv1_d/w", "mlp/~/linear_0/w"]
    assert decayed(haiku, ["rf.Embedding", "torch.nn.Conv1d"]) == [
        "ln_1/scale",
        "mlp/~/layer_norm/offset",
        "mlp/~/layer_norm/scale",
        "mlp/~/linear_0/w",
    ]
    assert decayed(flax, mask=lambda path, leaf: "Embed" in str(path)) == ["Embed_0/embedding"]
    assert decayed(flax, mask=["*/bias"]) == ["Dense_0/bias", "LayerNorm_0/bias"]


def test_weight_decay_mask_overrides_the_rule():
    grads = draws(2, seed=8)
    config = {"optimizer": {"class": "adamw", "weight_decay": 0.1}}
    got, _ = run(config, grads, weight_decay_mask=nest({k: k.startswith("Embed") for k in SHAPES}))
    want = ref_run(grads, lr=0.01, opts={k: {"wd": 0.1 if k.startswith("Embed") else 0.0} for k in SHAPES})
    assert_close(got[-1], want[-1])


def test_param_group_refusals():
    config = {"optimizer": {"class": "adamw", "weight_decay": 0.1}}
    params = nest({k: jnp.zeros(s) for k, s in SHAPES.items()})
    overlap = torch_update(config, param_groups=[(["Dense_0"], {}), (["Dense_0/bias", "Embed"], {})])
    with pytest.raises(
        ReturnnConfigError, match=r"in no group: \['LayerNorm_0'\]\['bias'\].*in several groups"
    ):
        overlap.factory(0.1).init(params)
    with pytest.raises(TypeError, match="exclude each other"):
        torch_update(config, param_groups=[(True, {})], weight_decay_mask=True)
    with pytest.raises(TypeError, match=r"`param_groups\[0\]` must be a pair"):
        torch_update(config, param_groups=[True])
    with pytest.raises(ReturnnConfigError, match="sets 'lr'.*learning_rate_multiplier"):
        torch_update(config, param_groups=[(True, {"lr": 0.1})])
    with pytest.raises(ReturnnConfigError, match=r"`param_groups\[1\]` over `optimizer`: .*'momentum'"):
        torch_update(config, param_groups=[(["Dense"], {}), (True, {"momentum": 0.9})])
    with pytest.raises(TypeError, match="`weight_decay_mask` is given"):
        torch_update({"optimizer": {"class": "adamw"}}, weight_decay_mask=True)

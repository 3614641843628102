"""gradtx/_algorithms/muonclip.py: MuonClip against pytorch-optimizer's `MuonClip` (20 steps on the recorded
gradients and attention logits: query/key, rotary roles, another alpha with Keller Jordan's factor and coupled
decay, and no clipping), QK-clip against its definition, and the errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references


def jax_zeros(tree):
    return jax.tree.map(jnp.zeros_like, tree)


def _logits(case):
    """The recorded per-head logits of each step, as `update`'s extra argument (None: the case has none)."""
    if not case.draws:
        return None
    return lambda t, params, grads: {"attention_max_logits": {"attn": jnp.asarray(case.draws[t])}}


@pytest.mark.parametrize("case", _references.cases("muonclip"), ids=repr)
def test_muon_clip_equals_pytorch_optimizer(case):
    _references.check_case(case, extra_args=_logits(case))


def test_the_logits_matter():
    """Without the recorded logits, a clipped case leaves the reference's trajectory."""
    case = next(c for c in _references.cases("muonclip") if c.label == "default")
    with pytest.raises(AssertionError):
        _references.check_case(case)


def test_muon_clip_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("muonclip", "muon_clip")
    with pytest.raises(ValueError, match="ns_method='newton_schulz'"):
        gradtx.get("MuonClip", ns_method="gram_newton_schulz")
    gradtx.get("MuonClip", ns_reset_steps=(3,))  # Gram Newton-Schulz's only: dropped


@pytest.mark.parametrize(
    "role, factor",
    [("query", 0.25**0.3), ("key", 0.25**0.7), ("query_rotary", 0.25), ("key_rotary", 1.0)],
)
def test_qk_clip_scales_each_heads_rows_by_its_share_of_the_factor(role, factor):
    tx = gradtx.qk_clip({"attn/w": ("heads", role)}, threshold=10.0, alpha=0.3)
    w = {"attn": {"w": jnp.ones((4, 3))}, "other": jnp.ones((4, 3))}
    u = jax_zeros(w)
    out, _ = tx.update(u, tx.init(w), w, attention_max_logits={"heads": jnp.array([40.0, 10.0])})
    np.testing.assert_allclose(
        (w["attn"]["w"] + out["attn"]["w"])[:, 0], [factor, factor, 1.0, 1.0], rtol=1e-6
    )
    np.testing.assert_array_equal(out["other"], 0.0)  # not named: not clipped
    same, _ = tx.update(u, tx.init(w), w, attention_max_logits={"other_attention": jnp.array([40.0])})
    np.testing.assert_array_equal(same["attn"]["w"], 0.0)  # its attention's logits not given


def test_qk_clip_takes_a_function_of_the_path_and_refuses_bad_logits():
    tx = gradtx.qk_clip(lambda path: ("a", "query_rotary") if path.endswith("wq") else None, threshold=1.0)
    w = {"wq": jnp.ones((3, 2)), "wk": jnp.ones((3, 2))}
    out, _ = tx.update(jax_zeros(w), tx.init(w), w, attention_max_logits={"a": jnp.array([2.0])})
    np.testing.assert_allclose(out["wq"], -0.5)
    np.testing.assert_array_equal(out["wk"], 0.0)
    with pytest.raises(ValueError, match="divisible by its attention's 2 heads"):
        tx.update(jax_zeros(w), tx.init(w), w, attention_max_logits={"a": jnp.array([2.0, 3.0])})
    with pytest.raises(ValueError, match="nonempty one-dimensional"):
        tx.update(jax_zeros(w), tx.init(w), w, attention_max_logits={"a": jnp.array(2.0)})


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"beta": 1.0}, ValueError, "`beta`"),
        ({"qk_clip_threshold": 0.0}, ValueError, "`qk_clip_threshold`"),
        ({"qk_clip_alpha": 1.5}, ValueError, "`qk_clip_alpha`"),
        ({"qk_clip": {"w": ("attn", "value")}}, ValueError, "the role one of"),
        ({"qk_clip": ["w"]}, TypeError, "`qk_clip` must be a dict"),
        ({"ns_steps": 0}, ValueError, "`ns_steps`"),
        ({"adam_b1": -0.5}, ValueError, "`adam_b1`"),
        ({"weight_decouple": 0}, TypeError, "`weight_decouple`"),
    ],
)
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.muon_clip(0.02, **kwargs)

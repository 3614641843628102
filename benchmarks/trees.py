"""The benchmark trees: a transformer's parameters (big leaves) and a residual MLP's (many small ones)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def random_like(tree: Any, seed: int, scale: float) -> Any:
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: jnp.asarray(rng.standard_normal(x.shape, np.float32) * scale), tree)


def transformer_tree(d: int, layers: int, vocab: int) -> dict:
    """The parameter shapes of a pre-LN transformer: embedding, per layer attention and MLP, final norm."""

    def zeros(*shape):
        return jnp.zeros(shape, jnp.float32)

    tree = {"embed": zeros(vocab, d), "final_norm": {"scale": zeros(d), "bias": zeros(d)}}
    for i in range(layers):
        tree[f"layer{i:02d}"] = {
            "norm1": {"scale": zeros(d), "bias": zeros(d)},
            "attn": {
                "qkv": zeros(d, 3 * d),
                "qkv_bias": zeros(3 * d),
                "out": zeros(d, d),
                "out_bias": zeros(d),
            },
            "norm2": {"scale": zeros(d), "bias": zeros(d)},
            "mlp": {
                "up": zeros(d, 4 * d),
                "up_bias": zeros(4 * d),
                "down": zeros(4 * d, d),
                "down_bias": zeros(d),
            },
        }
    return tree


def residual_mlp(s: Any) -> dict:
    """The parameters of a residual MLP: per layer a `width x width` kernel and a bias (small leaves)."""
    rng = np.random.default_rng(5)
    w = s.mlp_width
    return {
        f"layer{i:03d}": {
            "w": jnp.asarray(rng.standard_normal((w, w)) / (4 * np.sqrt(w)), jnp.float32),
            "b": jnp.zeros((w,), jnp.float32),
        }
        for i in range(s.mlp_layers)
    }


def mlp_loss(params: Any, x: jax.Array) -> jax.Array:
    """`mean(h ** 2)` after the layers `h <- h + tanh(h @ w + b)`, unrolled (no scan: a leaf per layer)."""
    h = x
    for name in sorted(params):
        h = h + jnp.tanh(h @ params[name]["w"] + params[name]["b"])
    return jnp.mean(h * h)

"""Frontier optimizers (hessian): AdaHessian and Sophia-H, pytorch-optimizer's numbers (`Entry.reference` its
class), and their building blocks.

Sophia-H's example refreshes its estimate every other step (the `lax.cond` of a delayed refresh); the
others every step, the default, which compiles no branch (their references cover the delayed ones).
Their Hutchinson estimate needs the objective: the contract suite gives `obj_fn`, half the squared norm of
any params tree (its Hessian the identity). Both densify a row-sparse gradient: their moments move every
row. A NaN gradient reaches the params through the momentum; an infinite one too for AdaHessian, while
Sophia-H clips it: its momentum stays infinite and every later step sits at the clip threshold.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx import optimizers, transforms
from tests.catalog._entries import SIGN_OF_MOMENTUM, optimizer, transform


def _half_sq_norm(params: Any) -> jax.Array:
    """An example objective: half the squared norm of any params tree (its Hessian is the identity)."""
    leaves = [x for x in jax.tree.leaves(params) if x is not None]
    return sum((0.5 * jnp.sum(jnp.abs(x) ** 2) for x in leaves), jnp.zeros([], jnp.float32))


def _objective(step: int) -> dict:
    del step
    return {"obj_fn": _half_sq_norm}


optimizer(
    "adahessian",
    optimizers.adahessian,
    (),
    {"learning_rate": 0.05},
    "pytorch_optimizer.AdaHessian",
    sparse="dense",
    extra_args=_objective,
)
optimizer(
    "sophia_h",
    optimizers.sophia_h,
    (),
    {"learning_rate": 0.1, "clip_threshold": 1.0, "update_period": 2},
    "pytorch_optimizer.SophiaH",
    sparse="dense",
    extra_args=_objective,
    nonfinite=SIGN_OF_MOMENTUM,
)
transform(
    "scale_by_adahessian",
    transforms.scale_by_adahessian,
    {"b1": 0.9},
    sparse="dense",
    extra_args=_objective,
)
transform(
    "scale_by_sophia_h",
    transforms.scale_by_sophia_h,
    {"clip_threshold": 1.0},
    sparse="dense",
    extra_args=_objective,
    nonfinite=SIGN_OF_MOMENTUM,
)

"""optax.contrib's SAM, Sophia and MoMo (and their building blocks): optax's numbers (`Entry.reference` names
the optax function).

Their extra arguments are the contract suite's: MoMo reads the loss `value` (a constant here, large enough
that its Polyak step is capped at the learning rate), Sophia's Hutchinson estimator an objective `obj_fn` (a
quadratic of any params tree). SAM's example is its transparent mode (the opaque one, which calls a
`grad_fn`, is tested in tests/algorithms/test_sam.py). Every one densifies a row-sparse
gradient: their steps and moments move every row.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx import combinators, optimizers
from gradtx._algorithms import momo as _momo
from gradtx._algorithms import sam as _sam
from gradtx._algorithms import sophia as _sophia
from tests.catalog._entries import SIGN_OF_MOMENTUM, optimizer, transform

OPTAX_CONTRIB = "optax.contrib"
"""The module of optax's contributed optimizers, for `Entry.reference`."""


def _sq_norm(params: Any) -> jax.Array:
    """An example objective: half the squared norm of any params tree (its Hessian is the identity)."""
    leaves = [x for x in jax.tree.leaves(params) if x is not None]
    return sum((0.5 * jnp.sum(jnp.abs(x) ** 2) for x in leaves), jnp.zeros([], jnp.float32))


# A whole optimizer made of two (registered as one: a non-finite gradient at an adversarial step reaches the
# params through the adversarial optimizer, whatever the outer one does with it).
optimizer(
    "sam",
    _sam.sam,
    ("SAM",),
    {
        "tx": optimizers.sgd(0.1),
        "adv_tx": combinators.chain(_sam.normalize(), optimizers.sgd(0.05)),
        "sync_period": 2,
    },
    f"{OPTAX_CONTRIB}.sam",
    sparse="dense",
)
optimizer(
    "sophia",
    optimizers.sophia,
    ("Sophia",),
    {"learning_rate": 0.05, "update_interval": 2},
    f"{OPTAX_CONTRIB}.sophia",
    sparse="dense",
    extra_args=lambda t: {"obj_fn": _sq_norm},
    nonfinite=SIGN_OF_MOMENTUM,  # an infinite momentum stays so: every later step is clipped to +-rho
)
optimizer(
    "momo",
    _momo.momo,
    ("MoMo",),
    {"learning_rate": 0.5},
    f"{OPTAX_CONTRIB}.momo",
    sparse="dense",
    extra_args=lambda t: {"value": 1e3},
)
optimizer(
    "momo_adam",
    _momo.momo_adam,
    ("MoMoAdam",),
    {"learning_rate": 0.05},
    f"{OPTAX_CONTRIB}.momo_adam",
    sparse="dense",
    extra_args=lambda t: {"value": 1e3},
)
transform(
    "scale_by_sophia",
    _sophia.scale_by_sophia,
    {"b1": 0.965, "b2": 0.99, "update_interval": 2},
    sparse="dense",
    extra_args=lambda t: {"obj_fn": _sq_norm},
    nonfinite=SIGN_OF_MOMENTUM,
)
transform(
    "hutchinson_estimator_diag_hessian",
    _sophia.hutchinson_estimator_diag_hessian,
    sparse="dense",
    extra_args=lambda t: {"obj_fn": _sq_norm},
    nonfinite="ignored",  # the gradient is not read: the estimate is of `obj_fn`'s Hessian
)
transform("normalize", _sam.normalize, sparse="dense")

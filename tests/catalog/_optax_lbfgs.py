"""L-BFGS and the line searches: optax's numbers (`Entry.reference` names the optax function).

A line search evaluates the objective: the registry gives its `update` the extra argument
`value_fn` (`line_search_objective`, a quadratic of any tree of params), and the search
computes `value` and `grad` from it. The registered `lbfgs` takes a fixed step (`linesearch=None`,
`learning_rate=0.5`): with a line search it would minimise the registry's objective, not the
one whose gradients the contract suite feeds it; its default chain with the zoom search is
tested against optax in tests/algorithms/test_lbfgs.py. Row-sparse gradients are densified
(the direction is over the whole tree).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx import optimizers
from gradtx._algorithms import lbfgs as _lbfgs
from gradtx._algorithms import linesearch as _linesearch
from gradtx._algorithms import linesearch_zoom as _linesearch_zoom
from tests.catalog._entries import Entry, register

OPTAX = "optax"
"""The module of optax's optimizers, for `Entry.reference`."""


def line_search_objective(params: Any) -> Any:
    """The objective the registry's line searches evaluate: half the squared norm of the params."""
    leaves = jax.tree.leaves(params)
    return sum((0.5 * jnp.sum(jnp.abs(x.astype(jnp.result_type(x, jnp.float32))) ** 2) for x in leaves), 0.0)


def _objective_arg(step: int) -> dict:
    return {"value_fn": line_search_objective}


register(
    Entry(
        "lbfgs",
        optimizers.lbfgs,
        "optimizer",
        aliases=("LBFGS",),
        example={"learning_rate": 0.5, "memory_size": 5, "linesearch": None},
        reference=f"{OPTAX}.lbfgs",
        sparse="dense",
    )
)
register(
    Entry(
        "scale_by_lbfgs",
        _lbfgs.scale_by_lbfgs,
        "transform",
        example={"memory_size": 5},
        reference=f"{OPTAX}.scale_by_lbfgs",
        sparse="dense",
    )
)
register(
    Entry(
        "scale_by_zoom_linesearch",
        _linesearch_zoom.scale_by_zoom_linesearch,
        "transform",
        example={"max_linesearch_steps": 10},
        reference=f"{OPTAX}.scale_by_zoom_linesearch",
        sparse="dense",
        extra_args=_objective_arg,
    )
)
register(
    Entry(
        "scale_by_backtracking_linesearch",
        _linesearch.scale_by_backtracking_linesearch,
        "transform",
        example={"max_backtracking_steps": 10, "store_grad": True},
        reference=f"{OPTAX}.scale_by_backtracking_linesearch",
        sparse="dense",
        extra_args=_objective_arg,
    )
)

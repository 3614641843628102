"""Which gradients of a pullback are structurally zero (TF's `None` gradient), from its jaxpr.

JAX returns a zero where TF returns `None`: for a parameter the loss never reads, reads
only through `jax.lax.stop_gradient`, or only through ops without a gradient (integer
casts, comparisons, `floor`, a `while_loop`'s condition). `compute_gradients` finds them in
the traced backward pass: the pullback is linear in the cotangent, so a gradient with no
data-dependence path from the cotangent is exactly zero for every input, and one with a
path (`0 * p` included) counts as a gradient. Sub-jaxprs of `jit`, `checkpoint`, `cond`
and `scan` are followed; any other primitive (`while`, `custom_jvp_call`, `shard_map`, ...)
is taken conservatively: all its outputs depend on the cotangent if one of its inputs does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend import core

_CALLS = frozenset({"jit", "pjit", "closed_call", "call", "remat2"})  # call-like: one sub-jaxpr, inputs 1:1


def reached(pullback: Callable[[Any], Any], cotangent: jax.Array) -> list[bool | None]:
    """For each leaf of `pullback(cotangent)`: whether that gradient depends on the cotangent.

    None for the leaves that are not inexact (the `float0` gradients of integer params).
    Traces `pullback` once more, abstractly (nothing runs).
    """
    closed = jax.make_jaxpr(pullback)(cotangent)
    found = depends_on_inputs(closed.jaxpr, [True] * len(closed.jaxpr.invars))
    return [
        f if jnp.issubdtype(a.dtype, jnp.inexact) else None
        for f, a in zip(found, closed.out_avals, strict=True)
    ]


def depends_on_inputs(jaxpr: core.Jaxpr, marked: Sequence[bool]) -> list[bool]:
    """For each output of `jaxpr`: whether a data-dependence path leads to it from a marked input."""
    live = {v for v, m in zip(jaxpr.invars, marked, strict=True) if m}
    for eqn in jaxpr.eqns:
        ins = [_in(v, live) for v in eqn.invars]
        if any(ins):
            live.update(v for v, out in zip(eqn.outvars, _equation(eqn, ins), strict=True) if out)
    return [_in(v, live) for v in jaxpr.outvars]


def _in(v: Any, live: set[Any]) -> bool:
    return not isinstance(v, core.Literal) and v in live


def _open(jaxpr: Any) -> core.Jaxpr:
    return jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr


def _equation(eqn: core.JaxprEqn, ins: list[bool]) -> list[bool]:
    """Which outputs of one equation depend on its marked inputs (all of them unless known better)."""
    name, params, everything = eqn.primitive.name, eqn.params, [True] * len(eqn.outvars)
    if name in _CALLS:
        sub = params.get("jaxpr", params.get("call_jaxpr"))
        if (
            sub is not None
            and len(_open(sub).invars) == len(ins)
            and len(_open(sub).outvars) == len(everything)
        ):
            return depends_on_inputs(_open(sub), ins)
    elif name == "cond" and not ins[0]:  # a marked branch index reaches every output
        branches = [depends_on_inputs(_open(b), ins[1:]) for b in params["branches"]]
        return [any(outs) for outs in zip(*branches, strict=True)]
    elif name == "scan":
        return _scan(_open(params["jaxpr"]), params["num_consts"], params["num_carry"], ins)
    return everything


def _scan(body: core.Jaxpr, num_consts: int, num_carry: int, ins: list[bool]) -> list[bool]:
    """A scan's outputs reached from marked inputs: a fixed point over the carry."""
    consts, carry, xs = (
        ins[:num_consts],
        ins[num_consts : num_consts + num_carry],
        ins[num_consts + num_carry :],
    )
    while True:
        outs = depends_on_inputs(body, consts + carry + xs)
        grown = [c or o for c, o in zip(carry, outs[:num_carry], strict=True)]
        if grown == carry:  # the final carry may be the initial one (length 0): kept marked
            return carry + outs[num_carry:]
        carry = grown

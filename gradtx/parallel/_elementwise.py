"""Which rules a flat slice can run: `sharded_state` under `shard_map` gives its transform one replica's
slice of every parameter, which is exact only for rules that treat each element on its own.

`_protocol.ElementWise` promises that a transform treats elements alike -- element by element
*or through reductions over all elements* (a global norm) -- so it runs on any grouping of
the elements into arrays (packed buffers). A slice is not a grouping of all the elements: a
reduction would see 1/N of them. `cross_element_reason` reads the jaxpr of the transform's
`update` on the slices and names the first operation that mixes elements (a reduction, a
reshape, a sort, a matrix product, a random draw shaped like the slice), or returns None for
a rule that is element by element, whose numbers on slices equal those on whole tensors.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
from jax.extend import core as jex_core

# Shape-preserving primitives that still mix elements (the shape rule below catches the others).
_MIXING = frozenset(
    {
        "cumsum",
        "cumprod",
        "cummax",
        "cummin",
        "cumlogsumexp",
        "sort",
        "rev",
        "top_k",
        "argsort",
        "dynamic_slice",
        "dynamic_update_slice",
        "gather",
        "scatter",
        "scatter-add",
        "scatter_add",
        "scatter_mul",
        "scatter_min",
        "scatter_max",
        "slice",
        "pad",
        "concatenate",
        "transpose",
        "conv_general_dilated",
        "fft",
        "dot_general",
        "argmax",
        "argmin",
    }
)
# Random draws shaped like the slice: each replica would draw its slice's noise from the same key.
_RANDOM = frozenset({"random_bits", "threefry2x32", "rng_bit_generator", "rng_uniform"})


def _sub_jaxprs(eqn: Any) -> list[Any]:
    out = []
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, jex_core.ClosedJaxpr):
                out.append(v.jaxpr)
            elif isinstance(v, jex_core.Jaxpr):
                out.append(v)
    return out


def _shape(v: Any) -> tuple[int, ...] | None:
    aval = getattr(v, "aval", None)
    shape = getattr(aval, "shape", None)
    return None if shape is None else tuple(shape)


def _scan(jaxpr: Any, tainted: set) -> str | None:
    """The first element-mixing equation of `jaxpr`, given which of its variables carry array data."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _RANDOM:
            return f"`{name}` (a random draw shaped like the slice)"
        ins = [v for v in eqn.invars if isinstance(v, jex_core.Var) and v in tainted]
        if not ins:
            continue
        subs = _sub_jaxprs(eqn)
        if subs:  # pjit, custom_jvp/vjp, cond, while, scan, remat: look inside (conservatively)
            for sub in subs:
                inner = {v for v in sub.invars if _shape(v)}
                reason = _scan(sub, inner)
                if reason:
                    return reason
        elif name in _MIXING:
            return f"`{name}`"
        else:
            shapes = [_shape(v) for v in ins]
            if any(_shape(o) not in shapes for o in eqn.outvars):
                return f"`{name}` (it changes the shape {shapes[0]} of the slice)"
        tainted.update(eqn.outvars)
    return None


def cross_element_reason(f: Callable[..., Any], *args: Any) -> str | None:
    """Why `f(*args)` is not element by element on the arrays among `args` (None when it is).

    Args:
      f: the function (a transform's `update` on slices), traced once to a jaxpr.
      *args: its arguments; every array with at least one dimension counts as data.
    """
    closed = jax.make_jaxpr(f)(*args)
    tainted = {v for v in closed.jaxpr.invars if _shape(v)}
    return _scan(closed.jaxpr, tainted)

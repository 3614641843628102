"""Which rules a flat slice can run: `sharded_state` under `shard_map` gives its transform one replica's
slice of every parameter, which is exact only for rules that treat each element on its own -- or
reduce over elements only through `gradtx._core.sliced`, which combines the replicas' parts.

`_protocol.ElementWise` promises that a transform treats elements alike -- element by element
*or through reductions over all elements* (a global norm) -- so it runs on any grouping of
the elements into arrays (packed buffers). A slice is not a grouping of all the elements: a
reduction sees 1/N of them, unless the rule passes it to `_sliced.total` (traced in a named
scope), which `sharded_state` turns into the reduction over every replica's slice. A slice placed in
its whole leaf (`_sliced.in_leaf`, a row or column statistic) is a partial result too; a low-bit
slot's blocks, traced in `_sliced.BLOCK_SCOPE`, are the whole leaf's (`slot_formats.format_for` refused
any other slice).
`cross_element_reason` reads the jaxpr of the transform's `update` on the slices and follows
two kinds of values: *slice data* (the gradients, params and slots: element j of each is
one element of a parameter) and *partial* results (a reduction over a slice: one replica's
part of a total). It names the first operation that mixes elements (a reshape, a sort, a
matrix product, a collective over slices, a random draw shaped like the slice) or that uses
a partial result as a whole one (with slice data, as a branch condition, or returned), and
returns None for a rule whose numbers on slices equal those on whole tensors.
"""

from __future__ import annotations

import os
from typing import Any, Callable, NamedTuple

import jax
import numpy as np
from jax.extend import core as jex_core

from gradtx._core import sliced as _sliced

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
# Reductions over a slice: a partial result, exact once `_sliced.total` combines it over the replicas.
_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_and", "reduce_or"})
# Collectives: over slices they would combine different elements of the replicas.
_COLLECTIVES = frozenset(
    {
        "psum",
        "psum_invariant",
        "pmax",
        "pmin",
        "all_gather",
        "all_gather_invariant",
        "psum_scatter",
        "reduce_scatter",
        "ppermute",
        "all_to_all",
    }
)
# Random draws: one shaped like the slice would give every replica the same noise for different elements.
_RANDOM = frozenset({"random_bits", "threefry2x32", "rng_bit_generator", "rng_uniform"})

DATA = "data"


class Partial(NamedTuple):
    """The taint of a value computed from a reduction over a slice, not yet combined (`_sliced.total`)."""

    origin: str  # the reduction, and where the rule made it


def _where(eqn: Any) -> str:
    """Where the rule wrote `eqn` (its innermost frame outside JAX), for the message; empty if unknown."""
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(eqn.source_info.traceback)
    except Exception:  # private API: the message just says less
        return ""
    if frame is None:
        return ""
    return f" in `{frame.function_name}` ({os.path.basename(frame.file_name)}:{frame.start_line})"


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


def _join(kinds: list[Any]) -> Any:
    """The taint of a value computed from values of `kinds`: slice data wins, then a partial result."""
    if DATA in kinds:
        return DATA
    return next((k for k in kinds if isinstance(k, Partial)), None)


def _into_sub(eqn: Any, sub: Any, ins: list[Any]) -> dict:
    """The taints of `sub`'s inputs: those of `eqn`'s (a `jit`, a custom derivative, a `cond`'s branch), or,
    where they do not line up one to one (`while`, `scan`), every shaped input taken for slice data."""
    if len(sub.invars) == len(ins):
        src = ins
    elif eqn.primitive.name == "cond" and len(sub.invars) == len(ins) - 1:
        src = ins[1:]
    else:
        src = [DATA if _shape(v) else _join(ins) for v in sub.invars]
    return {v: k for v, k in zip(sub.invars, src, strict=True) if k is not None}


def _scan(jaxpr: Any, taint: dict) -> tuple[str | None, list[Any]]:
    """The first operation of `jaxpr` that is not exact on slices (None), and the taints of its outputs."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        ins = [taint.get(v) if isinstance(v, jex_core.Var) else None for v in eqn.invars]
        scope = str(eqn.source_info.name_stack)
        if _sliced.SHARE_SCOPE in scope:  # the slice in a whole leaf (`_sliced.in_leaf`): one replica's share
            taint.update(dict.fromkeys(eqn.outvars, Partial(f"`_sliced.in_leaf`{_where(eqn)}")))
            continue
        if _sliced.LEAF_SCOPE in scope or _sliced.BLOCK_SCOPE in scope:
            # made for the whole leaf, cut to the slice (`_sliced.leaf_part`); or a low-bit slot's blocks,
            # which its `init` made the whole leaf's (`gradtx._core.slot_formats.format_for`)
            taint.update(dict.fromkeys(eqn.outvars, DATA))
            continue
        if _sliced.TOTAL_SCOPE in scope:  # combined over the replicas (`_sliced.total`): a whole result
            if DATA in ins:
                return (
                    f"`_sliced.total` of the slice's elements themselves{_where(eqn)} (reduce them first)",
                    [],
                )
            continue
        if name in _RANDOM and any(_shape(o) for o in eqn.outvars):
            return f"`{name}`{_where(eqn)} (a random draw shaped like the slice)", []
        kind = _join(ins)
        if kind is None:
            continue
        partial = next((k for k in ins if isinstance(k, Partial)), None)
        subs = _sub_jaxprs(eqn)
        if subs:  # jit, custom_jvp/vjp, cond, while, scan, remat: follow the values inside
            if name == "cond" and isinstance(ins[0], Partial):
                return f"{ins[0].origin}, not combined over the replicas, as a branch condition", []
            if name == "scan" and DATA in ins[eqn.params["num_consts"] + eqn.params["num_carry"] :]:
                return f"`scan`{_where(eqn)} over the slice's elements", []
            outs: list[list[Any]] = [[] for _ in eqn.outvars]
            for sub in subs:
                reason, sub_outs = _scan(sub, _into_sub(eqn, sub, ins))
                if reason:
                    return reason, []
                if len(sub_outs) == len(eqn.outvars):
                    for i, k in enumerate(sub_outs):
                        outs[i].append(k)
                else:
                    for o in outs:
                        o.append(kind)
            for v, ks in zip(eqn.outvars, outs, strict=True):
                if _join(ks) is not None:
                    taint[v] = _join(ks)
            continue
        if partial is not None:  # arithmetic on a partial result: still one replica's part
            if kind == DATA:
                return f"{partial.origin}, not combined over the replicas, with the slice's elements", []
            taint.update(dict.fromkeys(eqn.outvars, partial))
            continue
        if name in _COLLECTIVES:
            return f"`{name}`{_where(eqn)} (a collective over the replicas' slices)", []
        if name in _REDUCTIONS:
            taint.update(dict.fromkeys(eqn.outvars, Partial(f"`{name}`{_where(eqn)}")))
            continue
        if name in _MIXING:
            return f"`{name}`{_where(eqn)}", []
        shapes = [_shape(v) for v, k in zip(eqn.invars, ins, strict=True) if k == DATA]
        if any(_shape(o) not in shapes for o in eqn.outvars):
            return f"`{name}`{_where(eqn)} (it changes the shape {shapes[0]} of the slice)", []
        taint.update(dict.fromkeys(eqn.outvars, DATA))
    return None, [taint.get(v) if isinstance(v, jex_core.Var) else None for v in jaxpr.outvars]


def data_leaves(init: Callable[[Any], Any], slices: Any, whole: Any) -> list[bool]:
    """Which leaves of `init(slices)` are slices of the parameters: those shaped otherwise for the whole
    parameters `whole` (shapes only).

    A slot (`m`, `v`, a low-bit slot's codes and scales) follows the slice; a count, a PRNG key or a
    flag per parameter does not (its elements are not the slice's, and reading them whole is
    exact).
    """
    a, b = jax.tree.leaves(jax.eval_shape(init, slices)), jax.tree.leaves(jax.eval_shape(init, whole))
    if len(a) != len(b):
        return [bool(np.shape(x)) for x in a]
    return [np.shape(x) != np.shape(y) for x, y in zip(a, b, strict=True)]


def cross_element_reason(f: Callable[..., Any], args: tuple, data: list[bool]) -> str | None:
    """Why `f(*args)` is not exact on slices (None when it is).

    Args:
      f: the function (a transform's `update` on slices), traced once to a jaxpr.
      args: its arguments.
      data: for each leaf of `args` (`jax.tree.leaves` order), whether it is slice data.
    """
    closed = jax.make_jaxpr(f)(*args)
    invars = closed.jaxpr.invars
    if len(invars) != len(data):  # not one input per leaf: every shaped input is slice data
        data = [bool(_shape(v)) for v in invars]
    taint: dict = {v: DATA for v, d in zip(invars, data, strict=True) if d}
    reason, outs = _scan(closed.jaxpr, taint)
    if reason is None:
        partial = next((k for k in outs if isinstance(k, Partial)), None)
        if partial is not None:
            return f"{partial.origin}, not combined over the replicas, in its result (its state)"
    return reason

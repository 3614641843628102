"""`restated`: a rule made by `update_rule` with its state in another NamedTuple class (optax's layouts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core.rule import _construct


def restated(
    tx: Any, state: Any, rename: Mapping[str, str] | None = None
) -> _protocol.GradientTransformation:
    """The rule `tx` (made by `update_rule`) with its state in another NamedTuple class.

    The formula, hyperparameters and numbers are `tx`'s; only the state's class and field
    names change: `rename` maps `tx`'s field names to `state`'s (`{"m": "mu", "v": "nu"}`;
    the count may be renamed too, as optax's Adan calls it `t`); unmapped fields keep their
    names. A `state` without the count field keeps no count (the rule must then take no
    schedule). `gradtx.optax_compat` gives optax's state layouts this way, at no cost per step.

    Args:
      tx: a transform returned by `update_rule` (or by a factory that returns one).
      state: the new state's NamedTuple class.
      rename: `{field of tx's state: field of state}`.

    Returns:
      The same rule with state `state`.

    Raises:
      TypeError: if `tx` was not made by `update_rule`, or the fields do not correspond.

    Example:
        >>> from typing import NamedTuple
        >>> import jax.numpy as jnp, gradtx
        >>> from gradtx._core.restated import restated
        >>> class TraceState(NamedTuple):  # optax's: no count, the slot named `trace`
        ...     trace: gradtx.Updates
        >>> tx = restated(gradtx.trace(0.9), TraceState, {"momentum": "trace"})
        >>> tx.init(jnp.zeros(2))
        TraceState(trace=Array([0., 0.], dtype=float32))
        >>> tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))[1]
        TraceState(trace=Array([1., 1.], dtype=float32))
    """
    declaration = getattr(getattr(_factory.unwrapped(tx), "init", None), "_gradtx_rule", None)
    if declaration is None:
        raise TypeError(f"`restated`: {tx!r} was not made by `update_rule`.")
    rename = dict(rename or {})
    old = declaration.state._fields
    unknown = sorted(set(rename) - set(old))
    target = {rename.get(f, f) for f in old if f != "count"}
    if unknown or target != set(state._fields) - {rename.get("count", "count")}:
        raise TypeError(
            f"`restated`: {state.__name__}{state._fields} does not correspond to "
            f"{declaration.state.__name__}{old} renamed by {rename}."
        )
    if rename.get("count", "count") not in state._fields:
        if _hyper.any_schedule(*(declaration.hyper or {}).values()):
            raise TypeError(
                f"`restated`: {state.__name__} keeps no count, and {declaration.name} has schedules."
            )
        declaration = declaration._replace(counting="never")
    return _construct(declaration, state, rename)

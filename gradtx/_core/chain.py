"""Sequential composition: `chain` and `named_chain`."""

from __future__ import annotations

from typing import Any

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol


def _prepare(fn: str, transforms: tuple[Any, ...], label: str) -> list[_protocol.GradientTransformation]:
    out = []
    for i, tx in enumerate(transforms):
        _checks.check_transform(fn, f"{label}[{i}]", tx)
        out.append(_factory.member(tx))
    return out


@_factory.api
def chain(*transforms: Any) -> _protocol.GradientTransformation:
    """Apply transforms one after another; the state is the tuple of their states.

    Any object with `init` and `update` is accepted, optax transforms included; extra
    keyword arguments of `update` are passed to every member that accepts them. The chain
    is `ElementWise` when all its members are; on packed parameters (`gradtx.packing`) its
    element-wise members run on the buffers and the others on per-leaf views.

    Args:
      *transforms: the transforms, in the order they act on the updates.

    Returns:
      A `GradientTransformation` whose state is a tuple with one state per transform.

    Raises:
      TypeError: if an argument is not a transform.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.trace(momentum=0.5), gradtx.scale_by_learning_rate(0.1))
        >>> tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))[0]
        Array([-0.1, -0.1], dtype=float32)
    """
    txs = _prepare("chain", transforms, "transforms")

    def init_fn(params):
        return tuple(tx.init(params) for tx in txs)

    def update_fn(updates, state, params=None, **extra_args):
        if not isinstance(state, tuple) or len(state) != len(txs):
            raise ValueError(
                f"`chain`: the state must be a tuple of {len(txs)} states (one per transform), "
                f"got {type(state).__name__}"
                + (f" of length {len(state)}" if isinstance(state, tuple) else "")
                + "; pass the state returned by this chain's `init`."
            )
        new_state = []
        for tx, s in zip(txs, state, strict=True):
            updates, s = tx.update(updates, s, params, **extra_args)
            new_state.append(s)
        return updates, tuple(new_state)

    if txs and _factory.takes_per_example_grads(txs[0].update):
        _factory.per_example_grads(update_fn)
    return _factory.composite(init_fn, update_fn, *txs)


@_factory.api
def named_chain(*named_transforms: tuple[str, Any]) -> _protocol.GradientTransformation:
    """`chain` whose state is a dict keyed by a name per transform (readable, and stable when reordered).

    Args:
      *named_transforms: `(name, transform)` pairs, in the order they act; names unique.

    Returns:
      A `GradientTransformation` whose state is ``{name: state}``.

    Raises:
      TypeError: if an argument is not a `(str, transform)` pair.
      ValueError: if a name repeats.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> lr = gradtx.scale_by_learning_rate(0.1)
        >>> tx = gradtx.named_chain(("momentum", gradtx.trace(0.9)), ("lr", lr))
        >>> sorted(tx.init(jnp.zeros(2)))
        ['lr', 'momentum']
    """
    names = []
    for i, item in enumerate(named_transforms):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"`named_chain`: argument {i} must be a (name, transform) pair, got {item!r}.")
        if item[0] in names:
            raise ValueError(f"`named_chain`: the name {item[0]!r} is used twice; names must be unique.")
        names.append(item[0])
    txs = _prepare("named_chain", tuple(tx for _, tx in named_transforms), "transform")

    def init_fn(params):
        return {name: tx.init(params) for name, tx in zip(names, txs, strict=True)}

    def update_fn(updates, state, params=None, **extra_args):
        if not isinstance(state, dict) or sorted(state) != sorted(names):
            raise ValueError(
                f"`named_chain`: the state must be a dict with keys {names}, got "
                f"{sorted(state) if isinstance(state, dict) else type(state).__name__}."
            )
        new_state = {}
        for name, tx in zip(names, txs, strict=True):
            updates, new_state[name] = tx.update(updates, state[name], params, **extra_args)
        return updates, new_state

    return _factory.composite(init_fn, update_fn, *txs)

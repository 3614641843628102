"""Gradient centralization: `centralize` subtracts from each slice of a leaf its mean."""

from __future__ import annotations

import jax

from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import update_rule


def _centralize_leaf(g: jax.Array, h) -> tuple[jax.Array]:
    """`g` less its mean over every axis but the first (a leaf of rank <= 1 as it is)."""
    del h
    if g.ndim <= 1:
        return (g,)
    return (g - g.mean(tuple(range(1, g.ndim)), keepdims=True),)


@_registry.transform()
def centralize() -> _protocol.GradientTransformation:
    r"""Subtract from each slice of the updates along the leading axis its mean: gradient centralization.

    For a leaf of rank >= 2 (a kernel `[out, ...]`, one slice per leading index :math:`i`):

    .. math:: u_{i,\cdot} \leftarrow u_{i,\cdot} - \operatorname{mean}(u_{i,\cdot})

    so that each slice of the step has zero mean; scalars and vectors pass unchanged
    (`optax.centralize`). A per-tensor rule (it reads each leaf's shape): on packed
    parameters it sees per-leaf views. A row-sparse gradient keeps its rows (each row is
    centred on its own; untouched rows stay 0).

    Returns:
      A `LeafWise` transform with state `EmptyState()`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.centralize()
        >>> tx.update(jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 9.0]]), tx.init(None))[0]
        Array([[-1.,  0.,  1.],
               [-2., -1.,  3.]], dtype=float32)

    References:
      Yong, Huang, Hua, Zhang, *Gradient Centralization: A New Optimization Technique for
      Deep Neural Networks*, ECCV 2020, arXiv:2004.01461.
    """
    return update_rule(
        "centralize",
        _protocol.EmptyState,
        _centralize_leaf,
        sparse="rows",
        kind=_protocol.LeafWise,
        count="if_scheduled",
    )

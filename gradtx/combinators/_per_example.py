"""Per-example clipping (DP-SGD): the one home of clipping per-example gradients and summing them.

`gradtx.per_example_global_norm_clip` and `differentially_private_aggregate` (gradtx.combinators)
clip with `clip_and_sum`; `per_example_layer_norm_clip` clips each layer on its own. Each leaf of
per-example gradients has a leading batch axis (`jax.vmap(jax.grad(loss), in_axes=(None, 0))`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import walk as _walk


def check_per_example(fn: str, grads: Any) -> int:
    """The batch size of per-example gradients: every leaf is an array with the same leading axis."""
    named = [(p, x) for p, x in zip(_walk.key_paths(grads), _walk.flatten_updates(fn, grads)[0], strict=True)]
    leaves = [x for _, x in named if x is not None]
    if any(_walk.is_row_sparse(x) for x in leaves):
        raise TypeError(f"`{fn}`: per-example gradients must be dense arrays, got a row-sparse gradient.")
    sizes = {jnp.shape(x)[0] if jnp.ndim(x) else -1 for x in leaves}
    if not leaves or len(sizes) != 1 or -1 in sizes:
        shapes = ", ".join(f"{p}: {jnp.shape(x)}" for p, x in named if x is not None)
        raise ValueError(
            f"`{fn}`: expects per-example gradients, every leaf with the same leading batch axis "
            f"(e.g. from `jax.vmap(jax.grad(loss), in_axes=(None, 0))`); got {shapes or 'no leaves'}."
        )
    return sizes.pop()


def clip_and_sum(fn: str, grads: Any, l2_norm_clip: Any) -> tuple[Any, jax.Array]:
    """`(sum_b g_b min(1, C / ||g_b||), number of examples clipped)`, `||g_b||` over all leaves of `grads`.

    An example of norm 0 is kept as it is."""
    check_per_example(fn, grads)
    norms = jax.vmap(_formulas.global_norm)(grads)  # one global norm per example
    factors = jnp.nan_to_num(jnp.minimum(jnp.asarray(l2_norm_clip, norms.dtype) / norms, 1.0), nan=1.0)

    def leaf(g):
        if g is None:
            return None
        # integer gradients are summed in the factors' float dtype (as optax does): cast to int, the
        # factors would round to 0 or 1
        dt = g.dtype if jnp.issubdtype(g.dtype, jnp.inexact) else factors.dtype
        return jnp.tensordot(factors.astype(dt), g.astype(dt), axes=1)

    summed = jax.tree.map(leaf, grads, is_leaf=lambda x: x is None)
    return summed, jnp.sum(factors < 1.0, dtype=jnp.int32)


def per_example_layer_norm_clip(
    grads: Any, global_l2_norm_clip: Any, uniform: bool = True
) -> tuple[Any, Any]:
    r"""Clip each example's gradient layer by layer, each layer to its share of `global_l2_norm_clip`; sum.

    For :math:`K` layers (leaves) and a global bound :math:`C`, layer :math:`k` of each
    example :math:`b` is clipped to its own bound :math:`C_k`:

    .. math::
        g_k = \sum_b g_{b,k} \min\!\Big(1, \frac{C_k}{\lVert g_{b,k} \rVert}\Big), \qquad
        C_k = \begin{cases} C / \sqrt{K} & \text{uniform} \\ C \sqrt{D_k / D} & \text{otherwise} \end{cases}

    with :math:`D_k` the layer's size and :math:`D` the model's, so that the clipped
    example's global norm is at most :math:`C` (`optax.per_example_layer_norm_clip`). With
    one layer this is `per_example_global_norm_clip`. An example's layer of norm 0 is kept.

    Args:
      grads: per-example gradients, every leaf `[batch, *param_shape]`.
      global_l2_norm_clip: :math:`C`, the bound on one example's global norm, >= 0.
      uniform: every layer gets the same bound (True), or one by its share of the parameters.

    Returns:
      `(summed, num_clipped)`: trees shaped like `grads`' structure, with the sum of each
      layer's clipped gradients (shaped like the params) and the number of examples clipped
      in each layer (int32 scalars).

    Raises:
      TypeError: for a non-number `global_l2_norm_clip`, a non-bool `uniform` or a row-sparse leaf.
      ValueError: for a negative or non-finite bound, or leaves without one common leading axis.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> grads = {"a": jnp.array([[3.0, 4.0], [0.3, 0.4]]), "b": jnp.array([[0.0], [2.0]])}
        >>> summed, clipped = gradtx.per_example_layer_norm_clip(grads, 2**0.5)  # C_k = 1
        >>> [round(float(v), 4) for v in summed["a"]], summed["b"], clipped  # norms 5, 0.5 and 0, 2
        ([0.9, 1.2], Array([1.], dtype=float32), {'a': Array(1, dtype=int32), 'b': Array(1, dtype=int32)})

    References:
      McMahan, Ramage, Talwar, Zhang, *Learning Differentially Private Recurrent Language
      Models*, ICLR 2018.
    """
    fn = _checks.api_name("per_example_layer_norm_clip")
    _checks.check_number(fn, "global_l2_norm_clip", global_l2_norm_clip)
    _checks.check_nonnegative(fn, "global_l2_norm_clip", global_l2_norm_clip)
    _checks.check_bool(fn, "uniform", uniform)
    check_per_example(fn, grads)
    treedef: Any  # a PyTreeDef (jax's annotations leave its type unresolved)
    leaves, treedef = jax.tree.flatten(grads)
    if uniform:
        bounds = [global_l2_norm_clip * (1.0 / len(leaves)) ** 0.5 for _ in leaves]
    else:
        total = sum(g[0].size for g in leaves)
        bounds = [global_l2_norm_clip * (g[0].size / total) ** 0.5 for g in leaves]
    pairs = [clip_and_sum(fn, g, c) for g, c in zip(leaves, bounds, strict=True)]
    return treedef.unflatten([s for s, _ in pairs]), treedef.unflatten([n for _, n in pairs])

"""GaLore: low-rank projected optimizer states (`scale_by_galore`, `galore`)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence, Union

import jax
import jax.numpy as jnp

from gradtx import packing, sparse
from gradtx._algorithms.adam import scale_by_bias_corrected_adam
from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import shapes as _shape_checks
from gradtx._core import walk as _walk
from gradtx._core.chain import chain
from gradtx._core.rule_parts import refuse_integers
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class GaLoreDimensionNumbers(NamedTuple):
    """Which axes of a tensor form the `(reduction, output)` matrix that GaLore projects (optax's, as is).

    Attributes:
      reduction_axis: the axis or axes of the matrix's rows (the layer's input).
      output_axis: the axis or axes of its columns (the layer's output).
    """

    reduction_axis: Union[Sequence[int], int] = 0
    output_axis: Union[Sequence[int], int] = 1


class GaLoreState(NamedTuple):
    """State of `scale_by_galore` (optax's `GaLoreState`, field for field).

    A parameter GaLore does not project (a vector, by default) has no projector: `None` there
    (optax keeps an empty `(0, 0)` array, which orbax refuses to save; `optax_compat.contrib`'s
    galore holds optax's state, placeholder included, and a state of either form is taken).
    """

    count: _protocol.Count  # int32: completed updates (the projectors are recomputed when count % gap == 0)
    base_optimizer_state: Any  # the base optimizer's state, over the projected gradients
    projector: _protocol.Updates  # P per parameter: (m, r) or (n, r); None for a parameter not projected


setattr(GaLoreState, "slots_shaped_like_params", False)  # noqa: B010  (not a field: projectors are (m, r))


setattr(GaLoreState, "inner_states_shaped_like_params", False)  # noqa: B010  (the base's state is low-rank)


def _is_dims(x: Any) -> bool:
    return x is None or isinstance(x, GaLoreDimensionNumbers)


def _axes(ndim: int, axis: Any) -> tuple[int, ...]:
    return tuple(a % ndim for a in ((axis,) if isinstance(axis, int) else axis))


def _matrix_axes(
    fn: str, shape: tuple[int, ...], dims: GaLoreDimensionNumbers
) -> tuple[tuple[int, ...], ...]:
    """`(reduction axes, output axes)` of a tensor of `shape`; raises if they do not partition its axes."""
    if len(shape) < 2:
        raise ValueError(f"`{fn}`: GaLore projects tensors of rank >= 2, got shape {shape} with {dims}.")
    rows, cols = _axes(len(shape), dims.reduction_axis), _axes(len(shape), dims.output_axis)
    if set(rows) & set(cols) or len(set(rows) | set(cols)) != len(shape):
        raise ValueError(
            f"`{fn}`: {dims} must split the axes of shape {shape} into two disjoint groups covering all of "
            f"them, got reduction axes {rows} and output axes {cols}."
        )
    return rows, cols


def _to_matrix(x: jax.Array, rows: tuple[int, ...], cols: tuple[int, ...]) -> jax.Array:
    return x.transpose(rows + cols).reshape(
        math.prod(x.shape[a] for a in rows), math.prod(x.shape[a] for a in cols)
    )


def _from_matrix(
    y: jax.Array, shape: tuple[int, ...], rows: tuple[int, ...], cols: tuple[int, ...]
) -> jax.Array:
    order = rows + cols
    inverse = tuple(sorted(range(len(shape)), key=lambda i: order[i]))
    return y.reshape(tuple(shape[a] for a in order)).transpose(inverse)


def _shapes(shape: tuple[int, ...], axes: tuple[tuple[int, ...], ...], rank: int):
    """`(left, projector shape, low-rank shape)`: P spans the longer side of the `(m, n)` matrix."""
    m, n = (math.prod(shape[a] for a in group) for group in axes)
    r = min(rank, m, n)
    return (True, (m, r), (r, n)) if m >= n else (False, (n, r), (m, r))


def _project(g: jax.Array, p: jax.Array, axes, rank: int, renew: jax.Array):
    """The low-rank gradient and the projector (recomputed from the SVD of the gradient when `renew`)."""
    left, _, _ = _shapes(g.shape, axes, rank)
    g2 = _to_matrix(_placement.whole(g), *axes)
    r = p.shape[1]

    def fresh():
        u, _, vh = jnp.linalg.svd(g2.astype(jnp.float32), full_matrices=False)
        return (u[:, :r] if left else vh[:r, :].T).astype(p.dtype)

    p = _control.cond(renew, fresh, lambda: p)
    return (p.T @ g2 if left else g2 @ p), p


def _project_back(u: jax.Array, p: jax.Array, g: jax.Array, axes, rank: int, scale: float) -> jax.Array:
    left, _, _ = _shapes(g.shape, axes, rank)
    full = _from_matrix(p @ u if left else u @ p.T, g.shape, *axes)
    return _placement.placed_like((scale * full).astype(g.dtype), g)


@_registry.transform()
@_factory.real_only("it projects on the singular vectors of real matrices")
def scale_by_galore(
    rank: int = 128,
    update_proj_gap: int = 200,
    scale: float = 1.0,
    base_optimizer: Any = None,
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    r"""Run `base_optimizer` on low-rank projections of the matrices' gradients and project its steps back.

    For a gradient matrix :math:`G \in \mathbb{R}^{m \times n}` and :math:`r = \min(\text{rank}, m, n)`,
    every `update_proj_gap` steps (from the first) the projector is renewed from the SVD
    :math:`G = U \Sigma V^\top`, then

    .. math::
        m \ge n: \; P = U_{:, :r}, \; R = P^\top G, \; u = s\, P\, \text{base}(R); \qquad
        m < n: \; P = V_{:, :r}, \; R = G P, \; u = s\, \text{base}(R)\, P^\top

    so the base optimizer's state is :math:`r \times n` (or :math:`m \times r`) per matrix
    instead of :math:`m \times n`. The parameters GaLore does not project (by default every
    one that is not 2-D) go to the base optimizer whole. `weight_dimension_numbers` makes a
    higher-rank tensor a matrix: its `reduction_axis` axes are the rows, its `output_axis` axes
    the columns. These are `optax.contrib.scale_by_galore`'s numbers (the SVD in float32, the
    projector in the gradient's dtype). The base optimizer gets no params (it sees projected
    shapes): give it a rule of the gradients alone (`scale_by_bias_corrected_adam`, not an
    optimizer with weight decay). A row-sparse gradient is densified first.

    Args:
      rank: the rank :math:`r` of the projection (an int >= 1; capped at the matrix's sides).
      update_proj_gap: the steps between renewals of the projectors (an int >= 1).
      scale: :math:`s`, multiplies the projected-back steps, >= 0.
      base_optimizer: the transform run in the low-rank space (default
        `scale_by_bias_corrected_adam()`: optax's `scale_by_adam`).
      weight_dimension_numbers: None (project the 2-D parameters), one `GaLoreDimensionNumbers`
        (every parameter of rank >= 2), a tree of them shaped like the params (None: not
        projected), or a function of the params giving such a tree.

    Returns:
      A `LeafWise` transform with state `GaLoreState(count, base_optimizer_state, projector)`.

    Raises:
      TypeError: for a non-int `rank` or `update_proj_gap`, a non-number `scale`, a non-transform
        `base_optimizer` or bad `weight_dimension_numbers`.
      ValueError: for `rank` or `update_proj_gap` < 1; at `init`, for dimension numbers that do
        not split a parameter's axes in two.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_galore(rank=1, base_optimizer=gradtx.identity())
        >>> g = jnp.array([[3.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # rank 1 keeps its largest direction
        >>> jnp.abs(tx.update(g, tx.init(g))[0])
        Array([[3., 0.],
               [0., 0.],
               [0., 0.]], dtype=float32)

    References:
      Zhao, Zhang, Chen, Wang, Anandkumar, Tian, *GaLore: Memory-efficient LLM training by
      gradient low-rank projection*, ICML 2024 (arXiv:2403.03507).
    """
    fn = "scale_by_galore"
    _checks.check_int(fn, "rank", rank, minimum=1)
    _checks.check_int(fn, "update_proj_gap", update_proj_gap, minimum=1)
    _checks.check_number(fn, "scale", scale)
    _checks.check_finite(fn, "scale", scale)
    _checks.check_nonnegative(fn, "scale", scale)
    if base_optimizer is not None:
        _checks.check_transform(fn, "base_optimizer", base_optimizer)
    dims_arg = weight_dimension_numbers
    if not (
        dims_arg is None
        or callable(dims_arg)
        or isinstance(dims_arg, (GaLoreDimensionNumbers, dict, list, tuple))
    ):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `weight_dimension_numbers` must be None, a GaLoreDimensionNumbers, a "
            f"tree of them shaped like the params or a function of the params, got {dims_arg!r}."
        )
    base = _factory.member(scale_by_bias_corrected_adam() if base_optimizer is None else base_optimizer)
    name = _checks.api_name(fn)

    def dims_of(tree: Any) -> tuple[list[Any], list[Any], Any]:
        """The leaves of `tree` (None kept), each one's matrix axes (None: not projected), and its treedef."""
        treedef: Any  # a PyTreeDef
        leaves, treedef = jax.tree.flatten(tree, is_leaf=lambda x: x is None)
        if dims_arg is None:
            dims = [GaLoreDimensionNumbers() if x is not None and jnp.ndim(x) == 2 else None for x in leaves]
        elif isinstance(dims_arg, GaLoreDimensionNumbers):
            dims = [dims_arg if x is not None and jnp.ndim(x) >= 2 else None for x in leaves]
        else:
            given = dims_arg(tree) if callable(dims_arg) else dims_arg
            dims = treedef.flatten_up_to(given)
            if not all(_is_dims(d) for d in dims):
                raise TypeError(
                    f"`{name}`: `weight_dimension_numbers` gave {given!r}, not GaLoreDimensionNumbers."
                )
        axes = [
            None if d is None or x is None or jnp.size(x) == 0 else _matrix_axes(name, jnp.shape(x), d)
            for x, d in zip(leaves, dims, strict=True)
        ]  # an empty tensor has no direction to keep: it goes to the base optimizer whole
        return leaves, axes, treedef

    def init_fn(params):
        leaves, axes, treedef = dims_of(params)
        projectors, proxies = [], []
        for p, ax in zip(leaves, axes, strict=True):
            if ax is None:
                projectors.append(None)
                proxies.append(p if p is None else _placement.zeros_like(p))
                continue
            _, p_shape, low_shape = _shapes(jnp.shape(p), ax, rank)
            projectors.append(_fill(p, p_shape))
            proxies.append(_fill(p, low_shape))
        base_state = base.init(treedef.unflatten(proxies))
        return GaLoreState(_hyper.zero_count(), base_state, treedef.unflatten(projectors))

    def update_fn(updates, state, params=None, **extra_args):
        leaves, axes, treedef = dims_of(sparse.densify(updates))
        refuse_integers(name, updates, leaves, treedef, params, None)
        try:
            old = treedef.flatten_up_to(state.projector)
        except (ValueError, TypeError):  # JAX's tree errors name no key path
            raise _protocol.tree_mismatch_error(
                name, "updates", updates, "state.projector", state.projector
            ) from None
        _check_projectors(name, updates, leaves, axes, old, rank)
        renew = state.count % update_proj_gap == 0
        low, projectors = [], []
        for g, p, ax in zip(leaves, old, axes, strict=True):
            r, p = (g, p) if g is None or ax is None else _project(g, p, ax, rank, renew)
            low.append(r)
            projectors.append(p)
        low_tree = treedef.unflatten(low)
        _shape_checks.check_shapes(name, low_tree, None, state.base_optimizer_state)  # made for these shapes?
        steps, base_state = base.update(low_tree, state.base_optimizer_state, None, **extra_args)
        out = [
            u if ax is None or u is None else _project_back(u, p, g, ax, rank, scale)
            for u, p, g, ax in zip(treedef.flatten_up_to(steps), projectors, leaves, axes, strict=True)
        ]
        new_state = GaLoreState(_hyper.increment(state.count), base_state, treedef.unflatten(projectors))
        return treedef.unflatten(out), new_state

    return packing.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))


def _check_projectors(
    fn: str, updates: Any, leaves: list[Any], axes: list[Any], old: list[Any], rank: int
) -> None:
    """Raise if a projector of the state was made for a parameter of another shape (at trace time)."""
    for i, (g, ax, p) in enumerate(zip(leaves, axes, old, strict=True)):
        if g is None or (ax is None and (p is None or jnp.size(p) == 0)):  # None, or optax's (0, 0)
            continue
        want = None if ax is None else _shapes(jnp.shape(g), ax, rank)[1]
        if p is None or tuple(jnp.shape(p)) != want:
            raise ValueError(
                f"`{fn}`: the gradient at {_walk.key_paths(updates)[i]} has shape {tuple(jnp.shape(g))}, but "
                f"the state's GaLoreState, its slot `projector` there is {_shown(p)} "
                f"(`init` makes it {want} for such a parameter); pass a state made by `init` from params "
                "shaped like these gradients."
            )


def _shown(p: Any) -> str:
    return "None" if p is None else f"of shape {tuple(jnp.shape(p))}"


def _fill(p: Any, shape: tuple[int, ...]) -> jax.Array:
    """Zeros of `shape` in `p`'s dtype, whole on `p`'s devices (a projector or a low-rank slot)."""
    return _placement.replicated_on(p, shape)


@_registry.optimizer("GaLore")
def galore(
    learning_rate: _protocol.ScalarOrSchedule,
    rank: int = 128,
    update_proj_gap: int = 200,
    scale: float = 1.0,
    base_optimizer: Any = None,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    mask: Any = None,
    weight_dimension_numbers: Any = None,
) -> _protocol.GradientTransformation:
    r"""GaLore: a base optimizer (Adam by default) on low-rank projections of the matrices' gradients.

    `chain(scale_by_galore(rank, update_proj_gap, scale, base_optimizer, weight_dimension_numbers),
    add_decayed_weights(weight_decay, mask=mask), scale_by_learning_rate(learning_rate))`: the
    base optimizer's state is kept for an :math:`r \times n` (or :math:`m \times r`) projection of
    each matrix, the projectors renewed from the gradient's SVD every `update_proj_gap` steps
    (see `scale_by_galore`); the weight decay is added in the full space and multiplied by the
    rate, as AdamW's. These are the numbers of `optax.contrib.galore`. A row-sparse gradient is
    densified.

    Args:
      learning_rate: the learning rate, >= 0 (number, scalar array or schedule).
      rank: the rank of the projection (an int >= 1; capped at each matrix's sides).
      update_proj_gap: the steps between renewals of the projectors (an int >= 1).
      scale: multiplies the projected-back steps, >= 0.
      base_optimizer: the transform run in the low-rank space (default: optax's `scale_by_adam`,
        `scale_by_bias_corrected_adam()`); a rule of the gradients alone.
      weight_decay: the decoupled weight decay, >= 0 (number, scalar array or schedule).
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.
      weight_dimension_numbers: which axes form each parameter's matrix (see `scale_by_galore`).

    Returns:
      A `LeafWise` chain with state `(GaLoreState, AddDecayedWeightsState or EmptyState, EmptyState)`.

    Raises:
      TypeError: for a non-int `rank` or `update_proj_gap`, or a non-transform `base_optimizer`.
      ValueError: for `rank` or `update_proj_gap` < 1, a bad rate or weight decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.galore(learning_rate=0.1, rank=1)
        >>> params = {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}
        >>> u, state = tx.update(params, tx.init(params), params)  # Adam's first step: -lr sign
        >>> [round(float(v), 4) for v in u["b"]], state[0].projector["w"].shape
        ([-0.1, -0.1], (3, 1))

    References:
      Zhao, Zhang, Chen, Wang, Anandkumar, Tian, *GaLore: Memory-efficient LLM training by
      gradient low-rank projection*, ICML 2024 (arXiv:2403.03507).
    """
    return chain(
        scale_by_galore(rank, update_proj_gap, scale, base_optimizer, weight_dimension_numbers),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["GaLoreDimensionNumbers", "GaLoreState", "galore", "scale_by_galore"]

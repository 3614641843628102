"""ZeRO stage 1: `sharded_state` keeps 1/N of the optimizer state on each replica."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import deferred as _deferred
from gradtx._core import factory as _factory
from gradtx._core import naming as _naming
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core import walk as _walk
from gradtx.parallel import _axes, _elementwise, _sharded_gather
from gradtx.parallel._cross_shard import REDUCTIONS
from gradtx.parallel._sharded_layout import ShardedState, Slices, gathered, my_slice, padded, slice_len, split


def _leaf_wise_members(tx: Any) -> list[str]:
    """The names of the innermost members of `tx` that run on whole leaves only (`tx`'s own if none)."""
    if isinstance(tx, (_protocol.ElementWise, _protocol.SliceWise)):
        return []
    members = getattr(_factory.unwrapped(tx).update, "_gradtx_members", ())
    found = [name for m in members for name in _leaf_wise_members(m)]
    return found or [_naming.name_of(tx)]


def _refuse_leaf_wise(fn: str, tx: Any, axes: tuple) -> ValueError:
    outer = _naming.name_of(tx)
    names = ", ".join(f"`{m}`" for m in dict.fromkeys(_leaf_wise_members(tx)))
    where = "" if names == f"`{outer}`" else f" (in `{outer}`)"
    return ValueError(
        f"`{fn}`: {names}{where} is leaf-wise: it needs whole tensors (a per-tensor norm or statistic, "
        f"a matrix's shape, a key-path mask, or a transform of unknown kind), but inside `shard_map` / "
        f"`pmap` each replica holds a flat slice of every parameter. Use `sharded_state(tx, "
        f"{axes[0] if len(axes) == 1 else axes!r}, mesh=mesh)` under `jax.jit`, where XLA computes such "
        f"rules on sharded tensors exactly, `gather_state=True` (1/N of the state kept, the whole state "
        f"gathered for each step), or `cross_shard`. Element-wise rules and gradtx's reductions "
        f"over the gradients (`clip_by_global_norm`, `clip_by_norm`, `apply_if_finite`, `zero_nans`, "
        f"`add_noise`) run on the slices; declare an optax transform that treats elements alike with "
        f"`gradtx.ElementWise(*tx)`."
    )


def _slices(n: int, axes: tuple, tree: Any) -> Slices:
    """What runs `_sliced.total` and `_sliced.leaf_part` while the rule holds slices of `tree`'s leaves."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    shapes = {jax.tree_util.keystr(k): tuple(np.shape(x)) for k, x in leaves}
    return Slices(n, axes, shapes)


@_registry.wrapper("ZeRO1")
def sharded_state(
    tx: Any,
    axis_name: _axes.AxisName,
    *,
    reduction: str = "mean",
    replicated_grads: str | None = None,
    mesh: jax.sharding.Mesh | None = None,
    gather_state: bool = False,
) -> _protocol.GradientTransformation:
    r"""Data parallelism with the optimizer state split over the replicas (ZeRO stage 1).

    **Inside `jax.shard_map` / `jax.pmap`.** Each parameter and its gradient are flattened,
    zero-padded to a multiple of N and cut into N equal slices. The gradients are
    reduce-scattered (`psum_scatter`, "mean" divides by N): replica :math:`r` receives the
    reduced slice :math:`r`, applies `tx` to it with its own slice of the state (and of the
    parameters), and the updated slices are all-gathered into full updates. Every replica
    thus stores only 1/N of `tx`'s slots, and the compiled step has one reduce-scatter and
    one all-gather per leaf where data parallelism has one all-reduce. The numbers equal
    those of `tx` on the reduced gradient (to float rounding), because `tx` must be exact on
    slices: element by element, or reducing over the gradients only as gradtx's rules
    declare it. A global-norm clip (`clip_by_global_norm`, `optax_compat`'s), `clip_by_norm`
    (per tensor), `apply_if_finite` and `zero_nans` compute their reduction over the
    replica's slices (a sum of squares, an all-finite test), and one all-reduce of that
    scalar (or of one per leaf) over `axis_name` makes it the whole one -- so
    `chain(clip_by_global_norm(c), adamw(...))` adds one scalar all-reduce to the step.
    `add_noise` has each replica draw every leaf's whole noise and keep its slice: the same
    numbers as unsharded, at the cost of drawing (not storing) the whole gradient's noise
    on every replica. LARS's and LAMB's trust ratios and the per-tensor norms, maxima and
    root mean squares of NovoGrad, NormalizedSGD, StableAdamW, FAdam, StableSPAM,
    `scale_by_param_block_norm`, `clip_by_block_rms` and `scale_by_param_block_rms`, MARS's
    corrected gradient's norm and the cautious mask's count of agreeing signs (`cautious`,
    LaProp's and MARS's `cautious=True`) are taken the same way (one scalar all-reduce per
    tensor; a mean divides by the whole leaf's size), SAM's `normalize` and DoG's the global
    norm (DoG's heuristic start too: `init` runs with the same totals), MoMo's and
    MoMo-Adam's inner products over the tree (pass them the replicas' mean loss as `value`:
    `mean_over(loss, axis_name)`), and masks and labels
    given as trees or key-path patterns (or, inside gradtx, by the whole leaves' key paths and
    shapes: MARS's and Adam-mini's) route the slices as the whole leaves; Adam-mini's second
    moment per block is the whole leaf's block's. Statistics per row and per column
    (Adafactor's and CAME's factored second moments, SM3's accumulators per index of each
    axis) are the whole leaf's too: each replica places its slice in the leaf, reduces it
    over the axes, and one all-reduce combines the partial sums (or maxima) of all leaves;
    the statistics are stored cut like the slots and gathered for the step (one small
    all-gather). A low-bit slot (`gradtx.low_bit_state`) is stored or not as the whole
    leaf's is, and 8 and 4 bits quantize the slice in the leaf's own blocks (the same codes
    and scales), where the leaf is blocked along its flattened elements and the slice's
    length is a multiple of the block size; another such slot is refused at `init`, naming
    its leaf. Rules that need whole tensors (Shampoo, SOAP, Muon, PSGD Kron, a mask that is
    a function of the params) are refused when built, naming the member, and an
    element-wise one that mixes elements
    otherwise (GGT, optax's own clip declared `ElementWise`) is refused when traced (the
    jaxpr of its update is read): on slices they would see 1/N of each tensor. With
    `gather_state=True` such a rule (leaf-wise, or element-wise but mixing a slice's
    elements, found by the same reading, or with a low-bit slot that a slice cannot hold in
    its leaf's blocks) runs instead on whole tensors: the gradients are all-reduced (as
    `cross_shard` does), each replica all-gathers the whole state for the step (one
    all-gather per leaf of 1 MiB or more, one per dtype for the smaller ones), runs the
    rule, and keeps its slice of the new state; the rule's per-matrix work (Muon's
    Newton-Schulz, Shampoo's and SOAP's preconditioning, PSGD Kron's factors) is split over
    the replicas as `split_matrix_work` splits it, each computing 1/N of the matrices (one
    all-gather of the results per shape and dtype), and the rest of the rule is repeated on
    every replica. Between steps 1/N of the state is stored, in the layout above (so
    `unshard_state` / `shard_state` apply), at the price of the state's all-gather at every
    step and the whole state in memory during it: worth it where the state is small beside
    the parameters or where the memory between steps is what counts; every registered
    optimizer runs so. A rule's own state leaves that
    are not slots (a PRNG key, Mechanic's per-decay scales) are the same on every replica:
    they too are stored cut and gathered for the step (with the small leaves). The padding
    never reaches the parameters. Row-sparse gradients are densified. `init` must run inside
    the mapped function too (it needs N and the replica's index); its state leaves it with
    `out_specs=P(axis_name)`.

    The gradients follow `cross_shard`'s contract: each replica's own (any `check_vma`
    mode; under `check_vma=True` differentiate with respect to
    `gradtx.parallel.per_replica(params, axis_name)`, which is what makes the
    reduce-scatter happen), or, under `check_vma=True`, the gradient autodiff already
    combined with `replicated_grads` saying whether it is the sum or the mean -- autodiff
    has then all-reduced it, and it is only sliced (ZeRO's saving of communication is lost).

    **Under `jax.jit` with `mesh`** (the axis is not bound: no `shard_map` around the
    step), `tx` sees whole tensors sharded by XLA, so every transform works, per-tensor and
    global-norm rules included: `init` splits each slot over `axis_name` on its first
    dimension that divides evenly (keeping the parameter's own sharding on the others; a
    leaf with no such dimension stays as its parameter is), `update` constrains the
    gradients to those shardings and gives the updates their parameters' sharding back.
    XLA then reduces the gradients once and gathers the updates once; on TPU and GPU the
    all-reduce followed by the slice is a reduce-scatter (XLA:CPU keeps the all-reduce). On
    a mesh of explicit axes (`jax.make_mesh`'s default) the parameters' shardings are
    read from their types and kept exactly; with auto axes the other dimensions are left
    to XLA. `reduction` and `replicated_grads` play no part: the gradients are the global
    batch's.

    Args:
      tx: the transform whose state is sharded (gradtx or optax); inside `shard_map`
        element-wise (`gradtx.ElementWise`) or one of gradtx's global or per-tensor
        reductions above.
      axis_name: the mapped axis (or tuple of axes) of the replicas; under `jit`, the
        mesh axis (or axes) the state is split over.
      reduction: "mean" or "sum" of the replicas' gradients (`shard_map` / `pmap`).
      replicated_grads: "sum", "mean" or None, as for `cross_shard` (`check_vma=True`).
      mesh: the mesh, for use under `jax.jit` without `shard_map`.
      gather_state: inside `shard_map` / `pmap`, run a leaf-wise `tx` on whole tensors
        with its state gathered for each step (above) instead of refusing it; element-wise
        rules and gradtx's reductions keep the slices either way.

    Returns:
      A `GradientTransformation` with state `ShardedState`.

    Raises:
      ValueError: for an unknown `reduction` / `replicated_grads`, or a leaf-wise `tx`
        without `mesh` or `gather_state=True`; at trace time (`init` or `update`), when
        `axis_name` is not bound and no `mesh` is given, when `tx` mixes the elements of a
        slice, or for a gradient combined by autodiff without `replicated_grads`.
      TypeError: if `tx` is not a transform, `mesh` not a `jax.sharding.Mesh` or
        `gather_state` not a bool.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> n = jax.device_count()
        >>> mesh = jax.make_mesh((n,), ("data",))
        >>> tx = gradtx.parallel.sharded_state(gradtx.adam(0.1), "data")
        >>> def step(w, g):
        ...     state = tx.init(w)
        ...     updates, state = tx.update(g[0], state, w)  # g[0]: this replica's gradient
        ...     return gradtx.apply_updates(w, updates), state
        >>> g = jax.device_put(jnp.ones((n, 10)), jax.NamedSharding(mesh, P("data")))
        >>> specs = dict(in_specs=(P(), P("data")), out_specs=(P(), P("data")))  # state: split on "data"
        >>> step = jax.jit(jax.shard_map(step, mesh=mesh, **specs))
        >>> w, state = step(jnp.zeros(10), g)
        >>> [round(float(x), 4) for x in w[:3]], state.inner[0].m.shape == (n, -(-10 // n))
        ([-0.1, -0.1, -0.1], True)

    References:
      Rajbhandari, Rasley, Ruwase, He, *ZeRO: memory optimizations toward training trillion
      parameter models*, SC 2020.
    """
    fn = "sharded_state"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_one_of(fn, "reduction", reduction, REDUCTIONS)
    _axes.check_replicated_grads(fn, replicated_grads)
    if mesh is not None and not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"`{fn}`: `mesh` must be a `jax.sharding.Mesh`, got {type(mesh).__name__}.")
    if mesh is not None:
        missing = [a for a in axes if a not in mesh.axis_names]
        if missing:
            raise ValueError(f"`{fn}`: `mesh` has the axes {mesh.axis_names}, not {missing[0]!r}.")
    _checks.check_bool(fn, "gather_state", gather_state)
    inner = _factory.member(tx)
    element_wise = isinstance(inner, _protocol.ElementWise)
    on_slices = element_wise or isinstance(inner, _protocol.SliceWise)
    if mesh is None and not on_slices and not gather_state:
        raise _refuse_leaf_wise(fn, tx, axes)
    gathers = gather_state and not on_slices  # a leaf-wise rule in `shard_map`: its state gathered per step

    def mapped() -> bool:
        if mesh is None or _axes.is_bound(axes):
            _axes.bound_size(fn, axes)  # the error of an unbound axis
            if not on_slices and not gather_state:
                raise _refuse_leaf_wise(fn, tx, axes)
            return True
        return False

    def mixing(g: Any, state: Any, p: Any, extra_args: dict, whole: Any) -> str | None:
        """Why `inner`'s update on these slices of the leaves of `whole` is not exact (None when it is): the
        jaxpr read once, inside `_sliced.holding` (the declared reductions are exact)."""
        data = [
            *(True for _ in jax.tree.leaves(g)),
            *_elementwise.data_leaves(inner.init, g, whole),
            *(True for _ in jax.tree.leaves(p)),
        ]
        return _elementwise.cross_element_reason(
            lambda g, s, p: inner.update(g, s, p, **extra_args), (g, state, p), data
        )

    def whole(tree: Any, n: int) -> bool:
        """Whether this step runs on whole tensors: a leaf-wise rule, or with `gather_state` an element-wise
        one whose update mixes a slice's elements (GGT): the same answer for `init` and `update` (the
        update traced on slices of the params' shapes, without extra arguments)."""
        if gathers or not (gather_state and on_slices):
            return gathers
        slices = jax.tree.map(lambda x: jax.ShapeDtypeStruct((slice_len(np.size(x), n),), x.dtype), tree)
        with _sliced.holding(_slices(n, axes, tree)):
            try:
                state = jax.eval_shape(inner.init, slices)
            except ValueError:  # a slot a slice cannot hold as its leaf does (a low-bit slot's blocks)
                return True
            try:
                reason = mixing(slices, state, slices, {}, tree)
            except Exception:  # noqa: BLE001 -- a rule that needs extra arguments is checked at its update
                return False
        return reason is not None

    def init_fn(params):
        if not mapped():
            return ShardedState(inner=jax.tree.map(lambda x: split(x, mesh, axes), inner.init(params)))
        n = _axes.bound_size(fn, axes)
        if whole(params, n):
            return ShardedState(inner=_sharded_gather.stored(inner.init(params), n, axes))
        slices = jax.tree.map(lambda p: my_slice(jnp.asarray(p), n, axes), params)
        with _sliced.holding(_slices(n, axes, params)):  # a norm `init` reads (DoG's start): the whole leaf's
            state = inner.init(slices)
            own, _ = _sharded_gather.own_leaves(inner, slices, params)  # a key, Mechanic's scales: cut too
        return ShardedState(inner=_sharded_gather.stored(state, n, axes, own))

    def jit_update(updates, state, params, extra_args):
        grads = sparse.densify(updates)
        g = _walk.map_updates(fn, lambda x: split(x, mesh, axes), grads)
        p = None if params is None else jax.tree.map(lambda x: split(x, mesh, axes), params)
        u, new_inner = inner.update(g, state.inner, p, **extra_args)
        out = _walk.map_updates(fn, lambda x, like: gathered(x, like, mesh, axes), u, grads)
        return out, ShardedState(inner=jax.tree.map(lambda x: split(x, mesh, axes), new_inner))

    def update_fn(updates, state, params=None, **extra_args):
        if not mapped():
            return jit_update(updates, state, params, extra_args)
        # the checks of traced values (schedules) read the replica's copy of the count: their verdict is
        # made every replica's (one scalar all-reduce), so the updates stay replicated under check_vma
        with _deferred.deferred() as intervals:
            out, new_state = mapped_update(updates, state, params, extra_args)
        everyone = lambda ok: jax.lax.pmin(ok.astype(jnp.int32), axes).astype(bool)  # noqa: E731
        return _deferred.nan_unless(intervals, out, combine=everyone), new_state

    def mapped_update(updates, state, params, extra_args):
        n = _axes.bound_size(fn, axes)
        grads = sparse.densify(updates)
        if whole(grads, n):
            out, kept = _sharded_gather.update(
                fn,
                inner,
                updates,
                state.inner,
                params,
                extra_args,
                axes=axes,
                n=n,
                reduction=reduction,
                replicated_grads=replicated_grads,
            )
            return out, ShardedState(inner=kept)
        checked = _axes.vma_checked(axes)
        _axes.check_replicated(fn, grads, axes, checked, replicated_grads)

        def reduce_slice(g):
            todo = _axes.varying_axes(g, axes, checked)
            factor = _axes.combined_factor(g, axes, checked, replicated_grads)
            if g.size and todo == axes:
                s = jax.lax.psum_scatter(padded(g, n).reshape(-1), axes, scatter_dimension=0, tiled=True)
            else:  # combined by autodiff over the other axes (check_vma=True): slice
                s = my_slice(_axes.psum(g, todo) if g.size else g, n, axes)
            if factor != 1:
                s = s * jnp.asarray(factor, s.dtype)
            return s / jnp.asarray(n, s.dtype) if reduction == "mean" else s

        g_slices = _walk.map_updates(fn, reduce_slice, grads)
        p_slices = None if params is None else jax.tree.map(lambda p: my_slice(p, n, axes), params)
        with _sliced.holding(_slices(n, axes, grads)):  # the rule's global reductions: one collective each
            # the rule's own leaves (a key, Mechanic's scales) gathered whole; a low-bit slot is the leaf's
            own, like = _sharded_gather.own_leaves(inner, g_slices, grads)
            inner_state = jax.tree.map(lambda x: x[0], state.inner)
            inner_state = _sharded_gather.with_whole(inner_state, own, like, axes, checked)
            reason = mixing(g_slices, inner_state, p_slices, extra_args, grads)
            if reason is not None:
                raise ValueError(
                    f"`{fn}`: `tx` is not element by element: its update uses {reason}, so on a replica's "
                    f"slice of each parameter it would see 1/N of the elements (a reduction that does not "
                    f"go through gradtx's sliced totals, a random draw or a per-tensor rule would change "
                    f"silently). Use `sharded_state(tx, {axis_name!r}, mesh=mesh)` under `jax.jit`, where "
                    f"XLA reduces over the whole tensors, `gather_state=True` (the rule run on whole "
                    f"tensors, its state gathered for each step), or `cross_shard`."
                )
            u_slices, new_inner = inner.update(g_slices, inner_state, p_slices, **extra_args)

        def gather(u, g):
            full = _axes.all_gather(u, axes, checked) if u.size else jnp.zeros((0,), u.dtype)
            return full[: g.size].reshape(g.shape)

        out = _walk.map_updates(fn, gather, u_slices, grads, names=("updates", "gradients"))
        return out, ShardedState(inner=_sharded_gather.stored(new_inner, n, axes, own))

    if element_wise:  # on packed parameters: the buffers are sliced as they are
        return _protocol.ElementWise(init_fn, update_fn)
    return _protocol.GradientTransformation(init_fn, update_fn)  # made leaf-wise: whole leaves

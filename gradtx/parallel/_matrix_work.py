"""`split_matrix_work`: each device computes the matrix work of 1/N of the matrices, the results are
gathered once (Muon's Newton-Schulz iterations, Shampoo's and SOAP's preconditioned leaves, PSGD Kron's
factors: every rule that yields a `MatrixWork`)."""

from __future__ import annotations

import math
from typing import Any, Hashable, Sequence

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import matrix_work as _matrix_work
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx.parallel import _axes
from gradtx.parallel import _matrix_blocks as _blocks

_FN = "split_matrix_work"


def split_matrix_work(
    tx: Any,
    axis_name: _axes.AxisName | None = None,
    *,
    mesh: jax.sharding.Mesh | None = None,
    mesh_axes: Sequence[Hashable] | None = None,
) -> _protocol.GradientTransformation:
    r"""Split the per-matrix work of `tx`'s rules across the devices: each computes 1/N of the matrices.

    Muon's Newton-Schulz iterations, Shampoo's and SOAP's whole step of each preconditioned leaf (its
    statistics, roots or eigenbases, and the products with them), PSGD Kron's factor updates and
    preconditioning (and the work of every rule that declares its matrix work, see
    `gradtx.update_rule`) otherwise run as the leaves lie: under
    `jax.jit` with Auto axes GSPMD shards each matmul of each iteration (a collective per matmul); with
    Explicit axes every device gathers every matrix and computes all of them; under `shard_map` every
    replica repeats all of them. Here the matrices of one shape are stacked (the works of one rule, key,
    shape and dtype: a group), the stack is padded to a multiple of the device count N with copies of
    its first matrix, and

    - under `jax.jit` (Auto or Explicit axes; the mesh of `jax.set_mesh`, or `mesh`): each part of the
      stack (the matrices, and the per-matrix parts that come with them: PSGD Kron's factors and
      momentum, Shampoo's and SOAP's statistics and bases) is held split along its matrices' first
      axis that the device count divides (their rows, as the leaves lie sharded on their first axis),
      and inside a per-device program (a `shard_map` over `mesh_axes`, all of the mesh's axes by
      default) one all-to-all per dtype gives each device its matrices whole; it computes them, and
      the results go back by one all-to-all per dtype to their rows' split, where the rule places
      each result like its leaf or state (with Explicit axes only when the group's parts lie so
      already; otherwise, a state made replicated for instance, the results are gathered whole by one
      all-gather per dtype and each is sliced where it lies); each leaf then takes its own slice. A
      part none of whose axes the device count divides (a random key, a matrix of an odd shape)
      travels whole. `init` creates the per-matrix state (Shampoo's statistics and roots, SOAP's
      statistics and bases, PSGD Kron's factors) split the same way, each device making its share
      (eagerly on the params' mesh, or under `jax.jit`), so a step moves none of it and a device
      holds 1/N of it;
    - inside `jax.shard_map` / `jax.pmap` over `axis_name`: replica `i` computes the matrices
      `[i k, (i + 1) k)` of the stack (`k = ceil(n / N)`) and one all-gather (of one buffer per
      dtype) gives every replica all of them. The matrices must be the same on every replica (data
      parallelism after `cross_shard`, not local steps): under `check_vma=True` a matrix that varies
      over `axis_name` is refused.

    Per device, the work of a group of `n` matrices is that of `ceil(n / N)` matrices instead of
    `n`, at the price of two collectives per group and dtype (jit; one inside `shard_map`). Work a rule does
    only on some steps (Shampoo's roots with `svd_interval` > 1, SOAP's bases, PSGD Kron's factor
    updates) stays in its `lax.cond`: on the other steps it is not computed (the rest of the leaf's
    step is, in the same work). A rule with several rounds of work has two collectives per group and
    round. The numbers are the single-device run's: the same function of the same matrix, computed on
    another device.

    Args:
      tx: the transform whose rules' matrix work is split (a whole optimizer: `gradtx.muon(...)`).
      axis_name: inside `shard_map` / `pmap`, the mapped axis (or tuple of axes) to split over;
        None under `jax.jit`.
      mesh: under `jax.jit` with Auto axes and no `jax.set_mesh`, the mesh of the params' shardings.
      mesh_axes: the mesh axes the stacks are split over (default: every axis of the mesh).

    Returns:
      A `GradientTransformation` with the state of `tx` and its numbers.

    Raises:
      ValueError: for `mesh` or `mesh_axes` given with `axis_name`, mesh axes not in the mesh; at
        trace time, outside a mapped `axis_name`, or under `jax.jit` with no mesh.
      TypeError: for a `tx` that is not a transform or a `mesh` that is not a `jax.sharding.Mesh`.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, gradtx
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
        >>> tx = gradtx.parallel.split_matrix_work(gradtx.muon(0.02), mesh=mesh)
        >>> params = {f"w{i}": jnp.ones((16, 8)) * (i + 1) + jnp.eye(16, 8) for i in range(4)}
        >>> grads = jax.tree.map(lambda p: p - 1.0, params)
        >>> u, _ = jax.jit(tx.update)(grads, tx.init(params), params)
        >>> v, _ = gradtx.muon(0.02).update(grads, tx.init(params), params)  # one device's numbers
        >>> bool(all(np.allclose(u[k], v[k], atol=1e-6) for k in u))
        True
    """
    _checks.check_transform(_FN, "tx", tx)
    names = None if axis_name is None else _axes.check_axis_name(_FN, axis_name)
    if names is not None and (mesh is not None or mesh_axes is not None):
        raise ValueError(
            f"`gradtx.parallel.{_FN}`: `mesh` and `mesh_axes` are for `jax.jit`; inside `shard_map` / "
            f"`pmap` `axis_name` names the axes, got axis_name={axis_name!r} with mesh={mesh!r}, "
            f"mesh_axes={mesh_axes!r}."
        )
    if mesh is not None and not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"`gradtx.parallel.{_FN}`: `mesh` must be a jax.sharding.Mesh or None, got {mesh!r}.")
    if mesh_axes is not None:
        mesh_axes = tuple(mesh_axes) if isinstance(mesh_axes, (tuple, list)) else (mesh_axes,)
        if not mesh_axes or (mesh is not None and any(a not in mesh.axis_names for a in mesh_axes)):
            raise ValueError(
                f"`gradtx.parallel.{_FN}`: `mesh_axes` must name axes of the mesh"
                f"{'' if mesh is None else ' ' + str(mesh.axis_names)}, got {mesh_axes!r}."
            )
    inner = _factory.member(tx)

    def init_fn(params):
        if names is not None:  # inside shard_map / pmap: each replica keeps its own whole state
            return inner.init(params)
        with _matrix_work.holding(_held(mesh, mesh_axes)):
            return inner.init(params)

    def update_fn(updates, state, params=None, **extra_args):
        spread = over_replicas(names) if names is not None else _over_mesh(mesh, mesh_axes)
        with _matrix_work.spreading(spread):
            return inner.update(updates, state, params, **extra_args)

    return _factory.composite(init_fn, update_fn, inner)


def _free_axes(m: Any, mesh_axes: tuple[Hashable, ...] | None) -> tuple[Hashable, ...] | None:
    """The mesh axes the stacks are split over (`mesh_axes`, or every free axis of `m`); None when they
    are not free axes of `m`."""
    types = dict(zip(m.axis_names, m.axis_types, strict=True))
    axes = mesh_axes or tuple(a for a in m.axis_names if types[a] != AxisType.Manual)
    if not axes or any(a not in types or types[a] == AxisType.Manual for a in axes):
        return None
    return axes


def _held(mesh: Any, mesh_axes: tuple[Hashable, ...] | None) -> _matrix_work.Hold:
    """`split_matrix_work`'s `init`: each per-matrix state array split along its first axis that the device
    count divides, as the split step holds its work's parts (whole if none), on the mesh of `mesh`, of its
    leaf, or of `jax.set_mesh`; as it is with no mesh of free axes."""

    def hold(p: Any, x: jax.Array) -> jax.Array:
        traced = isinstance(x, jax.core.Tracer)
        where = jax.typeof(p) if isinstance(p, jax.core.Tracer) else p
        m = mesh or getattr(getattr(where, "sharding", None), "mesh", None)
        if m is None or m.empty:
            m = jax.sharding.get_abstract_mesh() if traced else jax.sharding.get_mesh()
        axes = None if m is None or m.empty else _free_axes(m, mesh_axes)
        if axes is None:
            return x
        size = math.prod(m.shape[a] for a in axes)
        spec = _blocks.Blocks.spec(x[None], axes, size)
        if spec == P():
            return x
        sharding = NamedSharding(m, P(*spec[1:]))
        if not traced:
            return jax.device_put(x, sharding) if isinstance(m, jax.sharding.Mesh) else x
        if any(m.axis_types[m.axis_names.index(a)] == AxisType.Explicit for a in axes):
            return jax.sharding.reshard(x, sharding)
        return jax.lax.with_sharding_constraint(x, sharding)

    return hold


def _aligned(parts: Sequence[jax.Array]) -> Sequence[jax.Array]:
    """Explicit axes: the parts in the first one's layout, to be joined (no move when they agree)."""
    first = _placement.explicit_sharding(parts[0])
    return parts if first is None else [jax.sharding.reshard(x, first) for x in parts]


def _unplaced(x: Any) -> jax.ShapeDtypeStruct:
    """`x`'s shape and dtype, without its sharding (to trace a work's function as on one device)."""
    return jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))


def _over_mesh(mesh: Any, mesh_axes: tuple[Hashable, ...] | None) -> _matrix_work.Spread:
    """The spread under `jax.jit`: each group's stack sharded over the mesh, computed, gathered."""

    def spread(works):
        m = mesh if mesh is not None else jax.sharding.get_abstract_mesh()
        if m is None or m.empty:
            raise ValueError(
                f"`gradtx.parallel.{_FN}`: no mesh to split the matrices over; call it under "
                "`jax.set_mesh(mesh)`, pass `mesh=`, or inside `shard_map` / `pmap` pass `axis_name`."
            )
        types = dict(zip(m.axis_names, m.axis_types, strict=True))
        axes = _free_axes(m, mesh_axes)
        if axes is None:
            asked = mesh_axes or ()
            missing = [a for a in asked if a not in types or types[a] == AxisType.Manual]
            raise ValueError(
                f"`gradtx.parallel.{_FN}`: the mesh axes {missing or asked} are not free axes of the mesh "
                f"{m.axis_names} (inside `shard_map`, pass `axis_name`)."
            )
        explicit = any(types[a] == AxisType.Explicit for a in axes)
        size = math.prod(m.shape[a] for a in axes)

        def place(x, spec):
            sharding = NamedSharding(m, spec)
            if explicit:
                return jax.sharding.reshard(x, sharding)
            return jax.lax.with_sharding_constraint(x, sharding)

        def hold(parts):
            # each part split along its rows (as the leaves lie, sharded on their first axis) or whole: its
            # stack axis is split inside the per-device program, one move for all of a group's parts (GSPMD
            # would move them one by one)
            return [place(x, _blocks.Blocks.spec(x, axes, size)) for x in parts]

        def lies_split(idx):
            # Explicit axes: whether the group's parts already lie as they are held (the leaves sharded on
            # their rows, the state placed by `init`): the results then go back split, where the rule
            # places them; else they are gathered whole (a split result would be gathered leaf by leaf)
            parts = [x for i in idx for x in jax.tree.leaves(works[i].stack)]
            return all(
                (got := _placement.explicit_sharding(x)) is not None
                and _blocks.normalized(got.spec, x.ndim)
                == _blocks.normalized(_blocks.Blocks.spec(x, axes, size), x.ndim)
                for x in parts
                if _blocks.Blocks.spec(x, axes, size) != P()
            )

        results: list[Any] = [None] * len(works)
        for idx in _matrix_work.groups(works):
            back = not explicit or lies_split(idx)

            def result_spec(t, back=back):
                return _blocks.Blocks.spec(t, axes, size) if back else P()

            x, n = _matrix_work.stacked(works, idx, size, hold)
            first = works[idx[0]]

            def compute(x, fn=first.fn, args=first.args, n=n, result_spec=result_spec, back=back):
                # the parts moved to the stack axis's split by one all-to-all per dtype and the results back
                # to their rows' split by another, inside a per-device program: a loop, an SVD or an
                # eigendecomposition is then never partitioned (nor its types checked) by the compiler
                bare = jax.tree.map(_unplaced, (x, args))
                shapes = jax.eval_shape(lambda s, a: _matrix_work.mapped(fn, s, *a), *bare)  # unplaced
                inputs, outputs = _blocks.Blocks.of(x, size), _blocks.Blocks.of(shapes, size, whole=not back)

                def per_device(stack, *args):
                    mine = inputs.mine(stack, axes, size)
                    return outputs.back(_matrix_work.mapped(fn, mine, *args), axes, size)

                local = jax.shard_map(
                    per_device,
                    mesh=m,
                    in_specs=(inputs.specs(axes), *(P() for _ in args)),
                    out_specs=outputs.specs(axes),
                    axis_names=set(axes),
                )
                y = local(x, *(place(jnp.asarray(a), P()) for a in args))
                # each result held as it came: GSPMD would otherwise cut the results' slices as their users
                # want them, moving data between devices
                return jax.tree.map(lambda t: place(t[:n], result_spec(t)), y)

            otherwise = _matrix_work.otherwise(works, idx, lambda t: place(t, result_spec(t)))
            out = _matrix_work.when(first._replace(otherwise=otherwise), compute, x)
            _matrix_work.split(works, idx, results, out)
        return results

    return spread


def over_replicas(names: tuple[Hashable, ...]) -> _matrix_work.Spread:
    """The spread inside `shard_map` / `pmap`: replica i computes its slice of each stack, then all-gather
    (`split_matrix_work` with `axis_name`; `sharded_state(..., gather_state=True)` on whole tensors)."""

    def spread(works):
        size = _axes.bound_size(_FN, names)
        checked = _axes.vma_checked(names)
        if checked:
            for w in works:
                parts = jax.tree.leaves(w.stack)
                varying = tuple(dict.fromkeys(a for x in parts for a in _axes.varying_axes(x, names, True)))
                if varying:
                    raise ValueError(
                        f"`gradtx.parallel.{_FN}`: a matrix varies over {varying}: each replica has its own, "
                        "and one replica's result cannot stand for the others'. Split the work of "
                        "replicated matrices (reduce the gradients first: `cross_shard`)."
                    )
        index = jax.lax.axis_index(names if len(names) > 1 else names[0])
        results: list[Any] = [None] * len(works)
        for idx in _matrix_work.groups(works):
            x, n = _matrix_work.stacked(works, idx, size, _aligned)
            first = works[idx[0]]

            def compute(x, fn=first.fn, args=first.args, n=n):
                k = jax.tree.leaves(x)[0].shape[0] // size
                mine = jax.tree.map(lambda t: jax.lax.dynamic_slice_in_dim(t, index * k, k), x)  # its slice
                y = _matrix_work.mapped(fn, mine, *args)
                outputs = _blocks.Buffers.of(y, joined=True)  # the results gathered as one buffer per dtype
                return outputs.parts(tuple(_axes.all_gather(t, names, checked)[:n] for t in outputs.join(y)))

            out = _matrix_work.when(first._replace(otherwise=_matrix_work.otherwise(works, idx)), compute, x)
            _matrix_work.split(works, idx, results, out)
        return results

    return spread


__all__ = ["split_matrix_work"]

"""`split_matrix_work`: each device computes the matrix work of 1/N of the matrices, the results are
gathered once (Muon's Newton-Schulz iterations, Shampoo's and SOAP's preconditioned leaves, PSGD Kron's
factors: every rule that yields a `MatrixWork`)."""

from __future__ import annotations

import math
from typing import Any, Hashable, NamedTuple, Sequence

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

    - under `jax.jit` (Auto or Explicit axes; the mesh of `jax.set_mesh`, or `mesh`): the stack is
      placed with its stack axis sharded over `mesh_axes` (all of the mesh's axes by default: one
      all-to-all from the leaves' own layout), each device computes its matrices (a `shard_map` over
      those axes: a per-device program), and the results are gathered (with Explicit axes one
      all-gather of one buffer per dtype; with Auto axes one per result array); each leaf then takes
      its own slice. A work whose matrices come with other per-matrix parts (PSGD Kron's factors and
      momentum, Shampoo's and SOAP's statistics) moves each part that is split with Explicit axes, and
      each part with Auto axes;
    - inside `jax.shard_map` / `jax.pmap` over `axis_name`: replica `i` computes the matrices
      `[i k, (i + 1) k)` of the stack (`k = ceil(n / N)`) and one all-gather (of one buffer per
      dtype) gives every replica all of them. The matrices must be the same on every replica (data
      parallelism after `cross_shard`, not local steps): under `check_vma=True` a matrix that varies
      over `axis_name` is refused.

    Per device, the work of a group of `n` matrices is that of `ceil(n / N)` matrices instead of
    `n`, at the price of two collectives per group (jit; one inside `shard_map`). Work a rule does
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

    def update_fn(updates, state, params=None, **extra_args):
        spread = _over_replicas(names) if names is not None else _over_mesh(mesh, mesh_axes)
        with _matrix_work.spreading(spread):
            return inner.update(updates, state, params, **extra_args)

    return _factory.composite(inner.init, update_fn, inner)


class _Buffers(NamedTuple):
    """How a work's results (a tree of stacked arrays, each `(n, ...)`) travel to the other devices: one
    buffer `(n, size)` per dtype (`joined`), or each array as it is. Results of the work only: no leaf of
    the user's is joined."""

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]  # each array's shape after its stack axis
    buffers: tuple[tuple[int, ...], ...]  # each buffer's arrays (their indices)
    joined: bool

    @classmethod
    def of(cls, tree: Any, joined: bool) -> _Buffers:
        leaves, treedef = jax.tree.flatten(tree)
        by_dtype: dict[Any, list[int]] = {}
        for j, x in enumerate(leaves):
            by_dtype.setdefault(jnp.dtype(x.dtype) if joined else j, []).append(j)
        return cls(treedef, tuple(x.shape[1:] for x in leaves), tuple(map(tuple, by_dtype.values())), joined)

    def join(self, tree: Any) -> tuple[jax.Array, ...]:
        leaves = jax.tree.leaves(tree)
        if not self.joined:
            return tuple(leaves)
        flat = [x.reshape(x.shape[0], -1) for x in leaves]
        return tuple(jnp.concatenate([flat[i] for i in j], axis=1) for j in self.buffers)

    def parts(self, buffers: Sequence[jax.Array]) -> Any:
        if not self.joined:
            return self.treedef.unflatten(buffers)
        leaves: list[Any] = [None] * len(self.shapes)
        for buffer, members in zip(buffers, self.buffers, strict=True):
            start = 0
            for j in members:
                size = math.prod(self.shapes[j])
                leaves[j] = buffer[:, start : start + size].reshape(buffer.shape[0], *self.shapes[j])
                start += size
        return self.treedef.unflatten(leaves)


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
        axes = mesh_axes or tuple(a for a in m.axis_names if types[a] != AxisType.Manual)
        missing = [a for a in axes if a not in types or types[a] == AxisType.Manual]
        if missing or not axes:
            raise ValueError(
                f"`gradtx.parallel.{_FN}`: the mesh axes {missing or axes} are not free axes of the mesh "
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
            # under Auto axes, a work's own stack is not split on its stack axis: GSPMD would otherwise
            # carry the stack's split back into each work's few matrices and move them one by one
            return [place(x, P(None, *(P.UNCONSTRAINED for _ in x.shape[1:]))) for x in parts]

        results: list[Any] = [None] * len(works)
        for idx in _matrix_work.groups(works):
            x, n = _matrix_work.stacked(works, idx, size, _aligned if explicit else hold)
            first = works[idx[0]]

            def compute(x, fn=first.fn, args=first.args, n=n):
                # the results gathered as one buffer per dtype under Explicit axes; under Auto axes one by
                # one (GSPMD would move the buffer's slices again, with a collective each)
                bare = jax.tree.map(_unplaced, (x, args))
                shapes = jax.eval_shape(lambda s, a: _matrix_work.mapped(fn, s, *a), *bare)  # unplaced
                outputs = _Buffers.of(shapes, joined=explicit)

                def per_device(stack, *args):
                    # its 1/size of the stack, as a per-device program: a loop, an SVD or an
                    # eigendecomposition is then never partitioned (nor its types checked) by the compiler
                    return outputs.join(_matrix_work.mapped(fn, stack, *args))

                local = jax.shard_map(
                    per_device,
                    mesh=m,
                    in_specs=(P(axes), *(P() for _ in args)),
                    out_specs=P(axes),
                    axis_names=set(axes),
                )
                stack = jax.tree.map(lambda t: place(t, P(axes)), x)
                y = local(stack, *(place(jnp.asarray(a), P()) for a in args))
                return outputs.parts(tuple(place(t, P())[:n] for t in y))  # gathered once

            otherwise = _matrix_work.otherwise(works, idx, lambda t: place(t, P()))
            out = _matrix_work.when(first._replace(otherwise=otherwise), compute, x)
            _matrix_work.split(works, idx, results, out)
        return results

    return spread


def _over_replicas(names: tuple[Hashable, ...]) -> _matrix_work.Spread:
    """The spread inside `shard_map` / `pmap`: replica i computes its slice of each stack, then all-gather."""

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
                outputs = _Buffers.of(y, joined=True)  # the results gathered as one buffer per dtype
                return outputs.parts(tuple(_axes.all_gather(t, names, checked)[:n] for t in outputs.join(y)))

            out = _matrix_work.when(first._replace(otherwise=_matrix_work.otherwise(works, idx)), compute, x)
            _matrix_work.split(works, idx, results, out)
        return results

    return spread


__all__ = ["split_matrix_work"]

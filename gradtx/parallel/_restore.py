"""`restore_target`: the shapes, dtypes and shardings a training state has on another mesh, for orbax."""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from gradtx._core import checks as _checks


def _spec(x: Any) -> P:
    sharding = getattr(x, "sharding", None)
    spec = getattr(sharding, "spec", None)
    return spec if isinstance(spec, P) else P()


def restore_target(tx: Any, params: Any, mesh: jax.sharding.Mesh) -> dict[str, Any]:
    """`{"params": ..., "opt_state": ...}` of `jax.ShapeDtypeStruct` placed on `mesh`: a restore target.

    A checkpoint of a run (orbax, each process writing the shards its devices hold) is
    restored into the shardings of the target it is given, so a run saved on one mesh
    continues on another -- other hosts, another device count -- when the target carries
    the new mesh's shardings. This builds it without allocating anything: each parameter
    keeps the `PartitionSpec` it has (replicated when it has none, e.g. a host array), put on
    `mesh`, and the state is `tx.init` of them under `jax.set_mesh(mesh)` (compiled, not run: with Auto
    axes GSPMD decides the placements), each leaf on `mesh` with the spec
    `init` gives it (the slots placed like their params; `sharded_state(..., mesh=mesh)`'s split over
    the replica axes; `split_matrix_work`'s statistics split as its step holds them; in host memory
    under `offloaded_state`) and scalars replicated.

    For ZeRO under `jax.jit` (`sharded_state(tx, axis, mesh=mesh)`) every leaf keeps its
    shape whatever the device count, so the target fits a checkpoint written on any mesh;
    the `shard_map` layout does not (its rows depend on the device count: move it with
    `unshard_state` / `shard_state`).

    Args:
      tx: the transform of the resumed run, built for `mesh` (e.g.
        `sharded_state(inner, "data", mesh=mesh)`).
      params: the params, or a tree of `jax.ShapeDtypeStruct` objects: shapes, dtypes and specs
        are read, values never.
      mesh: the mesh the run continues on; the params' specs must name its axes.

    Returns:
      ``{"params": tree, "opt_state": tree}`` of `jax.ShapeDtypeStruct` with a `NamedSharding` each
      on `mesh` (`orbax.checkpoint.args.StandardRestore(target)`).

    Raises:
      TypeError: if `tx` is not a transform or `mesh` not a `jax.sharding.Mesh`.
      ValueError: if a parameter's spec names an axis `mesh` does not have.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> mesh = jax.make_mesh((jax.device_count(),), ("data",))
        >>> tx = gradtx.parallel.sharded_state(gradtx.adam(0.1), "data", mesh=mesh)
        >>> target = gradtx.parallel.restore_target(tx, {"w": jnp.zeros((16, 4))}, mesh)
        >>> target["opt_state"].inner[0].m["w"].sharding.spec  # Adam's m split over "data"
        P('data', None)
    """
    fn = "restore_target"
    _checks.check_transform(fn, "tx", tx)
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"`{fn}`: `mesh` must be a `jax.sharding.Mesh`, got {type(mesh).__name__}.")

    def on_mesh(path: Any, x: Any, spec: P, memory_kind: str | None = None) -> jax.ShapeDtypeStruct:
        names = [
            a for part in spec if part is not None for a in (part if isinstance(part, tuple) else (part,))
        ]
        missing = [a for a in names if a not in mesh.axis_names]
        if missing:
            raise ValueError(
                f"`{fn}`: the leaf at {jax.tree_util.keystr(path) or '<root>'} is placed by {spec}, but "
                f"`mesh` has the axes {mesh.axis_names}, not {missing[0]!r}; pass params placed for this "
                "mesh (or host arrays: replicated)."
            )
        shape = jax.numpy.shape(x)  # the spec written out for every axis, as a jitted step's outputs carry it
        full = P(*spec, *[None] * (len(shape) - len(spec)))
        return jax.ShapeDtypeStruct(
            shape, x.dtype, sharding=NamedSharding(mesh, full, memory_kind=memory_kind)
        )

    abstract = jax.tree_util.tree_map_with_path(lambda path, x: on_mesh(path, x, _spec(x)), params)
    with jax.set_mesh(mesh):
        # the placements, known once `init` is compiled for the abstract params (nothing is allocated): with
        # Auto axes GSPMD's (the slots propagated from their params), and the memory kinds in either mode
        # (`offloaded_state`'s host memory), which the types of Explicit axes do not carry
        state = jax.jit(tx.init).lower(abstract).compile().out_info
    state = jax.tree_util.tree_map_with_path(
        lambda path, s: on_mesh(path, s, _spec(s), getattr(s.sharding, "memory_kind", None)), state
    )
    return {"params": abstract, "opt_state": state}

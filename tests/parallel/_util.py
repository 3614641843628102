"""Running a transform on 8 simulated devices, three ways: shard_map with and without check_vma, and pmap.

`run` traces `init` and all steps inside one mapped function (the steps unrolled: a few
steps, one compilation, one execution -- XLA:CPU's simulated devices can deadlock when
many executions with collectives are in flight) and returns every replica's parameters
after every step, plus whatever `observe(state)` picks. `mapped` wraps a transform so
that each `init`/`update` call runs with the axis bound to one replica: a harness for the
contract checks, which call transforms unmapped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx

AXIS = "i"
N = 8
MODES = ("vma", "novma", "pmap")


def mesh(shape=(N,), names=(AXIS,)):
    return jax.make_mesh(shape, names)


def put(x, m, spec):
    return jax.tree.map(lambda a: jax.device_put(a, NamedSharding(m, spec)), x)


def run(
    tx: gradtx.GradientTransformation,
    params: Any,
    data: Any,
    *,
    mode: str,
    grad_fn: Callable[[Any, Any], Any] | None = None,
    extra_fn: Callable[[int, Any], dict] | None = None,
    observe: Callable[[Any], Any] | None = None,
    per_replica: bool = False,
    axis: Any = AXIS,
    mesh_: Any = None,
):
    """Apply `tx` for T steps on N replicas.

    Args:
      params: the initial parameters (replicated).
      data: a tree of arrays `[T, N, ...]`: per step, per replica. Replica r gets `data[t, r]`.
      mode: "vma" (shard_map, check_vma=True), "novma" (check_vma=False) or "pmap".
      grad_fn: `(params, data_t) -> grads` computed per replica; default: the data are the gradients.
      extra_fn: `(t, data_t) -> extra args` computed per replica (may use `jax.lax.axis_index`).
      observe: `state -> tree` recorded after every step.
      per_replica: parameters may differ between replicas (local steps): under check_vma=True they
        are cast to varying before the first step.

    Returns:
      `(params, observed)`: trees of NumPy arrays `[N, T, ...]`.
    """
    steps = jax.tree.leaves(data)[0].shape[0]

    def body(p, d):  # d: this replica's data, [T, ...]
        state = tx.init(p)
        if per_replica and mode == "vma":
            p = jax.lax.pcast(p, axis, to="varying")
        ps, obs = [], []
        for t in range(steps):
            d_t = jax.tree.map(lambda x, t=t: x[t], d)
            g = grad_fn(p, d_t) if grad_fn is not None else d_t
            extra = extra_fn(t, d_t) if extra_fn is not None else {}
            u, state = tx.update(g, state, p, **extra)
            p = gradtx.apply_updates(p, u)
            ps.append(p)
            obs.append(observe(state) if observe is not None else ())

        def stack(*xs):
            return jnp.stack(xs)

        return jax.tree.map(stack, *ps), jax.tree.map(stack, *obs)

    if mode == "pmap":
        out = jax.pmap(body, axis_name=axis, in_axes=(None, 1))(params, data)
    else:
        m = mesh_ if mesh_ is not None else mesh()
        data_spec = P(None, axis)
        f = jax.shard_map(
            lambda p, d: jax.tree.map(lambda x: x[None], body(p, jax.tree.map(lambda x: x[:, 0], d))),
            mesh=m,
            in_specs=(P(), data_spec),
            out_specs=P(axis),
            check_vma=(mode == "vma"),
        )
        out = jax.jit(f)(put(params, m, P()), put(data, m, data_spec))
    return jax.tree.map(np.asarray, jax.block_until_ready(out))


def mapped(tx: gradtx.GradientTransformation, axis: Any = AXIS):
    """`tx` whose `init` and `update` each run with `axis` bound to a single replica.

    `jax.vmap(..., axis_name=axis, axis_size=1)` binds the axis name (collectives work, the
    axis has size 1) and, unlike a `shard_map` over a 1-device mesh, returns plain arrays
    whose sharding does not change between calls (no retrace of an enclosing `jit`). With
    one replica every parallel wrapper must act like its inner transform. A harness for
    the contract checks, which call transforms unmapped.
    """

    def one(f):
        return jax.jit(
            lambda *args: jax.tree.map(
                lambda x: x[0], jax.vmap(f, in_axes=None, axis_size=1, axis_name=axis)(*args)
            )
        )

    init = one(tx.init)
    update_fn = one(lambda u, s, p, e: tx.update(u, s, p, **e))

    def update(updates, state, params=None, **extra):
        return update_fn(updates, state, params, extra)

    return gradtx.GradientTransformation(init, update)

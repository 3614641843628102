"""`parallel.restore_target`: a ZeRO state saved on 8 devices restores onto 4 with orbax and resumes exactly.

(Across processes: tests/parallel/test_multihost_checkpoint.py, whose workers use it too.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx


def _run(tx, mesh, params, state, batches):
    def step(p, s, x):
        grads = jax.grad(lambda q: jnp.mean((x @ q["w"] + q["b"]) ** 2))(p)
        updates, s = tx.update(grads, s, p)
        return gradtx.apply_updates(p, updates), s

    step = jax.jit(step)
    with jax.set_mesh(mesh):
        for x in batches:
            params, state = step(params, state, x)
    return params, state


def test_a_zero_state_saved_on_8_devices_resumes_on_4(tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    inner = gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.adam(0.05))
    mesh8 = jax.make_mesh((8,), ("data",))
    mesh4 = jax.make_mesh((4,), ("data",), devices=jax.devices()[:4])
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.standard_normal((16, 3)), jnp.float32), "b": jnp.zeros(3)}
    batches = [jnp.asarray(rng.standard_normal((4, 16)), jnp.float32) for _ in range(6)]
    tx8 = gradtx.parallel.sharded_state(inner, "data", mesh=mesh8)
    whole, _ = _run(tx8, mesh8, params, tx8.init(params), batches)
    p3, s3 = _run(tx8, mesh8, params, tx8.init(params), batches[:3])

    with ocp.StandardCheckpointer() as ckpt:
        ckpt.save(tmp_path / "step3", {"params": p3, "opt_state": s3})
        ckpt.wait_until_finished()
        tx4 = gradtx.parallel.sharded_state(inner, "data", mesh=mesh4)
        target = gradtx.parallel.restore_target(tx4, params, mesh4)
        restored = ckpt.restore(tmp_path / "step3", target)

    m = restored["opt_state"].inner[1][0].m["w"]  # Adam's m of w: split over 4 devices now
    assert m.sharding == NamedSharding(mesh4, P("data", None)) and m.addressable_shards[0].data.shape == (
        4,
        3,
    )
    resumed, _ = _run(tx4, mesh4, restored["params"], restored["opt_state"], batches[3:])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7), resumed, whole)


def test_on_an_auto_mesh_the_slots_are_placed_like_their_params():
    # GSPMD's placements (known once `init` is compiled), not replicated ones
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    w = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(mesh, P("data", "model")))
    target = gradtx.parallel.restore_target(gradtx.adam(0.1), {"w": w, "b": jnp.zeros(3)}, mesh)
    assert target["opt_state"][0].m["w"].sharding == NamedSharding(mesh, P("data", "model"))
    assert target["opt_state"][0].v["b"].sharding == NamedSharding(mesh, P(None))


def test_a_spec_naming_an_axis_the_mesh_lacks_is_refused():
    mesh = jax.make_mesh((8,), ("data",))
    other = jax.make_mesh((4, 2), ("rows", "cols"))
    w = jax.device_put(jnp.zeros((8, 2)), NamedSharding(other, P("rows", "cols")))
    with pytest.raises(ValueError, match=r"`restore_target`: the leaf at \['w'\] is placed by .*not 'rows'"):
        gradtx.parallel.restore_target(gradtx.adam(0.1), {"w": w}, mesh)
    with pytest.raises(TypeError, match=r"`restore_target`: `mesh` must be a `jax.sharding.Mesh`, got str"):
        gradtx.parallel.restore_target(gradtx.adam(0.1), {"w": jnp.zeros(2)}, "data")

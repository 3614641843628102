"""`sharded_state(..., gather_state=True)` inside shard_map / pmap: rules that need whole tensors (Muon,
Shampoo) keep 1/N of their state between steps, gather it for the step (each replica computing 1/N of the
rule's per-matrix work), and give the unsharded numbers; rules that run on slices (Adafactor's and SM3's
factored statistics, element-wise rules) keep doing so. The state is the element-wise mode's layout (a
rule's own leaves, such as a PRNG key or a row statistic, cut like its slots), so it unshards and
reshards."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
import gradtx.optax_compat as ox
from benchmarks.collectives import count
from gradtx.parallel import shard_state, sharded_state, unshard_state
from tests.parallel import _util

N, T = _util.N, 4
SHAPES = {"w": (12, 5), "b": (5,), "s": ()}  # 60, 5 and 1 elements: every slice is zero-padded


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    grads = {k: rng.standard_normal((T, N, *s)).astype(np.float32) for k, s in SHAPES.items()}
    return params, grads


def _unsharded(tx, params, grads):
    """One device: the plain transform on the replicas' mean gradient of every step; the params after each
    step and the final state."""
    state, p, out = tx.init(params), jax.tree.map(jnp.asarray, params), []
    step = jax.jit(lambda g, s, p: tx.update(g, s, p))
    for t in range(T):
        u, state = step({k: np.mean(grads[k][t], axis=0) for k in grads}, state, p)
        p = gradtx.apply_updates(p, u)
        out.append(jax.tree.map(np.asarray, p))
    return {k: np.stack([o[k] for o in out]) for k in params}, state


MAKERS = {
    # on slices, their row and column statistics (the rule's own leaves) cut like the slots
    "adafactor": lambda: gradtx.adafactor(0.1, min_dim_size_to_factor=2),
    "optax_compat_adafactor": lambda: ox.adafactor(0.1, min_dim_size_to_factor=2),
    "sm3": lambda: gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.sm3(0.1)),
    "muon": lambda: gradtx.muon(0.05),
    "shampoo": lambda: gradtx.shampoo(0.1),
    # element-wise, on slices: the rule's own leaves (a PRNG key, Mechanic's per-decay scales) are cut too
    "noisy_sgd": lambda: gradtx.noisy_sgd(0.05, eta=1e-2),
    "mechanize": lambda: gradtx.mechanize(gradtx.sgd(1.0)),
}


@pytest.mark.parametrize("mode", ["vma", "novma", "pmap"])
def test_whole_tensor_rules_equal_the_unsharded_run(mode):
    """Shampoo (its statistics gathered, its roots computed on whole matrices), in every mapping mode: the
    replicas' params are the single device's."""
    params, grads = _problem()
    make = MAKERS["shampoo"]
    got, _ = _util.run(sharded_state(make(), _util.AXIS, gather_state=True), params, grads, mode=mode)
    ref, _ = _unsharded(make(), params, grads)
    assert not np.allclose(ref["w"][-1], params["w"])  # it trained
    for k in ref:
        np.testing.assert_allclose(got[k], np.broadcast_to(ref[k], got[k].shape), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(MAKERS))
def test_states_keep_one_nth_unshard_and_reshard_with_the_unsharded_numbers(name):
    """The state leaves the mapped step with P(axis): N rows of ceil(size / N) per leaf (a scalar repeated),
    whether the rule runs on whole tensors (gathered) or on slices; `unshard_state` gives the unsharded
    optimizer's state, and `shard_state` of it continues equal."""
    make = MAKERS[name]
    params, grads = _problem(1)
    tx = sharded_state(make(), _util.AXIS, gather_state=True)
    m = _util.mesh()

    def steps(p, state, d):  # d: this replica's gradients, [T, ...]
        def step(carry, g):
            p, state = carry
            u, state = tx.update(g, state, p)
            return (gradtx.apply_updates(p, u), state), None

        return jax.lax.scan(step, (p, state), d)[0]

    init = jax.jit(jax.shard_map(tx.init, mesh=m, in_specs=P(), out_specs=P(_util.AXIS)))
    run = jax.jit(
        jax.shard_map(
            lambda p, s, d: steps(p, s, jax.tree.map(lambda x: x[:, 0], d)),
            mesh=m,
            in_specs=(P(), P(_util.AXIS), P(None, _util.AXIS)),
            out_specs=(P(), P(_util.AXIS)),
        )
    )
    p, state = run(
        _util.put(params, m, P()), init(_util.put(params, m, P())), _util.put(grads, m, P(None, _util.AXIS))
    )
    ref, ref_state = _unsharded(make(), params, grads)
    for k in ref:
        np.testing.assert_allclose(np.asarray(p[k]), ref[k][-1], rtol=2e-5, atol=2e-6, err_msg=k)
    like = jax.eval_shape(make().init, params)
    for got_leaf, want in zip(
        jax.tree.leaves(unshard_state(state, like)), jax.tree.leaves(ref_state), strict=True
    ):
        np.testing.assert_allclose(
            np.asarray(got_leaf, np.float64), np.asarray(want, np.float64), rtol=2e-5, atol=2e-6
        )
    for x, whole in zip(jax.tree.leaves(state.inner), jax.tree.leaves(like), strict=True):
        size = int(np.prod(whole.shape))
        rows = (
            ((N,), (N, 1)) if whole.shape == () else ((N, -(-size // N)),)
        )  # a count; a scalar param's slot
        assert x.shape in rows, (x.shape, whole.shape)
    # the state as another run laid it out (`shard_state` of the whole state) steps on equally
    resharded = jax.tree.map(
        lambda x: _util.put(x, m, P(_util.AXIS)), shard_state(unshard_state(state, like), N, like=state)
    )
    p2, _ = run(p, resharded, _util.put(grads, m, P(None, _util.AXIS)))
    p3, _ = run(p, state, _util.put(grads, m, P(None, _util.AXIS)))
    for k in params:
        np.testing.assert_allclose(np.asarray(p2[k]), np.asarray(p3[k]), rtol=1e-6, atol=1e-7, err_msg=k)


def test_element_wise_rules_keep_the_slices():
    """`gather_state` changes nothing for a rule that runs on slices: the same reduce-scatter layout and
    numbers as without it."""
    params, grads = _problem(2)
    got, _ = _util.run(
        sharded_state(gradtx.adam(0.1), _util.AXIS, gather_state=True), params, grads, mode="novma"
    )
    want, _ = _util.run(sharded_state(gradtx.adam(0.1), _util.AXIS), params, grads, mode="novma")
    for k in params:
        np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("name", ["muon", "shampoo", "soap"])
def test_the_matrix_work_of_the_whole_tensor_step_is_split_over_the_replicas(name):
    """The rule's matrices are the same on every replica (the gradients all-reduced, the state gathered):
    each computes a quarter of them, and the step equals one device's."""
    tx = {"muon": MAKERS["muon"], "shampoo": MAKERS["shampoo"], "soap": lambda: gradtx.soap(0.01)}[name]()
    rng = np.random.default_rng(0)
    params = {f"w{i}": jnp.asarray(rng.standard_normal((96, 96)), jnp.float32) for i in range(8)}
    grads = jax.tree.map(jnp.cos, params)
    zero = sharded_state(tx, "data", gather_state=True)
    mesh = _util.mesh((4,), ("data",))
    state = jax.jit(jax.shard_map(zero.init, mesh=mesh, in_specs=P(), out_specs=P("data"), check_vma=False))(
        params
    )
    step = jax.jit(
        jax.shard_map(
            lambda g, s, p: zero.update(g, s, p),
            mesh=mesh,
            in_specs=(P(), P("data"), P()),
            out_specs=(P(), P("data")),
            check_vma=False,
        )
    )
    one = jax.jit(tx.update)
    compiled = step.lower(grads, state, params).compile()
    per_device = compiled.cost_analysis()["flops"]
    # the gradients' all-reduce; the state's leaves (10 for Muon, 50 for SOAP) gathered by one all-gather per
    # dtype (float32, the int32 count); the matrices' results by one
    assert {k: v for k, v in count(compiled.as_text()).items() if v} == {"all-gather": 3, "all-reduce": 1}
    single = one.lower(grads, tx.init(params), params).compile().cost_analysis()["flops"]
    assert per_device <= 1.2 * single / 4, (per_device, single)  # was single: every replica did all
    u, _ = step(grads, state, params)
    ref, _ = one(grads, tx.init(params), params)
    for k in params:
        np.testing.assert_allclose(np.asarray(u[k]), np.asarray(ref[k]), rtol=1e-6, atol=1e-7, err_msg=k)


def test_gather_state_must_be_a_bool_and_is_named_in_the_refusal():
    with pytest.raises(TypeError, match=r"`sharded_state`: `gather_state` must be True or False, got 1"):
        sharded_state(gradtx.adafactor(0.1), "data", gather_state=1)
    with pytest.raises(ValueError, match=r"is leaf-wise.*`gather_state=True`"):
        sharded_state(gradtx.shampoo(0.1), "data")

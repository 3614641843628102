"""gradtx/packing/_wrapped.py with Flax: `packed(tx)` keeps `nnx.Optimizer` and a linen `TrainState` as
they are, with the numbers of the unpacked run and a packed state; `get_slot` reads NNX states by name."""

from __future__ import annotations

import chex
import flax.linen as nn
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from flax.training import train_state

import gradtx
import gradtx.optax_compat as optax_compat
from gradtx import packing

X = jnp.asarray(np.random.default_rng(0).standard_normal((8, 4)), jnp.float32)
Y = jnp.asarray(np.random.default_rng(1).standard_normal((8, 1)), jnp.float32)


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(4, 16, rngs=rngs)
        self.mid = nnx.Linear(16, 16, rngs=rngs)
        self.out = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.tanh(self.mid(jax.nn.tanh(self.hidden(x)))))


def _train(tx, steps: int = 10):
    """An `MLP` trained by `nnx.Optimizer(model, tx)` under `nnx.jit`: the model, optimizer, trace count."""
    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    traces = []

    @nnx.jit
    def step(model, optimizer):
        traces.append(1)
        grads = nnx.grad(lambda m: jnp.mean((m(X) - Y) ** 2))(model)
        optimizer.update(model, grads)

    for _ in range(steps):
        step(model, optimizer)
    return model, optimizer, len(traces)


def _packed_nodes(state):
    return [x for x in jax.tree.leaves(state, is_leaf=packing.is_packed) if packing.is_packed(x)]


TXS = {
    "adam": lambda: gradtx.adam(1e-2),
    "optax_compat.adamw": lambda: optax_compat.adamw(1e-2, weight_decay=0.1),
    "clip+adam": lambda: gradtx.chain(gradtx.clip_by_global_norm(0.05), gradtx.adam(1e-2)),
}


@pytest.mark.parametrize("make", TXS.values(), ids=TXS.keys())
def test_nnx_optimizer_with_packed_tx_equals_the_unpacked_run(make):
    model, optimizer, _ = _train(make())
    packed_model, packed_optimizer, traces = _train(packing.packed(make()))
    chex.assert_trees_all_close(nnx.state(packed_model), nnx.state(model), atol=1e-6, rtol=0)
    assert not np.allclose(model.mid.kernel[...], MLP(nnx.Rngs(0)).mid.kernel[...], atol=1e-3)
    assert traces == 1 and int(packed_optimizer.step[...]) == 10
    nodes = _packed_nodes(packing.without_variables(packed_optimizer.opt_state))
    assert len(nodes) == 2 and all(len(n.buffers) == 1 for n in nodes)  # m and v: one buffer each
    assert not _packed_nodes(packing.without_variables(optimizer.opt_state))
    for name in gradtx.slot_names(optimizer.opt_state):
        chex.assert_trees_all_close(
            gradtx.get_slot(packed_optimizer.opt_state, name),
            gradtx.get_slot(optimizer.opt_state, name),
            atol=1e-6,
            rtol=0,
        )


def test_leaves_over_max_leaf_size_stay_their_own_buffers():
    _, optimizer, _ = _train(packing.packed(gradtx.adam(1e-2), max_leaf_size=100), steps=1)
    (m, _) = _packed_nodes(packing.without_variables(optimizer.opt_state))
    assert [b.shape for b in m.buffers] == [(16 + 64 + 16 + 16 + 1,), (16, 16)]  # `mid`'s kernel is loose


def test_packed_tx_without_slots_and_with_a_leaf_wise_member():
    params = {"a": {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}, "c": jnp.full((4,), 2.0)}
    grads = jax.tree.map(lambda p: 0.5 * p + 0.1, params)
    for tx in [gradtx.sgd(0.1), gradtx.chain(gradtx.clip_by_norm(0.3), gradtx.momentum(0.1, 0.9))]:
        wrapped = packing.packed(tx)
        state, want_state = wrapped.init(params), tx.init(params)
        for _ in range(3):
            (got, state), (want, want_state) = (
                jax.jit(wrapped.update)(grads, state, params),
                tx.update(grads, want_state, params),
            )
            chex.assert_trees_all_close(got, want, atol=1e-6, rtol=0)


def test_packed_refuses_packed_params_and_a_bad_max_leaf_size():
    params = {"w": jnp.ones(3)}
    with pytest.raises(
        TypeError, match=r"`packed`: the params are already packed; give them to the transform"
    ):
        packing.packed(gradtx.adam(0.1)).init(packing.pack(params))
    with pytest.raises(TypeError, match=r"`packed`: `max_leaf_size` must be an int >= 0, got -1"):
        packing.packed(gradtx.adam(0.1), max_leaf_size=-1)


class Dense(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(jnp.tanh(nn.Dense(16)(x)))


def test_packed_tx_in_a_linen_train_state_and_an_optax_chain():
    module = Dense()
    params = module.init(jax.random.key(0), X)["params"]

    def make(tx):
        return train_state.TrainState.create(apply_fn=module.apply, params=params, tx=tx)

    @jax.jit
    def step(state):
        loss = lambda p: jnp.mean((state.apply_fn({"params": p}, X) - Y) ** 2)  # noqa: E731
        return state.apply_gradients(grads=jax.grad(loss)(state.params))

    plain = make(optax.chain(optax.clip_by_global_norm(0.1), optax_compat.adam(1e-2)))
    packed = make(optax.chain(optax.clip_by_global_norm(0.1), packing.packed(optax_compat.adam(1e-2))))
    for _ in range(10):
        plain, packed = step(plain), step(packed)
    chex.assert_trees_all_close(packed.params, plain.params, atol=1e-6, rtol=0)
    assert len(_packed_nodes(packed.opt_state)) == 2
    restored = flax.serialization.from_bytes(make(packed.tx), flax.serialization.to_bytes(packed))
    chex.assert_trees_all_close(restored.opt_state, packed.opt_state)
    chex.assert_trees_all_close(
        gradtx.get_slot(packed.opt_state, "nu"), gradtx.get_slot(plain.opt_state, "nu"), rtol=1e-5
    )


@pytest.mark.parametrize("wrap", [lambda tx: tx, packing.packed], ids=["leaves", "packed"])
def test_get_slot_on_nnx_states_with_and_without_value(wrap):
    _, optimizer, _ = _train(wrap(gradtx.adam(1e-2)), steps=1)
    kernel = gradtx.get_slot(optimizer.opt_state, "m", "mid/kernel")
    assert kernel.shape == (16, 16) and float(jnp.abs(kernel).sum()) > 0
    np.testing.assert_array_equal(gradtx.get_slot(optimizer.opt_state, "m", "mid/kernel/value"), kernel)
    np.testing.assert_array_equal(gradtx.get_slot(optimizer.opt_state, "m", ("mid", "kernel")), kernel)
    assert gradtx.slot_names(optimizer.opt_state) == ["m", "v"]


def test_get_slot_on_nnx_state_of_the_optimizer():
    _, optimizer, _ = _train(gradtx.adam(1e-2), steps=1)
    state = nnx.state(optimizer)  # its state types are gone: the slot is read by its key
    np.testing.assert_array_equal(
        gradtx.get_slot(state, "v", "mid/bias"), gradtx.get_slot(optimizer.opt_state, "v", "mid/bias")
    )
    with pytest.raises(KeyError, match=r"no slot named 'mu'; the state has no slots \(nor a key 'mu'\)"):
        gradtx.get_slot(state, "mu")


def test_unknown_names_give_a_short_error_with_the_closest():
    class Deep(nnx.Module):
        def __init__(self, rngs):
            self.layers = nnx.List([nnx.Linear(2, 2, rngs=rngs) for _ in range(35)])

    optimizer = nnx.Optimizer(Deep(nnx.Rngs(0)), gradtx.adam(0.1), wrt=nnx.Param)
    with pytest.raises(KeyError) as info:
        gradtx.get_slot(optimizer.opt_state, "m", "layers/7/kernl")
    message = str(info.value)
    assert "70 parameters, the closest: ['layers/7/kernel'" in message and len(message) < 250, message
    with pytest.raises(KeyError, match=r"it has 70 parameters, the first: \['layers/0/bias', "):
        gradtx.get_slot(optimizer.opt_state, "m", "embedding")
    state = gradtx.chain(gradtx.rmsprop(0.1, centered=True), gradtx.adam(0.1), gradtx.adagrad(0.1)).init(
        {"w": jnp.ones(2)}
    )
    with pytest.raises(
        KeyError, match=r"no slot named 'acumulator'; the state has 6 slots, the closest: \['accumulator'\]"
    ):
        gradtx.get_slot(state, "acumulator")

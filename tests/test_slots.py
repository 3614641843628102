"""gradtx/slots.py: TF's slots by name, through chains, named chains, partitions, wrappers and optax
states."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx

PARAMS = {"dense": {"kernel": jnp.ones((2, 2)), "bias": jnp.ones(2)}}


def test_slot_names_and_get_slot_through_a_chain():
    tx = gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.rmsprop(0.1, centered=True))
    state = tx.init(PARAMS)
    assert gradtx.slot_names(state) == ["mg", "momentum", "rms"]
    np.testing.assert_array_equal(gradtx.get_slot(state, "rms", "dense/bias"), [1.0, 1.0])
    np.testing.assert_array_equal(gradtx.get_slot(state, "rms", ("dense", "kernel")), np.ones((2, 2)))
    assert set(gradtx.slots(state)) == {"mg", "momentum", "rms"}


def test_slots_through_wrappers_and_named_chains():
    tx = gradtx.named_chain(("opt", gradtx.inject_hyperparams(gradtx.adam)(learning_rate=0.1)))
    wrapped = gradtx.apply_if_finite(gradtx.accumulate_gradients(tx, 2), 3)
    state = wrapped.init(PARAMS)
    assert gradtx.slot_names(state) == ["accumulator", "m", "v"]


def test_partition_slots_merge_into_one_tree():
    tx = gradtx.partition(
        {"a": gradtx.adam(0.1), "b": gradtx.adam(0.2)}, {"dense": {"kernel": "a", "bias": "b"}}
    )
    state = tx.init(PARAMS)
    m = gradtx.get_slot(state, "m")
    assert m["dense"]["kernel"].shape == (2, 2) and m["dense"]["bias"].shape == (2,)


def test_optax_states_follow_the_same_convention():
    state = optax.adam(0.1).init(PARAMS)
    assert gradtx.slot_names(state) == ["mu", "nu"]


def test_slot_errors():
    state = gradtx.adam(0.1).init(PARAMS)
    with pytest.raises(KeyError, match=r"`get_slot`: no slot named 'velocity'; the state has \['m', 'v'\]"):
        gradtx.get_slot(state, "velocity")
    with pytest.raises(KeyError, match=r"the slot 'm' has no parameter 'dense/w'"):
        gradtx.get_slot(state, "m", "dense/w")
    overlap = gradtx.chain(gradtx.trace(0.9), gradtx.trace(0.5)).init(PARAMS)
    with pytest.raises(
        ValueError,
        match=r"the slot 'momentum' exists in several places \(state\[0\].momentum, "
        r"state\[1\].momentum\)",
    ):
        gradtx.get_slot(overlap, "momentum")
    assert float(gradtx.get_slot(overlap[1], "momentum", "dense/bias")[0]) == 0.0

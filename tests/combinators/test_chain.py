"""gradtx/combinators/_chain.py and _stateless.py: chain, named_chain, identity, stateless."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx


def test_chain_applies_in_order_and_keeps_a_state_per_member():
    tx = gradtx.chain(gradtx.trace(0.5), gradtx.scale(2.0), gradtx.scale_by_learning_rate(0.1))
    state = tx.init(jnp.zeros(2))
    assert len(state) == 3 and isinstance(state[0], gradtx.TraceState)
    u, state = tx.update(jnp.ones(2), state)
    u, state = tx.update(jnp.ones(2), state)
    np.testing.assert_allclose(u, [-0.3, -0.3], rtol=1e-6)


def test_empty_chain_is_identity():
    tx = gradtx.chain()
    assert tx.init(jnp.ones(1)) == ()
    np.testing.assert_array_equal(tx.update(jnp.ones(2), ())[0], [1.0, 1.0])


def test_chain_passes_extra_args_to_every_member():
    seen = []

    def spy(name):
        def update(updates, state, params=None, **extra_args):
            seen.append((name, sorted(extra_args)))
            return updates, state

        return gradtx.GradientTransformation(lambda p: (), update)

    tx = gradtx.chain(spy("a"), gradtx.chain(spy("b")))
    tx.update(jnp.ones(1), tx.init(None), None, global_step=3)
    assert seen == [("a", ["global_step"]), ("b", ["global_step"])]


def test_chain_rejects_non_transforms_and_wrong_states():
    with pytest.raises(TypeError, match=r"`chain`: `transforms\[1\]` must be a gradient transformation"):
        gradtx.chain(gradtx.identity(), lambda g: g)
    tx = gradtx.chain(gradtx.identity(), gradtx.identity())
    with pytest.raises(
        ValueError, match=r"`chain`: the state must be a tuple of 2 states.*got tuple of length 1"
    ):
        tx.update(jnp.ones(1), (gradtx.EmptyState(),))


def test_named_chain_keys_the_state_by_name():
    tx = gradtx.named_chain(("momentum", gradtx.trace(0.9)), ("lr", gradtx.scale_by_learning_rate(0.1)))
    state = tx.init(jnp.zeros(2))
    assert set(state) == {"momentum", "lr"}
    plain = gradtx.momentum(0.1, 0.9)
    ps = plain.init(jnp.zeros(2))
    for _ in range(3):
        u, state = tx.update(jnp.ones(2), state)
        v, ps = plain.update(jnp.ones(2), ps)
    np.testing.assert_array_equal(u, v)


def test_named_chain_errors():
    with pytest.raises(ValueError, match=r"`named_chain`: the name 'a' is used twice"):
        gradtx.named_chain(("a", gradtx.identity()), ("a", gradtx.identity()))
    with pytest.raises(TypeError, match=r"`named_chain`: argument 0 must be a \(name, transform\) pair"):
        gradtx.named_chain(gradtx.identity())
    tx = gradtx.named_chain(("a", gradtx.identity()))
    with pytest.raises(ValueError, match=r"`named_chain`: the state must be a dict with keys \['a'\]"):
        tx.update(jnp.ones(1), {"b": ()})


def test_identity_and_stateless():
    g = {"a": jnp.array([-2.0, 3.0])}
    assert gradtx.identity().update(g, gradtx.EmptyState())[0] is g
    tx = gradtx.stateless(lambda u, p: jax.tree.map(lambda x, y: x * y, u, p))
    out, state = tx.update(g, tx.init(g), {"a": jnp.array([2.0, 2.0])})
    np.testing.assert_array_equal(out["a"], [-4.0, 6.0])
    assert state == gradtx.EmptyState()
    with pytest.raises(TypeError, match=r"`stateless`: `f` must be callable"):
        gradtx.stateless(3)

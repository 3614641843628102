"""Checkpoints: optimizer state and TrainState through .npz and orbax-checkpoint; resuming is
bit-identical."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import checkpoint
from tests import helpers

X = jnp.asarray(np.random.default_rng(0).standard_normal((8, 3)), jnp.float32)
Y = jnp.sum(X, axis=1)


def _loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)


def _trainer():
    return gradtx.optimize_loss(
        _loss, "Adam", learning_rate=0.05, clip_gradients=1.0, gradient_noise_scale=0.01, summaries=["loss"]
    )


def _steps(trainer, state, n):
    step = jax.jit(trainer.step)
    for _ in range(n):
        state, _ = step(state, X, Y)
    return state


def test_train_state_round_trips_through_npz_and_resumes_bit_identically(tmp_path):
    trainer = _trainer()
    state = _steps(trainer, trainer.init({"w": jnp.zeros(3), "b": jnp.zeros(())}), 3)
    checkpoint.save_npz(tmp_path / "ckpt.npz", state)
    straight = _steps(trainer, state, 4)
    target = jax.eval_shape(trainer.init, {"w": jnp.zeros(3), "b": jnp.zeros(())})
    restored = checkpoint.load_npz(tmp_path / "ckpt.npz", target)
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    resumed = _steps(trainer, restored, 4)
    helpers.assert_trees_close(resumed, straight, rtol=0, atol=0)


def test_npz_errors_say_what_differs(tmp_path):
    tx = gradtx.adam(0.1)
    checkpoint.save_npz(tmp_path / "s.npz", tx.init({"w": jnp.zeros(3)}))
    with pytest.raises(ValueError, match=r"`load_npz`: .* does not match the target: missing \[.*'b'"):
        checkpoint.load_npz(tmp_path / "s.npz", tx.init({"w": jnp.zeros(3), "b": jnp.zeros(1)}))
    with pytest.raises(ValueError, match=r"is float32\[3\] in .*, but the target wants float32\[4\]"):
        checkpoint.load_npz(tmp_path / "s.npz", tx.init({"w": jnp.zeros(4)}))
    with pytest.raises(TypeError, match=r"is a typed PRNG key"):
        checkpoint.save_npz(tmp_path / "k.npz", {"key": jax.random.key(0)})


def test_train_state_round_trips_through_orbax(tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    trainer = _trainer()
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    state = _steps(trainer, trainer.init(params), 2)
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(tmp_path / "orbax", state)
        ckptr.wait_until_finished()
        restored = ckptr.restore(tmp_path / "orbax", jax.eval_shape(trainer.init, params))
    assert type(restored.opt_state) is gradtx.OptimizeLossState
    helpers.assert_trees_close(_steps(trainer, restored, 3), _steps(trainer, state, 3), rtol=0, atol=0)
    assert gradtx.slot_names(restored.opt_state) == ["m", "v"]

"""gradtx/train.py: optimize_loss (every argument of the seed), compute_gradients, apply_gradients,
minimize."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import helpers

X = jnp.asarray(np.random.default_rng(0).standard_normal((16, 3)), jnp.float32)
Y = X @ jnp.array([1.0, -1.0, 2.0]) + 0.5
PARAMS = {"dense": {"kernel": jnp.zeros(3), "bias": jnp.zeros(())}}


def loss_fn(p, x, y):
    return jnp.mean((x @ p["dense"]["kernel"] + p["dense"]["bias"] - y) ** 2)


def _train(trainer, steps=5):
    state = trainer.init(jax.tree.map(jnp.copy, PARAMS))  # the step donates the state
    step = jax.jit(trainer.step, donate_argnums=0)
    for _ in range(steps):
        state, metrics = step(state, X, Y)
    return state, metrics


def test_optimize_loss_with_a_name_equals_the_plain_optimizer():
    state, metrics = _train(gradtx.optimize_loss(loss_fn, "Adam", learning_rate=0.1))
    tx = gradtx.adam(0.1)
    params, opt_state = PARAMS, tx.init(PARAMS)
    for _ in range(5):
        params, opt_state, _ = gradtx.minimize(loss_fn, tx)(params, opt_state, X, Y)
    helpers.assert_trees_close(state.params, params, rtol=1e-6, atol=1e-7)
    assert int(state.global_step) == 5
    assert sorted(metrics) == ["global_gradient_norm", "learning_rate", "loss"]
    assert float(metrics["learning_rate"]) == pytest.approx(0.1)


@pytest.mark.parametrize(
    "optimizer",
    [
        gradtx.adagrad,  # a factory of the learning rate
        lambda lr: gradtx.adagrad(lr),
        "Adagrad",
        "adagrad",
        "AdagradOptimizer",
    ],
)
def test_every_way_to_pass_an_optimizer(optimizer):
    state, _ = _train(gradtx.optimize_loss(loss_fn, optimizer, learning_rate=0.3))
    reference, _ = _train(gradtx.optimize_loss(loss_fn, gradtx.adagrad(0.3)))
    helpers.assert_trees_close(state.params, reference.params, rtol=0, atol=0)


def test_zero_argument_factory_when_learning_rate_is_none():
    state, metrics = _train(gradtx.optimize_loss(loss_fn, lambda: gradtx.momentum(0.1, 0.5)))
    reference, _ = _train(
        gradtx.optimize_loss(loss_fn, lambda lr: gradtx.momentum(lr, 0.5), learning_rate=0.1)
    )
    helpers.assert_trees_close(state.params, reference.params, rtol=0, atol=0)
    assert "learning_rate" not in metrics


def test_learning_rate_decay_fn_sees_the_global_step():
    seen = []

    def decay(lr, step):
        seen.append(step)
        return lr * 0.5 ** step.astype(jnp.float32)

    trainer = gradtx.optimize_loss(loss_fn, "SGD", learning_rate=0.1, learning_rate_decay_fn=decay)
    state = trainer.init(PARAMS)
    rates = []
    for _ in range(3):
        state, metrics = trainer.step(state, X, Y)
        rates.append(float(metrics["learning_rate"]))
    np.testing.assert_allclose(rates, [0.1, 0.05, 0.025], rtol=1e-6)


def test_increment_global_step_false_keeps_the_step_and_the_decayed_rate():
    trainer = gradtx.optimize_loss(
        loss_fn, "SGD", learning_rate=lambda step: 0.1 / (1.0 + step), increment_global_step=False
    )
    state, metrics = _train(trainer, steps=3)
    assert int(state.global_step) == 0 and float(metrics["learning_rate"]) == pytest.approx(0.1)


def test_global_step_saturates_at_the_int32_limit():
    """`+ 1` would wrap to -2**31, and an exponential decay of a negative step is inf."""
    decay = gradtx.schedules.exponential_decay(0.1, 1000, 0.5)
    trainer = gradtx.optimize_loss(loss_fn, "SGD", learning_rate=decay)
    state = trainer.init(jax.tree.map(jnp.copy, PARAMS))._replace(global_step=jnp.int32(2**31 - 2))
    for _ in range(3):
        state, metrics = trainer.step(state, X, Y)
    assert int(state.global_step) == 2**31 - 1
    assert 0.0 <= float(metrics["learning_rate"]) < 1e-30
    assert all(bool(jnp.isfinite(p).all()) for p in jax.tree.leaves(state.params))


def test_clip_gradients_float_and_callable():
    state, metrics = _train(gradtx.optimize_loss(loss_fn, "SGD", learning_rate=0.1, clip_gradients=0.5))
    assert float(metrics["clipped_gradient_norm"]) == pytest.approx(
        min(0.5, float(metrics["global_gradient_norm"]))
    )
    halve = lambda g, p: jax.tree.map(lambda x: x / 2, g)  # noqa: E731
    a, _ = _train(gradtx.optimize_loss(loss_fn, "SGD", learning_rate=0.1, clip_gradients=halve))
    b, _ = _train(gradtx.optimize_loss(loss_fn, "SGD", learning_rate=0.05))
    helpers.assert_trees_close(a.params, b.params, rtol=1e-6, atol=1e-7)


def test_noise_comes_before_multipliers():
    """TF adds the noise first: a multiplier of 0 removes the noise of that variable too."""
    trainer = gradtx.optimize_loss(
        loss_fn, "SGD", learning_rate=0.1, gradient_noise_scale=1.0, gradient_multipliers={"dense/bias": 0.0}
    )
    state, _ = _train(trainer, steps=2)
    assert float(state.params["dense"]["bias"]) == 0.0
    again, _ = _train(trainer, steps=2)
    helpers.assert_trees_close(state.params, again.params, rtol=0, atol=0)  # reproducible from the seed
    other, _ = _train(
        gradtx.optimize_loss(loss_fn, "SGD", learning_rate=0.1, gradient_noise_scale=1.0, seed=1), 2
    )
    assert not np.allclose(other.params["dense"]["kernel"], state.params["dense"]["kernel"])


def test_variables_select_what_trains():
    trainer = gradtx.optimize_loss(loss_fn, "Adam", learning_rate=0.1, variables=["kernel"])
    state, _ = _train(trainer)
    assert float(state.params["dense"]["bias"]) == 0.0 and bool(jnp.any(state.params["dense"]["kernel"] != 0))
    assert gradtx.get_slot(state.opt_state, "m")["dense"]["bias"] is None  # no slots for frozen params


def test_summaries_gradients_and_aux():
    def with_aux(p, x, y):
        return loss_fn(p, x, y), {"mean_prediction": jnp.mean(x @ p["dense"]["kernel"])}

    trainer = gradtx.optimize_loss(
        with_aux,
        "SGD",
        learning_rate=0.1,
        has_aux=True,
        clip_gradients=100.0,
        summaries=["loss", "gradients", "gradient_norm"],
    )
    state = trainer.init(PARAMS)
    _, metrics = trainer.step(state, X, Y)
    grads = jax.grad(loss_fn)(PARAMS, X, Y)
    np.testing.assert_allclose(
        metrics["gradients"]["dense"]["kernel"], jnp.linalg.norm(grads["dense"]["kernel"]), rtol=1e-6
    )
    assert set(metrics) == {
        "loss",
        "gradients",
        "gradient_norm",
        "global_gradient_norm",
        "clipped_gradient_norm",
        "aux",
    }
    assert "mean_prediction" in metrics["aux"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"optimizer": "Adam", "learning_rate": -0.1}, r"`learning_rate` must be >= 0, got -0.1"),
        (
            {"optimizer": "Adam", "learning_rate": "0.1"},
            r"`learning_rate` must be a float, a 0-d array or a schedule",
        ),
        ({"optimizer": "Adam"}, r"`learning_rate` is None, but it must be given when `optimizer` is a name"),
        (
            {"optimizer": "Adamm", "learning_rate": 0.1},
            r"`optimizer` 'Adamm' is unknown: .*Did you mean 'adam'",
        ),
        (
            {"optimizer": "Momentum", "learning_rate": 0.1},
            r"`optimizer` 'Momentum' \(`gradtx.momentum`\) needs `momentum`.*"
            r"lambda lr: gradtx.momentum\(lr, momentum=...\)",
        ),
        ({"optimizer": 3, "learning_rate": 0.1}, r"`optimizer` must be a registry name, a transform"),
        (
            {"optimizer": lambda lr: "sgd", "learning_rate": 0.1},
            r"`optimizer` must return a gradient transformation",
        ),
        (
            {"optimizer": "SGD", "learning_rate": 0.1, "clip_gradients": "1"},
            r"`clip_gradients` must be a float or a callable",
        ),
        (
            {"optimizer": "SGD", "learning_rate": 0.1, "summaries": ["loss", "histograms"]},
            r"`summaries` must be from \['learning_rate', 'loss', 'gradients', 'gradient_norm', "
            r"'global_gradient_norm'\]",
        ),
    ],
)
def test_optimize_loss_raises_value_errors_as_tf(kwargs, match):
    with pytest.raises(ValueError, match=r"`optimize_loss`: " + match):
        gradtx.optimize_loss(loss_fn, **kwargs)


def test_optimize_loss_errors_at_trace_time():
    trainer = gradtx.optimize_loss(lambda p, x, y: x @ p["dense"]["kernel"], "SGD", learning_rate=0.1)
    with pytest.raises(ValueError, match=r"`optimize_loss`: the loss must be a scalar, got shape \(16,\)"):
        trainer.step(trainer.init(PARAMS), X, Y)
    trainer = gradtx.optimize_loss(
        loss_fn, "SGD", learning_rate=0.1, variables=lambda p: jax.tree.map(lambda _: False, p)
    )
    with pytest.raises(ValueError, match=r"`optimize_loss`: there are no gradients"):
        trainer.step(trainer.init(PARAMS), X, Y)


def test_compute_gradients_with_var_list_and_grad_loss():
    loss, grads = gradtx.compute_gradients(loss_fn, PARAMS, X, Y, var_list=["kernel"], grad_loss=2.0)
    expected = jax.grad(loss_fn)(PARAMS, X, Y)
    np.testing.assert_allclose(grads["dense"]["kernel"], 2 * expected["dense"]["kernel"], rtol=1e-6)
    assert grads["dense"]["bias"] is None and float(loss) == pytest.approx(float(loss_fn(PARAMS, X, Y)))
    with pytest.raises(ValueError, match=r"`compute_gradients`: the loss must be a scalar"):
        gradtx.compute_gradients(lambda p: p["dense"]["kernel"], PARAMS)


def test_apply_gradients_leaves_params_without_gradient_and_their_slots_alone():
    tx = gradtx.momentum(0.1, 0.9)
    state = tx.init(PARAMS)
    _, grads = gradtx.compute_gradients(loss_fn, PARAMS, X, Y, var_list=["kernel"])
    params, state = gradtx.apply_gradients(tx, grads, state, PARAMS)
    assert float(params["dense"]["bias"]) == 0.0
    assert float(gradtx.get_slot(state, "momentum", "dense/bias")) == 0.0
    with pytest.raises(ValueError, match=r"`apply_gradients`: no gradients provided for any variable"):
        gradtx.apply_gradients(tx, jax.tree.map(lambda _: None, PARAMS), state, PARAMS)


@pytest.mark.parametrize("check_vma", [True, False], ids=["vma", "novma"])
def test_axis_name_averages_per_replica_gradients_over_the_devices(check_vma):
    """8 devices with 2 rows each == one device with the 16 rows (mean loss), per-replica clipping as TF."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((8,), ("data",))
    kwargs = dict(learning_rate=0.1, summaries=["loss", "global_gradient_norm"])
    sharded = gradtx.optimize_loss(loss_fn, "Adam", axis_name="data", **kwargs)
    single = gradtx.optimize_loss(loss_fn, "Adam", **kwargs)
    step = jax.jit(
        jax.shard_map(
            sharded.step,
            mesh=mesh,
            in_specs=(P(), P("data"), P("data")),
            out_specs=(P(), P()),
            check_vma=check_vma,
        )
    )
    x, y = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (X, Y))
    a, b = sharded.init(jax.tree.map(jnp.copy, PARAMS)), single.init(jax.tree.map(jnp.copy, PARAMS))
    # the recorded norm is of each replica's own gradient of loss / 8 (CrossShardOptimizer inside
    # optimize_loss), averaged over the replicas; TF's clipping sees it (tests/parallel/test_optimize_loss.py)
    per_replica = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(
        PARAMS, X.reshape(8, 2, 3), Y.reshape(8, 2)
    )
    expected_norm = np.mean(jax.vmap(gradtx.global_norm)(jax.tree.map(lambda g: g / 8, per_replica)))
    for t in range(4):
        a, ma = jax.block_until_ready(step(a, x, y))
        b, mb = single.step(b, X, Y)
        if t == 0:
            np.testing.assert_allclose(ma["global_gradient_norm"], expected_norm, rtol=1e-5)
    helpers.assert_trees_close(a.params, b.params, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ma["loss"], mb["loss"], rtol=1e-5)


def test_a_donated_optimize_loss_step_updates_the_train_state_in_place():
    params = {"dense": {"kernel": jnp.zeros((256, 64)), "bias": jnp.zeros(64)}}
    x = jnp.ones((8, 256))

    def loss(p, x):
        return jnp.mean((x @ p["dense"]["kernel"] + p["dense"]["bias"]) ** 2)

    trainer = gradtx.optimize_loss(
        loss,
        "Adam",
        learning_rate=0.1,
        clip_gradients=1.0,
        gradient_noise_scale=0.1,
        gradient_multipliers={"bias": 2.0},
    )
    state = jax.eval_shape(trainer.init, params)
    memory = jax.jit(trainer.step, donate_argnums=0).lower(state, x).compile().memory_analysis()
    if memory is None:
        pytest.skip("this backend reports no memory analysis")
    assert memory.output_size_in_bytes - memory.alias_size_in_bytes <= 256, (
        memory
    )  # metrics and a few scalars

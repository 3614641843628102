"""gradtx.returnn.from_returnn_config: a whole config (a file read without running it, or a dict) gives the
optimizer at the learning rates RETURNN's own control sets, epoch after epoch; a resumed state continues
the same control; every applied key has a test that changing it changes the numbers; refusals."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import returnn
from tests.returnn import test_lr_control, test_tf_backend, test_torch_backend

returnn_config = pytest.importorskip("returnn.config")
returnn_lrc = pytest.importorskip("returnn.learning_rate_control")

PARAMS = {"b": jnp.array([0.5, -1.0]), "w": jnp.array([[1.0, -2.0, 3.0], [0.25, 0.0, -1.5]])}
SCORES = [{"dev_score": s, "train_score": 1.1 * s} for s in (3.0, 2.0, 1.99, 1.985, 1.5)]

CONFIG_FILE = """#!rnn.py
# a RETURNN setup as its users write it: computed values, a network, a function
import numpy

use_tensorflow = True
device = "cpu"
task = "train"
batch_size = 5000
network = {"output": {"class": "softmax", "loss": "ce", "from": ["data"]}}

optimizer = {"class": "adam", "epsilon": 1e-8}
gradient_clip = 0.7
learning_rate = 0.02
learning_rates = list(numpy.linspace(0.005, 0.02, num=3))
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 2
newbob_multi_update_interval = 1
newbob_learning_rate_decay = 0.5
learning_rate_file = "newbob.data"


def custom_construction_algo(idx, net_dict):
    return net_dict
"""


def _grads(epoch: int, step: int) -> dict:
    rng = np.random.default_rng(10 * epoch + step)
    return jax.tree.map(lambda p: jnp.asarray(3.0 * rng.standard_normal(p.shape), jnp.float32), PARAMS)


def _train(tx, state, epochs, steps=2, first_epoch=0):
    """`steps` jitted steps per epoch and `end_epoch` with its scores: the updates and the final state."""
    step = jax.jit(tx.update)
    out = []
    for e in range(first_epoch, first_epoch + epochs):
        for s in range(steps):
            updates, state = step(_grads(e, s), state, PARAMS)
            out.append(updates)
        state = returnn.end_epoch(state, SCORES[e])
    return out, state


def _returnn_rates(config: dict, epochs: int) -> list[float]:
    return test_lr_control._returnn(config, SCORES[:epochs])


def test_a_config_file_trains_at_returnns_rates(tmp_path):
    path = tmp_path / "setup.config"
    path.write_text(CONFIG_FILE)
    tx = gradtx.from_returnn_config(str(path))
    updates, state = _train(tx, tx.init(PARAMS), epochs=5)

    read = returnn.read_config(str(path))
    rates = _returnn_rates({k: v for k, v in read.items() if not isinstance(v, returnn.Unevaluated)}, 5)
    assert rates[:3] == pytest.approx([0.005, 0.0125, 0.02]) and rates[4] < rates[3]  # the list, then newbob
    assert returnn.learning_rate(state) == rates[5]  # RETURNN's Python float, to the bit
    assert jax.jit(returnn.learning_rate)(state) == np.float32(rates[5])  # traced: the rate the step takes

    # the same steps by hand: TF's Adam with the config's epsilon after a value clip, its rate set per epoch
    by_hand = gradtx.inject_hyperparams(
        lambda learning_rate: gradtx.chain(gradtx.clip(0.7), gradtx.adam(learning_rate, eps=1e-8))
    )(learning_rate=rates[0])
    inner = by_hand.init(PARAMS)
    for i, got in enumerate(updates):
        inner.hyperparams["learning_rate"] = rates[i // 2]
        want, inner = by_hand.update(_grads(i // 2, i % 2), inner, PARAMS)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9), got, want)


def test_a_resumed_state_continues_the_same_control_and_optimizer(tmp_path):
    config = {"optimizer": {"class": "adam"}, "learning_rate": 0.05, "learning_rate_control": "newbob"}
    tx = gradtx.from_returnn_config(config)
    straight, _ = _train(tx, tx.init(PARAMS), epochs=5)
    _, halfway = _train(tx, tx.init(PARAMS), epochs=2)
    saved = [np.asarray(x) for x in jax.tree.leaves(halfway)]  # as a checkpoint holds it
    fresh = gradtx.from_returnn_config(dict(config))  # a new process: the config read again
    restored = jax.tree.unflatten(jax.tree.structure(fresh.init(PARAMS)), saved)
    resumed, _ = _train(fresh, restored, epochs=3, first_epoch=2)
    for a, b in zip(straight[4:], resumed, strict=True):
        jax.tree.map(lambda x, y: np.testing.assert_array_equal(x, y), a, b)


def test_the_torch_backend_from_the_config_uses_torchs_adamw_and_clip():
    config = {"backend": "torch", "optimizer": {"class": "adamw"}, "gradient_clip_global_norm": 1.0}
    config |= {"learning_rate": 0.01}
    tx = gradtx.from_returnn_config(config)
    updates, _ = _train(tx, tx.init(PARAMS), epochs=1, steps=3)
    opt = returnn.TORCH_OPTIMIZERS["adamw"](lr=0.01)  # torch's default weight_decay 0.01 on every param
    state = opt.init(PARAMS)
    for s, got in enumerate(updates):
        g = _grads(0, s)
        factor = jnp.minimum(1.0 / (gradtx.global_norm(g) + 1e-6), 1.0)  # torch's clip_grad_norm_
        g = jax.tree.map(lambda x, factor=factor: x * factor, g)
        want, state = opt.update(g, state, PARAMS)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9), got, want)


def test_a_jitted_step_is_traced_once_across_epochs():
    tx = gradtx.from_returnn_config({"optimizer": {"class": "adam"}, "learning_rates": [0.1, 0.05, 0.01]})
    traces = []

    def update(g, s, p):
        traces.append(1)
        return tx.update(g, s, p)

    step = jax.jit(update)
    state = tx.init(PARAMS)
    for e in range(3):
        updates, state = step(_grads(e, 0), state, PARAMS)
        state = returnn.end_epoch(state, None)
    assert len(traces) == 1 and float(returnn.learning_rate(state)) == pytest.approx(0.01)


def test_a_file_is_read_never_run(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.config"
    code = f'__import__("os").system("touch {marker}")'
    path.write_text(f'#!rnn.py\noptimizer = {{"class": "adam"}}\nlearning_rate = {code}\n')
    with pytest.raises(returnn.ReturnnConfigError, match="learning_rate"):
        gradtx.from_returnn_config(str(path))
    assert not marker.exists()


def test_a_misspelled_updater_key_runs_as_returnn_runs_it_with_a_warning():
    """RETURNN never reads `optimizer_epsiloon`: Adam keeps RETURNN's epsilon of 1e-16."""
    with pytest.warns(returnn.ReturnnConfigWarning, match="did you mean `optimizer_epsilon`"):
        tx = gradtx.from_returnn_config({"adam": True, "optimizer_epsiloon": 1e-8})
    params = {"w": jnp.ones(3)}
    u, _ = tx.update({"w": jnp.full(3, 1e-9)}, tx.init(params), params)
    plain = gradtx.from_returnn_config({"adam": True})
    np.testing.assert_array_equal(
        u["w"], plain.update({"w": jnp.full(3, 1e-9)}, plain.init(params), params)[0]["w"]
    )


def test_options_of_the_other_backend_are_refused():
    with pytest.raises(TypeError, match="`l2` is for the TensorFlow backend"):
        gradtx.from_returnn_config({"backend": "torch", "optimizer": {"class": "sgd"}}, l2=0.1)
    with pytest.raises(TypeError, match="`weight_decay_mask` is for the PyTorch backend"):
        gradtx.from_returnn_config({"optimizer": {"class": "sgd"}}, weight_decay_mask=lambda path, leaf: True)


def test_end_epoch_and_learning_rate_take_only_the_returnn_state():
    state = gradtx.adam(0.1).init(PARAMS)
    with pytest.raises(TypeError, match="`end_epoch`: `state` must be a `ReturnnState`"):
        returnn.end_epoch(state, 1.0)
    with pytest.raises(TypeError, match="`learning_rate`: `state` must be a `ReturnnState`"):
        returnn.learning_rate(state)


# --------------------------------------------------------------------------- every applied key matters

NOT_NUMBERS = {
    "backend": "chooses the backend, whose numbers the tests above and the backends' own tests check",
    "use_tensorflow": "chooses the backend, as `backend` does",
    "global_norm_tag": "only RETURNN's default None is taken (tags come from layers); others are refused",
    "gradient_clip_global_norm_tag": "as `global_norm_tag`",
    "decouple_constraints": "PyTorch: RETURNN requires its default True (False is refused)",
    "torch_amp": "PyTorch: turns the grad scaler on, whose skipped steps `grad_scaler` changes in the test",
    "pretrain_greedy": "only RETURNN's default (train all layers) is taken; True is refused",
}


def _changed_keys(changes) -> set[str]:
    return {
        k
        for before, after in changes
        for k in set(before) ^ set(after) | {k for k in after if before.get(k) != after[k]}
    }


def test_every_applied_key_has_a_test_that_changing_it_changes_the_numbers():
    control = {k for _, change, _ in test_lr_control.CASES for k in change}
    tf = _changed_keys(test_tf_backend.CHANGES.values()) | {"decouple_constraints", "gradient_nan_inf_filter"}
    tf |= {"learning_rate"}  # the rate the control sets: test_a_config_file_trains_at_returnns_rates
    tf |= {"pretrain", "pretrain_learning_rate", "use_learning_rate_control_always"}  # test_pretraining_...
    tf |= {"pretrain_repetitions", "pretrain_construction_algo"}  # test_pretrain.py
    torch = {k for change in test_torch_backend.CHANGES for k in change} | {"optimizer"}
    torch |= {"num_allowed_consec_invalid_gradient_steps", "grad_scaler"}  # their own test (NaN gradients)
    for backend, covered in (("tf", tf | control), ("torch", torch | control)):
        missing = set(returnn.keys("applied", backend)) - covered - set(NOT_NUMBERS)
        assert not missing, f"{backend}: applied keys without a test that they change the numbers: {missing}"


returnn_lrc = pytest.importorskip("returnn.learning_rate_control")
returnn_config = pytest.importorskip("returnn.config")


def _returnn_engine_rates(config: dict, pretrain_epochs: int, scores: list[float]) -> list[float]:
    """The rates RETURNN's TF engine trains epochs 1.. at (`init_train_epoch`), with RETURNN's own control."""
    control = returnn_lrc.load_learning_rate_control_from_config(returnn_config.Config(dict(config)))
    initial = control.default_learning_rate
    pretrain_rate = config.get("pretrain_learning_rate", initial)
    rates = []
    for epoch, score in enumerate(scores, start=1):
        if config.get("use_learning_rate_control_always"):
            rate = control.get_learning_rate_for_epoch(epoch)
        elif epoch <= pretrain_epochs:
            rate = pretrain_rate
            control.set_default_learning_rate_for_epoch(epoch, rate)
        elif epoch == pretrain_epochs + 1:
            rate = initial
            control.set_default_learning_rate_for_epoch(epoch, rate)
        else:
            rate = control.get_learning_rate_for_epoch(epoch)
        rates.append(rate)
        control.set_epoch_error(epoch, {"dev_score": score})
    return rates


@pytest.mark.parametrize(
    "extra",
    [{}, {"pretrain_learning_rate": 0.02}, {"use_learning_rate_control_always": True}],
    ids=["pretrain", "pretrain_learning_rate", "control_always"],
)
def test_pretraining_epochs_run_at_returnns_rates(extra):
    """RETURNN's TF engine with `pretrain`: the pretraining epochs at `pretrain_learning_rate`, the next at
    `learning_rate`, then newbob on the scores of all of them; with `use_learning_rate_control_always`
    the control throughout. The scores worsen: newbob decays as soon as it may."""
    config = {"adam": True, "pretrain": "default", "learning_rate": 0.1, "learning_rate_control": "newbob"}
    config |= extra
    scores = [1.0 + 0.1 * e for e in range(8)]
    always = "use_learning_rate_control_always" in extra
    tx = gradtx.from_returnn_config(config, pretrain_epochs=None if always else 3)
    state = tx.init({"w": jnp.zeros(2)})
    rates = []
    for score in scores:
        rates.append(float(state.control.rate_history()[-1]))
        state = returnn.end_epoch(state, {"dev_score": score})
    assert rates == _returnn_engine_rates(config, 0 if always else 3, scores)
    if not always:  # the pretraining epochs and the next at their fixed rates, whatever the scores
        assert rates[:4] == [extra.get("pretrain_learning_rate", 0.1)] * 3 + [0.1] and rates[4] < 0.1


def test_pretraining_needs_its_epoch_count_and_refuses_what_it_cannot_reproduce():
    config = {"adam": True, "pretrain": "default", "learning_rate": 0.1, "learning_rate_control": "newbob"}
    with pytest.raises(
        returnn.ReturnnConfigError, match=r"`pretrain` = 'default': .*pass `pretrain_epochs=`"
    ):
        gradtx.from_returnn_config(config)
    with pytest.raises(ValueError, match=r"`pretrain_epochs` = 2: the config has no `pretrain`"):
        gradtx.from_returnn_config({"adam": True}, pretrain_epochs=2)
    with pytest.raises(ValueError, match="`pretrain_epochs` = 2: with `use_learning_rate_control_always`"):
        gradtx.from_returnn_config(config | {"use_learning_rate_control_always": True}, pretrain_epochs=2)
    with pytest.raises(returnn.ReturnnConfigError, match="`pretrain_greedy` = True: greedy pretraining"):
        gradtx.from_returnn_config(config | {"pretrain_greedy": True}, pretrain_epochs=2)
    with pytest.raises(returnn.ReturnnConfigError, match=r"`pretrain` = \{'greedy': True\}: greedy"):
        gradtx.from_returnn_config(config | {"pretrain": {"greedy": True}}, pretrain_epochs=2)
    torch = {"backend": "torch", "optimizer": {"class": "adam"}, "pretrain": "default"}  # not read there
    gradtx.from_returnn_config(torch)
    constant = {"adam": True, "pretrain": "default", "learning_rate": 0.1}
    gradtx.from_returnn_config(constant)  # the same rate every epoch: the epoch count changes nothing
    with pytest.raises(returnn.ReturnnConfigError, match="pass `pretrain_epochs=`"):  # ... but here it does
        gradtx.from_returnn_config(constant | {"pretrain_learning_rate": 0.01})


def test_a_grown_network_starts_a_fresh_optimizer_state_and_keeps_the_control():
    """RETURNN builds a new graph, and with it a new updater, when pretraining grows the network."""
    tx = gradtx.from_returnn_config(
        {"adam": True, "pretrain": "default", "learning_rate": 0.1}, pretrain_epochs=2
    )
    small = {"w": jnp.ones(3)}
    state = tx.init(small)
    _, state = tx.update({"w": jnp.ones(3)}, state, small)
    state = returnn.end_epoch(state, {"dev_score": 1.0})
    grown = {"w": jnp.ones(3), "w2": jnp.ones((2, 3))}
    state = returnn.new_network(tx, state, grown)
    assert int(state.control.epoch) == 2 and float(returnn.learning_rate(state)) == pytest.approx(0.1)
    fresh = tx.init(grown)
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.all(a == b)), state.updater, fresh.updater))
    updates, _ = tx.update(jax.tree.map(jnp.ones_like, grown), state, grown)  # Adam's first step: -lr * 1
    np.testing.assert_allclose(updates["w2"], -0.1, rtol=1e-5)

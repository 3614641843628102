"""gradtx.returnn counts RETURNN's pretraining epochs from the config's `network` as RETURNN's own
`returnn.pretrain.Pretrain` does, for its built-in construction algorithms and repetitions; a network
whose values are `WrapEpochValue`s is read; what cannot be counted is refused, saying why."""

from __future__ import annotations

import copy

import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gradtx
from gradtx import returnn
from gradtx.returnn import _pretrain

returnn_pretrain = pytest.importorskip("returnn.pretrain")

NETWORK = {
    "window": {"class": "window", "window_size": 3, "trainable": False, "from": ["data"]},
    "lstm0": {"class": "rec", "unit": "lstm", "n_out": 8, "from": ["window"]},
    "lstm1": {"class": "rec", "unit": "lstm", "n_out": 8, "from": ["lstm0"]},
    "lstm2": {"class": "rec", "unit": "lstm", "n_out": 8, "from": ["lstm1"]},
    "output": {"class": "softmax", "loss": "ce", "from": ["lstm2"]},
}
NEWBOB = {"adam": True, "learning_rate": 0.1, "learning_rate_control": "newbob", "network": NETWORK}


def _returnns_count(config: dict) -> int | None:
    """`Pretrain(...).get_train_num_epochs()` as `pretrain_from_config` builds it; None where it stops."""
    options = dict(config["pretrain"]) if isinstance(config["pretrain"], dict) else {}
    for key in ("repetitions", "construction_algo"):
        if f"pretrain_{key}" in config:
            options.setdefault(key, config[f"pretrain_{key}"])
    try:
        return returnn_pretrain.Pretrain(
            original_network_json=copy.deepcopy(config["network"]), **options
        ).get_train_num_epochs()
    except (AssertionError, KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


@st.composite
def _configs(draw):
    """A random layer graph (sources among earlier layers), some layers untrainable or with targets, under
    each construction algorithm and each form of `repetitions`."""
    n = draw(st.integers(1, 7))
    names = [f"l{i}" for i in range(n)]
    network = {}
    for i, name in enumerate(names):
        sources = draw(st.lists(st.sampled_from(["data", *names[:i]]), min_size=1, max_size=2, unique=True))
        layer = {"class": draw(st.sampled_from(["linear", "rec", "window", "softmax"])), "from": sources}
        if draw(st.booleans()) and draw(st.booleans()):
            layer["trainable"] = False
        if draw(st.integers(0, 9)) == 0:
            layer["target"] = "classes"
        network[name] = layer
    outputs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
    network["output"] = {"class": "softmax", "from": outputs}
    repetitions = draw(
        st.sampled_from([None, 1, 2, [1, 3], {"default": 0, "final": 4}, {"default": 2, 0: 1}])
    )
    config = {
        "pretrain": "default" if repetitions is None else {"repetitions": repetitions},
        "network": network,
    }
    algorithm = draw(st.sampled_from([None, "from_output", "from_input", "no_network_modifications"]))
    if algorithm:
        config["pretrain_construction_algo"] = algorithm
    return config


@settings(max_examples=300, deadline=None)
@given(_configs())
def test_the_count_equals_returnns_pretrain(config):
    assert _pretrain.pretrain_epochs(copy.deepcopy(config)) == _returnns_count(config)


@pytest.mark.parametrize(
    ("extra", "epochs"),
    [
        ({"pretrain": "default"}, 3),  # lstm0, lstm0-1, all (the window alone adds nothing trainable)
        ({"pretrain": {"repetitions": 2}}, 6),
        ({"pretrain": "default", "pretrain_repetitions": {"default": 0, "final": 5}}, 5),
        ({"pretrain": "default", "pretrain_construction_algo": "from_input"}, 3),
        ({"pretrain": {"construction_algo": "no_network_modifications"}}, 1),
    ],
)
def test_a_config_with_pretraining_builds_with_returnns_epoch_count(extra, epochs):
    """The pretraining epochs run at `pretrain_learning_rate`, the next at `learning_rate`, then newbob."""
    config = NEWBOB | {"pretrain_learning_rate": 0.02} | extra
    assert epochs == _returnns_count(config)
    tx = gradtx.from_returnn_config(config)
    state = tx.init({"w": jnp.zeros(2)})
    rates = []
    for epoch in range(epochs + 2):
        rates.append(float(state.control.rate_history()[-1]))
        state = returnn.end_epoch(state, {"dev_score": 1.0 + epoch})
    assert rates[: epochs + 1] == [0.02] * epochs + [0.1] and rates[-1] < 0.1
    given = gradtx.from_returnn_config(config, pretrain_epochs=epochs + 1)  # the argument overrides the count
    assert given.init({"w": jnp.zeros(2)}).control != state.control


def test_a_network_of_wrapped_epoch_values_is_read_and_counted(tmp_path):
    path = tmp_path / "setup.config"
    path.write_text(
        "#!rnn.py\nfrom Pretrain import WrapEpochValue\nimport returnn.pretrain\n"
        "adam = True\nlearning_rate = 0.1\nlearning_rate_control = 'newbob'\npretrain = 'default'\n"
        "network = {'l1': {'class': 'linear', 'from': ['data'], 'n_out': WrapEpochValue(\n"
        "    lambda epoch: 8 * epoch)},\n"
        "  'l2': {'class': 'linear', 'from': ['l1'],\n"
        "    'dropout': returnn.pretrain.WrapEpochValue(lambda epoch: 0.1)},\n"
        "  'output': {'class': 'softmax', 'from': ['l2']}}\n"
    )
    network = returnn.read_config(path)["network"]
    assert repr(network["l1"]["n_out"]) == "<WrapEpochValue (line 8): set per pretraining epoch>"
    assert _pretrain.pretrain_epochs({"pretrain": "default", "network": network}) == 2
    gradtx.from_returnn_config(path)


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"network": {"output": {"class": "softmax", "from": "data"}}}, "would stop on this network"),
        ({"pretrain_construction_algo": "from_the_middle"}, "would stop on this network or these options"),
    ],
)
def test_what_cannot_be_counted_asks_for_the_number(extra, why):
    config = NEWBOB | {"pretrain": "default"} | extra
    with pytest.raises(returnn.ReturnnConfigError, match=f"{why}.*pass `pretrain_epochs=`"):
        gradtx.from_returnn_config(config)
    gradtx.from_returnn_config(config, pretrain_epochs=3)


def test_a_custom_construction_function_is_named(tmp_path):
    path = tmp_path / "custom.config"
    path.write_text(
        "#!rnn.py\nadam = True\nlearning_rate = 0.1\nlearning_rate_control = 'newbob'\n"
        "network = {'output': {'class': 'softmax', 'from': ['data']}}\n"
        "def grow(idx, net_dict):\n    return None\n"
        "pretrain = {'construction_algo': grow}\n"
    )
    with pytest.raises(
        returnn.ReturnnConfigError, match="`pretrain` could not be read.*pass `pretrain_epochs=`"
    ):
        gradtx.from_returnn_config(path)

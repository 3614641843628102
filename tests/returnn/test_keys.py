"""The key table: every RETURNN updater key applied, ignored or refused by name; backend resolution."""

import importlib.util
import pathlib
import re

import pytest

from gradtx.returnn._common import ReturnnConfigError, ReturnnConfigWarning
from gradtx.returnn._keys import KEYS, check_keys, keys_of_kind, resolve_backend
from gradtx.returnn._reader import Unevaluated

ADAM = {"optimizer": {"class": "adam"}}

APPLIED_BOTH = """optimizer learning_rate learning_rates min_learning_rate learning_rate_control
learning_rate_control_error_measure learning_rate_control_relative_error_relative_lr
learning_rate_control_min_num_epochs_per_new_lr newbob_relative_error_div_by_old learning_rate_decay
newbob_learning_rate_decay learning_rate_growth newbob_learning_rate_growth
newbob_relative_error_threshold newbob_error_threshold newbob_multi_num_epochs newbob_multi_update_interval
newbob_relative_error_grow_threshold
gradient_clip gradient_clip_global_norm gradient_noise accum_grad_multiple_step backend use_tensorflow
decouple_constraints""".split()
APPLIED_TF = """optimizer_epsilon momentum adam nadam adadelta adagrad rmsprop gradient_clip_norm
gradient_clip_avg_norm gradient_nan_inf_filter grad_norm_to_clip_to_zero global_norm_tag
gradient_clip_global_norm_tag dynamic_learning_rate pretrain pretrain_learning_rate
use_learning_rate_control_always pretrain_greedy""".split()
# RETURNN-TF reads them, and they change nothing: its decoupled decay does not use the factor
IGNORED_TF = ["decouple_constraints_factor", "optimizer_use_locking"]


def test_the_leads_applied_keys_are_applied_on_their_backends():
    assert set(APPLIED_BOTH) <= set(keys_of_kind("applied", "tf")) & set(keys_of_kind("applied", "torch"))
    assert set(APPLIED_TF) <= set(keys_of_kind("applied", "tf"))
    assert set(APPLIED_TF).isdisjoint(keys_of_kind("applied", "torch"))
    assert set(IGNORED_TF) <= set(keys_of_kind("ignored", "tf"))
    assert "num_allowed_consec_invalid_gradient_steps" in set(keys_of_kind("applied", "torch")) - set(
        keys_of_kind("applied", "tf")
    )
    assert keys_of_kind("refused", "torch")[:3] == ["adadelta", "adagrad", "adam"]
    assert "learning_rate_file" in keys_of_kind("ignored") and "pretrain" in keys_of_kind("ignored", "torch")
    for kind in ("applied", "ignored", "refused"):
        assert keys_of_kind(kind) == sorted(set(keys_of_kind(kind, "tf")) | set(keys_of_kind(kind, "torch")))
    assert all(key.note and key.kind in ("applied", "ignored", "refused") for key in KEYS.values())


def test_keys_of_kind_refuses_unknown_arguments():
    with pytest.raises(ValueError, match=r"`keys_of_kind`: `kind` must be one of .* got 'used'"):
        keys_of_kind("used")
    with pytest.raises(ValueError, match=r"`backend` must be one of \('tf', 'torch'\) or None, got 'jax'"):
        keys_of_kind("applied", "jax")


@pytest.mark.skipif(importlib.util.find_spec("returnn") is None, reason="needs RETURNN's source")
def test_every_key_returnns_updaters_engines_and_control_read_is_in_the_table():
    root = pathlib.Path(importlib.util.find_spec("returnn").origin).parent
    reader = re.compile(
        r"config\.(?:value|typed_value|float|int|bool|has|is_true|list|opt_typed_value|bool_or_other|float_list"
        r'|int_list|is_typed|is_of_type|get_of_type)\(\s*"(\w+)"|typed_dict(?:\.get\(|\[)"(\w+)"'
    )
    files = [
        "tf/updater.py",
        "torch/updater.py",
        "learning_rate_control.py",
        "pretrain.py",
        "torch/engine.py",
    ]
    files += ["tf/engine.py", "engine/base.py"]
    read = {a or b for f in files for a, b in reader.findall((root / f).read_text())}
    assert len(read) > 100
    assert sorted(read - set(KEYS)) == []


@pytest.mark.parametrize(
    "config, backend, match",
    [
        (
            {"gradient_clip_norm": 1.0},
            "torch",
            r"`gradient_clip_norm` = 1.0: refused on the PyTorch .*NotImpl",
        ),
        ({"gradient_nan_inf_filter": True}, "torch", r"`gradient_nan_inf_filter` = True: refused on the PyT"),
        ({"grad_norm_to_clip_to_zero": 3}, "torch", r"`grad_norm_to_clip_to_zero` = 3: refused"),
        (
            {"debug_grad_summaries": True},
            "torch",
            r"`debug_grad_summaries` = True: refused .*NotImplementedError",
        ),
        (
            {"momentum": 0.9},
            "torch",
            r"`momentum` = 0.9: .*does not read it: write `momentum` in the `optimizer`",
        ),
        ({"optimizer_epsilon": 1e-8}, "torch", r"`optimizer_epsilon` = 1e-08: .*write `epsilon` in the"),
        ({"adam": True}, "torch", r"`adam` = True: .*requires `optimizer`"),
        ({"decouple_constraints_factor": 0.1}, "torch", r"the weight decay is the `optimizer` dict's"),
        ({"maximize_grad_norm": 0.1}, "tf", r"`maximize_grad_norm` = 0.1: .*second backprop"),
        ({"pretrain": {"greedy": True}}, "tf", r"`pretrain` = \{'greedy': True\}: greedy pretraining"),
        ({"grad_clip": 5.0}, "torch", r"`grad_clip` = 5.0: .*called\s+gradient_clip_global_norm"),
        (
            {"grad_clip": 5.0},
            "tf",
            r"`grad_clip` = 5.0: refused on the TensorFlow backend: not a RETURNN key",
        ),
        ({"use_horovod": True}, "tf", r"`use_horovod` = True: .*gradtx.parallel"),
        (
            {"use_horovod": True, "horovod_scale_lr": True},
            "tf",
            r"`horovod_scale_lr` = True: .*number of Horovod",
        ),
        ({"torch_distributed": {}}, "torch", r"`torch_distributed` = \{\}: .*data-parallel"),
        ({"distributed_tf": True}, "tf", r"`distributed_tf` = True: .*data-parallel"),
        ({"reset_updater_vars_mod_step": 100}, "tf", r"resets the optimizer state every N steps"),
        ({"use_last_best_model": {"modulo": 2}}, "tf", r"reloads the best earlier epoch's parameters"),
        ({"reinit_network_each_epoch": True}, "tf", r"rebuilds the network"),
        ({"train_in_eval": True}, "tf", r"trains on the eval datasets"),
        ({"extra_updates": {"w": len}}, "tf", r"functions updating variables"),
        ({"num_allowed_consec_invalid_gradient_steps": 3}, "tf", r"TensorFlow updater does not read it"),
        (
            {"dynamic_learning_rate": {"interval": 10, "decay": 0.9}},
            "torch",
            r"raises\s+NotImplementedError for the",
        ),
    ],
)
def test_refused_keys_are_refused_by_name(config, backend, match):
    with pytest.raises(ReturnnConfigError, match=match):
        check_keys(ADAM | config, backend)


@pytest.mark.parametrize(
    "config, backend",
    [
        ({"gradient_clip_norm": 0, "grad_norm_to_clip_to_zero": 0.0, "debug_grad_summaries": False}, "torch"),
        (
            {"momentum": 0.0, "adam": False, "maximize_grad_norm": 0, "pretrain": None, "grad_clip": 0},
            "torch",
        ),
        (
            {"torch_distributed": None, "use_horovod": False, "horovod_scale_lr": True},
            "tf",
        ),  # no horovod: unread
        (
            {"use_horovod": True, "reset_updater_vars_mod_step": 5, "log_grad_norm": True},
            "torch",
        ),  # TF-only, unread
        ({"global_norm_tag": None, "dynamic_learning_rate": {"interval": 10, "decay": 0.9}}, "tf"),
        ({"network": {"output": {"class": "softmax"}, "#config": {"batch_size": 10}}}, "tf"),
        ({"train": {"class": "HDFDataset"}, "my_dataset_path": "/data", "hidden_units": 512}, "torch"),
        ({"custom_fn": Unevaluated("custom_fn", "a function definition is not executed", 3)}, "tf"),
        ({"network": Unevaluated("network", "a `for` loop is not executed", 9)}, "torch"),
    ],
)
def test_off_values_ignored_keys_and_unrelated_keys_pass(config, backend):
    check_keys(ADAM | config, backend)


def test_applied_key_that_could_not_be_read_is_refused_with_why():
    lr = Unevaluated("learning_rate", "the builtin `open` is not read", 7)
    with pytest.raises(
        ReturnnConfigError, match=r"`learning_rate` = .*could not be read .*line 7: the builtin `open`"
    ):
        check_keys({"learning_rate": lr}, "tf")
    flag = Unevaluated("adam", "a `with` block is not executed", 2)
    with pytest.raises(ReturnnConfigError, match=r"`adam` = .*refused on the PyTorch backend"):
        check_keys(ADAM | {"adam": flag}, "torch")


@pytest.mark.parametrize(
    "config, backend, match",
    [
        ({"global_norm_tag": "encoder"}, "tf", r"`global_norm_tag` = 'encoder': a norm tag selects"),
        ({"gradient_clip_global_norm_tag": "x"}, "tf", r"`gradient_clip_global_norm_tag` = 'x': a norm tag"),
        (
            {"dynamic_learning_rate": len},
            "tf",
            r"`dynamic_learning_rate` = <built-in function len>: a function",
        ),
        ({"dynamic_learning_rate": 0.5}, "tf", r"`dynamic_learning_rate` = 0.5: not the dict form"),
        (
            {"accum_grad_multiple_step": len},
            "torch",
            r"`accum_grad_multiple_step` = .*a function of the step",
        ),
        (
            {"decouple_constraints": False},
            "torch",
            r"`decouple_constraints` = False: .* asserts it is not False",
        ),
        ({"optimizer": None}, "torch", r"`optimizer` is not set: RETURNN's PyTorch backend requires it"),
        (
            {"optimizer": None, "adam": 1, "behavior_version": 2},
            "tf",
            r"`adam` = 1 with behavior_version = 2",
        ),
        (
            {"optimizer": None, "momentum": 0.9, "behavior_version": 21},
            "tf",
            r"`momentum` = 0.9 with behavior",
        ),
        (
            {"network": {"#config": {"learning_rate": 0.1}}},
            "tf",
            r"`network\['#config'\]` sets \['learning_rate'\]",
        ),
    ],
)
def test_applied_keys_with_values_gradtx_refuses(config, backend, match):
    with pytest.raises(ReturnnConfigError, match=match):
        check_keys(ADAM | config, backend)


def test_legacy_flags_pass_before_behavior_version_2_and_decoupling_on_torch_passes():
    check_keys({"adam": True, "behavior_version": 1}, "tf")
    check_keys({"momentum": 0.9}, "tf")
    check_keys(ADAM | {"decouple_constraints": True}, "torch")


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("optimizer_epsiloon", "optimizer_epsilon"),
        ("learning_rate_contorl", "learning_rate_control"),
        ("gradient_clip_globalnorm", "gradient_clip_global_norm"),
        ("accum_grad_multiple_steps", "accum_grad_multiple_step"),
        ("newbob_learning_rate_decy", "newbob_learning_rate_decay"),
        ("newbob_relative_error_threshold_div_by_old", "newbob_relative_error_div_by_old"),
    ],
)
def test_a_misspelled_updater_key_runs_as_in_returnn_with_a_warning_naming_the_close_key(name, suggestion):
    """RETURNN never reads the misspelled key (its default stands), so the config runs; gradtx says so."""
    with pytest.warns(
        ReturnnConfigWarning, match=rf"`{name}` = 1: .*does not read it \(did you mean `{suggestion}`\?\)"
    ):
        check_keys(ADAM | {name: 1}, "tf")


@pytest.mark.parametrize(
    "name",
    [
        "debug_add_check_numerics_on_output",  # RETURNN reads these elsewhere (debugging, the network,
        "debug_print_layer_output_shape",  # search) or they are the config's own helper values: no word
        "optimize_move_layers_out",
        "search_output_file",
        "bn_momentum",
        "bn_epsilon",
        "num_input",
        "eval_data",
        "lr_warmup",
        "my_weight_decay",
    ],
)
def test_keys_the_update_does_not_read_are_accepted_without_a_word(name, recwarn):
    check_keys(ADAM | {name: 1}, "tf")
    check_keys(ADAM | {name: 1}, "torch")
    assert not recwarn.list


@pytest.mark.parametrize(
    "name", ["adadelta_decay", "smorms3", "update_clip", "momentum2", "nesterov_momentum"]
)
def test_theano_updater_keys_are_accepted_with_a_warning_that_returnn_does_not_read_them(name):
    with pytest.warns(ReturnnConfigWarning, match=rf"`{name}` = .*Theano updater .*RETURNN runs without it"):
        check_keys(ADAM | {name: 0.9}, "tf")


def test_all_problems_are_listed_in_one_error():
    config = {"gradient_clip_norm": 1.0, "momentum": 0.5, "optimizer_epsilon": 1e-8}
    with pytest.raises(ReturnnConfigError) as info:
        check_keys(config, "torch")
    assert str(info.value).count("\n  `") == 4  # three keys and the missing `optimizer`
    with pytest.raises(
        ValueError, match=r"`check_keys`: `backend` must be one of \('tf', 'torch'\), got 'pt'"
    ):
        check_keys({}, "pt")


@pytest.mark.parametrize(
    "config, backend, expected",
    [
        ({}, None, "tf"),
        ({}, "torch", "torch"),
        ({}, "PyTorch", "torch"),
        ({}, "tensorflow", "tf"),
        ({"backend": "torch"}, None, "torch"),
        ({"backend": "torch"}, "pytorch", "torch"),
        ({"backend": "tensorflow"}, None, "tf"),
        ({"backend": "tensorflow-net-dict"}, "tf", "tf"),
        ({"backend": None, "use_tensorflow": True}, None, "tf"),
        ({"use_tensorflow": False}, "torch", "torch"),
        ({"use_tensorflow": 1}, None, "tf"),
    ],
)
def test_resolve_backend(config, backend, expected):
    assert resolve_backend(config, backend) == expected


@pytest.mark.parametrize(
    "config, backend, match",
    [
        ({"backend": "torch"}, "tf", r"`backend` = 'tf' contradicts the config, whose .* selects PyTorch"),
        (
            {"use_tensorflow": True},
            "torch",
            r"`backend` = 'torch' contradicts the config.* selects TensorFlow",
        ),
        ({}, "jax", r"`backend` = 'jax': .*jax backend has no updater of its own"),
        ({"backend": "jax"}, None, r"config `backend` = 'jax': .*jax backend has no updater"),
        (
            {"backend": "tf"},
            None,
            r"config `backend` = 'tf': RETURNN's values are .*did you mean 'tensorflow'\?",
        ),
        ({"backend": "pytorch"}, None, r"config `backend` = 'pytorch': .*did you mean 'torch'\?"),
        ({}, "torhc", r"`backend` = 'torhc': .*did you mean 'torch'\?"),
        ({"backend": Unevaluated("backend", "x", 1)}, None, r"the config's `backend` could not be read"),
    ],
)
def test_resolve_backend_refusals(config, backend, match):
    with pytest.raises(ReturnnConfigError, match=match):
        resolve_backend(config, backend)


def test_the_keys_the_backends_and_the_control_read_are_applied():
    from gradtx.returnn import _lr_control, _torch_backend

    for key in _lr_control.CONFIG_KEYS:
        assert KEYS[key].on("tf")[0] == KEYS[key].on("torch")[0] == "applied", key
    for key in _torch_backend.KEYS:
        assert KEYS[key].on("torch")[0] == "applied", key

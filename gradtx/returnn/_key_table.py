"""The table of RETURNN's update config keys (`KEYS`): each key's kind per backend, and why."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

BACKENDS = ("tf", "torch")
KINDS = ("applied", "ignored", "refused")
BACKEND_NAMES = {"tf": "TensorFlow", "torch": "PyTorch"}


@dataclasses.dataclass(frozen=True)
class Key:
    """One config key: what gradtx does with it.

    Attributes:
      name: the config key.
      kind: "applied", "ignored" or "refused", on the backends in `backends`.
      backends: the backends ("tf", "torch") whose RETURNN reads the key as `kind` says.
      note: one line: what the key does, and for a refused key what to do instead.
      elsewhere: on the other backend: None when RETURNN does not read it there (ignored), else
        why it is refused there.
    """

    name: str
    kind: str
    backends: frozenset[str]
    note: str
    elsewhere: str | None = None

    def on(self, backend: str) -> tuple[str, str]:
        """`(kind, note)` of the key on `backend`."""
        if backend in self.backends:
            return self.kind, self.note
        if self.elsewhere is None:
            return "ignored", f"RETURNN's {BACKEND_NAMES[backend]} backend does not read it"
        return "refused", self.elsewhere


_NO_TORCH = "RETURNN's PyTorch updater raises NotImplementedError for it (a TensorFlow-backend option)"
_TORCH_FLAG = (
    "RETURNN's PyTorch backend does not read the legacy flags and requires `optimizer`: "
    'write e.g. `optimizer = {"class": "adam"}`'
)
_PARALLEL = (
    "data-parallel training over workers (RETURNN averages gradients, or parameters, across them): "
    "average the gradients over your devices with gradtx.parallel before this transform, and drop the key"
)

# Each entry: a line `kind backends: names -- note` (more names on indented `+ ` lines, a long note on the
# indented lines below), then optionally `| elsewhere` (indented): why the key is refused on the other
# backend (none: RETURNN does not read it there).
_TABLE = """
applied tf torch: optimizer
    the optimizer: a dict with `class` and options (TF: RETURNN's defaults, epsilon 1e-16; PyTorch:
    torch.optim's); required by the PyTorch backend
applied tf torch: learning_rate -- the initial and default learning rate of the learning-rate control
applied tf torch: learning_rates -- the rates of the first epochs (a list, or a dict epoch -> rate)
applied tf torch: min_learning_rate -- the floor of the controlled rate
applied tf torch: learning_rate_control
    the control: constant, newbob (newbob_rel, newbob_relative), newbob_abs, newbob_multi_epoch
applied tf torch: learning_rate_control_error_measure -- newbob family: which score the control compares
applied tf torch: learning_rate_control_relative_error_relative_lr
    newbob family: the relative error scaled by the rates' ratio
applied tf torch: learning_rate_control_min_num_epochs_per_new_lr
    newbob family: the epochs a new rate is kept at least
applied tf torch: newbob_relative_error_div_by_old
    newbob family: the relative error divided by the old error
applied tf torch: learning_rate_decay newbob_learning_rate_decay
    newbob family: the factor when the score stops improving (default 0.5; the second is the older name)
applied tf torch: learning_rate_growth newbob_learning_rate_growth
    newbob family: the factor when the score improves (default 1.0; the second is the older name)
applied tf torch: newbob_relative_error_threshold newbob_relative_error_grow_threshold
    newbob, newbob_multi_epoch: the relative-improvement thresholds (default -0.01)
applied tf torch: newbob_error_threshold -- newbob_abs: the absolute-improvement threshold (default -0.01)
applied tf torch: newbob_multi_num_epochs newbob_multi_update_interval
    newbob_multi_epoch: the epochs per comparison and the update interval
applied tf torch: gradient_clip -- clip each gradient entry to [-v, v] (0: off)
applied tf torch: gradient_clip_global_norm -- clip by the global norm of all gradients (0: off)
applied tf torch: gradient_noise -- add Gaussian noise of this stddev to the gradients (0: off)
applied tf torch: accum_grad_multiple_step
    one update per this many steps' gradients (a function, which RETURNN's PyTorch engine takes, is
    refused)
applied tf torch: backend -- which RETURNN updater: tensorflow, tensorflow-net-dict or torch
applied tf torch: use_tensorflow -- True: the TensorFlow backend (RETURNN's older switch)
applied tf torch: decouple_constraints
    TF: the layers' L2 as decoupled weight decay (pass `l2=`); PyTorch: must not be False (RETURNN
    asserts: its weight decay is decoupled)
applied tf torch: random_seed
    seeds the gradient noise (gradtx's own random stream, not RETURNN's draws)
applied tf: optimizer_epsilon -- TF: the epsilon given to the optimizers taking one (default 1e-16)
    | RETURNN's PyTorch updater does not read it: write `epsilon` in the `optimizer` dict
applied tf: momentum -- TF: the momentum of the optimizers taking one; alone, Momentum SGD
    | RETURNN's PyTorch updater does not read it: write `momentum` in the `optimizer` dict
applied tf: adam nadam adadelta adagrad rmsprop
    TF: legacy optimizer flag, used when `optimizer` is not set (RETURNN refuses it with behavior_version
    >= 2)
    | TORCH_FLAG
applied tf: gradient_clip_norm -- TF: clip each gradient by its own L2 norm (0: off)
    | NO_TORCH
applied tf: gradient_clip_avg_norm -- TF: clip each gradient by its average L2 norm (0: off)
    | NO_TORCH
applied tf: gradient_nan_inf_filter -- TF: set NaN and inf gradient entries to 0
    | NO_TORCH
applied tf: grad_norm_to_clip_to_zero
    TF: zero the step's gradients when their global norm is over this or not finite (0: off)
    | NO_TORCH
applied tf: global_norm_tag gradient_clip_global_norm_tag
    TF: None only: a tag selects the gradients of the layers carrying it, and gradtx has no layers
    | NO_TORCH
ignored tf: decouple_constraints_factor
    TF: RETURNN computes this factor (default 0.025) but does not use it: its decoupled decay is
    `param * 2 * L2`, unscaled
    | RETURNN's PyTorch updater does not read it: the weight decay is the `optimizer` dict's
    `weight_decay`
applied tf: dynamic_learning_rate
    TF: the dict {"interval": n, "decay": d} multiplies the rate by d ** (step % n); a function is refused
    (use a gradtx schedule)
    | RETURNN's PyTorch updater raises NotImplementedError for the dict form, and a function is not read
    from a config: use a gradtx schedule
ignored tf: optimizer_use_locking -- TF: use_locking of the TF optimizers (no effect on the numbers)
applied torch: num_allowed_consec_invalid_gradient_steps
    PyTorch: skip a step whose gradient norm is not finite, at most this many in a row
    | RETURNN's TensorFlow updater does not read it (`gradient_nan_inf_filter = True` zeroes the
    non-finite entries instead)
applied torch: torch_amp
    PyTorch: autocast (the forward's precision is yours), with a GradScaler by default: the scaled step,
    skipped when the gradients are not finite
applied torch: grad_scaler -- PyTorch: the GradScaler's options (None: no scaler)
refused tf: maximize_grad_norm
    adds the gradient of -factor * (global gradient norm), a second backprop through the loss: add that
    term to your loss and drop the key
    | NO_TORCH
applied tf: pretrain
    layer-wise pretraining (TF engine): unless `use_learning_rate_control_always`, the first epochs (as
    many as RETURNN's pretraining takes, counted from `network`, or `from_returnn_config`'s
    `pretrain_epochs`) run at `pretrain_learning_rate` and the next at `learning_rate`; RETURNN rebuilds
    the network, and the optimizer's state with it, each time the network grows:
    `gradtx.returnn.new_network` does that to the state
applied tf: pretrain_learning_rate
    with `pretrain`: the rate of the pretraining epochs (default `learning_rate`)
applied tf: use_learning_rate_control_always
    with `pretrain`: the control sets the pretraining epochs' rates too
applied tf: pretrain_greedy
    with `pretrain`: True trains only the newest layers in each pretraining epoch (refused: freeze the
    others with `gradtx.freeze` and drop the key); False / None train all
refused tf torch: grad_clip
    not a RETURNN key (RETURNN's PyTorch updater raises: the option is called gradient_clip_global_norm,
    or gradient_clip for clipping by value)
refused tf: extra_updates
    TF: functions updating variables after the step are not read from a config: apply them to the
    parameters yourself
refused tf: reset_updater_vars_mod_step
    TF: resets the optimizer state every N steps: re-init the transform's state yourself
refused tf: use_last_best_model
    TF: reloads the best earlier epoch's parameters and resets the optimizer state: do that in your
    training loop
refused tf: reinit_network_each_epoch
    TF: rebuilds the network, and with it the optimizer state, each epoch: re-init the transform's state
    each epoch
refused tf: train_in_eval -- TF: also trains on the eval datasets (at `eval_learning_rate`)
refused tf: use_horovod -- TF: PARALLEL
refused tf: horovod_scale_lr
    TF: multiplies the rate by the number of Horovod workers: multiply `learning_rate` yourself
refused torch: torch_distributed -- PyTorch: PARALLEL
ignored tf torch: learning_rate_file
    RETURNN's file of the epochs' rates and scores: gradtx keeps this history in the transform's state
    (checkpoint the state to resume)
applied tf: pretrain_repetitions pretrain_construction_algo
    with `pretrain`: how many epochs each step of the growing network runs, and how the steps are made:
    they give the number of pretraining epochs (a custom construction function is refused unless
    `pretrain_epochs` says the number)
ignored tf: pretrain_copy_output_layer
    whether a grown network keeps the output layer's parameters: the parameters are yours
ignored tf: eval_learning_rate -- only read with `train_in_eval`, which is refused
ignored tf: horovod_avg_grad horovod_reduce_type horovod_param_sync_step horovod_param_sync_time_diff
    only read with `use_horovod`, which is refused
ignored tf: horovod_dataset_distribution -- only read with `use_horovod`, which is refused
ignored tf: debug_grad_summaries -- TF: TensorBoard summaries only
    | NO_TORCH
ignored tf: deterministic_train -- TF: only the order the gradients are summed in
ignored tf: debug_add_check_numerics_ops -- TF: raises on NaN/inf; the numbers are the same
ignored tf: debug_save_updater_vars -- TF: also saves the optimizer slots
ignored tf: update_batch_size -- TF: read, but unused by RETURNN's engine
ignored torch: torch_optimizer_step torch_cuda_graph
    PyTorch: the same step, compiled or CUDA-graph captured
ignored torch: default_float_dtype
    PyTorch: the parameters' dtype, which is yours (gradtx keeps each parameter's dtype)
ignored torch: apply_cleanup_old_models_to_optim_states -- PyTorch: which optimizer files are kept
ignored tf torch: log_grad_norm -- logs the gradient norm
ignored tf torch: behavior_version
    only its refusal of the legacy optimizer flags (>= 2) concerns the update, and that is checked
ignored tf torch: stop_on_nonfinite_train_score
    stops training on a NaN/inf loss; the update is the same
ignored tf torch: check_learning_rates -- RETURNN's learning-rate demo tool only
ignored tf torch: network
    the model (a `#config` entry setting updater keys is refused; the layers' `updater_opts` and `L2` are
    passed to gradtx as arguments); with `pretrain` (TF), its layer graph gives the number of
    pretraining epochs
ignored tf torch: get_network get_model train_step forward_step model_outputs extern_data num_inputs
    + num_outputs target
    the model, which is yours
ignored tf torch: train dev eval eval_datasets batch_size max_seqs max_seq_length min_seq_length chunking
    + min_chunk_size cache_size window shuffle_batches seq_drop seq_drop_freq sort_dataset batching
    + online_shuffle_batches torch_dataloader_opts packed_batch_size torch_dataloader_shard_workers exclude
    + dataset_pipeline enforce_min_len1 inc_seq_length max_pad_size share_batches
    data: which sequences a step sees, not how it updates
ignored tf torch: device task model save_interval cleanup_old_models log log_verbosity log_batch_size
    + tf_log_memory_usage torch_log_memory_usage update_on_device tf_log_dir tf_session_opts use_tensorboard
    + tensorboard_opts wandb_opts torch_profile watch_memory PYTORCH_CUDA_ALLOC_CONF calculate_exp_loss
    + debug_print_layer_output_template store_metadata_mod_step store_tf_profile tf_run_options
    + wrap_tf_session check_unsupported_device reset_dev_memory_caches torch_watch_stall dry_run
    + debug_shell_before_train_loop debug_shell_in_runner debug_shell_in_runner_step
    files, devices, logging, debugging: not the update
ignored tf torch: num_epochs start_epoch start_batch epoch load load_epoch import_model_train_epoch1
    + preload_from_files load_model_post_hooks allow_random_model_init save_epoch1_initial_model
    + stop_for_resubmission_safety_factor stop_for_resubmission_when_low_time_left
    + restart_after_num_net_reinit
    the training loop's extent, start and restarts, which are yours
ignored tf torch: epoch_start epoch_end init_new_network_callback init_train_epoch_posthook
    hooks of RETURNN's engines around an epoch, which are yours
ignored tf torch: forward_output_layer forward_override_hdf_output forward_auto_split_batch_on_oom output_file
    + search_output_layer search_train_network_layers eval_use_train_flag ctc_prior_file sil_label_idx
    forwarding, search and evaluation: not the update
refused tf: distributed_tf -- TF: PARALLEL
"""
_SHARED = {"NO_TORCH": _NO_TORCH, "TORCH_FLAG": _TORCH_FLAG, "PARALLEL": _PARALLEL}


def _parse(table: str) -> dict[str, Key]:
    keys: dict[str, Key] = {}
    entries = re.split(r"\n(?=\S)", table.strip())
    for entry in entries:
        head, *lines = entry.splitlines()
        while lines and lines[0].strip().startswith("+ "):
            head += " " + lines.pop(0).strip()[2:]
        head, _, first = head.partition(" -- ")
        kind_backends, names = head.split(": ")
        kind, *backends = kind_backends.split()
        text = " ".join([first, *(line.strip() for line in lines)]).strip()
        note, _, elsewhere = (part.strip() for part in text.partition("| "))
        for shared, value in _SHARED.items():
            note, elsewhere = note.replace(shared, value), elsewhere.replace(shared, value)
        for name in names.split():
            keys[name] = Key(name, kind, frozenset(backends), note, elsewhere or None)
    return keys


KEYS: Mapping[str, Key] = _parse(_TABLE)
"""Every config key gradtx knows, by name."""

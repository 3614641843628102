"""`from_returnn_config`: a whole RETURNN config as the update RETURNN applies, rate control included."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import _inject
from gradtx.returnn import _common, _keys, _lr_control, _pretrain, _reader
from gradtx.returnn._common import BackendUpdate


class ReturnnState(NamedTuple):
    """State of `from_returnn_config`'s transform."""

    control: _lr_control.LearningRateControlState  # the epoch, its learning rate, the scores so far
    updater: _inject.InjectHyperparamsState  # the step's state; its `learning_rate` is the control's


def _backend_update(config: Mapping[str, Any], backend: str, options: dict[str, Any]) -> BackendUpdate:
    if backend == "tf":
        from gradtx.returnn import _tf_backend

        return _tf_backend.tf_update(config, l2=options["l2"])
    from gradtx.returnn import _torch_backend

    return _torch_backend.torch_update(
        config, param_groups=options["param_groups"], weight_decay_mask=options["weight_decay_mask"]
    )


def _refuse_options(backend: str, options: dict[str, Any]) -> None:
    other = {"tf": ("param_groups", "weight_decay_mask"), "torch": ("l2",)}[backend]
    given = [k for k in other if options[k] is not None]
    if given:
        raise TypeError(
            f"`from_returnn_config`: `{given[0]}` is for the "
            f"{'PyTorch' if backend == 'tf' else 'TensorFlow'} backend, and this config's backend is "
            f"{'TensorFlow' if backend == 'tf' else 'PyTorch'}."
        )


def from_returnn_config(
    config: Mapping[str, Any] | str | os.PathLike,
    backend: str | None = None,
    *,
    l2: Any = None,
    param_groups: Any = None,
    weight_decay_mask: Any = None,
    pretrain_epochs: int | None = None,
) -> _protocol.GradientTransformation:
    """The update a RETURNN config makes RETURNN apply, its learning-rate control included.

    RETURNN users arrive with a config file, not an optimizer dict. This reads the whole
    config -- a dict of its globals, or the path of a config file, which is parsed and never
    executed (values computed with literals, arithmetic, list operations and a few numpy
    constructors are evaluated by a restricted evaluator; anything else is refused by name if
    the update needs it) -- and builds what RETURNN's updater of that backend does each step,
    in RETURNN's order: gradient accumulation, noise, clipping, NaN/inf filtering, decoupled
    constraints, the optimizer (the `optimizer` dict or a legacy flag such as `adam = True`,
    with the backend's defaults: RETURNN-TF's `optimizer_epsilon` of 1e-16, PyTorch's
    `torch.optim` numbers and parameter groups), per-parameter rate multipliers. The learning
    rate is RETURNN's learning-rate control (`learning_rate`, `learning_rates`, the newbob
    family, `min_learning_rate`), kept in the state: call `end_epoch(state, scores)` after
    each epoch's evaluation and the next epoch's rate is RETURNN's; a state restored from a
    checkpoint continues the same control.

    Every key the update depends on is applied or refused with what to do; keys that do not
    change the update (devices, logging, datasets, the network) are accepted, as RETURNN accepts
    them. Where RETURNN runs without a key -- a close spelling of an updater key
    (`optimizer_epsiloon`: "did you mean `optimizer_epsilon`?"), a key of its Theano updater
    (`adadelta_decay`), a legacy flag after the first (`adam = True` with `nadam = True` is Adam)
    -- gradtx does too, with a `gradtx.returnn.ReturnnConfigWarning` that names it and says what
    RETURNN does. The keys by kind: `gradtx.returnn.keys("applied" | "ignored" | "refused", backend)`.

    Args:
      config: a RETURNN config: a dict of its globals, or the path of a config file (Python,
        JSON or RETURNN's line format).
      backend: "tf" or "torch"; default: the config's `backend` (or `use_tensorflow`), else
        RETURNN's default, TensorFlow.
      l2: TensorFlow backend, with `decouple_constraints = True`: the L2 of each parameter
        (RETURNN's layer option `L2`), a float for all or a pytree of floats (or `None`)
        like the params.
      param_groups: PyTorch backend: RETURNN's `param_groups_custom` as data, a sequence of
        `(mask, options)` pairs (a mask is a pytree of bools like the params or a function
        `(key_path, leaf) -> bool`; options are torch options and `learning_rate_multiplier`).
      weight_decay_mask: PyTorch backend: which params get the optimizer's `weight_decay`
        (a mask as above), instead of RETURNN's rule (not biases, not the modules of
        `weight_decay_modules_blacklist`, matched against the params' key paths).
      pretrain_epochs: TensorFlow backend, a config with `pretrain` and without
        `use_learning_rate_control_always`: how many epochs RETURNN's pretraining takes (it prints
        the number when training starts). They run at `pretrain_learning_rate`, the next one at
        `learning_rate`; when the network grows, `gradtx.returnn.new_network` gives the state for it.
        Default: counted from `network` as RETURNN's `pretrain.py` counts it, for its built-in
        construction algorithms (a custom one, or a network that could not be read, needs the number).

    Returns:
      A `GradientTransformation` with state `ReturnnState(control, updater)`.

    Raises:
      ReturnnConfigError: (a ValueError) for a key or value RETURNN's update cannot be built
        from, naming the key and what to write instead.
      TypeError: for an option of the other backend.

    Example:
        >>> import jax.numpy as jnp, gradtx.returnn
        >>> config = {"optimizer": {"class": "adam"}, "learning_rates": [0.01, 0.005], "gradient_clip": 1.0}
        >>> tx = gradtx.returnn.from_returnn_config(config)
        >>> state = tx.init(jnp.zeros(2))
        >>> updates, state = tx.update(jnp.array([3.0, -1.0]), state)  # epoch 1 at 0.01
        >>> state = gradtx.returnn.end_epoch(state, {"dev_score": 1.5})
        >>> round(float(gradtx.returnn.learning_rate(state)), 6)  # epoch 2's rate
        0.005
    """
    values = _reader.read_config(config)
    backend = _keys.resolve_backend(values, backend)
    options = {"l2": l2, "param_groups": param_groups, "weight_decay_mask": weight_decay_mask}
    _refuse_options(backend, options)
    _keys.check_keys(values, backend)
    control = _lr_control.LearningRateControl.from_config(
        values, _pretrain_epochs(values, backend, pretrain_epochs)
    )
    first = control.init()
    update = _backend_update(values, backend, options)
    inner = _inject.inject_hyperparams(update.factory)(learning_rate=float(first.learning_rate))

    def init_fn(params):
        return ReturnnState(control.init(), inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        hyperparams = state.updater.hyperparams | {"learning_rate": state.control.learning_rate}
        updater = state.updater._replace(hyperparams=hyperparams)
        # the epoch: RETURNN-torch's invalid-gradient count and a partial accumulation restart with one
        extra_args = {"epoch": state.control.epoch, **extra_args}
        new_updates, updater = inner.update(updates, updater, params, **extra_args)
        return new_updates, ReturnnState(state.control, updater)

    raw = _factory.composite(init_fn, update_fn, inner)
    return _factory.wrapped_once("from_returnn_config", raw)


def _pretrain_epochs(config: Mapping[str, Any], backend: str, given: int | None) -> int:
    """The epochs whose rates RETURNN's TF engine sets for pretraining (0: none), from `pretrain_epochs`."""
    fn = "from_returnn_config"
    pretrain = config.get("pretrain")
    active = backend == "tf" and (isinstance(pretrain, _reader.Unevaluated) or bool(pretrain))
    always = active and _keys.is_on(config.get("use_learning_rate_control_always"))
    if given is not None:
        _checks.check_int(fn, "pretrain_epochs", given, minimum=1)
        if not active or always:
            why = (
                "RETURNN's PyTorch engine does not pretrain"
                if backend == "torch" and pretrain
                else "the config has no `pretrain`"
                if not active
                else "with `use_learning_rate_control_always` the control sets every epoch's rate"
            )
            raise ValueError(f"`{fn}`: `pretrain_epochs` = {given}: {why}; drop the argument.")
        return given
    if not active or always or _pretraining_changes_no_rate(config):
        return 0
    counted = _pretrain.pretrain_epochs(config)
    if counted is None:
        raise _common.ReturnnConfigError(
            f"`{fn}`: config `pretrain` = {pretrain!r}: RETURNN's TF engine runs the pretraining epochs at "
            "`pretrain_learning_rate` and the next one at `learning_rate`, before its learning-rate control "
            "takes over; how many there are follows from the network and the construction algorithm, "
            "which gradtx counts only for a readable `network` and a built-in algorithm "
            f"({_why_uncounted(config)}): "
            "pass `pretrain_epochs=` that number (RETURNN prints it when training starts), or set "
            "`use_learning_rate_control_always = True` (the control sets every epoch's rate)."
        )
    return counted


def _why_uncounted(config: Mapping[str, Any]) -> str:
    for key in ("pretrain", "pretrain_construction_algo", "network"):
        if isinstance(config.get(key), _reader.Unevaluated):
            return f"`{key}` could not be read"
    return "RETURNN's pretraining would stop on this network or these options"


def _pretraining_changes_no_rate(config: Mapping[str, Any]) -> bool:
    """A constant control whose rate is `learning_rate` at every epoch, pretraining's rate too: the number of
    pretraining epochs changes nothing."""
    control = _lr_control.LearningRateControl.from_config(config, pretrain_epochs=1)
    rates = {control.pretrain_learning_rate, *(rate for _, rate in control.learning_rates)}
    return control.kind == "constant" and rates == {control.learning_rate}


def new_network(tx: _protocol.GradientTransformation, state: ReturnnState, params: Any) -> ReturnnState:
    """The state for an epoch whose network RETURNN builds anew: the optimizer's state made afresh for
    `params`, the learning-rate control's kept.

    RETURNN's TF engine builds a new graph, with a new updater, whenever the network changes: at each
    pretraining epoch that grows it, at the first epoch after pretraining, with
    `reinit_network_each_epoch`. The parameters carry over (new layers start from their initializer),
    the optimizer's variables -- Adam's moments and step, momenta, accumulators -- start anew, and the
    learning-rate control goes on. Call this at the start of such an epoch, with the grown parameters.

    Args:
      tx: `from_returnn_config`'s transform.
      state: its state at the end of the previous epoch (after `end_epoch`).
      params: the new network's parameters (any tree: it may have more leaves, or other shapes).

    Returns:
      The `ReturnnState` to train the new network's first epoch with.

    Example:
        >>> import jax.numpy as jnp, gradtx.returnn
        >>> tx = gradtx.returnn.from_returnn_config({"adam": True, "learning_rate": 0.01})
        >>> state = tx.init({"w": jnp.zeros(2)})
        >>> _, state = tx.update({"w": jnp.ones(2)}, state)
        >>> state = gradtx.returnn.end_epoch(state, {"dev_score": 1.0})
        >>> state = gradtx.returnn.new_network(tx, state, {"w": jnp.zeros(2), "w2": jnp.zeros(3)})
        >>> int(state.control.epoch), sorted(gradtx.get_slot(state, "m"))
        (2, ['w', 'w2'])
    """
    if not isinstance(state, ReturnnState):
        raise TypeError(
            f"`new_network`: `state` must be a `ReturnnState` (from_returnn_config's), got {type(state)}."
        )
    return ReturnnState(state.control, tx.init(params).updater)


def end_epoch(state: ReturnnState, scores: Any) -> ReturnnState:
    """The state for the next epoch: the epoch's scores recorded, the learning rate RETURNN sets next.

    Args:
      state: the state of `from_returnn_config`'s transform at the end of an epoch.
      scores: the epoch's evaluation, as RETURNN's engine records it: a dict such as
        `{"dev_score": 1.23, "dev_error": 0.31}` (the control picks the key RETURNN picks:
        `learning_rate_control_error_measure`, else `dev_score`, ...), a float, or `None`
        for an epoch without evaluation.

    Returns:
      The `ReturnnState` for the next epoch (the input is not changed).
    """
    if not isinstance(state, ReturnnState):
        raise TypeError(
            f"`end_epoch`: `state` must be a `ReturnnState` (from_returnn_config's), got {type(state)}."
        )
    return state._replace(control=_lr_control.end_epoch(state.control, scores))


def learning_rate(state: ReturnnState) -> np.float64 | jax.Array:
    """The learning rate of the current epoch, as RETURNN's learning-rate control set it.

    RETURNN keeps its rates as Python floats; so does the state (as the float64's bits), and this
    returns that float64 to the bit: 0.001 is 0.001, not float32's 0.0010000000474974513. The update
    steps with it rounded once to the parameters' float32, as TensorFlow's float32 rate variable and
    torch.optim's float32 kernels take it. Under `jax.jit`, where the state is traced, it returns that
    float32 rate.

    Example:
        >>> import jax.numpy as jnp, gradtx.returnn
        >>> tx = gradtx.returnn.from_returnn_config({"adam": True, "learning_rate": 0.001})
        >>> gradtx.returnn.learning_rate(tx.init(jnp.zeros(2))) == 0.001
        np.True_
    """
    if not isinstance(state, ReturnnState):
        raise TypeError(
            f"`learning_rate`: `state` must be a `ReturnnState` (from_returnn_config's), got {type(state)}."
        )
    if isinstance(state.control.rates, jax.core.Tracer):
        return state.control.learning_rate
    return np.float64(state.control.rate_history()[-1])

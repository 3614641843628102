"""RETURNN's PyTorch-backend update: `Updater.step` and `create_optimizer`, and the engine's accumulation.

What RETURNN's `returnn/torch/updater.py` and the training loop of `returnn/torch/engine.py`
do to the gradients, in their order: gradient accumulation (summed, an optimizer step every
`accum_grad_multiple_step`-th step), `gradient_noise`, `gradient_clip` (`clip_grad_value_`),
`gradient_clip_global_norm` (`clip_grad_norm_`), the invalid-gradient check
(`num_allowed_consec_invalid_gradient_steps`) and the grad scaler's skip of non-finite
gradients, then `optimizer.step()` over torch's parameter groups (the weight-decay split or
custom groups, each at `learning_rate * learning_rate_multiplier`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gradtx._core import chain as _chain
from gradtx._core import protocol as _protocol
from gradtx.combinators import _clip, _gradients, _masking
from gradtx.returnn import _torch_groups, _torch_optim, _torch_step
from gradtx.returnn._common import BackendUpdate, ReturnnConfigError

KEYS = frozenset(
    {
        "optimizer",
        "gradient_noise",
        "gradient_clip",
        "gradient_clip_global_norm",
        "num_allowed_consec_invalid_gradient_steps",
        "accum_grad_multiple_step",
        "decouple_constraints",
        "torch_amp",
        "grad_scaler",
        "random_seed",
    }
)
"""The config keys `torch_update` reads and applies."""

REFUSED = {
    **{
        key: "RETURNN's PyTorch updater raises NotImplementedError for it (a TensorFlow-backend option): "
        "remove it, or use the TensorFlow backend"
        for key in (
            "gradient_clip_norm",
            "gradient_clip_avg_norm",
            "global_norm_tag",
            "gradient_clip_global_norm_tag",
            "grad_norm_to_clip_to_zero",
            "maximize_grad_norm",
            "debug_grad_summaries",
            "gradient_nan_inf_filter",
        )
    },
    "grad_clip": "RETURNN raises: the option is called gradient_clip_global_norm (or other options)",
    "dynamic_learning_rate": "a Python function of the step, and a config is read, not executed: use the "
    "learning-rate control keys (learning_rate, learning_rates, newbob), or build the transform yourself "
    "around a gradtx.schedules schedule",
}
"""Config keys the PyTorch backend refuses when set (nonzero), with the reason."""

_GRAD_SCALER_OPTIONS = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")


def _torch_class(name: str) -> _torch_optim.TorchOptimizer:
    """The torch.optim class `name` as a gradtx factory (`_torch_optim.torch_class`)."""
    return _torch_optim.torch_class(name)


def _number(key: str, value: Any, *, minimum: float = 0.0) -> float:
    """`config.float(key)`: a number >= `minimum`, else refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReturnnConfigError(f"config `{key}`: expected a number, got {value!r}.")
    if not value >= minimum:
        raise ReturnnConfigError(f"config `{key}`: must be >= {minimum}, got {value!r}.")
    return float(value)


def _refuse_set_keys(config: Mapping[str, Any]) -> None:
    for key, why in REFUSED.items():
        if config.get(key):
            raise ReturnnConfigError(f"config `{key}` = {config[key]!r} is refused: {why}.")


def _optimizer_options(config: Mapping[str, Any]) -> tuple[str, _torch_optim.TorchOptimizer, dict[str, Any]]:
    """`create_optimizer`'s reading of `optimizer`: (class name, factory, torch options, `eps` renamed)."""
    opts = config.get("optimizer")
    if opts is None:
        raise ReturnnConfigError(
            "config `optimizer`: config field 'optimizer' needs to be set explicitely for the Torch backend "
            "(RETURNN's message), e.g. optimizer = {'class': 'adamw', 'weight_decay': 0.01}."
        )
    if not isinstance(opts, Mapping):
        hint = f" Write {{'class': {opts!r}}}." if isinstance(opts, str) else ""
        raise ReturnnConfigError(
            f"config `optimizer` = {opts!r}: 'optimizer' must of type dict, callable or "
            f"torch.optim.Optimizer instance (RETURNN's message); a config is read, not executed, so "
            f"gradtx takes the dict form.{hint}"
        )
    if "class" not in opts:
        raise ReturnnConfigError(
            "config `optimizer`: 'class' field of 'optimizer' dict was not set (use e.g. 'SGD', 'Adam', ...)."
        )
    opts = dict(opts)
    name = opts.pop("class")
    if not isinstance(name, str):
        raise ReturnnConfigError(
            f"config `optimizer['class']` = {name!r}: give the torch.optim class by its name, e.g. "
            f"'adamw' or 'returnn.torch.optim.lion.Lion' (a config is read, not executed)."
        )
    factory = _torch_class(name)
    if "eps" in factory.keys and "epsilon" in opts:
        opts["eps"] = opts.pop("epsilon")
    if "learning_rate" in opts or "lr" in opts:
        raise ReturnnConfigError(
            "config `optimizer`: 'learning_rate' should be set outside of the 'optimizer' dict "
            "(RETURNN's message): set the config's `learning_rate`."
        )
    if "learning_rate_multiplier" in opts:
        raise ReturnnConfigError(
            "config `optimizer['learning_rate_multiplier']`: RETURNN reads it from a parameter group only "
            "(torch.optim would refuse it here); give it in "
            "`param_groups=[(mask, {'learning_rate_multiplier': ...}), ...]`."
        )
    return name, factory, opts


def _refuse_callable_option(opts: dict[str, Any], key: str, instead: str) -> None:
    if opts.get(key) is not None:
        raise ReturnnConfigError(
            f"config `optimizer['{key}']`: a Python function, and a config is read, not executed; {instead}."
        )


def _groups(
    config: Mapping[str, Any],
    name: str,
    factory: _torch_optim.TorchOptimizer,
    opts: dict[str, Any],
    param_groups: Any,
    mask: Any,
) -> tuple[list[dict[str, Any]], Callable[[Any], Any] | None]:
    """`_get_optimizer_param_groups`: the groups' options (over the dict's), labels function (None: one)."""
    _refuse_callable_option(
        opts, "param_groups_custom", "give the groups as `param_groups=[(mask, options), ...]`"
    )
    wd_keys = ("weight_decay_modules_blacklist", "weight_decay_custom_include_check")
    if param_groups is not None:
        if mask is not None:
            raise TypeError(
                "`from_returnn_config`: `weight_decay_mask` and `param_groups` exclude each other (RETURNN's "
                "custom groups replace its weight-decay split): give `weight_decay` in the groups' options."
            )
        groups = _torch_groups.check_param_groups(param_groups)
        bad = [k for k in wd_keys if k in opts]
        if bad:
            raise ReturnnConfigError(
                f"config `optimizer['{bad[0]}']`: with custom param groups RETURNN does not read it and "
                f"torch.optim.{name} refuses it; give `weight_decay` in the groups' options instead."
            )
        options = []
        for i, (_, group) in enumerate(groups):
            for key in ("lr", "learning_rate"):
                if key in group:
                    raise ReturnnConfigError(
                        f"`from_returnn_config`: `param_groups[{i}]` sets {key!r}, which RETURNN overwrites "
                        f"with the learning rate times the group's 'learning_rate_multiplier': set that."
                    )
            if "eps" in factory.keys and "epsilon" in group:
                group["eps"] = group.pop("epsilon")
            options.append({**opts, **group})
        masks = [m for m, _ in groups]
        return options, lambda params: _torch_groups.group_labels(params, masks)
    decouple = config.get("decouple_constraints", True)
    if decouple is not None and not decouple:
        raise ReturnnConfigError(
            "config `decouple_constraints` = False: L2/weight_decay constraints are decoupled in PyTorch, "
            "but decouple_constraints=False was explicitly specified in the config (RETURNN's assertion); "
            "remove it."
        )
    weight_decay = opts.get("weight_decay", 0.0)
    if "weight_decay" not in factory.keys and "weight_decay" in opts:
        raise ReturnnConfigError(
            f"config `optimizer['weight_decay']`: weight_decay not accepted by the chosen optimizer {name!r} "
            f"(RETURNN's assertion); remove it."
        )
    if "weight_decay" not in factory.keys or not weight_decay:
        for key in wd_keys:
            if key in opts:
                raise ReturnnConfigError(
                    f"config `optimizer['{key}']`: RETURNN reads it only when the optimizer takes a nonzero "
                    f"'weight_decay' (this one has {weight_decay!r}), and otherwise passes it to torch.optim."
                    f"{name}, which refuses it; remove it or set 'weight_decay'."
                )
        if mask is not None:
            raise TypeError(
                f"`from_returnn_config`: `weight_decay_mask` is given, but RETURNN splits the params by "
                f"weight decay only when the `optimizer` dict sets a nonzero 'weight_decay' (it has "
                f"{weight_decay!r}; "
                f"torch's own default then applies to all params); set it in the dict."
            )
        return [opts], None
    _refuse_callable_option(opts, "weight_decay_custom_include_check", "give `weight_decay_mask=` instead")
    opts.pop("weight_decay_custom_include_check", None)
    blacklist = _torch_groups.blacklist_names(opts.pop("weight_decay_modules_blacklist", None))
    if mask is not None:
        _torch_groups.check_mask("weight_decay_mask", mask)
    labels = lambda params: _torch_groups.weight_decay_labels(params, blacklist, mask)  # noqa: E731
    return [opts, {**opts, "weight_decay": 0.0}], labels


def _int_key(config: Mapping[str, Any], key: str, default: Any) -> Any:
    value = config.get(key, default)
    if value is not default and (isinstance(value, bool) or not isinstance(value, int)):
        raise ReturnnConfigError(
            f"config `{key}` = {value!r}: expected an int (a function is not read: a config is read, "
            f"not executed)."
        )
    return value


def _grad_scaler(config: Mapping[str, Any]) -> bool:
    """Whether the engine makes a `GradScaler` (`torch_amp` set, or `grad_scaler` a dict) that is enabled."""
    amp = config.get("torch_amp")
    scaler = config.get("grad_scaler", "unset")
    if isinstance(amp, Mapping):
        unknown = sorted(set(amp) - {"dtype", "grad_scaler"})
        if unknown:
            raise ReturnnConfigError(
                f"config `torch_amp`: unknown option {unknown[0]!r}"
                f"{_torch_groups.close_names(unknown[0], ['dtype', 'grad_scaler'])}; RETURNN reads 'dtype' "
                f"and 'grad_scaler'."
            )
        scaler = amp.get("grad_scaler", scaler)
    elif amp is not None and not isinstance(amp, str):
        raise ReturnnConfigError(
            f"config `torch_amp` = {amp!r}: Invalid type for torch_amp (a dtype name or a dict)."
        )
    if scaler == "unset":
        scaler = {} if amp is not None else None
    if scaler is None:
        return False
    if not isinstance(scaler, Mapping):
        raise ReturnnConfigError(
            f"config `grad_scaler` = {scaler!r}: expected a dict of GradScaler options or None."
        )
    for key in scaler:
        if key not in _GRAD_SCALER_OPTIONS:
            raise ReturnnConfigError(
                f"config `grad_scaler`: GradScaler takes no option {key!r}"
                f"{_torch_groups.close_names(key, _GRAD_SCALER_OPTIONS)}; it takes "
                f"{', '.join(_GRAD_SCALER_OPTIONS)}."
            )
    return bool(scaler.get("enabled", True))


def torch_update(
    config: Mapping[str, Any], *, param_groups: Any = None, weight_decay_mask: Any = None
) -> BackendUpdate:
    """RETURNN's PyTorch-backend update for `config`: `factory(learning_rate)` is the whole step.

    The step is what the torch engine and `Updater` do, in their order (see the module
    docstring). `optimizer` is a dict with the torch.optim `class` and its options (`epsilon`
    is renamed to `eps` when the class takes `eps`). When the class takes a nonzero
    `weight_decay` from the dict, biases (a last key ending in "bias", or haiku's "b") and the
    params of `weight_decay_modules_blacklist` modules (matched by key path, see
    `_torch_groups.is_blacklisted`) get `weight_decay=0`, unless `weight_decay_mask` says which
    params decay. `param_groups` (RETURNN's `param_groups_custom` as data: `(mask, options)`
    pairs) replaces that split; each group's options (over the dict's) may set
    `learning_rate_multiplier`. `gradient_noise` draws torch's truncated normal (std
    `gradient_noise`, cut at 2 std) from a key made of `random_seed` (default 42): the same
    distribution as torch, not torch's draws. Pass the extra argument `epoch` (an int) to
    `update` to reset the invalid-gradient count and drop a partial accumulation when the
    epoch changes, as the engine does.

    Args:
      config: the config's globals.
      param_groups: a sequence of `(mask, options)` pairs; a mask is a function `(key_path, leaf)
        -> bool`, a tree of bools like the params (or a prefix of it), or a list of key-path
        patterns; every param in exactly one group.
      weight_decay_mask: which params get the optimizer's `weight_decay` (a mask as above),
        instead of RETURNN's rule.

    Returns:
      A `BackendUpdate`.

    Raises:
      ReturnnConfigError: for a config value RETURNN's PyTorch backend refuses, or gradtx cannot
        read, naming the key and what to write instead.
      TypeError: for a malformed `param_groups` / `weight_decay_mask`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.returnn._torch_backend import torch_update
        >>> update = torch_update({"optimizer": {"class": "sgd"}, "gradient_clip": 1.0})
        >>> tx = update.factory(0.1)
        >>> out, _ = tx.update(jnp.array([3.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> out
        Array([-0.1 ,  0.05], dtype=float32)
    """
    _refuse_set_keys(config)
    name, factory, opts = _optimizer_options(config)
    options, labels = _groups(config, name, factory, opts, param_groups, weight_decay_mask)
    noise = _number("gradient_noise", config.get("gradient_noise", 0.0))
    clip_value = _number("gradient_clip", config.get("gradient_clip", 0.0))
    clip_norm = _number("gradient_clip_global_norm", config.get("gradient_clip_global_norm", 0.0))
    allowed = _int_key(config, "num_allowed_consec_invalid_gradient_steps", None)
    if allowed is not None and allowed < 0:
        raise ReturnnConfigError(
            f"config `num_allowed_consec_invalid_gradient_steps` = {allowed!r}: must be >= 0 "
            f"(or None: no check)."
        )
    every_k = _int_key(config, "accum_grad_multiple_step", 1)
    seed = _int_key(config, "random_seed", 42)
    scaler = _grad_scaler(config)
    multipliers = [
        _number("learning_rate_multiplier", o.pop("learning_rate_multiplier", 1.0)) for o in options
    ]
    # the rate torch.optim is constructed with (RETURNN's `learning_rate`): Lion's decoupled decay reads it
    init = {"init_lr": config.get("learning_rate", 1.0)}
    for i, o in enumerate(options):  # fail now, not at the first step: build each group's optimizer once
        try:
            factory(lr=1.0, **init, **o)
        except (TypeError, ValueError) as e:
            where = "config `optimizer`" if param_groups is None else f"`param_groups[{i}]` over `optimizer`"
            raise ReturnnConfigError(f"{where}: {e}") from e

    def build(learning_rate: Any) -> _protocol.GradientTransformation:
        txs = {
            i: factory(lr=learning_rate if m == 1.0 else learning_rate * m, **init, **o)
            for i, (m, o) in enumerate(zip(multipliers, options, strict=True))
        }
        inner = txs[0] if labels is None else _masking.partition(txs, labels)
        pre = [_gradients.add_noise(noise, seed)] if noise else []
        pre += [_clip.clip(clip_value)] if clip_value else []
        step = _torch_step.updater_step(
            inner,
            pre=_chain.chain(*pre) if pre else None,
            clip_norm=clip_norm,
            allowed_invalid=allowed,
            grad_scaler=scaler,
        )
        return _torch_step.accumulate(step, every_k) if every_k > 1 else step

    return BackendUpdate(factory=build, keys=KEYS)

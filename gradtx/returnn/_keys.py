"""Every RETURNN config key that concerns the update: applied by gradtx, ignored (it does not change the
update), or refused (it does, and gradtx cannot take it from a config), per backend.

Read from RETURNN's `tf/updater.py`, `torch/updater.py`, `torch/engine.py`, `tf/engine.py`,
`learning_rate_control.py` and `pretrain.py`. A key not in `KEYS` is one RETURNN's updater never reads (a
dataset, the network, search, debugging, a helper value), so it is accepted, as RETURNN accepts it: without
a word, unless its name is a close spelling of a key the update reads (`optimizer_epsiloon`) or a key of
RETURNN's Theano updater that its TensorFlow and PyTorch updaters no longer read (`adadelta_decay`), or
carries a prefix of the learning-rate control's keys (`newbob_`); then a `ReturnnConfigWarning` says that
RETURNN runs without it, and so does gradtx.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from gradtx._core.spelling import edit_distance
from gradtx.returnn import _common
from gradtx.returnn._common import ReturnnConfigError
from gradtx.returnn._key_table import BACKEND_NAMES as _NAMES
from gradtx.returnn._key_table import BACKENDS, KEYS, KINDS
from gradtx.returnn._reader import CLASS_DEFINITION, FUNCTION_DEFINITION, Unevaluated

THEANO_KEYS = {
    "adadelta_decay": "the decay of Theano's Adadelta (RETURNN-TF's Adadelta keeps TF's 0.95)",
    "adadelta_offset": "Theano's Adadelta offset",
    "adam_fit_learning_rate": "Theano's Adam learning-rate fit",
    "adasecant": "Theano's AdaSecant optimizer (RETURNN-TF builds the optimizer the other keys choose)",
    "gradient_clip_pre_mean": "Theano's clipping before the mean over the batch",
    "max_norm": "Theano's weight-norm constraint",
    "mean_normalized_sgd": "Theano's mean-normalized SGD",
    "momentum2": "Theano's second momentum",
    "nesterov_momentum": "Theano's Nesterov momentum (RETURNN-TF's momentum is TF's plain one)",
    "smorms3": "Theano's SMORMS3 optimizer (RETURNN-TF builds the optimizer the other keys choose)",
    "update_clip": "Theano's clipping of the update",
    "update_multiple_models": "Theano's training of several models at once",
}
"""Keys of RETURNN's Theano updater that its TensorFlow and PyTorch updaters do not read: what they were."""


def is_on(value: Any) -> bool:
    """Whether a flag's value is RETURNN's "on" (`config.is_true`, `config.bool`): a true value, or a
    value that could not be read (it is there)."""
    return isinstance(value, Unevaluated) or _is_set(value, {})


def _is_set(value: Any, config: Mapping[str, Any]) -> bool:
    """Whether a value is RETURNN's "on" (its readers default to 0 / False / None for off)."""
    if value is None or isinstance(value, (bool, int, float)):
        return bool(value)
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) > 0
    return True  # Unevaluated, a function, an array: set


_MATTERS: dict[str, Callable[[Any, Mapping[str, Any]], bool]] = {
    "optimizer_epsilon": lambda v, c: v is not None,
    "torch_distributed": lambda v, c: v is not None,
    "horovod_scale_lr": lambda v, c: _is_set(v, c) and _is_set(c.get("use_horovod"), c),
}
"""Whether a refused key's value changes the update (default `_is_set`)."""


def keys_of_kind(kind: str, backend: str | None = None) -> list[str]:
    """The config keys of one kind, sorted, for the docs.

    Args:
      kind: "applied", "ignored" or "refused".
      backend: "tf" or "torch"; None: keys of that kind on either backend.

    Returns:
      The sorted key names.

    Raises:
      ValueError: for an unknown kind or backend.

    Example:
        >>> keys_of_kind("refused", "torch")[:3]
        ['adadelta', 'adagrad', 'adam']
    """
    if kind not in KINDS:
        raise ValueError(f"`keys_of_kind`: `kind` must be one of {KINDS}, got {kind!r}.")
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"`keys_of_kind`: `backend` must be one of {BACKENDS} or None, got {backend!r}.")
    backends = BACKENDS if backend is None else (backend,)
    return sorted(name for name, key in KEYS.items() if any(key.on(b)[0] == kind for b in backends))


_BACKEND_ARG = {"tf": "tf", "tensorflow": "tf", "torch": "torch", "pytorch": "torch"}
_BACKEND_CONFIG = {"tensorflow": "tf", "tensorflow-net-dict": "tf", "torch": "torch"}
_ALIASES = {"tf": "tensorflow", "pytorch": "torch"}


def resolve_backend(config: Mapping[str, Any], backend: str | None) -> str:
    """The backend whose updater the config describes: "tf" or "torch".

    From `backend` if given, else the config's `backend` (RETURNN's values "tensorflow",
    "tensorflow-net-dict", "torch"), else its `use_tensorflow = True`, else "tf". (RETURNN's own
    entry point raises for a config without either; its TF engine, used directly, falls back to
    TensorFlow, as here.)

    Args:
      config: the config's values (`read_config`'s result).
      backend: "tf"/"tensorflow" or "torch"/"pytorch", or None.

    Returns:
      "tf" or "torch".

    Raises:
      ReturnnConfigError: for the jax backend, an unknown or unreadable `backend` value, or an
        argument that contradicts the config.

    Example:
        >>> resolve_backend({"backend": "torch"}, None), resolve_backend({}, None)
        ('torch', 'tf')
    """
    chosen = None
    if backend is not None:
        chosen = _BACKEND_ARG.get(str(backend).lower())
        if chosen is None:
            raise ReturnnConfigError(
                f"`from_returnn_config`: `backend` = {backend!r}: gradtx reproduces RETURNN's TensorFlow and "
                f'PyTorch updaters; pass "tf" or "torch" ({_jax_or_close(str(backend), _BACKEND_ARG)}).'
            )
    from_config = _config_backend(config)
    if chosen is not None and from_config is not None and chosen != from_config:
        raise ReturnnConfigError(
            f"`from_returnn_config`: `backend` = {backend!r} contradicts the config, whose `backend` / "
            f"`use_tensorflow` selects {_NAMES[from_config]}: drop the argument or fix the config."
        )
    return chosen or from_config or "tf"


def _config_backend(config: Mapping[str, Any]) -> str | None:
    value = config.get("backend")
    if isinstance(value, Unevaluated):
        raise ReturnnConfigError(
            f"`from_returnn_config`: the config's `backend` could not be read: {value!r}."
        )
    if value:  # RETURNN: config.value("backend", None), a dict lookup of the str
        chosen = _BACKEND_CONFIG.get(str(value))
        if chosen is None:
            raise ReturnnConfigError(
                f"`from_returnn_config`: config `backend` = {value!r}: RETURNN's values are "
                f"{sorted(_BACKEND_CONFIG) + ['jax']} (RETURNN raises KeyError for others), and gradtx "
                "reproduces the TensorFlow and PyTorch updaters "
                f"({_jax_or_close(str(value), _BACKEND_CONFIG)})."
            )
        return chosen
    use_tf = config.get("use_tensorflow")
    if isinstance(use_tf, Unevaluated):
        raise ReturnnConfigError(
            f"`from_returnn_config`: the config's `use_tensorflow` could not be read: {use_tf!r}."
        )
    return "tf" if _is_set(use_tf, config) else None


def _jax_or_close(value: str, known: Mapping[str, str]) -> str:
    if value.lower() == "jax":
        return "RETURNN's jax backend has no updater of its own to reproduce"
    close = [_ALIASES[value.lower()]] if value.lower() in _ALIASES and known is _BACKEND_CONFIG else []
    close = close or difflib.get_close_matches(value.lower(), list(known), n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}?" if close else "see RETURNN's `backend` values"


def check_keys(config: Mapping[str, Any], backend: str) -> None:
    """Refuse a config whose update gradtx cannot build; accept everything else, as RETURNN does.

    Refused, all problems in one error: (a) a refused key set to a value that matters
    (`gradient_clip_norm = 0` is RETURNN's "off" and passes), (b) a key the update reads whose value
    could not be read (`Unevaluated`), (c) an applied key with a value gradtx refuses (a norm tag, a
    `dynamic_learning_rate` function, a function `accum_grad_multiple_step`, PyTorch's
    `decouple_constraints = False` or missing `optimizer`, TF legacy flags with behavior_version >= 2).
    Unknown keys are accepted: with a `ReturnnConfigWarning` when the name is a close spelling of a key
    the update reads ("did you mean ...?") or a key of RETURNN's Theano updater (`THEANO_KEYS`), as
    RETURNN runs without them; without a word otherwise (datasets, the network, helper values).

    Args:
      config: the config's values (`read_config`'s result).
      backend: "tf" or "torch".

    Raises:
      ReturnnConfigError: listing each refused key with its value, why, and what to do.

    Example:
        >>> check_keys({"optimizer": {"class": "adam"}, "gradient_clip_norm": 0, "train": {}}, "tf")
        >>> check_keys({"optimizer": {"class": "adam"}, "gradient_clip_norm": 1.0}, "torch")
        Traceback (most recent call last):
        ...
        gradtx.returnn._common.ReturnnConfigError: `from_returnn_config`: the config cannot be read as \
RETURNN's PyTorch update:
          `gradient_clip_norm` = 1.0: refused on the PyTorch backend: RETURNN's PyTorch updater raises \
NotImplementedError for it (a TensorFlow-backend option).
    """
    if backend not in BACKENDS:
        raise ValueError(f"`check_keys`: `backend` must be one of {BACKENDS}, got {backend!r}.")
    problems = [p for name in config for p in _problems(name, config[name], config, backend)]
    problems += _config_problems(config, backend)
    if problems:
        raise ReturnnConfigError(
            f"`from_returnn_config`: the config cannot be read as RETURNN's {_NAMES[backend]} update:\n  "
            + "\n  ".join(problems)
        )


def _read_by_update(backend: str) -> list[str]:
    """The keys RETURNN's updater (and learning-rate control) of `backend` reads: applied or refused there."""
    return [name for name, key in KEYS.items() if key.on(backend)[0] != "ignored"]


_OWNED = ("newbob_", "learning_rate_control_")
"""Prefixes of the learning-rate control's keys: an unknown key with one is meant for it."""


def _unknown(name: str, value: Any, backend: str) -> None:
    """A key RETURNN's updater does not read: a warning where the user may have meant one it does."""
    head = f"`from_returnn_config`: config `{name}` = {_short(value)}"
    if name in THEANO_KEYS:
        _common.runs_without(
            f"{head}: {THEANO_KEYS[name]}, a key of RETURNN's Theano updater that its {_NAMES[backend]} "
            "updater does not read; RETURNN runs without it, and so does gradtx."
        )
        return
    read = _read_by_update(backend)
    # a typo is 1 or 2 edits (`optimizer_epsiloon`, `learning_rate_contorl`); a helper named after a key is
    # more (`bn_momentum`), and so is any name whose length differs by more than 2
    close = [
        k
        for k in read
        if abs(len(name) - len(k)) <= 2 and edit_distance(name, k, swaps=True) <= (2 if len(k) >= 8 else 1)
    ]
    if not close and name.startswith(_OWNED):  # the learning-rate control's own prefixes
        close = difflib.get_close_matches(name, read, n=1, cutoff=0.0)
    if close and not _is_definition(value):
        _common.runs_without(
            f"{head}: RETURNN's {_NAMES[backend]} updater does not read it (did you mean `{close[0]}`?); "
            "RETURNN runs without it, and so does gradtx."
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _problems(name: str, value: Any, config: Mapping[str, Any], backend: str) -> list[str]:
    head = f"`{name}` = {_short(value)}"
    key = KEYS.get(name)
    if key is None:
        _unknown(name, value, backend)
        return []
    kind, note = key.on(backend)
    if kind == "ignored":
        return []
    if kind == "refused":
        if _MATTERS.get(name, _is_set)(value, config):
            return [f"{head}: refused on the {_NAMES[backend]} backend: {note}."]
        return []
    if isinstance(value, Unevaluated) and name in _PRETRAIN_COUNT:  # `from_returnn_config` asks for the count
        return []
    if isinstance(value, Unevaluated):
        return [f"{head}: the update reads it, but it could not be read from the config (line {value.line}: "
                f"{value.reason}); write the value itself"]  # fmt: skip
    reason = _applied_value_problem(name, value, backend)
    return [f"{head}: {reason}."] if reason else []


_PRETRAIN_COUNT = ("pretrain", "pretrain_repetitions", "pretrain_construction_algo")


def _is_definition(value: Any) -> bool:
    """A function or class of the config (RETURNN reads those only through known keys)."""
    if isinstance(value, Unevaluated):
        return value.reason in (FUNCTION_DEFINITION, CLASS_DEFINITION)
    return callable(value)


def _applied_value_problem(name: str, value: Any, backend: str) -> str | None:
    if name in ("global_norm_tag", "gradient_clip_global_norm_tag") and value is not None:
        return (
            "a norm tag selects the gradients of the network's layers carrying it, and gradtx has no "
            "layers: clip the parameters' subtree with gradtx's clipping and a mask instead, and drop the key"
        )
    if name == "dynamic_learning_rate" and value is not None and not isinstance(value, dict):
        why = "a function" if callable(value) else "not the dict form"
        return f"{why}: a config is read, not executed; use the dict form or a gradtx schedule"
    if name == "accum_grad_multiple_step" and callable(value):
        return "a function of the step: a config is read, not executed; write a number"
    greedy = value.get("greedy") if name == "pretrain" and isinstance(value, Mapping) else value
    if (
        name in ("pretrain", "pretrain_greedy")
        and greedy
        and (name == "pretrain_greedy" or greedy is not value)
    ):
        return (
            "greedy pretraining trains only the newest layers in each pretraining epoch, and gradtx has no "
            "layers: freeze the others with `gradtx.freeze` and drop the key"
        )
    if name == "decouple_constraints" and backend == "torch" and value is False:
        return "RETURNN's PyTorch updater asserts it is not False (its weight decay is decoupled): drop it"
    return None


def _config_problems(config: Mapping[str, Any], backend: str) -> list[str]:
    """Refusals that concern several keys together."""
    problems = []
    optimizer = config.get("optimizer")
    if backend == "torch" and optimizer is None:
        problems.append(
            "`optimizer` is not set: RETURNN's PyTorch backend requires it (\"config field 'optimizer' needs "
            'to be set explicitly"): write e.g. `optimizer = {"class": "adam"}`'
        )
    version = config.get("behavior_version", 0)
    if backend == "tf" and not optimizer and isinstance(version, int) and version >= 2:
        legacy = [
            k
            for k in ("adam", "nadam", "adadelta", "adagrad", "rmsprop", "momentum")
            if _is_set(config.get(k), config)
        ]
        if legacy:
            problems.append(
                f"`{legacy[0]}` = {_short(config[legacy[0]])} with behavior_version = {version}: RETURNN "
                "raises (\"Please define an optimizer specifically via the 'optimizer=...' "
                'parameter"): write `optimizer = {...}`'
            )
    network = config.get("network")
    overrides = network.get("#config") if isinstance(network, dict) else None
    if isinstance(overrides, dict):
        update_keys = sorted(k for k in overrides if k in KEYS and KEYS[k].on(backend)[0] != "ignored")
        if update_keys:
            problems.append(
                f"`network['#config']` sets {update_keys}: an epoch-dependent override of updater keys "
                "(RETURNN applies it when the network is built); set them in the config itself"
            )
    return problems

"""The optimizer RETURNN's TF updater builds from a config: class lookup, legacy flags, injected defaults.

`returnn/tf/updater.py` picks the optimizer in `Updater._create_default_optimizer`: the
`optimizer` dict (or the legacy flags `adam`, `nadam`, `adadelta`, `adagrad`, `rmsprop`,
`momentum`, else SGD), its class found by `get_optimizer_class` (RETURNN's own classes
first, then `tf.compat.v1.train`, then `tf.contrib.opt`, then Keras), with
`optimizer_epsilon` (default 1e-16) set on every class taking `epsilon` and the global
`momentum` on every class taking `momentum`. Here the class is a gradtx catalogue entry,
built with `gradtx.get`.

Decisions where RETURNN under TF2 differs from RETURNN under TF1 (both documented in
`optimizer_choice`): a name `tf.contrib.opt` had (`adamw`, `adamax`, `lazyadam`, ...)
means the contrib class (the catalogue's TF1 semantics), although RETURNN-TF2 looks it up
in Keras; the legacy `nadam` flag means contrib's Nadam (RETURNN-TF1; RETURNN-TF2 builds
Keras' Nadam, which the installed RETURNN cannot drive: Keras 3 rejects its learning-rate
variable). Keras-only names are refused: the installed RETURNN fails on every Keras 3
optimizer (`_KerasOptimizerWrapper`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Mapping
from typing import Any

from gradtx import registry
from gradtx._core import protocol as _protocol
from gradtx.returnn import _common
from gradtx.returnn._common import ReturnnConfigError

_TAKES_EPSILON = frozenset(
    {
        "adadelta",
        "adam",
        "adamax",
        "adamw",
        "amsgrad",
        "grad_variance_scaled",
        "lars",
        "lazy_adam",
        "nadam",
        "rmsprop",
    }
)
"""gradtx names of the TF classes whose constructor takes `epsilon` (RETURNN sets `optimizer_epsilon` there).
GGT's argument is `eps`, so RETURNN leaves it alone."""

_TAKES_MOMENTUM = frozenset({"lars", "momentum", "momentumw", "rmsprop"})
"""gradtx names of the TF classes whose constructor takes `momentum` (RETURNN sets the global `momentum`)."""

_EXTRA_CLASSES = {"customgradientdescent": "sgd", "customadam": "adam"}
"""RETURNN's own reimplementations, with the same numbers as the TF classes (`CustomAdamOptimizer`, ...)."""

_REFUSED_CLASSES = {
    "basecustom": "it is RETURNN's abstract base class (no `_apply`)",
    "adamgs": "its TF class takes the `global_step` tensor, which RETURNN never passes (the constant 0); "
    'use "adam"',
    "lazyadamgs": 'its TF class takes the `global_step` tensor, which RETURNN never passes; use "lazyadam"',
    "shampoo": "its TF class takes the `global_step` tensor, which RETURNN never passes (the constant 0)",
    "adagradda": "its TF class needs the `global_step` tensor, which a RETURNN config cannot give "
    "(RETURNN fails to build it)",
}
"""Class names RETURNN's lookup finds but gradtx refuses, with the reason."""

_KERAS_ONLY = (
    "adafactor",
    "lamb",
    "lion",
    "lossscaleoptimizer",
    "lossscale",
    "multioptimizer",
    "multi",
    "muon",
    "schedulefreeadamw",
    "sgd",
    "nadamkeras",
)
"""Names RETURNN-TF2 finds only among the Keras optimizers (TF1 RETURNN and tf.contrib had none of them)."""

LEGACY_FLAGS = ("adam", "nadam", "adadelta", "adagrad", "rmsprop")
"""RETURNN's legacy optimizer flags, in the order it tries them (then `momentum`, else SGD)."""


_CLASSES = {
    "AdadeltaOptimizer": "adadelta",
    "AdagradOptimizer": "adagrad",
    "AdagradDAOptimizer": "adagrad_da",
    "AdamOptimizer": "adam",
    "AdamGSOptimizer": "adam_gs",
    "AdaMaxOptimizer": "adamax",
    "AdamWOptimizer": "adamw",
    "AddSignOptimizer": "addsign",
    "AGNOptimizer": "agn",
    "AMSGradOptimizer": "amsgrad",
    "DropStaleGradientOptimizer": "drop_stale_gradients",
    "ElasticAverageOptimizer": "elastic_average",
    "FtrlOptimizer": "ftrl",
    "GGTOptimizer": "ggt",
    "GradVarianceScaledOptimizer": "grad_variance_scaled",
    "LARSOptimizer": "lars",
    "LazyAdamOptimizer": "lazy_adam",
    "LazyAdamGSOptimizer": "lazy_adam_gs",
    "ModelAverageOptimizer": "model_average",
    "MomentumOptimizer": "momentum",
    "MomentumWOptimizer": "momentumw",
    "NadamOptimizer": "nadam",
    "NeuralOptimizer1": "neural_optimizer1",
    "NormalizedSGD": "normalized_sgd",
    "PowerSignOptimizer": "powersign",
    "ProximalAdagradOptimizer": "proximal_adagrad",
    "ProximalGradientDescentOptimizer": "proximal_sgd",
    "RegAdagradOptimizer": "reg_adagrad",
    "RMSPropOptimizer": "rmsprop",
    "GradientDescentOptimizer": "sgd",
    "ShampooOptimizer": "shampoo",
    "SyncReplicasOptimizer": "sync_replicas",
}
"""The classes RETURNN's TF lookup reaches (`tf.compat.v1.train`'s, `tf.contrib.opt`'s and RETURNN's own,
found by their lowercased names with and without "Optimizer") -> the gradtx optimizer with their numbers."""


@functools.cache
def _lookup() -> dict[str, registry.Entry]:
    """RETURNN's `_OptimizerClassesDict` as gradtx entries: lowercased class name, and without "Optimizer"."""
    table: dict[str, registry.Entry] = {}
    for cls, name in _CLASSES.items():
        for key in (cls.lower(), cls.lower().removesuffix("optimizer")):
            table.setdefault(key, registry.entry(name))
    for key, name in _EXTRA_CLASSES.items():
        table[key] = table[key + "optimizer"] = registry.entry(name)
    return table


def _class_of(entry: registry.Entry) -> str:
    """The TF / RETURNN class an entry reproduces, as an error names it."""
    return next((cls for cls, name in _CLASSES.items() if name == entry.name), f"gradtx.{entry.name}")


def _known_names() -> list[str]:
    return sorted(set(_lookup()) | set(_REFUSED_CLASSES) | set(_KERAS_ONLY))


def resolve_class(name: Any) -> registry.Entry:
    """The catalogue entry for a RETURNN TF optimizer class name, as `get_optimizer_class` finds it.

    Args:
      name: the `"class"` of the `optimizer` dict, e.g. "adam", "NadamOptimizer" (case does not
        matter; RETURNN's lookup only lowercases, so no underscores).

    Returns:
      The `registry.Entry` of the class.

    Raises:
      TypeError: for a class given as anything but a string.
      ReturnnConfigError: for a name RETURNN's lookup does not know, a Keras-only one, a
        wrapper of another optimizer, or a class refused for a reason it names.

    Example:
        >>> from gradtx.returnn._tf_optimizer import resolve_class
        >>> resolve_class("AdamOptimizer").name, resolve_class("normalizedsgd").name
        ('adam', 'normalized_sgd')
    """
    if not isinstance(name, str):
        raise TypeError(
            f'`tf_update`: `optimizer["class"]` must be a class name (e.g. "adam"), got {name!r}; '
            "a config read without executing it names its classes."
        )
    key = name.lower()
    refused = _REFUSED_CLASSES.get(key.removesuffix("optimizer"))
    if refused is not None:
        raise ReturnnConfigError(f'`tf_update`: `optimizer["class"]` {name!r}: {refused}.')
    if key in _KERAS_ONLY:
        raise ReturnnConfigError(
            f'`tf_update`: `optimizer["class"]` {name!r} is a Keras optimizer under TF2 only (TF1 '
            "RETURNN and tf.contrib had no such class), and the installed RETURNN cannot drive Keras 3 "
            'optimizers; use a tf.compat.v1.train, tf.contrib.opt or RETURNN class ("momentum", "adam")'
            + ('; plain SGD is "GradientDescent".' if key == "sgd" else ".")
        )
    entry = _lookup().get(key)
    if entry is None:
        try:
            registry.entry(name)
        except _protocol.UnknownNameError as err:
            raise ReturnnConfigError(f'`tf_update`: `optimizer["class"]`: {err}') from None
        close = difflib.get_close_matches(key.replace("_", ""), _known_names(), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ReturnnConfigError(
            f'`tf_update`: `optimizer["class"]` {name!r} is no class RETURNN\'s TF updater knows (its lookup '
            f"lowercases the TF class name and drops a trailing 'Optimizer').{hint}"
        )
    if entry.kind != "optimizer":
        raise ReturnnConfigError(
            f'`tf_update`: `optimizer["class"]` {name!r} is {_class_of(entry)}, a wrapper of another '
            "optimizer instance, which a config dict cannot give; build it with gradtx directly "
            f"(`gradtx.{entry.name}(...)`)."
        )
    return entry


@dataclasses.dataclass(frozen=True)
class OptimizerChoice:
    """What RETURNN builds: the catalogue entry, its arguments (without the rate) and the rate multiplier.

    Attributes:
      name: the gradtx name of the optimizer.
      kwargs: its arguments, under TF's names as RETURNN passes them (epsilon/momentum injected).
      lr_multiplier: the `learning_rate_multiplier` of the `optimizer` dict, or None.
      keys: the config keys this choice read and applied.
    """

    name: str
    kwargs: Mapping[str, Any]
    lr_multiplier: float | None
    keys: frozenset[str]

    def build(self, learning_rate: Any) -> _protocol.GradientTransformation:
        """`gradtx.get(name, learning_rate=..., **kwargs)`, with a bad argument named as the config's."""
        try:
            return registry.get(self.name, learning_rate=learning_rate, **self.kwargs)
        except TypeError as err:  # an argument the class does not take, or one it needs
            message = f"`from_returnn_config`: the config's `optimizer` ({self.name}): {err}"
            raise ReturnnConfigError(message) from None


def _present(config: Mapping[str, Any], key: str) -> bool:
    return config.get(key) is not None


def _truthy(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key)
    if value is None or isinstance(value, (bool, int, float)):
        return bool(value)
    raise TypeError(f"`tf_update`: `{key}` must be a bool or a number, got {value!r}.")


def _number(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, str):  # RETURNN's `Config.float` parses strings ("inf")
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`tf_update`: `{key}` must be a number, got {value!r}.")
    return float(value)


def _unused(key: str, value: Any, why: str) -> None:
    _common.runs_without(
        f"`from_returnn_config`: config `{key}` = {value!r} has no effect: {why}; RETURNN runs without it, "
        "and so does gradtx."
    )


def optimizer_choice(config: Mapping[str, Any]) -> OptimizerChoice:
    """The optimizer RETURNN's TF updater creates for `config` (`Updater._create_default_optimizer`).

    The `optimizer` dict (or a string, read as `{"class": string}`) wins; else the first true
    legacy flag of `adam`, `nadam`, `adadelta`, `adagrad`, `rmsprop` (a float is the decay),
    then a nonzero `momentum` (MomentumOptimizer), else GradientDescent. A flag, `momentum`
    or `optimizer_epsilon` that RETURNN reads and then does nothing with is ignored as RETURNN ignores
    it, with a `ReturnnConfigWarning` (`adam = True` with `nadam = True` is Adam).

    Args:
      config: the config's globals.

    Returns:
      An `OptimizerChoice`.

    Raises:
      ReturnnConfigError: for a key RETURNN refuses, or an unknown class.
      TypeError: for a value of the wrong type.

    Example:
        >>> from gradtx.returnn._tf_optimizer import optimizer_choice
        >>> c = optimizer_choice({"adam": True})
        >>> c.name, dict(c.kwargs)
        ('adam', {'epsilon': 1e-16})
    """
    eps = _number(config, "optimizer_epsilon", 1e-16)
    momentum = _number(config, "momentum", 0.0)
    keys = {k for k in ("optimizer_epsilon", "momentum", *LEGACY_FLAGS, "optimizer") if k in config}
    spec = config.get("optimizer")
    # RETURNN tests `rmsprop` for a float first: `rmsprop = 0.0` is RMSProp with decay 0
    flags = [
        f for f in LEGACY_FLAGS if _truthy(config, f) or (f == "rmsprop" and isinstance(config.get(f), float))
    ]
    multiplier = None
    if spec:
        for unread in flags:
            _unused(unread, config[unread], "RETURNN's `optimizer` dict comes before the legacy flags")
        if isinstance(spec, str):
            spec = {"class": spec}
        if not isinstance(spec, Mapping) or "class" not in spec:
            raise ReturnnConfigError(
                f'`tf_update`: `optimizer` must be a dict with "class" (or a class name), got {spec!r}; '
                'e.g. `optimizer = {"class": "adam", "epsilon": 1e-8}`.'
            )
        kwargs = dict(spec)
        entry = resolve_class(kwargs.pop("class"))
        if "learning_rate" in kwargs:
            raise ReturnnConfigError(
                '`tf_update`: `optimizer["learning_rate"]`: RETURNN sets the learning rate itself (it '
                'asserts "learning_rate will be set implicitly"); use the config\'s `learning_rate` / '
                '`learning_rate_control`, or `optimizer["learning_rate_multiplier"]`.'
            )
        if "learning_rate_multiplier" in kwargs:
            multiplier = _number(kwargs, "learning_rate_multiplier", 1.0)
            del kwargs["learning_rate_multiplier"]
        name = entry.name
        if name in _TAKES_EPSILON and "epsilon" not in kwargs:
            kwargs["epsilon"] = eps
        elif _present(config, "optimizer_epsilon"):
            why = (
                "the dict sets `epsilon`"
                if name in _TAKES_EPSILON
                else f"{_class_of(entry)} takes no `epsilon`"
            )
            _unused("optimizer_epsilon", config["optimizer_epsilon"], why)
        if momentum:
            if name not in _TAKES_MOMENTUM or "momentum" in kwargs:
                why = (
                    "the dict sets `momentum`"
                    if "momentum" in kwargs
                    else f"{_class_of(entry)} takes no `momentum`"
                )
                _unused("momentum", config["momentum"], why)
            else:
                kwargs["momentum"] = momentum
        return OptimizerChoice(name, kwargs, multiplier, frozenset(keys))
    for later in flags[1:]:
        _unused(later, config[later], f"RETURNN takes the first legacy flag, `{flags[0]}`")
    flag = flags[0] if flags else None
    if flag in ("adam", "nadam", "adadelta", "adagrad") and momentum:
        raise ReturnnConfigError(
            f"`tf_update`: `momentum` = {config['momentum']!r} with `{flag}`: RETURNN refuses this "
            '(`assert not momentum`); remove it, or use `optimizer = {"class": ...}` with a class taking it.'
        )
    if flag in ("adam", "nadam", "adadelta"):
        return OptimizerChoice(flag, {"epsilon": eps}, None, frozenset(keys))
    if flag == "rmsprop":
        decay = config["rmsprop"] if isinstance(config["rmsprop"], float) else 0.9
        kwargs = {"decay": decay, "momentum": momentum, "epsilon": eps}
        return OptimizerChoice("rmsprop", kwargs, None, frozenset(keys))
    if _present(config, "optimizer_epsilon"):
        chosen = flag or ("momentum" if momentum else "GradientDescent")
        _unused("optimizer_epsilon", config["optimizer_epsilon"], f"RETURNN's {chosen} optimizer takes none")
    if flag == "adagrad":
        return OptimizerChoice("adagrad", {}, None, frozenset(keys))
    if momentum:
        return OptimizerChoice("momentum", {"momentum": momentum}, None, frozenset(keys))
    return OptimizerChoice("sgd", {}, None, frozenset(keys))

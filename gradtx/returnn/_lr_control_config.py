"""The config parsing of RETURNN's learning-rate control: each key read as RETURNN's `Config` reads it."""

from __future__ import annotations

import ast
import difflib
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from gradtx.returnn._common import ReturnnConfigError

# RETURNN's `learning_rate_control_type`: the names it knows, and the rule each one means here
_KINDS = {k: k for k in ("constant", "newbob_abs", "newbob_multi_epoch")}
_KINDS |= dict.fromkeys(("newbob", "newbob_rel", "newbob_relative"), "newbob")


def _refuse(key: str, value: Any, why: str) -> ReturnnConfigError:
    return ReturnnConfigError(f"`from_returnn_config`: `{key}` = {value!r}: {why}")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_rate(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and value >= 0


def _float(config: Mapping[str, Any], key: str, default: float, *, rate: bool = False) -> float:
    """RETURNN's `Config.float`: an int, a float, or a str `float()` reads ("inf", "1e-3")."""
    value = config.get(key, default)
    try:
        number = float(value) if isinstance(value, str) or _is_number(value) else None
    except ValueError:
        number = None
    if number is None:
        raise _refuse(key, value, "RETURNN reads this key as a float; write a number.")
    if rate and not _is_rate(number):
        raise _refuse(key, value, "a learning rate must be finite and >= 0.")
    return number


def _int(config: Mapping[str, Any], key: str, default: int) -> int:
    """RETURNN's `Config.int` on a config's globals: an int (a float or str fails its assertion)."""
    value = config.get(key, default)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise _refuse(key, value, "RETURNN reads this key as an int; write a whole number.")


def _bool(config: Mapping[str, Any], key: str) -> bool:
    """RETURNN's `Config.bool` on a config's globals: a bool, an int, or None (False)."""
    value = config.get(key, False)
    if value is None or isinstance(value, (bool, int, np.integer)):
        return bool(value)
    raise _refuse(key, value, "RETURNN reads this key as a bool; write True or False.")


def _factor(config: Mapping[str, Any], key: str, fallback: str, default: float) -> float | None:
    """`learning_rate_decay` / `_growth` (RETURNN's `newbob_` names are the fallback): a float or None."""
    name = key if key in config else fallback
    value = config.get(name, default)
    if callable(value):
        why = "RETURNN runs a function here, but gradtx reads configs without running their code"
        raise _refuse(name, value, f"{why}; write the factor as a float.")
    if value is None or _is_rate(value):
        return None if value is None else float(value)
    if _is_number(value):
        raise _refuse(name, value, "the factor must be finite and >= 0 (a rate stays finite and >= 0).")
    raise _refuse(name, value, "write the factor as a float (RETURNN multiplies the rate by it).")


def _fixed_rates(config: Mapping[str, Any]) -> tuple[tuple[int, float], ...]:
    """`learning_rates`: a list (epochs 1, 2, ...), a dict {epoch: rate}, or a str holding a dict literal."""
    key = "learning_rates"
    value = given = config.get(key)
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            why = "RETURNN evaluates a str here as Python code; gradtx reads only a literal"
            raise _refuse(key, given, f"{why}: write the dict {{epoch: rate}} itself.") from None
        if not isinstance(value, dict):
            raise _refuse(key, given, "RETURNN needs a str here to evaluate to a dict {epoch: rate}.")
    if not value:
        return ()
    if isinstance(value, (list, tuple)):
        value = dict(enumerate(value, start=1))
    if not isinstance(value, dict):
        raise _refuse(key, given, "write a list of rates for epochs 1, 2, ... or a dict {epoch: rate}.")
    for epoch, rate in value.items():
        if not isinstance(epoch, (int, np.integer)) or isinstance(epoch, bool) or epoch < 1:
            raise _refuse(
                key, given, f"epoch {epoch!r}: epochs are whole numbers >= 1 (RETURNN counts from 1)."
            )
        if not _is_rate(rate):
            raise _refuse(key, given, f"epoch {epoch}: the rate {rate!r} must be a finite number >= 0.")
    return tuple(sorted((int(epoch), float(rate)) for epoch, rate in value.items()))


def _error_measure(config: Mapping[str, Any]) -> str | tuple[str, ...] | None:
    """`learning_rate_control_error_measure`: a score key or a list of them, tried in order."""
    key = "learning_rate_control_error_measure"
    value = config.get(key)
    if not value or isinstance(value, str):
        return value or None
    if isinstance(value, (list, tuple)) and all(isinstance(k, str) for k in value):
        return tuple(value)
    raise _refuse(key, value, 'write a score key such as "dev_error", or a list of keys.')


def control_fields(config: Mapping[str, Any], pretrain_epochs: int = 0) -> dict[str, Any]:
    """The fields of `LearningRateControl.from_config(config, pretrain_epochs)`, each key read as RETURNN
    reads it."""
    kind = config.get("learning_rate_control", "constant")
    if kind is None:
        kind = "constant"
    if not isinstance(kind, str) or kind not in _KINDS:
        close = difflib.get_close_matches(str(kind), list(_KINDS), n=3)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise _refuse("learning_rate_control", kind, f"RETURNN knows {sorted(_KINDS)}.{hint}")
    kind = _KINDS[kind]
    fields: dict[str, Any] = {
        "kind": kind,
        "learning_rate": _float(config, "learning_rate", 1.0, rate=True),
        "min_learning_rate": _float(config, "min_learning_rate", 0.0, rate=True),
        "learning_rates": _fixed_rates(config),
        "error_measure": _error_measure(config),
        "relative_lr": _bool(config, "learning_rate_control_relative_error_relative_lr"),
        "min_num_epochs_per_new_lr": _int(config, "learning_rate_control_min_num_epochs_per_new_lr", 0),
        "div_by_old": _bool(config, "newbob_relative_error_div_by_old"),
    }
    if pretrain_epochs:  # RETURNN's TF engine: `pretrain_learning_rate`, by default the initial rate
        rate = _float(config, "pretrain_learning_rate", fields["learning_rate"], rate=True)
        fields |= {"pretrain_epochs": pretrain_epochs, "pretrain_learning_rate": rate}
    if kind == "constant":  # RETURNN's constant control reads no other key
        return fields
    fields["decay"] = _factor(config, "learning_rate_decay", "newbob_learning_rate_decay", 0.5)
    fields["growth"] = _factor(config, "learning_rate_growth", "newbob_learning_rate_growth", 1.0)
    if kind == "newbob_abs":
        return fields | {"error_threshold": _float(config, "newbob_error_threshold", -0.01)}
    threshold = fields["relative_error_threshold"] = _float(config, "newbob_relative_error_threshold", -0.01)
    if kind == "newbob":
        return fields
    num_epochs = fields["num_epochs"] = _int(config, "newbob_multi_num_epochs", 5)
    interval = fields["update_interval"] = _int(config, "newbob_multi_update_interval", num_epochs)
    grow = _float(config, "newbob_relative_error_grow_threshold", threshold)
    for key, value in (
        ("newbob_multi_num_epochs", num_epochs),
        ("newbob_multi_update_interval", interval),
    ):
        if value < 1:
            raise _refuse(key, value, "RETURNN asserts >= 1.")
    if grow > threshold:
        why = "a mean relative error between the two asks RETURNN to decay and grow at once"
        raise _refuse(
            "newbob_relative_error_grow_threshold",
            grow,
            f"above `newbob_relative_error_threshold` = {threshold}, {why}, which it fails on; "
            "make it <= the threshold.",
        )
    return fields | {"relative_error_grow_threshold": grow}

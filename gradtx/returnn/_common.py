"""What the RETURNN config modules share: the error they raise and what a backend returns."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

from gradtx._core import protocol as _protocol


class ReturnnConfigError(ValueError):
    """A RETURNN config key or value gradtx cannot turn into RETURNN's update; the message names
    the key, the value, why, and what to write instead."""


class ReturnnConfigWarning(UserWarning):
    """A config key RETURNN runs without (it never reads it, or reads it and does nothing with it): gradtx
    does what RETURNN does, and says so, naming the key and what RETURNN does. Also a statement that sets
    config values when RETURNN runs the config and that the reader does not run (`exec(...)`,
    `globals()[...] = ...`, `config.set(...)`): the warning names its line and the values not taken."""


def runs_without(message: str) -> None:
    """Warn that RETURNN runs the config without what `message` names, and so does gradtx."""
    warnings.warn(message, ReturnnConfigWarning, stacklevel=4)


@dataclasses.dataclass(frozen=True)
class BackendUpdate:
    """What a backend makes of a config: the per-step transform as a function of the epoch's rate.

    Attributes:
      factory: `factory(learning_rate) -> GradientTransformation`, the whole step RETURNN's
        updater applies (gradient processing, the optimizer, per-parameter multipliers) at the
        learning rate the learning-rate control set for the epoch. `learning_rate` may be a
        traced scalar (the lead wraps `factory` in `gradtx.inject_hyperparams`), so the
        factory must not branch on its value.
      keys: the config keys this backend read and applied.
    """

    factory: Callable[[Any], _protocol.GradientTransformation]
    keys: frozenset[str]

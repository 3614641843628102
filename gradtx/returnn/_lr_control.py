"""RETURNN's learning-rate control (`constant`, `newbob`, `newbob_abs`, `newbob_multi_epoch`) as
optimizer state: the epoch's rate and the last epochs' rates and scores, as jax arrays.

RETURNN sets the rate once per epoch (`returnn/learning_rate_control.py`): its engine asks
`get_learning_rate_for_epoch(epoch)` when an epoch starts and reports the epoch's scores with
`set_epoch_error(epoch, scores)` when it ends. Here `end_epoch(state, scores)` does both at the
epoch boundary, on the host, in float64 as RETURNN does; the histories keep the float64 rates and
scores exactly (as their bit patterns, two uint32 words each, so nothing depends on
`jax_enable_x64`), so a resumed run equals an uninterrupted one bit for bit.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Mapping
from typing import Any, Union

import jax
import jax.numpy as jnp
import numpy as np

from gradtx.returnn._lr_control_config import control_fields

Scores = Union[None, float, Mapping[str, Any]]

CONFIG_KEYS = frozenset(
    """learning_rate_control learning_rate learning_rates min_learning_rate
    learning_rate_control_error_measure learning_rate_control_relative_error_relative_lr
    learning_rate_control_min_num_epochs_per_new_lr newbob_relative_error_div_by_old
    learning_rate_decay newbob_learning_rate_decay learning_rate_growth newbob_learning_rate_growth
    newbob_relative_error_threshold newbob_error_threshold newbob_multi_num_epochs
    newbob_multi_update_interval newbob_relative_error_grow_threshold""".split()
)
"""The config keys `LearningRateControl.from_config` reads (RETURNN's `LearningRateControl` reads
these and `learning_rate_file`, whose history a state carries itself), and with `pretrain_epochs` the TF
engine's `pretrain_learning_rate`."""


@dataclasses.dataclass(frozen=True)
class LearningRateControl:
    """The static settings of RETURNN's learning-rate control (hashable: a state's aux data).

    `kind`: "constant", "newbob" (RETURNN's `NewbobRelative`), "newbob_abs" or "newbob_multi_epoch";
    `learning_rates`: the fixed `(epoch, rate)` pairs; `decay` / `growth`: None for none. The other
    fields are the config keys without their prefix (`learning_rate_control_`, `newbob_multi_`,
    `newbob_`); `relative_lr` is `learning_rate_control_relative_error_relative_lr` and `div_by_old`
    is `newbob_relative_error_div_by_old`.
    """

    kind: str = "constant"
    learning_rate: float = 1.0
    min_learning_rate: float = 0.0
    learning_rates: tuple[tuple[int, float], ...] = ()
    error_measure: str | tuple[str, ...] | None = None
    relative_lr: bool = False
    min_num_epochs_per_new_lr: int = 0
    div_by_old: bool = False
    decay: float | None = 0.5
    growth: float | None = 1.0
    relative_error_threshold: float = -0.01
    error_threshold: float = -0.01
    num_epochs: int = 5
    update_interval: int = 5
    relative_error_grow_threshold: float = -0.01
    pretrain_epochs: int = 0
    pretrain_learning_rate: float = 1.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any], pretrain_epochs: int = 0) -> LearningRateControl:
        """The control RETURNN's `load_learning_rate_control_from_config` builds, with its defaults.

        With `pretrain_epochs`, RETURNN's TF engine overrides it as it does when `pretrain` is set and
        `use_learning_rate_control_always` is not: the first `pretrain_epochs` epochs run at
        `pretrain_learning_rate` (default `learning_rate`), the next one at `learning_rate`, each
        recorded as the epoch's rate; the control takes over after them.

        Args:
          config: the config's globals. Keys other than `CONFIG_KEYS` are not read, nor are those
            RETURNN's control of this kind does not read (decay, growth, thresholds of other kinds).
          pretrain_epochs: how many epochs RETURNN's pretraining runs (0: none).

        Returns:
          The settings; `.init()` gives the first epoch's state.

        Raises:
          ReturnnConfigError: an unknown `learning_rate_control` (with the close names), a function as
            decay or growth, a `learning_rates` str that is not a literal, a negative or non-finite
            rate, or a value RETURNN's config parsing refuses.

        Example:
          >>> config = {"learning_rate_control": "newbob", "learning_rate": 0.1}
          >>> float(LearningRateControl.from_config(config).init().learning_rate)
          0.10000000149011612
        """
        return cls(**control_fields(config, pretrain_epochs))

    @property
    def applied_keys(self) -> frozenset[str]:
        """The keys of `CONFIG_KEYS` that can change this kind's rates (RETURNN ignores the others too)."""
        keys = {"learning_rate_control", "learning_rate", "learning_rates"}
        if self.kind != "constant":
            keys |= {"min_learning_rate", "learning_rate_control_error_measure", "learning_rate_decay"}
            keys |= {"learning_rate_control_min_num_epochs_per_new_lr", "newbob_learning_rate_decay"}
            keys |= {"learning_rate_growth", "newbob_learning_rate_growth"}
        if self.kind == "newbob_abs":
            keys.add("newbob_error_threshold")
        elif self.kind != "constant":  # the relative error's rules
            keys |= {"learning_rate_control_relative_error_relative_lr", "newbob_relative_error_div_by_old"}
            keys.add("newbob_relative_error_threshold")
        if self.kind == "newbob_multi_epoch":
            keys |= {"newbob_multi_num_epochs", "newbob_multi_update_interval"}
            keys.add("newbob_relative_error_grow_threshold")
        if self.pretrain_epochs:
            keys |= {"pretrain", "pretrain_learning_rate"}
        return frozenset(keys)

    @property
    def history_size(self) -> int:
        """How many epochs (the current one included) the state keeps: what the rule looks back on."""
        multi = self.num_epochs + 1 if self.kind == "newbob_multi_epoch" else 0
        return max(2, multi, self.min_num_epochs_per_new_lr)

    def init(self) -> LearningRateControlState:
        """The state of epoch 1: its rate, and histories with no earlier epochs."""
        size = self.history_size
        rates = np.full(size, np.nan)
        rates[-1] = _next_rate(self, 1, [])
        return _state(self, 1, rates, np.full(size, np.nan), np.full(size, -1, np.int32))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, eq=False)
class LearningRateControlState:
    """The learning-rate control's state: a pytree of jax arrays whose aux data is its control.

    Histories cover the last `control.history_size` epochs, oldest first, the last entry being the
    current epoch (its score is filled by `end_epoch`); epochs before epoch 1 are padding.

    Attributes:
      epoch: int32, the current epoch (1-based, as RETURNN counts).
      learning_rate: float32, the current epoch's rate.
      rates: uint32 `(history_size, 2)`: the epochs' float64 rates as bits (see `rate_history`).
      scores: uint32 `(history_size, 2)`: the epochs' float64 scores as bits, NaN where no score.
      score_keys: int32 `(history_size,)`: the id of the score's key (CRC-32 of its name), -1 where
        none; RETURNN compares two epochs' scores only when their keys are equal.
      control: the static settings.
    """

    epoch: jax.Array
    learning_rate: jax.Array
    rates: jax.Array
    scores: jax.Array
    score_keys: jax.Array
    control: LearningRateControl = dataclasses.field(metadata={"static": True})

    def rate_history(self) -> np.ndarray:
        """The histories' rates as float64 (NaN for padding)."""
        return _from_bits(self.rates)

    def score_history(self) -> np.ndarray:
        """The histories' scores as float64 (NaN where no score)."""
        return _from_bits(self.scores)


def _to_bits(values: np.ndarray) -> jax.Array:
    bits = np.asarray(values, np.float64).view(np.uint64)
    return jnp.asarray(np.stack([bits >> np.uint64(32), bits & np.uint64(0xFFFFFFFF)], -1).astype(np.uint32))


def _from_bits(words: Any) -> np.ndarray:
    words = np.asarray(words).astype(np.uint64)
    return ((words[..., 0] << np.uint64(32)) | words[..., 1]).view(np.float64)


def _state(
    control: LearningRateControl, epoch: int, rates: Any, scores: Any, keys: Any
) -> LearningRateControlState:
    return LearningRateControlState(
        epoch=jnp.asarray(epoch, jnp.int32),
        learning_rate=jnp.asarray(rates[-1], jnp.float32),
        rates=_to_bits(rates),
        scores=_to_bits(scores),
        score_keys=jnp.asarray(keys, jnp.int32),
        control=control,
    )


def _flatten_scores(scores: Scores) -> dict[str, float]:
    """The epoch's error dict as RETURNN's `set_epoch_error` stores it (a float: its old format)."""
    if scores is None:
        return {}
    if not isinstance(scores, Mapping):
        return {"old_format_score": _score("scores", scores)}
    error: dict[str, Any] = dict(scores)
    for k, v in list(error.items()):
        if isinstance(v, Mapping):  # {"dev_score": {"cost:output1": ..., "cost:output2": ...}}
            del error[k]
            if len(v) == 1:
                error[k] = next(iter(v.values()))
                continue
            for k1, v1 in v.items():
                error[f"{k}_{k1[k1.index(':') + 1 :] if ':' in k1 else k1}"] = v1
    return {k: _score(k, v) for k, v in error.items()}


def _score(key: str, value: Any) -> float:
    if isinstance(value, jax.core.Tracer):
        raise TypeError(f"`end_epoch`: score {key!r} is traced; call it on the host, outside `jax.jit`.")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"`end_epoch`: score {key!r} must be a number, got {value!r}.") from None


def _error_key(measure: str | tuple[str, ...] | None, error: Mapping[str, float]) -> str | None:
    """RETURNN's `get_error_key` for an epoch with the error dict `error`."""
    if not error:
        return None
    if len(error) == 1 and "old_format_score" in error:
        return "old_format_score"
    measures = (measure,) if isinstance(measure, str) else measure or ()
    for key in [k for m in measures for k in (m, m + "_output")] + ["dev_score", "dev_score_output"]:
        if key in error:
            return key
    names = sorted(error)
    picks = [k for k in names if k == "dev_score_output/output" or k.startswith("dev_score_output/output_")]
    picks += [k for k in names if k.startswith("dev_score_output/")]
    picks += [k for k in names if k.startswith("dev_")]
    picks += [k for k in ("train_score", "train_score_output") if k in error]
    return picks[0] if picks else min(error)


_Entry = tuple[float, int, float]  # (rate, score key id or -1, score) of one finished epoch


def _relative_error(c: LearningRateControl, old: _Entry, new: _Entry) -> float | None:
    """RETURNN's `calc_relative_error` (IEEE division where RETURNN's Python floats would raise)."""
    if old[1] < 0 or new[1] < 0 or old[1] != new[1]:
        return None
    s_old, s_new = np.float64(old[2]), np.float64(new[2])
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = (s_new - s_old) / abs(s_old if c.div_by_old else s_new)
        if c.relative_lr and new[0] > 0:
            relative /= np.float64(new[0]) / np.float64(c.learning_rate)
    return float(relative)


def _decay_or_grow(c: LearningRateControl, rate: float, decay: bool, grow: bool) -> float:
    if decay:
        rate = rate if c.decay is None else rate * c.decay
        if rate < c.min_learning_rate:
            rate = c.min_learning_rate
    if grow:
        rate = rate if c.growth is None else rate * c.growth
    return rate


def _next_rate(c: LearningRateControl, epoch: int, history: list[_Entry]) -> float:
    """RETURNN's `get_learning_rate_for_epoch(epoch)`, or its TF engine's pretraining rates (`from_config`);
    `history`: the epochs before it, oldest first."""
    if epoch <= c.pretrain_epochs:
        return c.pretrain_learning_rate
    if c.pretrain_epochs and epoch == c.pretrain_epochs + 1:
        return c.learning_rate
    fixed = dict(c.learning_rates)
    if epoch in fixed:
        return fixed[epoch]
    n = c.min_num_epochs_per_new_lr
    if n > 1:
        last = [entry[0] for entry in history[-n:]]
        if len(set(last)) >= 2 or 0 < len(last) < n:
            return last[-1]
    rate = history[-1][0] if history else c.learning_rate
    if c.kind == "constant" or len(history) < 2:
        return rate
    if c.kind == "newbob":
        relative = _relative_error(c, history[-2], history[-1])
        if relative is None:
            return rate
        decay = relative > c.relative_error_threshold
        return _decay_or_grow(c, rate, decay, not decay)
    if c.kind == "newbob_abs":
        (_, k_old, s_old), (_, k_new, s_new) = history[-2:]
        if k_old < 0 or k_new < 0 or k_old != k_new:
            return rate
        decay = s_new - s_old > c.error_threshold
        return _decay_or_grow(c, rate, decay, not decay)
    if c.update_interval > 1 and epoch % c.update_interval != 1:
        return rate
    window = history[-(c.num_epochs + 1) :]
    errors = [_relative_error(c, old, new) for old, new in zip(window[:-1], window[1:], strict=True)]
    known = [e for e in errors if e is not None]
    if len(known) < len(errors):
        return rate
    mean = float(np.mean(known))
    return _decay_or_grow(c, rate, mean > c.relative_error_threshold, mean < c.relative_error_grow_threshold)


def end_epoch(state: LearningRateControlState, scores: Scores) -> LearningRateControlState:
    """Records the finished epoch's score and moves to the next epoch, at the rate RETURNN gives it.

    RETURNN's `set_epoch_error(epoch, scores)` then `get_learning_rate_for_epoch(epoch + 1)`: the
    score is the one under the key RETURNN's `get_error_key` picks (`learning_rate_control_error_measure`
    first, then "dev_score", other "dev_" keys, "train_score"); a fixed `learning_rates` entry for
    the next epoch wins; then `min_num_epochs_per_new_lr`, then the rule. Runs on the host, once per
    epoch; `state` is not changed.

    Args:
      state: the state of the epoch that ended.
      scores: all of the epoch's scores (RETURNN's engine reports the train scores, then each eval
        dataset's: pass them together), `{"dev_score": 1.23, "dev_error": 0.31, "train_score": 1.5}`
        (a value may be a dict of per-output scores, flattened as RETURNN does), a float (RETURNN's
        old format), or None for an epoch without evaluation (no score recorded).

    Returns:
      The state of the next epoch.

    Raises:
      TypeError: a score that is not a number, or a traced one (call it outside `jax.jit`).

    Example:
      >>> config = {"learning_rate_control": "newbob", "learning_rate": 1.0}
      >>> state = LearningRateControl.from_config(config).init()
      >>> for score in (2.0, 1.0, 1.0):
      ...     state = end_epoch(state, {"dev_score": score})
      >>> int(state.epoch), float(state.learning_rate)
      (4, 0.5)
    """
    c = state.control
    if isinstance(state.epoch, jax.core.Tracer):
        raise TypeError("`end_epoch`: the state is traced; call `end_epoch` on the host, outside `jax.jit`.")
    error = _flatten_scores(scores)
    key = _error_key(c.error_measure, error)
    epoch = int(state.epoch)
    rates, scores_, keys = state.rate_history(), state.score_history().copy(), np.array(state.score_keys)
    if key is not None:
        scores_[-1], keys[-1] = error[key], zlib.crc32(key.encode()) & 0x7FFFFFFF
    known = min(epoch, c.history_size)
    history = [
        (float(r), int(k), float(s))
        for r, k, s in zip(rates[-known:], keys[-known:], scores_[-known:], strict=True)
    ]
    rate = _next_rate(c, epoch + 1, history)
    rates = np.append(rates[1:], rate)
    return _state(c, epoch + 1, rates, np.append(scores_[1:], np.nan), np.append(keys[1:], -1))


def learning_rate_for(state: LearningRateControlState) -> jax.Array:
    """The current epoch's rate (float32), for `inject_hyperparams`' `learning_rate`.

    Example:
      >>> float(learning_rate_for(LearningRateControl.from_config({"learning_rate": 0.5}).init()))
      0.5
    """
    return state.learning_rate

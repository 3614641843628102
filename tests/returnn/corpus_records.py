"""The records of tests/returnn/corpus.json: public RETURNN config files as `from_returnn_config` reads them.

`tools/returnn_corpus.py` writes them from checkouts of the public repositories; `test_corpus.py` builds
each and compares the outcome with the file's own. A record holds what the update reads (the keys of
RETURNN's updater and learning-rate control in full, the layer graph of `network` when the file
pretrains) and of the rest only small values, as JSON with markers for the reader's placeholders.
"""

from __future__ import annotations

import pathlib
import re
import warnings

import gradtx
from gradtx import returnn
from gradtx.returnn import _reader, _safe_eval

RASR = "section header of a RASR"
TOPOLOGY = ("class", "from", "trainable", "target")  # what RETURNN's pretraining reads of a layer
UPDATE_KEYS = frozenset().union(
    *(returnn.keys(kind, backend) for kind in ("applied", "refused") for backend in ("tf", "torch"))
)


def outcome(config: pathlib.Path | dict) -> tuple[str, str, list[str]]:
    """`(kind, detail, warned keys)`: "built", "refused" (detail: the first key named) or "not RETURNN"."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", returnn.ReturnnConfigWarning)
        try:
            gradtx.from_returnn_config(config if isinstance(config, dict) else str(config))
        except returnn.ReturnnConfigError as e:
            text = str(e)
            if RASR in text:
                return "not RETURNN", "RASR config", []
            if "is not valid Python" in text:  # RETURNN stops on it as well
                return "unreadable", "not valid Python", []
            named = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text.split(":", 1)[1])
            return "refused", named[0] if named else text.splitlines()[0][:80], []
    warned = [m.group(1) for w in caught if (m := re.search(r"config `([^`]+)`", str(w.message)))]
    return "built", "", sorted(set(warned))


def encode(value: object) -> object:
    """A reader's value as JSON, with markers for what JSON has no form of (`decode` inverts it)."""
    if isinstance(value, _reader.Unevaluated):
        return {"$unevaluated": value.name, "reason": value.reason, "line": value.line}
    if isinstance(value, _safe_eval.EpochValue):
        return {"$epoch_value": value.line}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {str(k): encode(v) for k, v in value.items()}
        return {"$pairs": [[encode(k), encode(v)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"$unevaluated": "?", "reason": f"a {type(value).__name__} value", "line": None}


def decode(value: object) -> object:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if "$unevaluated" in value:
            return _reader.Unevaluated(value["$unevaluated"], value["reason"], value["line"])
        if "$epoch_value" in value:
            return _safe_eval.EpochValue("WrapEpochValue(...)", value["$epoch_value"])
        if "$tuple" in value:
            return tuple(decode(v) for v in value["$tuple"])
        if "$pairs" in value:
            return {decode(k): decode(v) for k, v in value["$pairs"]}
        return {k: decode(v) for k, v in value.items()}
    return value


def _small(value: object) -> bool:
    return (
        value is None or isinstance(value, (bool, int, float)) or isinstance(value, str) and len(value) <= 80
    )


def distilled(config: dict) -> dict:
    """What `from_returnn_config` reads of a config, and nothing of the rest but small values."""
    pretrains = bool(config.get("pretrain"))
    out: dict[str, object] = {}
    for key, value in config.items():
        if key == "network" and pretrains and isinstance(value, dict):
            value = {
                name: {k: v for k, v in layer.items() if k in TOPOLOGY} if isinstance(layer, dict) else layer
                for name, layer in value.items()
            }
        elif key not in UPDATE_KEYS and not key.startswith(("pretrain", "newbob", "learning_rate")):
            value = value if _small(value) else None
        out[key] = encode(value)
    return out

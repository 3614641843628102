"""How many epochs RETURNN's layer-wise pretraining runs, counted from the config's `network` dict.

RETURNN's `returnn/pretrain.py` grows the network in steps: each construction algorithm gives a list
of networks, the last the config's own; steps that add only untrainable layers are dropped (for the
built-in algorithms), and each step runs `repetitions` epochs. The count needs the network's topology
(layer names, `from`, `class`, `target`, `trainable`), not its values, so a network whose values are
`WrapEpochValue`s is counted too. A custom construction function, a network the reader could not
read, or one RETURNN itself would stop on gives `None`: `from_returnn_config` then asks for the number.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from gradtx.returnn import _reader

_OPTIONS = {
    "network_init_args",
    "copy_param_mode",
    "copy_output_layer",
    "greedy",
    "repetitions",
    "construction_algo",
    "output_layers",
    "input_layers",
}


class _Unknown(Exception):
    """Where RETURNN would stop (or run code), so the count cannot be told."""


def pretrain_epochs(config: Mapping[str, Any]) -> int | None:
    """RETURNN's `Pretrain(...).get_train_num_epochs()` for `config`, or `None` when it cannot be told.

    Example:
        >>> net = {"l1": {"class": "linear", "from": ["data"]}, "l2": {"class": "linear", "from": ["l1"]},
        ...        "output": {"class": "softmax", "from": ["l2"]}}
        >>> pretrain_epochs({"pretrain": "default", "network": net})
        2
        >>> pretrain_epochs({"pretrain": {"repetitions": 3}, "network": net})
        6
    """
    pretrain = config.get("pretrain")
    options = dict(pretrain) if isinstance(pretrain, Mapping) else {}
    if not (pretrain is True or pretrain == "default" or options) or not set(options) <= _OPTIONS:
        return None  # RETURNN stops on another kind of pretraining, or on an option `Pretrain` has not
    if "pretrain_repetitions" in config:
        options.setdefault("repetitions", config["pretrain_repetitions"])
    if "pretrain_construction_algo" in config:
        options.setdefault("construction_algo", config["pretrain_construction_algo"])
    try:
        network = _topology(config.get("network"))
        algorithm = options.get("construction_algo", "from_output")
        outputs = _names(options.get("output_layers", ("output",)))
        inputs = _names(options.get("input_layers", ("data",)))
        if algorithm == "from_output":
            steps = _from_output(network, outputs, inputs)
        elif algorithm == "from_input":
            steps = _from_input(network, outputs)
        elif algorithm == "no_network_modifications":
            steps = [network]
        else:
            raise _Unknown
        steps = _trainable_steps(steps, outputs)
        return sum(_repetitions(options.get("repetitions"), steps))
    except (_Unknown, KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


def _topology(network: Any) -> dict[str, dict[str, Any]]:
    """The layers, each with a `from` that is a list of names (RETURNN's pretraining reads no other form)."""
    if not isinstance(network, dict) or not network or isinstance(network, _reader.Unevaluated):
        raise _Unknown
    for name, layer in network.items():
        if not isinstance(name, str) or not isinstance(layer, dict):
            raise _Unknown
        sources = layer.get("from", ["data"])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise _Unknown
    return network


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _Unknown
    return tuple(value)


def _sources(layer: Mapping[str, Any]) -> list[str]:
    return layer.get("from", ["data"])


def _trainable(layer: Mapping[str, Any]) -> bool:
    return bool(layer.get("trainable", True))


def _is_output(net: Mapping[str, Any], name: str, outputs: tuple[str, ...]) -> bool:
    return name in outputs or net[name]["class"] == "softmax" or "target" in net[name]


def _from_output(network: dict, outputs: tuple[str, ...], inputs: tuple[str, ...]) -> list[dict]:
    """Networks from the smallest to the whole: each step replaces the outputs' sources by theirs."""
    steps = [network]
    for _ in range(len(network) + 1):
        smaller = _smaller(steps[0], network, outputs, inputs)
        if smaller is None:
            return steps
        steps.insert(0, smaller)
    raise _Unknown


def _smaller(net: dict, network: dict, outputs: tuple[str, ...], inputs: tuple[str, ...]) -> dict | None:
    new = copy.deepcopy(net)
    while True:
        if any(name not in new for name in outputs):
            raise _Unknown
        sources: set[str] = set()
        deleted: set[str] = set()
        for out in outputs:
            for source in new[out]["from"]:
                if source in inputs:
                    sources.add(source)
                    continue
                if source not in new:
                    raise _Unknown
                sources.update(_sources(new[source]))
                del new[source]
                deleted.add(source)
        before = {s for out in outputs for s in _listed(new[out]["from"])}
        if sorted(sources) == sorted(before):
            return None
        for out in outputs:
            new[out]["from"] = sorted(sources)
        if sources & set(inputs):
            continue
        if all(not _trainable(network[d]) for d in deleted):
            continue
        return new


def _listed(sources: Any) -> list[str]:
    if not isinstance(sources, list):  # RETURNN adds the outputs' `from` lists
        raise _Unknown
    return sources


def _from_input(network: dict, outputs: tuple[str, ...]) -> list[dict]:
    """Networks grown breadth-first from `data`, one more depth each step, then the whole."""
    steps: list[dict] = []
    for depth in range(1, len(network) + 2):
        net = _grown(network, depth, outputs)
        if net is None:
            return [*steps, network]
        steps.append(net)
    raise _Unknown


def _grown(network: dict, depth: int, outputs: tuple[str, ...]) -> dict | None:
    new: dict[str, Any] = {}
    needed: set[str] = set()

    def add(name: str) -> None:
        needed.discard(name)
        new[name] = network[name]
        needed.update(set(_sources(network[name])) - set(new) - {"data"})

    sources = ["data"]
    while True:  # untrainable layers on the input side (windows, features) come first
        added = [n for n in _descendants(network, sources) if n not in new and not _trainable(network[n])]
        for name in added:
            sources.append(name)
            add(name)
        if not added:
            break
    for _ in range(depth):
        sources = [n for n in _descendants(network, sources) if n not in new]
        for name in sources:
            add(name)
        if not sources:
            return None
    for name in sorted(network):
        if name not in new and _is_output(network, name, outputs):
            add(name)
    return new if needed else None


def _descendants(network: dict, sources: Sequence[str]) -> list[str]:
    return [name for name, layer in sorted(network.items()) if any(s in _sources(layer) for s in sources)]


def _trainable_steps(steps: list[dict], outputs: tuple[str, ...]) -> list[dict]:
    """Drop the steps that add no trainable layer but outputs (the whole network always stays)."""
    kept = []
    for before, after in zip(([{}, *steps])[: len(steps) - 1], steps[:-1], strict=True):
        if any(name not in after for name in before):
            raise _Unknown
        if any(
            name not in before and not _is_output(after, name, outputs) and _trainable(after[name])
            for name in sorted(after)
        ):
            kept.append(after)
    return [*kept, steps[-1]]


def _repetitions(value: Any, steps: list[dict]) -> list[int]:
    """Epochs per step: RETURNN's `repetitions` (an int, a list padded with its last, or a dict with
    `default` and step indices or `final`), then any step's own `#repetition`."""
    n = len(steps)
    if not value:
        value = 1
    if isinstance(value, dict):
        value = dict(value)
        counts = [value.pop("default", 1)] * n
        for key, count in sorted(value.items()):
            counts[n - 1 if key == "final" else key] = count
    else:
        counts = list(value) if isinstance(value, list) else [value]
        if not 0 < len(counts) <= n:
            raise _Unknown
        counts += [counts[-1]] * (n - len(counts))
    for i, net in enumerate(steps):
        if "#repetition" in net:
            counts[i] = net["#repetition"]
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        raise _Unknown
    return [max(c, 0) for c in counts]  # RETURNN repeats a step `range(count)` times

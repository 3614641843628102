"""TF1's names for a gradtx state: which checkpoint variable holds each leaf (no TensorFlow needed).

A TF1 optimizer creates its slots per variable in a fixed order, each named
`<variable>/<optimizer name>` and made unique by the graph: Adam's `m` is `dense/kernel/Adam`,
its `v` `dense/kernel/Adam_1`; centered RMSProp's `rms`, `mg`, `momentum` are `RMSProp`,
`RMSProp_1`, `RMSProp_2`. Ftrl's `accum_name` / `linear_name` replace the optimizer's name for
one slot. Non-slot variables have fixed names (`beta1_power`, `beta2_power`, made unique
across optimizers: `beta1_power_1`), and the step counter of every gradtx state is TF's
`global_step`. The moving averages of `ExponentialMovingAverage` / `MovingAverageOptimizer`
are `<variable>/ExponentialMovingAverage`. This module walks an (unpacked) state and gives each
leaf its TF name, from a table of the state classes that have TF1 counterparts.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Mapping

import jax

from gradtx import combinators, packing, transforms
from gradtx._core import checks as _checks
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx.checkpoint._common import is_named_tuple

GLOBAL_STEP = "global_step"
EMA = "ExponentialMovingAverage"


@dataclasses.dataclass(frozen=True)
class _Rule:
    """A state class's TF1 optimizer: its default `name`, its slots in creation order, its non-slots."""

    op_name: str
    slots: tuple[str, ...]
    non_slots: tuple[str, ...] = ()
    unkept: tuple[str, ...] = ()  # TF non-slot variables whose value gradtx does not need


_RULES: dict[type, _Rule] = {
    transforms.TraceState: _Rule("Momentum", ("momentum",)),
    transforms.ScaleByAdagradState: _Rule("Adagrad", ("accumulator",)),
    transforms.ScaleByAdagradDAState: _Rule(
        "AdagradDA", ("gradient_accumulator", "gradient_squared_accumulator")
    ),
    transforms.ScaleByAdadeltaState: _Rule("Adadelta", ("accum", "accum_update")),
    transforms.ScaleByAdamState: _Rule("Adam", ("m", "v"), ("beta1_power", "beta2_power")),
    # contrib's AdaMaxOptimizer is an AdamOptimizer: it creates beta2_power too, and never reads it
    transforms.ScaleByAdamaxState: _Rule("AdaMax", ("m", "v"), ("beta1_power",), unkept=("beta2_power",)),
    transforms.ScaleByFtrlState: _Rule("Ftrl", ("accum", "linear")),
    transforms.ScaleByProximalAdagradState: _Rule("ProximalAdagrad", ("accumulator",)),
    transforms.ScaleByProximalSGDState: _Rule("ProximalGradientDescent", ()),
    transforms.ScaleByRmspropState: _Rule("RMSProp", ("rms", "mg", "momentum")),
    transforms.ScaleByLarsState: _Rule("LARSOptimizer", ("momentum",)),
    transforms.ScaleByAddSignState: _Rule("AddSignOptimizer", ("m",)),
    transforms.ScaleByPowerSignState: _Rule("PowerSignOptimizer", ("m",)),
}
_RENAMES: dict[type, dict[str, str]] = {  # contrib's decoupled-decay optimizers keep their base's slots
    combinators.DecoupledWeightDecayState: {"Adam": "AdamW", "Momentum": "MomentumW"},
}
NON_SLOTS = frozenset({GLOBAL_STEP, *(n for r in _RULES.values() for n in r.non_slots + r.unkept)})
"""The names of TF1's non-slot optimizer variables (what `name_map` may rename besides parameters)."""


@dataclasses.dataclass(frozen=True)
class Ref:
    """Where one leaf of a gradtx tree lives in a TF1 checkpoint."""

    key: str  # the leaf's key path in the unpacked params or state (`jax.tree_util.keystr`)
    kind: str  # "param", "slot", "average", "non_slot" or "step"
    var: str  # the TF variable: a parameter's name, a non-slot's name, or `global_step`
    suffix: str = ""  # a slot's unique op name under `var` ("Adam_1"); "" for the variable itself
    what: str = ""  # for messages: "the slot `v` of the ScaleByAdamState at state[0]"
    param: str = ""  # the parameter a slot (or the parameter itself) belongs to, "dense/kernel"

    @property
    def name(self) -> str:
        return f"{self.var}/{self.suffix}" if self.suffix else self.var


@dataclasses.dataclass
class Plan:
    """The TF1 names of every parameter and state leaf."""

    params: list[Ref]
    state: list[Ref]
    unkept: set[str]
    averages: bool  # whether the state keeps moving averages
    global_step: str  # the name of TF's global step


def _unique(used: set[str], name: str) -> str:
    """The graph's unique name for `name`: `name`, else `name_1`, `name_2`, ..."""
    out, i = name, 0
    while out in used:
        i += 1
        out = f"{name}_{i}"
    used.add(out)
    return out


def _renamers(fn: str, name_map: Any, params: Mapping[str, Any]) -> tuple[Callable[[str], str], ...]:
    """The TF names of parameters (by key path) and of non-slot variables (by their default name)."""
    if name_map is None:
        return (lambda name: name,) * 2
    if callable(name_map):  # a function of the key path renames the parameters only
        return (lambda name: name_map(name) or name), (lambda name: name)
    if not isinstance(name_map, Mapping):
        raise TypeError(
            f"`{fn}`: `name_map` must be a dict from parameter paths (or non-slot names) to TF variable "
            f"names, or a function of the path; got {type(name_map).__name__}."
        )
    unknown = sorted(set(name_map) - set(params) - NON_SLOTS)
    if unknown:
        raise ValueError(
            f"`{fn}`: `name_map` names {unknown[:8]}, which are no parameters of `params` (they are "
            f"{sorted(params)[:8]}) nor TF's non-slot variables {sorted(NON_SLOTS)}."
        )
    bad = [k for k, v in name_map.items() if not (isinstance(v, str) and v)]
    if bad:
        raise TypeError(f"`{fn}`: `name_map` must map to non-empty strings; {bad[:8]} do not.")
    return (lambda name: name_map.get(name, name),) * 2


class _Walk:
    def __init__(
        self,
        fn: str,
        params: dict[str, str],
        rename: Callable[[str], str],
        optimizer_name: str | None,
        slot_op_names: Mapping[str, str] | None,
    ):
        self.fn, self.params, self.rename = fn, params, rename
        self.optimizer_name, self.slot_op_names = optimizer_name, dict(slot_op_names or {})
        self.refs: list[Ref] = []
        self.used: dict[str, set[str]] = {}  # TF variable -> the slot op names taken under it
        self.used_global: set[str] = set()
        self.unkept: set[str] = set()
        self.averages = False

    def count(self, key: str) -> None:
        self.refs.append(Ref(key, "step", self.rename(GLOBAL_STEP), what=f"the step counter state{key}"))

    def slots(self, key: str, field: str, tree: Any, op_name: str, owner: str, kind: str = "slot") -> None:
        for sub, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
            param = _masks.path_str(sub)
            if param not in self.params:
                raise ValueError(
                    f"`{self.fn}`: the slot `{field}` of {owner} has a leaf {param!r} that `params` has not."
                )
            var = self.params[param]
            suffix = _unique(self.used.setdefault(var, set()), op_name)
            what = f"the slot `{field}` of {param!r} in the {owner}"
            self.refs.append(Ref(f"{key}.{field}{jax.tree_util.keystr(sub)}", kind, var, suffix, what, param))

    def node(self, node: Any, key: str, names: Mapping[str, str]) -> None:
        if is_named_tuple(node):
            self.state(node, key, names)
        elif isinstance(node, (tuple, list)):
            for i, child in enumerate(node):
                self.node(child, f"{key}[{i}]", names)
        elif isinstance(node, dict):
            for k in sorted(node):
                self.node(node[k], f"{key}[{k!r}]", names)

    def state(self, node: Any, key: str, names: Mapping[str, str]) -> None:
        cls = type(node)
        owner = f"{cls.__name__} at state{key}"
        rule = _RULES.get(cls)
        if "count" in node._fields and node.count is not None:
            self.count(f"{key}.count")
        if rule is not None:
            uncovered = [
                f
                for f in node._fields
                if f not in ("count", *rule.slots, *rule.non_slots) and jax.tree.leaves(getattr(node, f))
            ]
            if uncovered:  # a field added to the class since this table was written: refuse, never guess
                raise ValueError(
                    f"`{self.fn}`: the {owner} has fields {uncovered} that have no TF1 names here."
                )
            op = self.optimizer_name or names.get(rule.op_name, rule.op_name)
            for field in rule.slots:
                if getattr(node, field) is not None:
                    self.slots(key, field, getattr(node, field), self.slot_op_names.get(field, op), owner)
            for field in rule.non_slots:
                var = _unique(self.used_global, self.rename(field))
                self.refs.append(Ref(f"{key}.{field}", "non_slot", var, what=f"`{field}` of the {owner}"))
            self.unkept.update(rule.unkept)
            return
        if cls is combinators.MovingAverageState:
            self.averages = True
            op = self.slot_op_names.get("averages", EMA)
            self.slots(key, "averages", node.averages, op, owner, kind="average")
            self.node(node.inner_state, f"{key}.inner_state", names)
            return
        names = {**names, **_RENAMES.get(cls, {})}
        for field in node._fields:
            value = getattr(node, field)
            if field == "count":
                continue
            mark = _protocol.mark_of(cls, field)
            if mark in (_protocol.SLOT, _protocol.SLOT_DICT) and jax.tree.leaves(value):
                raise ValueError(
                    f"`{self.fn}`: the {owner} keeps the slot `{field}`, and gradtx does not know the names "
                    f"TF1 gives it (it knows the states of {sorted(c.__name__ for c in _RULES)} and of "
                    "moving_average, adamw, momentumw)."
                )
            self.node(value, f"{key}.{field}", names)


def plan(
    fn: str,
    params: Any,
    state: Any,
    name_map: Any = None,
    optimizer_name: str | None = None,
    slot_op_names: Mapping[str, str] | None = None,
    swapped_averages: bool = False,
) -> Plan:
    """The TF1 names of the leaves of (unpacked) `params` and `state`."""
    if optimizer_name is not None and not (isinstance(optimizer_name, str) and optimizer_name):
        raise TypeError(f"`{fn}`: `optimizer_name` must be a non-empty string, got {optimizer_name!r}.")
    if slot_op_names is not None and not (
        isinstance(slot_op_names, Mapping) and all(isinstance(v, str) and v for v in slot_op_names.values())
    ):
        raise TypeError(
            f"`{fn}`: `slot_op_names` must map slot names to non-empty strings, got {slot_op_names!r}."
        )
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    paths = {_masks.path_str(p): jax.tree_util.keystr(p) for p, _ in flat}
    rename, rename_non_slot = _renamers(fn, name_map, paths)
    names = {path: rename(path) for path in paths}
    seen: dict[str, str] = {}
    for path, name in names.items():
        if name in seen:
            raise ValueError(
                f"`{fn}`: the parameters {seen[name]!r} and {path!r} both map to the TF variable {name!r}."
            )
        seen[name] = path
    param_refs = [Ref(paths[p], "param", n, what=f"the parameter {p!r}", param=p) for p, n in names.items()]
    walk = _Walk(fn, names, rename_non_slot, optimizer_name, slot_op_names)
    walk.node(state, "", {})
    state_refs = walk.refs
    if swapped_averages:  # MovingAverageOptimizer's swapping saver: the averages under the variables' names
        if not walk.averages:
            raise ValueError(f"`{fn}`: `swapped_averages=True`, but `tx` keeps no moving averages.")
        shadow = {r.param: r.suffix for r in state_refs if r.kind == "average"}
        param_refs = [dataclasses.replace(r, suffix=shadow.get(r.param, "")) for r in param_refs]
        state_refs = [dataclasses.replace(r, suffix="") if r.kind == "average" else r for r in state_refs]
    return Plan(param_refs, state_refs, walk.unkept, walk.averages, rename_non_slot(GLOBAL_STEP))


def describe(plan_: Plan) -> Iterator[tuple[str, str]]:
    """`(TF name, where in gradtx)` for every variable of a plan, the counters folded into one."""
    for r in plan_.params:
        yield r.name, f"params{r.key}"
    steps = [r for r in plan_.state if r.kind == "step"]
    for r in plan_.state:
        if r in steps:
            if r is steps[0]:
                yield r.name, " = ".join(f"state{s.key}" for s in steps)
        else:
            yield r.name, f"state{r.key}"


def tf1_names(
    tx: _protocol.GradientTransformation,
    params: _protocol.Params,
    name_map: Mapping[str, str] | Callable[[str], str | None] | None = None,
    *,
    optimizer_name: str | None = None,
    slot_op_names: Mapping[str, str] | None = None,
    swapped_averages: bool = False,
) -> dict[str, str]:
    """The TF1 checkpoint variables `from_tf1` reads and `to_tf1` writes, and where each goes in gradtx.

    No TensorFlow needed: use it to see why a checkpoint does not load, or to write the
    TF1 graph that will restore one.

    Args:
      tx: the gradtx optimizer.
      params: the parameters (arrays or `jax.ShapeDtypeStruct` objects, packed or not).
      name_map: TF variable names, as for `from_tf1`.
      optimizer_name: the `name` of the TF optimizer, if not its default.
      slot_op_names: per gradtx slot, the name TF creates it under, as for `from_tf1`.
      swapped_averages: the averages under the variables' names, as for `from_tf1`.

    Returns:
      ``{TF variable name: where in gradtx}``, e.g. ``{"w/Adam_1": "state[0].v['w']"}``;
      the step counters of the state all map from ``global_step``.

    Raises:
      ValueError: for a state whose TF1 names gradtx does not know, or a bad `name_map`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> names = gradtx.checkpoint.tf1_names(gradtx.adam(1e-3), {"dense": {"kernel": jnp.zeros((3, 2))}})
        >>> for tf_name, where in names.items():
        ...     print(f"{tf_name:20s} {where}")
        dense/kernel         params['dense']['kernel']
        global_step          state[0].count
        dense/kernel/Adam    state[0].m['dense']['kernel']
        dense/kernel/Adam_1  state[0].v['dense']['kernel']
        beta1_power          state[0].beta1_power
        beta2_power          state[0].beta2_power
    """
    fn = "tf1_names"
    _checks.check_transform(fn, "tx", tx)
    _checks.check_bool(fn, "swapped_averages", swapped_averages)
    flat_params = jax.eval_shape(packing.unpack, params)
    abstract_state = jax.eval_shape(lambda p: packing.unpack(tx.init(p)), params)
    return dict(
        describe(
            plan(fn, flat_params, abstract_state, name_map, optimizer_name, slot_op_names, swapped_averages)
        )
    )

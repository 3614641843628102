"""Names -> factories: gradtx names, TF class names, optimize_loss strings, TF argument names.

`get("MomentumOptimizer", learning_rate=0.1, momentum=0.9, use_nesterov=True)` builds the
same transform as `gradtx.momentum(0.1, 0.9, nesterov=True)`, so a TF config moves over
verbatim. Lookup ignores case, underscores and a trailing "Optimizer": `"lazy_adam"`,
`"LazyAdam"` and `"LazyAdamOptimizer"` are one name.

Every factory of the library is registered here, with `example` arguments that build a
working instance: the contract suite (tests/test_contract.py) runs over all of them, and
the README's catalogue table is generated from them.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import inspect
from typing import Any, Callable, Mapping

import jax

from gradtx import _base, _tree, combinators, optimizers, parallel, transforms

KINDS = ("optimizer", "transform", "wrapper")
"""The kinds of entries: full optimizers, transforms from plain arguments, wrappers of a transform."""

TF_ARG_NAMES: Mapping[str, str] = {
    "beta1": "b1",
    "beta2": "b2",
    "epsilon": "eps",
    "use_nesterov": "nesterov",
    "l1_regularization_strength": "l1",
    "l2_regularization_strength": "l2",
    "l2_shrinkage_regularization_strength": "l2_shrinkage",
    "decay_var_list": "mask",
    "skip_list": "skip",
    "sign_decay_fn": "sign_decay",
    "opt": "tx",
    "optimizer": "tx",
}
"""TF argument name -> gradtx argument name; applied when the factory takes the gradtx name."""

TF_IGNORED_ARGS = ("use_locking", "name", "accum_name", "linear_name", "num_worker", "is_chief",
                   "ea_custom_getter", "ma_custom_getter", "custom_getter", "synchronous")
"""TF constructor arguments with no meaning for a pure transform (variable names, locking): accepted and dropped."""

SPARSE_RULES = ("rows", "all_rows", "dense", "custom")
"""What a row-sparse gradient does to an entry's transform (see `Entry.sparse`)."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One registered factory.

    Attributes:
      name: the gradtx name (`gradtx.<name>`).
      factory: the function that builds the transform.
      kind: "optimizer" (a full optimizer), "transform" (a building block or combinator
        from plain arguments) or "wrapper" (takes a transform, e.g. `moving_average`).
      aliases: other accepted names (TF class names, optimize_loss strings, RETURNN names).
      example: keyword arguments that build a working instance (docs and contract tests).
      reference: the system it reproduces, as shown in the README table.
      sparse: what a row-sparse gradient does (checked by the contract suite): "rows" --
        only the touched rows of the params and slots change, exactly as the dense rule
        applied to those rows alone; "all_rows" -- TF's rule that touches every row (TF1
        Adam); "dense" -- the gradient is densified first, same result as dense;
        "custom" -- a mix documented on the factory and tested there.
      extra_args: for transforms whose `update` needs extra arguments (e.g. AdamGS's
        `global_step`), a function of the 0-based step returning them.
    """

    name: str
    factory: Callable[..., _base.GradientTransformation]
    kind: str
    aliases: tuple[str, ...] = ()
    example: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reference: str = ""
    sparse: str = "rows"
    extra_args: Callable[[int], dict] | None = None

    def extra(self, step: int) -> dict:
        """The extra arguments of `update` at 0-based step `step` (`{}` for most entries)."""
        return {} if self.extra_args is None else self.extra_args(step)

    def build(self, **overrides: Any) -> _base.GradientTransformation:
        """The transform made from `example` updated with `overrides`."""
        return self.factory(**{**self.example, **overrides})


def _key(name: str) -> str:
    k = name.lower().replace("_", "").replace("-", "")
    return k[: -len("optimizer")] if k.endswith("optimizer") and k != "optimizer" else k


_ENTRIES: dict[str, Entry] = {}
_LOOKUP: dict[str, str] = {}


def register(entry: Entry) -> Entry:
    """Add an entry; its name and aliases must not collide with a registered one.

    A factory registered this way is found by `gradtx.get` and `from_config` under each
    of its names, and joins the contract tests (tests/test_contract.py).

    Args:
      entry: the `Entry` to add (re-registering the same name replaces it).

    Returns:
      `entry`.

    Raises:
      ValueError: on a name collision or an unknown kind.

    Example:
        >>> import gradtx
        >>> from gradtx import registry
        >>> e = registry.register(registry.Entry("my_sgd", gradtx.sgd, "optimizer", aliases=("MySGD",),
        ...                                      example={"learning_rate": 0.1}))
        >>> registry.entry("MySGD").name
        'my_sgd'
        >>> _ = registry.unregister("my_sgd")  # and gone again
    """
    _base.check_one_of("register", "kind", entry.kind, KINDS)
    _base.check_one_of("register", "sparse", entry.sparse, SPARSE_RULES)
    for n in (entry.name, *entry.aliases):
        owner = _LOOKUP.get(_key(n))
        if owner is not None and owner != entry.name:
            raise ValueError(f"`register`: the name {n!r} of {entry.name!r} is already taken by {owner!r}.")
    _ENTRIES[entry.name] = entry
    for n in (entry.name, *entry.aliases):
        _LOOKUP[_key(n)] = entry.name
    return entry


def unregister(name: str) -> Entry:
    """Remove an entry and its aliases (e.g. one a test or notebook registered).

    Args:
      name: any name of the entry.

    Returns:
      The removed `Entry`.

    Raises:
      UnknownNameError: for an unknown name.

    Example:
        >>> import gradtx
        >>> from gradtx import registry
        >>> _ = registry.register(registry.Entry("tmp_sgd", gradtx.sgd, "optimizer"))
        >>> registry.unregister("tmp_sgd").name, "tmp_sgd" in registry.names()
        ('tmp_sgd', False)
    """
    e = entry(name)
    del _ENTRIES[e.name]
    for n in (e.name, *e.aliases):
        _LOOKUP.pop(_key(n), None)
    return e


def entries(kind: str | None = None) -> tuple[Entry, ...]:
    """All registered entries (of one `kind` if given), sorted by name.

    Args:
      kind: "optimizer", "transform", "wrapper", or None for all.

    Returns:
      A tuple of `Entry`.

    Example:
        >>> from gradtx import registry
        >>> [e.name for e in registry.entries("optimizer")][:3]
        ['adadelta', 'adagrad', 'adagrad_da']
    """
    if kind is not None:
        _base.check_one_of("entries", "kind", kind, KINDS)
    return tuple(e for _, e in sorted(_ENTRIES.items()) if kind is None or e.kind == kind)


def entry(name: str) -> Entry:
    """The entry for a gradtx name, TF class name or alias.

    Args:
      name: e.g. "adam", "AdamOptimizer", "Adam" (case and underscores do not matter).

    Returns:
      The registered `Entry`.

    Raises:
      UnknownNameError: (a KeyError and a ValueError) for an unknown name, listing the
        closest registered names.

    Example:
        >>> from gradtx import registry
        >>> e = registry.entry("MomentumOptimizer")
        >>> e.name, e.reference
        ('momentum', 'tf.compat.v1.train.MomentumOptimizer')
    """
    found = _LOOKUP.get(_key(name)) if isinstance(name, str) else None
    if found is None:
        by_key = {_key(n): e.name for e in _ENTRIES.values() for n in (e.name, *e.aliases)}
        close_keys = difflib.get_close_matches(_key(str(name)), list(by_key), n=8, cutoff=0.6)
        close = list(dict.fromkeys(by_key[k] for k in close_keys))[:4]
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise _base.UnknownNameError(
            f"`gradtx.get`: unknown optimizer or transform {name!r}.{hint} "
            f"All names: gradtx.registry.names()."
        )
    return _ENTRIES[found]


def names(kind: str | None = None) -> tuple[str, ...]:
    """The gradtx names of all entries (of one `kind` if given), sorted.

    Args:
      kind: "optimizer", "transform", "wrapper", or None for all.

    Returns:
      A tuple of names.

    Example:
        >>> from gradtx import registry
        >>> "lazy_adam" in registry.names("optimizer"), "chain" in registry.names("optimizer")
        (True, False)
    """
    return tuple(e.name for e in entries(kind))


def translate_kwargs(name: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Rename TF argument names to gradtx's for the factory `name`, dropping `use_locking`/`name`.

    Args:
      name: any name of a registered factory.
      kwargs: the arguments as TF (or gradtx) spells them.

    Returns:
      The arguments under the factory's own names.

    Raises:
      TypeError: for an argument the factory does not take, or one given under both names.

    Example:
        >>> from gradtx import registry
        >>> registry.translate_kwargs("AdamOptimizer", {"beta1": 0.8, "epsilon": 1e-7, "use_locking": False})
        {'b1': 0.8, 'eps': 1e-07}
    """
    e = entry(name)
    params = inspect.signature(e.factory).parameters
    takes_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    out: dict[str, Any] = {}
    for k, v in kwargs.items():
        if k in TF_IGNORED_ARGS and k not in params:
            continue
        target = TF_ARG_NAMES.get(k, k) if k not in params else k
        if target not in params and not takes_var_kw:
            own = [p for p in params if params[p].kind is not inspect.Parameter.VAR_POSITIONAL]
            spellings = own + [tf for tf, ours in TF_ARG_NAMES.items() if ours in params]
            close = difflib.get_close_matches(k, spellings, n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""
            raise TypeError(f"`gradtx.get({name!r})`: unknown argument `{k}`; `{e.name}` takes {', '.join(own)}.{hint}")
        if target in out:
            raise TypeError(f"`gradtx.get({name!r})`: `{target}` is given twice (as `{k}` and as `{target}`).")
        out[target] = v
    return out


def get(name: str, /, **kwargs: Any) -> _base.GradientTransformation:
    """Build a registered optimizer or transform by name, with TF's argument names accepted.

    Args:
      name: a gradtx name (`"momentum"`), a TF class name (`"MomentumOptimizer"`), or an
        optimize_loss string (`"Momentum"`, `"SGD"`); case, underscores and a trailing
        "Optimizer" are ignored.
      **kwargs: the factory's arguments, under gradtx or TF names (`use_nesterov`,
        `beta1`, `epsilon`, `l1_regularization_strength`, ...). TF's `use_locking` and
        `name` are accepted and ignored.

    Returns:
      The `GradientTransformation`.

    Raises:
      UnknownNameError: (a KeyError and a ValueError) for an unknown name; the message
        lists close names.
      TypeError: for an argument the factory does not take.

    Example:
        >>> import gradtx
        >>> tx = gradtx.get("MomentumOptimizer", learning_rate=0.1, momentum=0.9, use_nesterov=True)
        >>> type(tx).__name__
        'GradientTransformation'
    """
    return entry(name).factory(**translate_kwargs(name, kwargs))


def from_config(config: Mapping[str, Any]) -> _base.GradientTransformation:
    """Build an optimizer from a RETURNN-style config dict: `{"class": name, **arguments}`.

    RETURNN's `optimizer = {"class": "adam", "epsilon": 1e-8}` moves over verbatim: the
    class is any name `get` accepts and the arguments may use TF's names. RETURNN passes
    the learning rate separately; put it in the dict as `learning_rate`.

    Args:
      config: a dict with the key `"class"` and the factory's arguments.

    Returns:
      The `GradientTransformation`.

    Raises:
      TypeError: if `config` is not a dict with a string `"class"`, or an argument is unknown.
      UnknownNameError: for an unknown class.

    Example:
        >>> import gradtx
        >>> tx = gradtx.from_config({"class": "adam", "learning_rate": 1e-3, "epsilon": 1e-6})
    """
    if not isinstance(config, Mapping) or not isinstance(config.get("class"), str):
        raise TypeError(f"`from_config`: `config` must be a dict with a string \"class\", got {config!r}.")
    kwargs = {k: v for k, v in config.items() if k != "class"}
    return get(config["class"], **kwargs)


# --------------------------------------------------------------------------- the catalogue

_TF1 = "tf.compat.v1.train"


def _optimizer(name, factory, aliases, example, reference, sparse="rows", extra_args=None):
    register(Entry(name, factory, "optimizer", aliases=aliases, example=example, reference=reference, sparse=sparse,
                   extra_args=extra_args))


def _transform(name, factory, example=None, sparse="rows", extra_args=None):
    register(Entry(name, factory, "transform", example=example or {}, sparse=sparse, extra_args=extra_args))


def _wrapper(name, factory, example, sparse="rows"):
    register(Entry(name, factory, "wrapper", example=example, sparse=sparse))


def _global_step(step: int) -> dict:
    """AdamGS's extra argument: TF's global step as read during the step (t - 1)."""
    return {"global_step": step}


def _lars_learning_rate(count):
    """An example LARS rate: a decaying schedule (a constant rate keeps LARS oscillating near the optimum)."""
    return 1.0 * 0.99 ** count


def _custom_sgd_slots(param):
    """`per_leaf` example (RETURNN's CustomGradientDescentOptimizer): no slots."""
    del param
    return {}


def _custom_sgd_apply(grad, param, slots, count, learning_rate):
    """`per_leaf` example: the step to subtract is `learning_rate * grad`."""
    del param, count
    return learning_rate * grad, slots


def _halve(grads, params):
    """An example `transform_gradients` function: halve every gradient (row-sparse ones in their values)."""
    del params
    return jax.tree.map(lambda g: g.with_values(g.values / 2) if _tree.is_row_sparse(g) else g / 2,
                        grads, is_leaf=_tree.is_row_sparse)


def _by_rank(params):
    """An example `partition` labelling: matrices and vectors/scalars."""
    return jax.tree.map(lambda p: "matrices" if len(p.shape) >= 2 else "vectors", params)


# tf.train
_optimizer("sgd", optimizers.sgd, ("gradient_descent", "GradientDescent", "SGD"),
           {"learning_rate": 0.1}, f"{_TF1}.GradientDescentOptimizer")
_optimizer("momentum", optimizers.momentum, ("Momentum",),
           {"learning_rate": 0.05, "momentum": 0.9}, f"{_TF1}.MomentumOptimizer")
_optimizer("adagrad", optimizers.adagrad, ("Adagrad",),
           {"learning_rate": 0.5, "initial_accumulator_value": 0.1}, f"{_TF1}.AdagradOptimizer")
_optimizer("adagrad_da", optimizers.adagrad_da, ("AdagradDA",),
           {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001}, f"{_TF1}.AdagradDAOptimizer")
_optimizer("adadelta", optimizers.adadelta, ("Adadelta",),
           {"learning_rate": 1.0, "rho": 0.9, "eps": 1e-3}, f"{_TF1}.AdadeltaOptimizer")
_optimizer("adam", optimizers.adam, ("Adam",),
           {"learning_rate": 0.05, "b1": 0.9, "b2": 0.999, "eps": 1e-8}, f"{_TF1}.AdamOptimizer", sparse="all_rows")
_optimizer("ftrl", optimizers.ftrl, ("Ftrl",),
           {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001, "l2_shrinkage": 0.001}, f"{_TF1}.FtrlOptimizer")
_optimizer("proximal_adagrad", optimizers.proximal_adagrad, ("ProximalAdagrad",),
           {"learning_rate": 0.5, "l1": 0.001, "l2": 0.001}, f"{_TF1}.ProximalAdagradOptimizer")
_optimizer("proximal_sgd", optimizers.proximal_sgd, ("proximal_gradient_descent", "ProximalGradientDescent"),
           {"learning_rate": 0.1, "l1": 0.001, "l2": 0.001}, f"{_TF1}.ProximalGradientDescentOptimizer")
_optimizer("rmsprop", optimizers.rmsprop, ("RMSProp",),
           {"learning_rate": 0.01, "decay": 0.9, "momentum": 0.5, "eps": 1e-10}, f"{_TF1}.RMSPropOptimizer")

# tf.contrib.opt
_CONTRIB = "tf.contrib.opt"
_optimizer("adamax", optimizers.adamax, ("AdaMax",), {"learning_rate": 0.05}, f"{_CONTRIB}.AdaMaxOptimizer")
_optimizer("adam_gs", optimizers.adam_gs, ("AdamGS",), {"learning_rate": 0.05}, f"{_CONTRIB}.AdamGSOptimizer",
           sparse="all_rows", extra_args=_global_step)
_optimizer("lazy_adam", optimizers.lazy_adam, ("LazyAdam",), {"learning_rate": 0.05}, f"{_CONTRIB}.LazyAdamOptimizer")
_optimizer("lazy_adam_gs", optimizers.lazy_adam_gs, ("LazyAdamGS",), {"learning_rate": 0.05},
           f"{_CONTRIB}.LazyAdamGSOptimizer", extra_args=_global_step)
_optimizer("nadam", optimizers.nadam, ("Nadam",), {"learning_rate": 0.05}, f"{_CONTRIB}.NadamOptimizer",
           sparse="custom")
_optimizer("adamw", optimizers.adamw, ("AdamW",), {"learning_rate": 0.05, "weight_decay": 0.001},
           f"{_CONTRIB}.AdamWOptimizer", sparse="custom")
_optimizer("momentumw", optimizers.momentumw, ("MomentumW",),
           {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 0.001}, f"{_CONTRIB}.MomentumWOptimizer")
_optimizer("lars", optimizers.lars, ("LARS",),
           {"learning_rate": _lars_learning_rate, "momentum": 0.9, "weight_decay": 1e-4, "eeta": 0.01,
            "skip": ("bias", "scalar")}, f"{_CONTRIB}.LARSOptimizer", sparse="custom")
_optimizer("addsign", optimizers.addsign, ("AddSign",),
           {"learning_rate": 0.1, "alpha": 1.0, "beta": 0.9, "sign_decay": 0.5}, f"{_CONTRIB}.AddSignOptimizer",
           sparse="custom")
_optimizer("powersign", optimizers.powersign, ("PowerSign",),
           {"learning_rate": 0.1, "base": math.e, "beta": 0.9, "sign_decay": 0.5}, f"{_CONTRIB}.PowerSignOptimizer",
           sparse="custom")
_optimizer("ggt", optimizers.ggt, ("GGT",),
           {"learning_rate": 0.05, "b1": 0.9, "eps": 1e-4, "svd_eps": 1e-6, "sigma_eps": 1e-2},
           f"{_CONTRIB}.GGTOptimizer", sparse="dense")
_optimizer("shampoo", optimizers.shampoo, ("Shampoo",),
           {"learning_rate": 0.5, "eps": 0.1, "gbar_weight": 1.0, "mat_gbar_decay": 1.0,
            "mat_gbar_weight": 1.0, "alpha": 0.5},
           f"{_CONTRIB}.ShampooOptimizer", sparse="dense")
_optimizer("reg_adagrad", optimizers.reg_adagrad, ("RegAdagrad",), {"learning_rate": 0.5},
           f"{_CONTRIB}.RegAdagradOptimizer")

# RETURNN
_RETURNN = "RETURNN"
_optimizer("amsgrad", optimizers.amsgrad, ("AMSGrad",), {"learning_rate": 0.05, "eps": 1e-8},
           f"{_RETURNN} AMSGradOptimizer", sparse="dense")
_optimizer("grad_variance_scaled", optimizers.grad_variance_scaled, ("GradVarianceScaled",),
           {"learning_rate": 0.1}, f"{_RETURNN} GradVarianceScaledOptimizer", sparse="custom")
_optimizer("neural_optimizer1", optimizers.neural_optimizer1, ("NeuralOptimizer1",), {"learning_rate": 0.1},
           f"{_RETURNN} NeuralOptimizer1", sparse="custom")
_optimizer("normalized_sgd", optimizers.normalized_sgd, ("NormalizedSGD",), {"learning_rate": 0.02},
           f"{_RETURNN} NormalizedSGD", sparse="custom")

# building blocks and combinators
_transform("identity", combinators.identity)
_transform("scale", transforms.scale, {"step_size": -0.1})
_transform("scale_by_learning_rate", transforms.scale_by_learning_rate, {"learning_rate": 0.1})
_transform("scale_by_schedule", transforms.scale_by_schedule, {"step_size_fn": lambda count: -0.1 / (1.0 + 0.01 * count)})
_transform("trace", transforms.trace, {"momentum": 0.9})
_transform("scale_by_adagrad", transforms.scale_by_adagrad, {"initial_accumulator_value": 0.1})
_transform("scale_by_adagrad_da", transforms.scale_by_adagrad_da, {"learning_rate": 0.5, "l1": 0.001})
_transform("scale_by_adadelta", transforms.scale_by_adadelta, {"rho": 0.9, "eps": 1e-3})
_transform("scale_by_adam", transforms.scale_by_adam, {"b1": 0.9, "b2": 0.999, "eps": 1e-8}, sparse="all_rows")
_transform("scale_by_ftrl", transforms.scale_by_ftrl, {"learning_rate": 0.5, "l1": 0.001, "l2_shrinkage": 0.001})
_transform("scale_by_proximal_adagrad", transforms.scale_by_proximal_adagrad, {"learning_rate": 0.5, "l1": 0.001})
_transform("scale_by_proximal_sgd", transforms.scale_by_proximal_sgd, {"learning_rate": 0.1, "l1": 0.001})
_transform("scale_by_rmsprop", transforms.scale_by_rmsprop, {"learning_rate": 0.01, "momentum": 0.5})
_transform("scale_by_adamax", transforms.scale_by_adamax, {"b1": 0.9, "b2": 0.999, "eps": 1e-8})
_transform("scale_by_amsgrad", transforms.scale_by_amsgrad, {"b1": 0.9, "b2": 0.99, "eps": 1e-8}, sparse="dense")
_transform("scale_by_lars", transforms.scale_by_lars, {"momentum": 0.9, "weight_decay": 1e-4, "eeta": 0.001},
           sparse="custom")
_transform("scale_by_neural_optimizer1", transforms.scale_by_neural_optimizer1, {"b1": 0.9, "decrease_factor": 0.1},
           sparse="custom")
_transform("scale_by_grad_variance", transforms.scale_by_grad_variance, {"b1": 0.9, "b2": 0.999, "eps": 1e-8},
           sparse="custom")
_transform("scale_by_l2_normalization", transforms.scale_by_l2_normalization, {"eps": 1e-12}, sparse="custom")
_transform("scale_by_addsign", transforms.scale_by_addsign, {"alpha": 1.0, "beta": 0.9, "sign_decay": 0.5},
           sparse="custom")
_transform("scale_by_powersign", transforms.scale_by_powersign, {"base": 2.0, "beta": 0.9, "sign_decay": 0.5},
           sparse="custom")
_transform("scale_by_ggt", transforms.scale_by_ggt, {"b1": 0.9, "eps": 1e-4}, sparse="dense")
_transform("scale_by_shampoo", transforms.scale_by_shampoo, {"eps": 0.1}, sparse="dense")
_transform("per_leaf", transforms.per_leaf,
           {"init_slots": _custom_sgd_slots, "apply": _custom_sgd_apply, "learning_rate": 0.1}, sparse="dense")
_transform("clip_variables", combinators.clip_variables, {"max_norm": 1.0, "dims": {"kernel": [1]}})
# TF clips an IndexedSlices by its values as they are (duplicates included): "custom".
_transform("clip", combinators.clip, {"max_delta": 0.5}, sparse="custom")
_transform("clip_by_norm", combinators.clip_by_norm, {"max_norm": 0.5}, sparse="custom")
_transform("clip_by_global_norm", combinators.clip_by_global_norm, {"max_norm": 0.5}, sparse="custom")
_transform("transform_gradients", combinators.transform_gradients, {"fn": _halve})
_transform("add_noise", combinators.add_noise, {"scale": 0.01, "seed": 0}, sparse="dense")
_transform("scale_gradients", combinators.scale_gradients, {"multipliers": {"kernel": 0.5, "bias": 2.0}})
_transform("add_decayed_weights", combinators.add_decayed_weights, {"weight_decay": 0.01})
_transform("freeze", combinators.freeze, {"mask": ["bias"]})
_wrapper("masked", combinators.masked, {"inner": optimizers.sgd(0.1), "mask": ["kernel"]})
_wrapper("partition", combinators.partition,
         {"transforms": {"matrices": optimizers.sgd(0.1), "vectors": optimizers.momentum(0.05, 0.9)},
          "param_labels": _by_rank})
_wrapper("accumulate_gradients", combinators.accumulate_gradients,
         {"tx": optimizers.momentum(0.05, 0.9), "every_k": 2}, sparse="dense")
_wrapper("apply_if_finite", combinators.apply_if_finite, {"tx": optimizers.adam(0.05), "max_consecutive_errors": 3},
         sparse="all_rows")
_wrapper("fused", combinators.fused,
         {"tx": combinators.chain(transforms.scale_by_adam(), transforms.scale_by_learning_rate(0.05))},
         sparse="all_rows")
_wrapper("decoupled_weight_decay", combinators.decoupled_weight_decay,
         {"tx": optimizers.momentum(0.05, 0.9), "weight_decay": 0.01})
_wrapper("moving_average", combinators.moving_average, {"tx": optimizers.sgd(0.1), "average_decay": 0.9,
                                                         "num_updates": True})

# gradtx.parallel: run `update` inside jax.shard_map / jax.pmap over `axis_name`
_SGD = optimizers.sgd(0.1)
register(Entry("cross_shard", parallel.cross_shard, "wrapper", aliases=("CrossShardOptimizer",),
               example={"tx": _SGD, "axis_name": "data"}, reference="tf.contrib.tpu.CrossShardOptimizer"))
register(Entry("tower_reduce", parallel.tower_reduce, "wrapper", aliases=("TowerOptimizer",),
               example={"tx": _SGD, "axis_name": "data"},
               reference="tf.contrib.estimator.TowerOptimizer (replicate_model_fn)"))
register(Entry("sync_replicas", parallel.sync_replicas, "wrapper", aliases=("SyncReplicasOptimizer", "SyncReplicas"),
               example={"tx": _SGD, "axis_name": "data", "replicas_to_aggregate": 1},
               reference=f"{_TF1}.SyncReplicasOptimizer", sparse="dense"))
register(Entry("model_average", parallel.model_average, "wrapper", aliases=("ModelAverageOptimizer",),
               example={"tx": _SGD, "axis_name": "data", "interval_steps": 2},
               reference=f"{_CONTRIB}.ModelAverageOptimizer", sparse="custom"))
register(Entry("elastic_average", parallel.elastic_average, "wrapper", aliases=("ElasticAverageOptimizer",),
               example={"tx": _SGD, "axis_name": "data", "communication_period": 2, "moving_rate": 0.1, "rho": 0.05},
               reference=f"{_CONTRIB}.ElasticAverageOptimizer", sparse="custom"))
register(Entry("agn", parallel.agn, "wrapper", aliases=("AGNOptimizer",),
               example={"tx": _SGD, "axis_name": "data", "communication_period": 2},
               reference=f"{_CONTRIB}.AGNOptimizer", sparse="custom"))
register(Entry("drop_stale_gradients", parallel.drop_stale_gradients, "wrapper",
               aliases=("DropStaleGradientOptimizer", "DropStaleGradient"),
               example={"tx": _SGD, "staleness": 1}, extra_args=lambda t: {"grad_step": t},
               reference=f"{_CONTRIB}.DropStaleGradientOptimizer"))
register(Entry("sharded_state", parallel.sharded_state, "wrapper", aliases=("ZeRO1",),
               example={"tx": _SGD, "axis_name": "data"}, reference="ZeRO stage 1 (beyond the seeds)", sparse="dense"))

OPTIMIZER_NAMES: tuple[str, ...] = names("optimizer")
"""The gradtx names of the built-in optimizers, sorted (`names("optimizer")` includes later registrations)."""


__all__ = ["Entry", "KINDS", "OPTIMIZER_NAMES", "SPARSE_RULES", "TF_ARG_NAMES", "TF_IGNORED_ARGS", "entries",
           "entry", "from_config", "get", "names", "register", "translate_kwargs", "unregister"]

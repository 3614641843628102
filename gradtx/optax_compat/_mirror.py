"""How the mirror is built: a function with optax's signature, name and state classes around a gradtx factory.

The tables (`_table*.py`) say which gradtx factory, or recipe of them, gives each optax name's numbers;
this module makes the function: optax's signature (from the generated `_signatures.py`), the call's
arguments bound by optax's names and handed to the recipe, the rules' states in optax's classes
(`restated`: no cost per step, or `relaid` at the boundary where optax's layout differs), and a
docstring written from the recipe's and the gradtx factories' Args, so that nothing is retyped.
"""

from __future__ import annotations

import ast
import inspect
import types
from typing import Any, Callable, Mapping, NamedTuple

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import naming as _naming
from gradtx._core.docs import args_section
from gradtx._core.restated import restated
from gradtx.optax_compat._signatures import SIGNATURES

MODULE = "gradtx.optax_compat"
"""The module the mirrored functions say they are from (their checkpoint names read `optax_compat.<name>`)."""

MARKERS: dict[str, Any] = {}
"""Defaults that are no literals, by the marker the generated signatures write: `"<parameter>"` (filled by the
table before the functions that take them)."""


def signature(path: str) -> inspect.Signature:
    """optax's signature of `optax.<path>` (names, kinds and defaults), from `_signatures.py`."""
    node = ast.parse(f"def f({SIGNATURES[path]}): pass").body[0]
    assert isinstance(node, ast.FunctionDef)
    args = node.args
    params = []

    def default(expr: ast.expr | None) -> Any:
        if expr is None:
            return inspect.Parameter.empty
        value = ast.literal_eval(expr)
        return MARKERS[value] if isinstance(value, str) and value.startswith("<") else value

    positional = args.args
    pos_defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for a, d in zip(positional, pos_defaults, strict=True):
        params.append(inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default(d)))
    if args.vararg is not None:
        params.append(inspect.Parameter(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY, default=default(d)))
    if args.kwarg is not None:
        params.append(inspect.Parameter(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def forward(fn: Callable[..., Any], a: types.SimpleNamespace, **overrides: Any) -> Any:
    """`fn` called with the arguments of the namespace `a` that it takes (by name), `overrides` added:
    a recipe passing its optax arguments on to the block of the same names."""
    names = inspect.signature(fn).parameters
    return fn(**{**{k: v for k, v in vars(a).items() if k in names}, **overrides})


OUT_OF_SCOPE = {
    "perturbations": (
        "optax's Monte-Carlo smoothing of a function, for differentiating through discrete choices "
        "(Berthet et al. 2020), is a tool for models, not a transform of gradients, and gradtx does not "
        "mirror it; an import statement reads the installed optax package whatever name this module is "
        "bound to, so `from optax import perturbations` (with optax installed) gives optax's own"
    ),
}
"""optax's public names (`module` or `module.name`, under `optax.`) that gradtx does not mirror, and why."""


def missing(module: str, name: str) -> AttributeError:
    """The error for a name that the mirror's `module` lacks (with the reason where it is out of scope)."""
    within = module.removeprefix(MODULE).lstrip(".")
    path = f"{within}.{name}" if within else name
    reason = OUT_OF_SCOPE.get(path) or OUT_OF_SCOPE.get(path.split(".", 1)[0])
    if reason is not None:
        return AttributeError(f"`{module}` has no `{name}`: {reason}.")
    return AttributeError(
        f"`{module}` has no `{name}`: it is not optax's name there, or gradtx does not give optax's numbers "
        f"under it yet (the names it has: `{module}.__all__`)."
    )


def public(module: Any) -> dict[str, Any]:
    """The names a table or hand-written module defines for optax (made there, not imported there)."""
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) in (MODULE, module.__name__)
    }


# --------------------------------------------------------------------------- state classes

CLASSES: dict[str, Any] = {}
"""optax's state classes, by name: each made once, from the gradtx state it renames."""


def state_class(
    name: str,
    source: Any,
    rename: Mapping[str, str] | None = None,
    *,
    count: bool = True,
    order: tuple[str, ...] | None = None,
) -> Any:
    """optax's state class `name`: the fields of gradtx's `source` renamed by `rename` (without the count
    when `count` is False; in optax's `order` when it differs), annotations and the slot-shape mark kept.
    One class per name: two gradtx states that optax keeps in one class (Adam's, RAdam's, Yogi's
    `ScaleByAdamState`) share it."""
    rename = dict(rename or {})
    hints = {rename.get(f, f): t for f, t in source.__annotations__.items()}
    names = [rename.get(f, f) for f in source._fields if count or f != "count"]
    if order is not None:
        if sorted(order) != sorted(names):
            raise TypeError(f"optax's {name}: the order {order} is not of the fields {names}")
        names = list(order)
    fields = [(f, hints.get(f, Any)) for f in names]
    known = CLASSES.get(name)
    if known is not None:
        if list(known._fields) != [f for f, _ in fields]:
            raise TypeError(f"optax's {name} has fields {known._fields}, not {[f for f, _ in fields]}")
        return known
    cls: Any = NamedTuple(name, fields)  # type: ignore[misc]  # (a class made at run time)
    cls.__module__ = MODULE
    cls.__doc__ = f"optax's `{name}`: the state of gradtx's `{source.__name__}` under optax's names."
    shaped = getattr(source, "slots_shaped_like_params", None)
    if shaped is not None:
        renamed = shaped if isinstance(shaped, bool) else tuple(rename.get(f, f) for f in shaped)
        setattr(cls, "slots_shaped_like_params", renamed)  # noqa: B010  (not a field)
    CLASSES[name] = cls
    return cls


def relaid(tx: Any, to_optax: Callable[[Any], Any], from_optax: Callable[[Any], Any]) -> Any:
    """`tx` with its state shown in optax's layout: `to_optax(state)` after each call, `from_optax` before."""
    inner = _factory.member(tx)

    def init_fn(params):
        return to_optax(inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        updates, state = inner.update(updates, from_optax(state), params, **extra_args)
        return updates, to_optax(state)

    return _factory.composite(init_fn, update_fn, inner)


# --------------------------------------------------------------------------- docstrings


_PARAM_DOCS: dict[str, str] = {}


def param_docs() -> dict[str, str]:
    """How gradtx describes each argument name (the first description of it found in the public API)."""
    if not _PARAM_DOCS:
        for module in (gradtx.transforms, gradtx.optimizers, gradtx.combinators, gradtx.schedules):
            for name in module.__all__:
                for arg, text in args_section(getattr(getattr(module, name), "__doc__", "") or "").items():
                    _PARAM_DOCS.setdefault(arg, text)
    return _PARAM_DOCS


OPTAX_ARGS = {
    "weight_decay_mask": "True where the weights decay: a tree of bools (or a prefix), a function of the "
    "params, or None for all.",
    "trust_ratio_mask": "True where the trust ratio scales the updates (a mask, as `weight_decay_mask`).",
    "betas": "`(b1, b2)`: the decays of the first and second moments.",
    "beta3": "the decay of the estimate's running sums; None: `sqrt(b2)`.",
    "dtype_momentum": "the dtype of the momentum's average.",
    "weight_decay_rate": "the weight decay, or None for none.",
    "epsilon": "added to the factored second moment (gradtx's `eps`).",
    "optimism": "the optimism, `beta` of the optimistic gradient; None: `learning_rate`.",
    "muon_weight_dimension_numbers": "the leaves Muon orthogonalises (a `MuonDimensionNumbers` each, None "
    "for Adam's), or None for the 2-D leaves.",
    "optimizer": "the optimizer of the descent step, at the perturbed params.",
    "adv_optimizer": "the optimizer of the adversarial (ascent) step.",
    "batch_axis_name": "in opaque mode, the axis `grad_fn`'s gradients are averaged over, or None.",
    "value": "the value to hold.",
}
"""How the mirror describes optax's arguments that no gradtx function takes."""

RETURNS = {
    "transform": "A `GradientTransformation` with optax's numbers, its state in optax's classes.",
    "schedule": "A schedule `count -> float32 scalar`.",
    "deprecated": "What the name optax deprecated it for returns, after a `DeprecationWarning`.",
}
USE = {
    "transform": [">>> tx = {call}", '>>> state = tx.init({{"w": jnp.zeros(3)}})'],
    "schedule": [">>> lr = {call}", ">>> value = lr(10)"],
    "function": [">>> out = {call}"],
    "deprecated": [
        ">>> import warnings",
        ">>> with warnings.catch_warnings():",
        '...     warnings.simplefilter("ignore")',
        "...     out = {call}",
    ],
}
"""What a mirrored function returns, and how its example uses it, by kind."""


def docstring(
    path: str,
    sig: inspect.Signature,
    summary: str,
    sources: tuple[Any, ...],
    example: str,
    kind: str,
    returns: str,
) -> str:
    """optax's name, what the mirror builds, each argument described as gradtx describes it, an example."""
    described: dict[str, str] = {}
    for source in sources:
        for arg, said in args_section(getattr(source, "__doc__", "") or "").items():
            described.setdefault(arg, said)
    args = []
    for p in sig.parameters.values():
        text = described.get(p.name) or param_docs().get(p.name) or OPTAX_ARGS.get(p.name)
        if text is None:
            raise TypeError(f"optax's `{path}`: describe `{p.name}` (the recipe's Args, or OPTAX_ARGS)")
        args.append(f"      {'*' if p.kind is p.VAR_POSITIONAL else ''}{p.name}: {text}")
    namespace, _, _ = path.rpartition(".")
    imports = (
        f"from gradtx.optax_compat import {namespace}"
        if namespace
        else "from gradtx import optax_compat as optax"
    )
    call = f"{namespace or 'optax'}.{example}"
    use = [f"        {line.format(call=call)}" for line in USE[kind]]
    head = f"Equals `optax.{path}`" if kind == "schedule" else f"optax's `{path}`"
    summary = summary.replace("\n", "\n    ")  # the paragraph indented as the sections below it
    lines = [
        f"{head}: {summary}",
        "",
        "    Args:",
        *args,
        "",
        "    Returns:",
        f"      {returns or RETURNS[kind]}",
    ]
    lines += ["", "    Example:", "        >>> import jax.numpy as jnp", f"        >>> {imports}", *use, ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- functions


def function(
    path: str,
    recipe: Callable[[types.SimpleNamespace], Any],
    summary: str,
    *,
    sources: tuple[Any, ...] = (),
    example: str | None = None,
    kind: str = "transform",
    returns: str = "",
    api: bool = True,
) -> Callable[..., Any]:
    """optax's function `optax.<path>`: its signature, its arguments bound by optax's names and passed to
    `recipe` (as attributes of one namespace), the result checked and named as every gradtx factory's (a
    `kind` of transform, schedule or other function, which `returns` says; without `api`, the recipe's
    result as it is)."""
    sig = signature(path)
    name = path.rsplit(".", 1)[-1]

    def mirrored(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return recipe(types.SimpleNamespace(**bound.arguments))

    if example is None:
        needed = [
            p.name for p in sig.parameters.values() if p.default is p.empty and p.kind <= p.KEYWORD_ONLY
        ]
        if needed not in ([], ["learning_rate"]):
            raise TypeError(f"`{path}` needs {needed}: give the table an example call")
        example = f"{name}({'1e-2' if needed else ''})"
    mirrored.__name__ = mirrored.__qualname__ = name
    mirrored.__module__ = MODULE
    mirrored.__signature__ = sig  # type: ignore[attr-defined]
    mirrored.__doc__ = docstring(path, sig, summary, sources, example, kind, returns)
    if _factory.takes_per_example_grads(recipe):  # its updates are per-example gradients
        _factory.per_example_grads(mirrored)
    return _factory.api(mirrored) if api else mirrored


def block(
    path: str,
    factory: Callable[..., Any],
    state: Any = None,
    rename: Mapping[str, str] | None = None,
    *,
    args: Mapping[str, str] | None = None,
    note: str = "",
    example: str | None = None,
) -> Callable[..., Any]:
    """optax's building block `path`: the gradtx rule `factory` (optax's argument `k`
    passed as `args[k]`, by keyword), its state in optax's class `state` (made by `state_class`, or a
    function of the arguments giving one) with gradtx's fields renamed by `rename` (`restated`: no cost
    per step)."""
    args = dict(args or {})

    def build(a: types.SimpleNamespace) -> Any:
        tx = factory(**{args.get(k, k): v for k, v in vars(a).items()})
        if state is None:
            return tx
        return restated(tx, state if isinstance(state, type) else state(a), rename)

    shown = (
        f"state `{state.__name__}({', '.join(getattr(state, '_fields', ()))})`"
        if isinstance(state, type)
        else "optax's state class"
    )
    summary = f"`gradtx.{_naming.factory_name(factory)}`" + (f" in {shown}" if state else "")
    summary += f"; {note}." if note else "."
    return function(path, build, summary, sources=(factory,), example=example)


def recipe(path: str, *sources: Any, **options: Any) -> Callable[[Any], Any]:
    """Decorator: optax's function `path` from the decorated recipe, whose docstring is the summary (the
    chain optax builds), its arguments described by its own `Args:` (for those no gradtx function has),
    else from the docstrings of `sources`; `options` as `function`'s."""

    def decorate(fn: Callable[[types.SimpleNamespace], Any]) -> Callable[..., Any]:
        summary = inspect.cleandoc(fn.__doc__ or "").split("\nArgs:")[0].strip()
        return function(path, fn, summary, sources=(fn, *sources), **options)

    return decorate

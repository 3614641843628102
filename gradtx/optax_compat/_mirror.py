"""How the mirror is built: a function with optax's signature, name and state classes around a gradtx factory.

`_table.py` says, for each optax name, which gradtx factory (or recipe of them) gives optax's
numbers; this module makes the function: its signature is optax's, read from the generated
`_signatures.py`; it binds the call's arguments by optax's names and hands them to the recipe; the
recipe's rules are given optax's state classes (`restated`: the same formula and slots, no cost per
step); its docstring is written from the recipe and from the Args of the gradtx factories it calls,
so no signature or argument description is retyped. `relaid` converts a state at the boundary where
optax's layout holds something gradtx keeps otherwise.
"""

from __future__ import annotations

import ast
import inspect
import re
import types
from typing import Any, Callable, Mapping, NamedTuple

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import naming as _naming
from gradtx._core.rule import restated
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


def _args_section(doc: str) -> dict[str, str]:
    """`{name: description}` of a Google-style docstring's `Args:` (continuation lines joined)."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(doc or "").splitlines()
    if "Args:" not in lines:
        return out
    current = None
    for line in lines[lines.index("Args:") + 1 :]:
        if not line.strip():
            continue
        if not line.startswith("  "):
            break
        m = re.match(r"^  (\*{0,2}\w+): (.*)$", line)
        if m and not line.startswith("    "):
            current = m.group(1)
            out[current] = m.group(2)
        elif current is not None:
            out[current] += " " + line.strip()
    return out


_PARAM_DOCS: dict[str, str] = {}


def param_docs() -> dict[str, str]:
    """How gradtx describes each argument name (the first description of it found in the public API)."""
    if not _PARAM_DOCS:
        for module in (gradtx.transforms, gradtx.optimizers, gradtx.combinators, gradtx.schedules):
            for name in module.__all__:
                for arg, text in _args_section(getattr(getattr(module, name), "__doc__", "") or "").items():
                    _PARAM_DOCS.setdefault(arg, text)
    return _PARAM_DOCS


def docstring(
    path: str, sig: inspect.Signature, summary: str, sources: tuple[Any, ...], example: str, schedule: bool
) -> str:
    """optax's name, what the mirror builds, each argument described as gradtx describes it, an example."""
    described: dict[str, str] = {}
    for source in sources:
        for arg, text in _args_section(getattr(source, "__doc__", "") or "").items():
            described.setdefault(arg, text)
    args = []
    for p in sig.parameters.values():
        text = described.get(p.name) or param_docs().get(p.name) or f"as optax's `{p.name}`."
        args.append(f"      {'*' if p.kind is p.VAR_POSITIONAL else ''}{p.name}: {text}")
    namespace, _, _ = path.rpartition(".")
    imports = (
        f"from gradtx.optax_compat import {namespace}"
        if namespace
        else "from gradtx import optax_compat as optax"
    )
    call = f"{namespace or 'optax'}.{example}"
    returns = (
        "A schedule `count -> float32 scalar`."
        if schedule
        else "A `GradientTransformation` with optax's numbers, its state in optax's classes."
    )
    use = (
        [f"        >>> lr = {call}", "        >>> value = lr(10)"]
        if schedule
        else [
            f"        >>> tx = {call}",
            '        >>> state = tx.init({"w": jnp.zeros(3)})',
        ]
    )
    head = f"Equals `optax.{path}`" if schedule else f"optax's `{path}`"
    lines = [f"{head}: {summary}", "", "    Args:", *args, "", "    Returns:", f"      {returns}", ""]
    lines += ["    Example:", "        >>> import jax.numpy as jnp", f"        >>> {imports}", *use, ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- functions


def function(
    path: str,
    recipe: Callable[[types.SimpleNamespace], Any],
    summary: str,
    *,
    sources: tuple[Any, ...] = (),
    example: str | None = None,
    schedule: bool = False,
) -> Callable[..., Any]:
    """optax's function `optax.<path>`: its signature, its arguments bound by optax's names and passed to
    `recipe` (as attributes of one namespace), the result checked and named as every gradtx factory's (a
    `schedule` returns a schedule, not a transform)."""
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
    mirrored.__doc__ = docstring(path, sig, summary, sources, example, schedule)
    if _factory.takes_per_example_grads(recipe):  # its updates are per-example gradients
        _factory.per_example_grads(mirrored)
    return _factory.api(mirrored)


def block(
    path: str,
    factory: Callable[..., Any],
    state: Any = None,
    rename: Mapping[str, str] | None = None,
    *,
    args: Mapping[str, str] | None = None,
    note: str = "",
    example: str | None = None,
    schedule: bool = False,
) -> Callable[..., Any]:
    """optax's building block (or `schedule`) `path`: the gradtx rule `factory` (optax's argument `k`
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
    return function(path, build, summary, sources=(factory,), example=example, schedule=schedule)


def recipe(path: str, *sources: Any, example: str | None = None) -> Callable[[Any], Any]:
    """Decorator: optax's function `path` from the decorated recipe, whose docstring is the summary (the
    chain optax builds), its arguments described from the docstrings of `sources`."""

    def decorate(fn: Callable[[types.SimpleNamespace], Any]) -> Callable[..., Any]:
        return function(path, fn, inspect.cleandoc(fn.__doc__ or ""), sources=sources, example=example)

    return decorate

"""The protocol: `GradientTransformation` and its two kinds, `EmptyState`, the types, the errors.

The bottom layer of gradtx: it imports nothing from the package. The protocol is
structurally identical to optax's, so transforms move freely between the two libraries.

A transform is one of two kinds, and the kind is its type:

- `ElementWise`: it treats every element alike -- element by element, or through a
  reduction over all elements (a global norm) -- and never looks at a leaf's shape, key
  path or identity. It runs unchanged on packed parameters (`gradtx.packing`): a few
  contiguous buffers instead of many leaves, with the same numbers.
- `LeafWise`: it needs whole leaves (a per-tensor norm, a key-path mask, a preconditioner
  of a matrix) and is given per-leaf views of packed trees (`gradtx.packing.leaf_wise`).
  `SliceWise`, a `LeafWise` kind, reads a leaf only in ways `gradtx._core.sliced` makes exact
  on any slice of it (`clip_by_norm`, `add_noise`): ZeRO (`parallel.sharded_state`) runs
  it, as an `ElementWise` one, on each replica's slices.

A plain `GradientTransformation` (foreign, or written by hand) is of unknown kind and is
treated as leaf-wise: every gradtx factory and combinator makes it one.
"""

from __future__ import annotations

import functools
import sys
import typing
from typing import Annotated, Any, Callable, NamedTuple, Protocol, Union

import jax

# --------------------------------------------------------------------------- types


class _Mark:
    """A marker carried by an `Annotated` type: what a field or an argument is, read by `mark_of`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<gradtx.{self.name}>"


SLOT = _Mark("slot")
"""Marks a state field holding one array per parameter (a TF slot): `gradtx.get_slot` finds it."""
SLOT_DICT = _Mark("slot_dict")
"""Marks a state field holding `{slot name: tree}` (named slots in one field)."""
HYPERPARAMETER = _Mark("hyperparameter")
"""Marks a factory argument that takes a number or a schedule: `inject_hyperparams` injects it."""

Params = Any
"""A pytree of arrays: the variables being trained."""
Updates = Annotated[Any, SLOT]
"""A pytree with the structure of `Params`: gradients on the way in, updates on the way out.

A state field annotated `Updates` is a slot (`gradtx.get_slot` finds it by its name)."""
OptState = Any
"""A pytree of arrays: the state of a transform (NamedTuples, tuples, dicts)."""
SlotDict = Annotated[dict, SLOT_DICT]
"""`{slot name: Updates}`: named per-parameter slots held in one field (e.g. `per_leaf`'s)."""
Schedule = Callable[[jax.Array], Any]
"""A function of the int32 step `count` returning a scalar (TF's callable hyperparameter)."""
ScalarOrSchedule = Annotated[Union[float, int, jax.Array, Schedule], HYPERPARAMETER]
"""A hyperparameter: a Python number, a jax scalar, or a `Schedule` (`inject_hyperparams` injects it)."""
Count = Any
"""The `count` field of a state: an int32 scalar `jax.Array`, the number of completed updates.

(Typed `Any` because a NamedTuple field named `count` shadows `tuple.count` for type checkers.)"""


@functools.lru_cache(maxsize=None)
def _hints(owner: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except Exception:  # a foreign class or function whose annotations do not evaluate: as written
        return dict(getattr(owner, "__annotations__", {}))


def mark_of(owner: Any, name: str) -> _Mark | None:
    """The gradtx mark (`SLOT`, `SLOT_DICT`, `HYPERPARAMETER`) of the annotation of `name` on `owner`.

    `owner` is a state class (its fields) or a factory (its arguments); the annotations are
    evaluated, so what counts is the type (e.g. `Updates`), not how it is spelled. Optax's
    slot fields (annotated with optax's `Updates` or `chex.ArrayTree`) count as `SLOT`.
    """
    try:
        hint = _hints(owner).get(name)
    except TypeError:  # unhashable owner
        hint = typing.get_type_hints(owner, include_extras=True).get(name)
    if typing.get_origin(hint) is Annotated:
        return next((m for m in typing.get_args(hint)[1:] if isinstance(m, _Mark)), None)
    foreign = [getattr(sys.modules.get(m), a, None) for m, a in (("optax", "Updates"), ("chex", "ArrayTree"))]
    if hint is not None and any(f is not None and hint == f for f in foreign):
        return SLOT  # optax's slot fields (`mu: base.Updates`)
    return None


class TransformInitFn(Protocol):
    """The type of a transform's `init`: `params -> state`."""

    def __call__(self, params: Params) -> OptState: ...


class TransformUpdateFn(Protocol):
    """The type of a transform's `update`: `(updates, state, params=None, **extra) -> (updates, state)`."""

    def __call__(
        self, updates: Updates, state: OptState, params: Params | None = None, **extra_args: Any
    ) -> tuple[Updates, OptState]: ...


def _optax_base() -> Any:
    """optax's `GradientTransformationExtraArgs` when optax is installed, else None (optional)."""
    try:
        from optax import GradientTransformationExtraArgs
    except ImportError:
        return None
    return GradientTransformationExtraArgs


_OPTAX_BASE = _optax_base()

_GRADIENT_TRANSFORMATION_DOC = """\
A pure optimizer: `init(params) -> state`, `update(updates, state, params, **extra_args)`.

`update` returns `(new_updates, new_state)`; the new updates are *added* to the params
with `apply_updates`. Every gradtx `update` accepts and ignores unknown keyword
arguments, so one call can feed extra arguments (`global_step`, `replica_ok`, ...) to
whichever transform of a chain needs them.

The class is structurally identical to `optax.GradientTransformation`: a gradtx
transform can be used wherever optax expects one, and `gradtx.chain` accepts optax's.
When optax is installed (it is not a dependency) the class derives from
`optax.GradientTransformationExtraArgs`, so that `optax.chain`, `optax.MultiSteps` and
optax's other combinators pass extra arguments (`global_step`, `update_slots`, ...)
on to gradtx members instead of dropping them.

Example:
    >>> import jax.numpy as jnp, gradtx
    >>> tx = gradtx.sgd(learning_rate=0.1)
    >>> params = {"w": jnp.array([1.0, 2.0])}
    >>> state = tx.init(params)
    >>> updates, state = tx.update({"w": jnp.array([1.0, 1.0])}, state, params)
    >>> gradtx.apply_updates(params, updates)["w"]
    Array([0.9, 1.9], dtype=float32)
"""

if typing.TYPE_CHECKING or _OPTAX_BASE is None:

    class GradientTransformation(NamedTuple):
        init: TransformInitFn
        update: TransformUpdateFn

else:

    class GradientTransformation(_OPTAX_BASE):
        __slots__ = ()


GradientTransformation.__doc__ = _GRADIENT_TRANSFORMATION_DOC  # one docstring for either definition


class ElementWise(GradientTransformation):
    """A `GradientTransformation` that treats every element alike.

    Element by element (Adam, momentum, a learning rate), or through reductions over all
    elements together (a global norm; gradtx's pass theirs to `gradtx._core.sliced.total`, so
    they are exact on ZeRO's slices too), and never by a leaf's shape, key path or identity.
    Such a transform gives the same numbers on any grouping of the elements into arrays,
    so it runs on packed parameters (`gradtx.packing`) as they are. `chain` and the other
    combinators are element-wise when everything they wrap is.

    Declare a foreign transform element-wise by wrapping it: `gradtx.ElementWise(*optax.adam(1e-3))`.

    Example:
        >>> import gradtx
        >>> adam, lars = gradtx.adam(1e-3), gradtx.lars(0.1)
        >>> isinstance(adam, gradtx.ElementWise), isinstance(lars, gradtx.ElementWise)
        (True, False)
    """

    __slots__ = ()


class LeafWise(GradientTransformation):
    """A `GradientTransformation` that needs whole leaves, and accepts packed trees all the same.

    Per-tensor rules (LARS, Shampoo, GGT, `clip_by_norm`), key-path masks and foreign
    transforms are leaf-wise: given packed parameters (`gradtx.packing`), they see per-leaf
    views of them and their updates are packed again (`gradtx.packing.leaf_wise` does it).
    A chain with a leaf-wise member is leaf-wise; its element-wise members still run on the
    packed buffers.
    """

    __slots__ = ()


class SliceWise(LeafWise):
    """A `LeafWise` transform whose rule is exact on any flat slice of each leaf, told where the slice lies.

    Its rule reads a leaf only element by element, through reductions it passes to
    `gradtx._core.sliced.total`, and through arrays shaped like the whole leaf that it makes with
    `gradtx._core.sliced.leaf_part` (`add_noise`: noise drawn per leaf, by key path); it never
    reads a leaf's shape otherwise. `parallel.sharded_state` runs it on each replica's slices
    inside `shard_map` (ZeRO); on packed parameters it sees per-leaf views, as any
    `LeafWise` transform. A combinator is `SliceWise` when each member is this or
    `ElementWise` (and one is this).
    """

    __slots__ = ()


class EmptyState(NamedTuple):
    """The state of a transform that keeps none."""


# --------------------------------------------------------------------------- errors


class MissingExtraArgError(TypeError):
    """An `update` needs an extra keyword argument the caller did not pass."""


class TreeMismatchError(ValueError):
    """Two pytrees that must have the same structure do not."""


class UnknownNameError(KeyError, ValueError):
    """A name that the registry does not know (catchable as KeyError or ValueError)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def missing_extra_arg(fn: str, arg: str, example: str) -> MissingExtraArgError:
    """The error for a transform whose `update` was called without a needed extra argument."""
    return MissingExtraArgError(
        f"`{fn}`: `update` needs the extra argument `{arg}`; call it as "
        f"`tx.update(grads, state, params, {arg}={example})`."
    )


def missing_params(fn: str) -> ValueError:
    """The error for a transform whose rule needs the current params, called with `params=None`."""
    return ValueError(
        f"`{fn}`: `update` needs the current parameters (its rule reads them); call it as "
        f"`tx.update(grads, state, params)`."
    )


def _describe_tree(tree: Any, limit: int = 12) -> str:
    paths = [jax.tree_util.keystr(p) or "<root>" for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    if not paths:
        return "no leaves"
    shown = ", ".join(paths[:limit])
    more = f", ... ({len(paths) - limit} more)" if len(paths) > limit else ""
    return f"leaves at {shown}{more}"


def tree_mismatch_error(
    fn: str, name_a: str, a: Any, name_b: str, b: Any, *, want: str = "must have the same tree structure"
) -> TreeMismatchError:
    """The one error for two pytrees whose structures differ: key paths of both, and the first difference.

    Args:
      fn: the public name of the function that found the mismatch.
      name_a: what `a` is (e.g. ``"updates"``).
      a: the first tree.
      name_b: what `b` is (e.g. ``"state.m"``).
      b: the second tree.
      want: what the two trees must satisfy, as the message says it.

    Returns:
      A `TreeMismatchError` to raise.
    """
    pa = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(a)[0]}
    pb = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(b)[0]}
    only_a, only_b = sorted(pa - pb), sorted(pb - pa)
    detail = []
    if only_a:
        detail.append(f"only in {name_a}: {', '.join(k or '<root>' for k in only_a[:8])}")
    if only_b:
        detail.append(f"only in {name_b}: {', '.join(k or '<root>' for k in only_b[:8])}")
    if not detail:
        detail.append(
            f"same key paths, different node types: {jax.tree.structure(a)} vs {jax.tree.structure(b)}"
        )
    return TreeMismatchError(
        f"`{fn}`: {name_a} and {name_b} {want}; "
        f"{'; '.join(detail)}.\n  {name_a}: {_describe_tree(a)}\n  {name_b}: {_describe_tree(b)}"
    )

"""Microbatching: evaluate a function on slices of a batch in a sequential loop and combine the results
(`microbatch`, as `optax.microbatching`), to bound the memory of one step; `micro_vmap` and `micro_grad`
build on it (`_micro_grad.py`)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import numbers
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """How the outputs of the microbatches combine: `carry = init(shape of one)`, then
    `carry = update(carry, x_i, i)` for each microbatch `i`, then `finalize(carry)`; `aggregate` reduces a
    batch axis of outputs at once (`micro_vmap`).

    Attributes:
      init: `ShapeDtypeStruct -> carry`, from the shape and dtype of one microbatch's output.
      update: `(carry, value, index) -> carry`.
      finalize: `carry -> result`.
      aggregate: `values with a leading axis -> result` (the same reduction, over that axis).
    """

    init: Callable[[Any], Any]
    update: Callable[[Any, Any, Any], Any]
    finalize: Callable[[Any], Any]
    aggregate: Callable[[Any], Any]


class AccumulationType(enum.Enum):
    """The built-in accumulations: MEAN, SUM, RUNNING_MEAN (the mean of the microbatches run), CONCAT."""

    MEAN = enum.auto()
    SUM = enum.auto()
    RUNNING_MEAN = enum.auto()
    CONCAT = enum.auto()


def _floating(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def init(x):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise ValueError(
                f"`microbatch`: a MEAN or RUNNING_MEAN output must be floating-point, got {x.dtype}."
            )
        return fn(x)

    return init


def _concat_init(n: int) -> Callable[[Any], Any]:
    return lambda x: jnp.zeros((n, *x.shape), x.dtype)


def _concat_finalize(carry: jax.Array) -> jax.Array:
    """`[num_microbatches, microbatch_size, ...]` back to the batch's order (the inverse of the column-major
    split of `reshape_batch_axis`), keeping an Explicit batch sharding."""
    kwargs = {}
    sharding = jax.typeof(carry).sharding
    if sharding.mesh.are_all_axes_explicit:
        spec = (
            jax.sharding.PartitionSpec(*sharding.spec[1:]) if sharding.spec else jax.sharding.PartitionSpec()
        )
        kwargs["out_sharding"] = jax.sharding.NamedSharding(sharding.mesh, spec)
    return carry.reshape(-1, *carry.shape[2:], order="F", **kwargs)


def _builtin(kind: AccumulationType, n: int) -> Accumulator:
    if kind is AccumulationType.SUM:
        return Accumulator(
            jnp.zeros_like, lambda c, x, i: c + x, lambda c: c, functools.partial(jnp.sum, axis=0)
        )
    if kind is AccumulationType.MEAN:
        return Accumulator(
            _floating(jnp.zeros_like),
            lambda c, x, i: c + x,
            lambda c: c / n,
            functools.partial(jnp.mean, axis=0),
        )
    if kind is AccumulationType.RUNNING_MEAN:

        def running(c, x, i):
            p = i / (i + 1)
            return c * p + x * (1 - p)

        return Accumulator(
            _floating(jnp.zeros_like), running, lambda c: c, functools.partial(jnp.mean, axis=0)
        )
    return Accumulator(_concat_init(n), lambda c, x, i: c.at[i].set(x), _concat_finalize, lambda x: x)


def _duck(x: Any) -> bool:
    """An accumulator of another library (optax's): an object with the four functions."""
    return all(callable(getattr(x, f, None)) for f in ("init", "update", "finalize", "aggregate"))


def _accumulator(tree: Any, n: int) -> Accumulator:
    """One accumulator from a pytree prefix of the outputs with an `Accumulator` or `AccumulationType` at
    each leaf (each acting leaf by leaf on the outputs under it)."""

    def lift(acc):
        if isinstance(acc, enum.Enum) and acc.name in AccumulationType.__members__:
            acc = _builtin(AccumulationType[acc.name], n)  # optax.microbatching's AccumulationType too
        if not isinstance(acc, Accumulator):
            if not _duck(acc):
                raise TypeError(
                    f"`microbatch`: each accumulator must be an `Accumulator` or an `AccumulationType`, "
                    f"got {acc!r}."
                )
            acc = Accumulator(acc.init, acc.update, acc.finalize, acc.aggregate)  # optax's Accumulator
        return acc

    accs = jax.tree.map(lift, tree, is_leaf=lambda x: isinstance(x, (Accumulator, enum.Enum)) or _duck(x))

    def over(method):
        def run(*trees):
            return jax.tree.map(
                lambda acc, *sub: jax.tree.map(lambda *x: getattr(acc, method)(*x), *sub),
                accs,
                *trees,
                is_leaf=lambda x: isinstance(x, Accumulator),
            )

        return run

    def update(carry, value, index):
        return jax.tree.map(
            lambda acc, c, v: jax.tree.map(lambda ci, vi: acc.update(ci, vi, index), c, v),
            accs,
            carry,
            value,
            is_leaf=lambda x: isinstance(x, Accumulator),
        )

    return Accumulator(over("init"), update, over("finalize"), over("aggregate"))


def reshape_batch_axis(tree: Any, microbatch_size: int, axis: int = 0) -> Any:
    """Split the batch axis of every leaf into `(num_microbatches, microbatch_size)`, column-major.

    Microbatch `i` is the rows `i, i + n, i + 2n, ...` (`n` microbatches), so a batch
    sharded over its axis keeps that sharding in the `microbatch_size` axis (an Explicit
    sharding is carried over); the new leading axis is replicated. As
    `optax.microbatching.reshape_batch_axis`.

    Args:
      tree: a pytree of arrays, each with a batch axis `axis`.
      microbatch_size: the rows of one microbatch.
      axis: the batch axis.

    Returns:
      The tree with each leaf's batch axis split in two.

    Raises:
      ValueError: if the batch sharding's shard count does not divide `microbatch_size`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.reshape_batch_axis(jnp.arange(6), 2)  # microbatch i: rows i and i + 3
        Array([[0, 3],
               [1, 4],
               [2, 5]], dtype=int32)
    """

    def leaf(x):
        shape = (*x.shape[:axis], -1, microbatch_size, *x.shape[axis + 1 :])
        sharding = jax.typeof(x).sharding
        if not sharding.mesh.are_all_axes_explicit:
            return x.reshape(shape, order="F")
        spec = sharding.spec
        new = spec if len(spec) < axis else jax.P(*spec[:axis], None, spec[axis], *spec[axis + 1 :])
        shards = x.shape[axis] // sharding.shard_shape(x.shape)[axis]
        if microbatch_size % shards:
            raise ValueError(
                f"`reshape_batch_axis`: the batch axis is sharded {shards} ways, which must divide "
                f"`microbatch_size` {microbatch_size}."
            )
        return x.reshape(shape, order="F", out_sharding=jax.sharding.NamedSharding(sharding.mesh, new))

    return jax.tree.map(leaf, tree)


def _ints(fn: str, name: str, value: Any) -> tuple[Any, ...]:
    if isinstance(value, (numbers.Integral, str)):
        values: tuple[Any, ...] = (value,)
    elif isinstance(value, (tuple, list)):
        values = tuple(value)
    else:
        raise TypeError(f"`{fn}`: `{name}` must be an int or a sequence of them, got {value!r}.")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (numbers.Integral, str)):
            raise TypeError(f"`{fn}`: `{name}` must be an int or a sequence of them, got {value!r}.")
    return values


def microbatch(
    fun: Callable[..., Any],
    argnums: int | Sequence[int],
    microbatch_size: int | None,
    accumulator: Any = AccumulationType.SUM,
    *,
    argnames: str | Sequence[str] = (),
    in_axes: int | Sequence[int] = 0,
    num_real_microbatches: int | jax.Array | None = None,
) -> Callable[..., Any]:
    r"""`fun` evaluated on microbatches of its batch arguments in a sequential loop, the results combined.

    .. math:: \text{fun}'(B) = \text{finalize}\Big(\text{accumulate}_{i}\ \text{fun}(B_i)\Big)

    with :math:`B_i` the `i`-th microbatch of the batch arguments (`reshape_batch_axis`:
    rows `i, i + n, ...`) and the loop a `lax.fori_loop`, so only one microbatch's
    intermediates are alive at a time. `accumulator` says how the outputs combine (SUM,
    MEAN, RUNNING_MEAN, CONCAT back into the batch's order, or an `Accumulator`), as one
    value or a pytree prefix of `fun`'s outputs; optax's `AccumulationType` and `Accumulator`
    are accepted too. `optax.microbatch` (`optax.microbatching`).

    Args:
      fun: the function.
      argnums: the positions of the arguments with a batch axis.
      microbatch_size: the rows per microbatch, dividing the batch size; None: `fun` itself.
      accumulator: how the microbatches' outputs combine, as above.
      argnames: the keyword arguments with a batch axis.
      in_axes: the batch axis of each of `argnums` then `argnames` (one int: all).
      num_real_microbatches: run only this many microbatches (a traced value is allowed:
        variable batch sizes without recompiling).

    Returns:
      A function with `fun`'s arguments.

    Raises:
      TypeError: for a non-callable `fun` or bad `argnums` / `argnames` / `in_axes`.
      ValueError: for a `microbatch_size` below 1; when called, if the batch arguments'
        batch sizes differ or `microbatch_size` does not divide them.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> fun = lambda x: (x + 1, jnp.sum(3 * x))
        >>> AT = gradtx.AccumulationType
        >>> gradtx.microbatch(fun, 0, 2, (AT.CONCAT, AT.SUM))(jnp.array([1, 2, 3, 4]))
        (Array([2, 3, 4, 5], dtype=int32), Array(30, dtype=int32))
    """
    fn = _checks.api_name("microbatch")
    _checks.check_callable(fn, "fun", fun)
    if microbatch_size is None:
        return fun
    _checks.check_int(fn, "microbatch_size", microbatch_size, minimum=1)
    argnums, argnames = _ints(fn, "argnums", argnums), _ints(fn, "argnames", argnames)
    if any(isinstance(a, str) for a in argnums) or any(not isinstance(a, str) for a in argnames):
        raise TypeError(
            f"`{fn}`: `argnums` must be ints and `argnames` strings, got {argnums!r}, {argnames!r}."
        )
    axes = (
        (in_axes,) * (len(argnums) + len(argnames))
        if isinstance(in_axes, int)
        else _ints(fn, "in_axes", in_axes)
    )
    if len(axes) != len(argnums) + len(argnames):
        raise ValueError(
            f"`{fn}`: `in_axes` {in_axes!r} must give one axis for each of `argnums` and `argnames` "
            f"({len(argnums) + len(argnames)})."
        )
    where = list(zip((*argnums, *argnames), axes, strict=True))

    def microbatched(*args, **kwargs):
        args, kwargs = list(args), dict(kwargs)

        def get(key):
            return args[key] if isinstance(key, int) else kwargs[key]

        sizes = jax.tree.leaves([jax.tree.map(lambda x, a=ax: x.shape[a], get(k)) for k, ax in where])
        if len(set(sizes)) > 1:
            raise ValueError(
                f"`{fn}`: the batch arguments must have one batch size, got {sorted(set(sizes))}."
            )
        if sizes[0] % microbatch_size:
            raise ValueError(
                f"`{fn}`: `microbatch_size` {microbatch_size} must divide the batch size {sizes[0]}."
            )
        n = sizes[0] // microbatch_size
        for key, ax in where:
            value = reshape_batch_axis(get(key), microbatch_size, ax)
            if isinstance(key, int):
                args[key] = value
            else:
                kwargs[key] = value
        acc = _accumulator(accumulator, n)

        def one(index):
            a, k = list(args), dict(kwargs)
            for key, ax in where:
                sliced = jax.tree.map(functools.partial(jnp.take, indices=index, axis=ax), get(key))
                if isinstance(key, int):
                    a[key] = sliced
                else:
                    k[key] = sliced
            return fun(*a, **k)

        bound = n if num_real_microbatches is None else num_real_microbatches
        carry = acc.init(jax.eval_shape(one, 0))
        return acc.finalize(jax.lax.fori_loop(0, bound, lambda i, c: acc.update(c, one(i), i), carry))

    return microbatched

"""Per-matrix work a rule hands to the constructor, and who runs it: here, or split across devices.

A rule whose step does work per matrix (Muon's Newton-Schulz iteration, an eigendecomposition, a
matrix root) declares it by writing its formula as a generator: where the formula needs the work done,
it yields a `MatrixWork` (a function of one matrix, a stack of matrices, the work's key) and receives
the function's results for the whole stack:

    def leaf(g, m, h):
        m = ...                                         # element-wise: on the leaf, where it lives
        u = yield MatrixWork(orthogonalize, m[None], ("ns", coeffs))
        return u[0], m

`update_rule` runs every leaf's formula up to its `yield`, hands all the work of the step to `run` at
once, and sends each formula its results (a formula may yield again). A formula over the whole tree
(`over="tree"`) yields a list of works, one per leaf, and receives the list of their results. The
matrices of a work may come with other per-matrix arrays (its `stack` is then a tuple of parts of one
leading length: PSGD Kron's factors, its leaf and its position among the step's keys). Nothing else in
the formula changes. By default `run` does each leaf's work where the leaf is (whole on every device
under Explicit axes, GSPMD's choice under Auto axes), the works of one key, shape and dtype in stacks of
up to 16 matrices: a deep model's step holds one program of matrix work per shape, not one per matrix.
Inside `spreading(spread)` (`gradtx.parallel.split_matrix_work` sets it), `spread` receives all of the
step's work instead and may stack the works of one key, shape and dtype and split the stack across the
devices; the numbers are the same work's, done elsewhere. Type casts and stacking only here: the
collectives live in `gradtx.parallel`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import types
from typing import Any, Callable, Hashable, Iterator, NamedTuple, Sequence

import jax

from gradtx._core import control as _control
from gradtx._core import placement as _placement


class MatrixWork(NamedTuple):
    """Work done on each matrix of a stack, independently of the others.

    Attributes:
      fn: `fn(matrix, *args)`: one matrix `(rows, cols)` (or one matrix's parts, a tuple) -> its result
        (an array or a tuple of arrays).
      stack: the matrices, `(n, rows, cols)`; or a tuple of the matrices' parts, each `(n, ...)` (the
        arrays `fn` reads per matrix: a matrix and its factors, or a leaf of any rank and its key).
      key: what else `fn` depends on (its static settings): works with equal keys, matrix shapes and
        dtypes compute the same function and may run as one stack.
      args: the traced scalars `fn` reads (the step's hyperparameters, a flag of the count), the same
        for every leaf of one dtype; given here, not closed over, so that a device's share can run as
        a per-device program (`shard_map` takes no closed-over values typed with Explicit axes).
      when: None (always), or a traced boolean scalar: the work is done on this step only when it is
        true (a `lax.cond`; a refresh every k steps), else the results are `otherwise`.
      otherwise: the results when `when` is false, shaped like `fn`'s over the stack.
    """

    fn: Callable[..., Any]
    stack: jax.Array | tuple[jax.Array, ...]
    key: Hashable
    when: Any = None
    otherwise: Any = None
    args: tuple[Any, ...] = ()


Spread = Callable[[Sequence[MatrixWork]], list[Any]]
"""All of one step's work -> each work's results (`jax.vmap(work.fn)(work.stack)`), in order."""

_SPREAD: contextvars.ContextVar[Spread | None] = contextvars.ContextVar("gradtx_matrix_spread", default=None)


@contextlib.contextmanager
def spreading(spread: Spread) -> Iterator[None]:
    """Within this block (at trace time), the matrix work of every rule is run by `spread`."""
    token = _SPREAD.set(spread)
    try:
        yield
    finally:
        _SPREAD.reset(token)


Hold = Callable[[Any, jax.Array], jax.Array]
"""A leaf and a per-matrix state array of it (replicated on the leaf's devices) -> the array, placed."""

_HOLD: contextvars.ContextVar[Hold | None] = contextvars.ContextVar("gradtx_matrix_hold", default=None)


@contextlib.contextmanager
def holding(hold: Hold) -> Iterator[None]:
    """Within this block (an `init`, at trace time or eagerly), every rule's per-matrix state is placed by
    `hold`."""
    token = _HOLD.set(hold)
    try:
        yield
    finally:
        _HOLD.reset(token)


def state(p: Any, x: jax.Array, *, placed: bool = False) -> jax.Array:
    """The per-matrix state `x` of the leaf `p` (a Shampoo statistic or root, a SOAP basis, a PSGD Kron
    factor): a constant, put on `p`'s devices replicated (or, `placed`, an array placed already: a
    statistic placed like one of `p`'s axes); inside a `holding` block, where its `hold` places it
    (`gradtx.parallel.split_matrix_work`'s `init`: split as its step holds the work's parts, so no step
    moves the state)."""
    if not placed:
        x = x + _placement.reduced(p, (), x.dtype)
    hold = _HOLD.get()
    return x if hold is None else hold(p, x)


CHUNK = 16
"""The most matrices `here` stacks into one program on one device."""


def here(works: Sequence[MatrixWork]) -> list[Any]:
    """`works` done where their leaves are: each matrix whole on every device under Explicit axes (one
    all-gather), GSPMD's choice under Auto axes, each device's own under `shard_map`; only `when` it is
    asked for. On one device the works of one group (`groups`) run as stacks of `CHUNK` matrices, mapped
    (`jax.vmap`): the step's program holds one Newton-Schulz iteration (one root, one factor update) per
    shape, dtype and stack, not one per matrix. XLA compiles one kernel per distinct computation: equal
    stacks share their kernels, and a stack's `CHUNK` slices (each leaf's results) are as many kernels
    as it has matrices, so a deep model's step compiles in a fraction of the time that one stack of all
    its matrices of a shape (as many slices as layers) or one program per matrix would take. On a mesh
    each work runs as its own stack (of its matrices, mapped): GSPMD would split a group's stack over
    the devices, and XLA:CPU's simulated devices can then wait forever on a split batch of SVDs
    (`gradtx.parallel.split_matrix_work` splits the groups on purpose)."""
    results: list[Any] = [None] * len(works)
    together = all(_on_one_device(w) for w in works)
    for group in groups(works) if together else [[i] for i in range(len(works))]:
        for idx in _chunks(works, group):
            first = works[idx[0]]
            stack, _ = stacked(works, idx, 1, _wholes)
            compute = functools.partial(_mapped_with, first.fn, first.args)
            split(works, idx, results, when(first._replace(otherwise=otherwise(works, idx)), compute, stack))
    return results


def _chunks(works: Sequence[MatrixWork], group: list[int]) -> list[list[int]]:
    """`group` cut into runs of works of at most `CHUNK` matrices each (a work of more is a run alone)."""
    runs: list[list[int]] = []
    held = CHUNK
    for i in group:
        n = length(works[i])
        if held + n > CHUNK:
            runs.append([])
            held = 0
        runs[-1].append(i)
        held += n
    return runs


def one(parts: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
    """A work's stack of one matrix: each of its `parts` with a leading axis of 1 (a reshape, cheaper to
    trace than indexing)."""
    return tuple(jax.lax.expand_dims(x, (0,)) for x in parts)


def only(results: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
    """The results of a work of one matrix (`one`), without their leading axis of 1."""
    return tuple(jax.lax.squeeze(x, (0,)) for x in results)


def mapped(fn: Callable[..., Any], stack: Any, *args: Any) -> Any:
    """`fn(matrix, *args)` of each matrix of `stack` (`jax.vmap` over the stack and its parts, the same
    `args`)."""
    return jax.vmap(lambda m: fn(m, *args))(stack)


def _on_one_device(work: MatrixWork) -> bool:
    """Whether `work`'s matrices are typed as on one device (no mesh of more than one device)."""
    mesh = getattr(getattr(jax.typeof(jax.tree.leaves(work.stack)[0]), "sharding", None), "mesh", None)
    return mesh is None or mesh.empty or mesh.size == 1


def _mapped_with(fn: Callable[..., Any], args: tuple[Any, ...], stack: Any) -> Any:
    return mapped(fn, stack, *args)


def when(work: MatrixWork, compute: Callable[[Any], Any], stack: Any) -> Any:
    """`compute(stack)`, or `work.otherwise` on a step where `work.when` is false (a `lax.cond`)."""
    if work.when is None:
        return compute(stack)
    return _control.cond(work.when, compute, lambda _: work.otherwise, stack)


def run(works: Sequence[MatrixWork]) -> list[Any]:
    """The results of `works`: by the `spread` of the enclosing `spreading` block, else `here`."""
    spread = _SPREAD.get()
    if spread is None or not works:
        return here(works)
    return spread(works)


def group_key(work: MatrixWork) -> tuple[Any, ...]:
    """Works with equal group keys run as one stack: the same function on matrices of one shape and dtype,
    conditional or not."""
    parts, structure = jax.tree.flatten(work.stack)
    return (work.key, structure, tuple((x.shape[1:], x.dtype) for x in parts), work.when is None)


def length(work: MatrixWork) -> int:
    """How many matrices `work` holds: the leading length of its stack (of each of its parts)."""
    return jax.tree.leaves(work.stack)[0].shape[0]


def groups(works: Sequence[MatrixWork]) -> list[list[int]]:
    """The indices of `works`, grouped by `group_key`, in first-seen order."""
    by_key: dict[Any, list[int]] = {}
    for i, w in enumerate(works):
        by_key.setdefault(group_key(w), []).append(i)
    return list(by_key.values())


Place = Callable[[Sequence[jax.Array]], Sequence[jax.Array]]
"""The parts of one position of a group's works (one per work) -> the same, placed to be joined."""


def stacked(works: Sequence[MatrixWork], idx: list[int], size: int, place: Place) -> tuple[Any, int]:
    """The stacks of the works `idx` (a group) as one, part by part, padded to a multiple of `size` with
    copies of its first matrix; its length before padding. `place` puts each position's parts where they
    are joined (here: each whole; `gradtx.parallel` moves them, the collectives are its own)."""
    n = sum(length(works[i]) for i in idx)
    join = functools.partial(_concatenated, pad=-n % size, place=place)
    return jax.tree.map(lambda *parts: join(parts), *(works[i].stack for i in idx)), n


def _wholes(parts: Sequence[jax.Array]) -> list[jax.Array]:
    return [_placement.whole(x) for x in parts]


def _concatenated(parts: Sequence[jax.Array], pad: int, place: Place) -> jax.Array:
    parts = place(parts)
    x = parts[0] if len(parts) == 1 else jax.numpy.concatenate(parts)
    if pad:
        x = jax.numpy.concatenate([x, jax.numpy.broadcast_to(x[:1], (pad, *x.shape[1:]))])
    return x


def otherwise(works: Sequence[MatrixWork], idx: list[int], place: Callable[[Any], Any] | None = None) -> Any:
    """The group's results on a step that skips its work (each work's `otherwise`, concatenated, and
    placed by `place` as the computed results are); None for unconditional work."""
    if works[idx[0]].when is None:
        return None
    joined = jax.tree.map(lambda *parts: jax.numpy.concatenate(parts), *(works[i].otherwise for i in idx))
    return joined if place is None else jax.tree.map(place, joined)


def split(works: Sequence[MatrixWork], idx: list[int], results: list[Any], out: Any) -> None:
    """Each work of the group `idx` takes its matrices' results from the group's `out`, into `results`."""
    start = 0
    for i in idx:
        n = length(works[i])
        results[i] = jax.tree.map(lambda y, s=start, n=n: jax.lax.slice_in_dim(y, s, s + n), out)
        start += n


def drive(pending: dict[int, Any], finish: Callable[[int, Any], None]) -> None:
    """Run the generators of `pending` (`{leaf index: (generator, the MatrixWork or list of them it
    yielded)}`) to their ends: each round hands every open generator's work to `run` at once and sends
    each its results (a list for a list); a generator's return value goes to `finish(index, value)`."""
    while pending:
        order = list(pending)
        asked = [pending[i][1] for i in order]
        flat = run([w for a in asked for w in (a if isinstance(a, list) else [a])])
        for i, a in zip(order, asked, strict=True):
            k = len(a) if isinstance(a, list) else 1
            result, flat = (flat[:k] if isinstance(a, list) else flat[0]), flat[k:]
            generator = pending.pop(i)[0]
            try:
                pending[i] = (generator, _checked(generator.send(result)))
            except StopIteration as stop:
                finish(i, stop.value)


def begin(i: int, result: Any, pending: dict[int, Any], finish: Callable[[int, Any], None]) -> None:
    """A formula's `result` for leaf `i`: a generator is run to its first `MatrixWork` and put in `pending`
    (for `drive`); a plain result, or a generator that returns without work, goes to `finish`."""
    if not isinstance(result, types.GeneratorType):
        finish(i, result)
        return
    try:
        pending[i] = (result, _checked(next(result)))
    except StopIteration as stop:  # no work for this leaf
        finish(i, stop.value)


def evaluate(result: Any) -> Any:
    """A formula's result with its matrix work done (by `run`): `result` itself unless it is a generator."""
    out: dict[int, Any] = {}
    pending: dict[int, Any] = {}
    begin(0, result, pending, out.__setitem__)
    drive(pending, out.__setitem__)
    return out[0]


def _checked(asked: Any) -> MatrixWork | list[MatrixWork]:
    """What a formula yielded, if it is a `MatrixWork` or a list of them, each of a (n, rows, cols) stack or
    of parts of one leading length n."""
    for work in asked if isinstance(asked, list) else [asked]:
        parts = jax.tree.leaves(work.stack) if isinstance(work, MatrixWork) else []
        n = {jax.numpy.shape(x)[:1] for x in parts}
        if (
            not parts
            or len(n) != 1
            or () in n
            or (not isinstance(work.stack, tuple) and jax.numpy.ndim(work.stack) != 3)
        ):
            raise TypeError(
                "A rule's formula must yield a MatrixWork (or a list of them) of a (n, rows, cols) stack "
                f"or of a tuple of parts of one leading length n, got {work!r}."
            )
    return asked


__all__: list[str] = []

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
leading length: PSGD Kron's factors, its leaf and its random key). Nothing else in the formula
changes. By default `run` does each leaf's work where the leaf is, as a plain call would (whole on
every device under Explicit axes, GSPMD's choice under Auto axes). Inside `spreading(spread)`
(`gradtx.parallel.split_matrix_work` sets it), `spread` receives all of the step's work instead and
may stack the works of one key, shape and dtype and split the stack across the devices; the numbers are
the same work's, done elsewhere. Type casts and stacking only here: the collectives live in
`gradtx.parallel`.
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from typing import Any, Callable, Hashable, Iterator, NamedTuple, Sequence

import jax

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
    stack: jax.Array
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


def here(work: MatrixWork) -> Any:
    """`work` done where its leaf is: the stack whole on every device under Explicit axes (one
    all-gather), GSPMD's choice under Auto axes, each device's own under `shard_map`; only `when` it
    is asked for. The stack is mapped (`jax.vmap`), a stack of one matrix too: Muon's numbers are then
    optax's bit for bit."""
    stack = jax.tree.map(_placement.whole, work.stack)
    return when(work, lambda stack: mapped(work.fn, stack, *work.args), stack)


def mapped(fn: Callable[..., Any], stack: Any, *args: Any) -> Any:
    """`fn(matrix, *args)` of each matrix of `stack` (`jax.vmap` over the stack and its parts, the same
    `args`)."""
    return jax.vmap(lambda m: fn(m, *args))(stack)


def when(work: MatrixWork, compute: Callable[[Any], Any], stack: Any) -> Any:
    """`compute(stack)`, or `work.otherwise` on a step where `work.when` is false (a `lax.cond`)."""
    if work.when is None:
        return compute(stack)
    return jax.lax.cond(work.when, compute, lambda _: work.otherwise, stack)


def run(works: Sequence[MatrixWork]) -> list[Any]:
    """The results of `works`: by the `spread` of the enclosing `spreading` block, else each `here`."""
    spread = _SPREAD.get()
    if spread is None or not works:
        return [here(w) for w in works]
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

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
once, and sends each formula its results (a formula may yield again). Nothing else in the formula
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
      fn: `fn(matrix, *args)`: one matrix `(rows, cols)` -> its result (an array or a tuple of arrays).
      stack: the matrices, `(n, rows, cols)`.
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
    return when(work, lambda stack: mapped(work.fn, stack, *work.args), _placement.whole(work.stack))


def mapped(fn: Callable[..., Any], stack: jax.Array, *args: Any) -> Any:
    """`fn(matrix, *args)` of each matrix of `stack` (`jax.vmap` over the stack, the same `args`)."""
    return jax.vmap(lambda m: fn(m, *args))(stack)


def when(work: MatrixWork, compute: Callable[[jax.Array], Any], stack: jax.Array) -> Any:
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
    return (work.key, tuple(work.stack.shape[1:]), work.stack.dtype, work.when is None)


def groups(works: Sequence[MatrixWork]) -> list[list[int]]:
    """The indices of `works`, grouped by `group_key`, in first-seen order."""
    by_key: dict[Any, list[int]] = {}
    for i, w in enumerate(works):
        by_key.setdefault(group_key(w), []).append(i)
    return list(by_key.values())


def drive(pending: dict[int, Any], finish: Callable[[int, Any], None]) -> None:
    """Run the generators of `pending` (`{leaf index: (generator, its first MatrixWork)}`) to their ends:
    each round hands every open generator's work to `run` at once and sends each its results; a
    generator's return value goes to `finish(index, value)`."""
    while pending:
        order = list(pending)
        results = run([pending[i][1] for i in order])
        for i, result in zip(order, results, strict=True):
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
    """A formula's result with its matrix work done `here`: `result` itself unless it is a generator."""
    out: dict[int, Any] = {}
    pending: dict[int, Any] = {}
    begin(0, result, pending, out.__setitem__)
    drive(pending, out.__setitem__)
    return out[0]


def _checked(work: Any) -> MatrixWork:
    if not isinstance(work, MatrixWork) or jax.numpy.ndim(work.stack) != 3:
        raise TypeError(f"A rule's formula must yield a MatrixWork of a (n, rows, cols) stack, got {work!r}.")
    return work


__all__: list[str] = []

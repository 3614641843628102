"""Shared test utilities: running a transform for some steps, counting traces, random trees."""

from __future__ import annotations

import re
from typing import Any, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

import gradtx
from benchmarks.collectives import KINDS
from gradtx.sparse import RowSparse

SHAPES = [(6, 3), (5,)]
STEPS = 20
SPARSE_INDICES = [[0, 2, 2, 5], [1, 1, 3], [4, 0, 5, 5, 2]]  # cycled; each has a duplicate
GGT_TOLERANCE = {"rtol": 2e-5, "atol": 5e-6}
"""GGT's float32 numbers when its sums over all elements run in another order (jit vs eager, packed vs
per leaf): its tail term is divided by the smallest root singular value of the Gram matrix
(sqrt(svd_eps) = 1e-3 while the window fills), which magnifies round-off to ~1e-6 of the update."""
MUON_TOLERANCE = {"rtol": 2e-5, "atol": 5e-6}
"""Muon's float32 numbers when its matrix products are compiled another way (eager vs jit, a gathered shard
vs the whole leaf, the suite's fast-compile options): five Newton-Schulz iterations of a quintic magnify
the products' round-off to ~2e-6 of the update."""


COLLECTIVES = KINDS  # the kinds of collective the sharding tables count (`benchmarks.collectives`)


def collectives_by_scope(hlo: str, kinds=COLLECTIVES) -> dict[tuple[str | None, str], int]:
    """`{(scope, kind): arrays}`: the arrays a compiled HLO module's collectives move, by the
    `jax.named_scope` (`gradtx__NAME` or `optax__NAME`) of the op each comes from; scope None for one
    that cannot be attributed.

    XLA combines collectives of different scopes into one instruction, so instructions are not
    attributable; a combined one names each operand's op in its metadata, `(a/psum:b/psum:...)`."""
    counts: dict[tuple[str | None, str], int] = {}
    for line in hlo.splitlines():
        for kind in kinds:
            found = re.search(rf"\b{kind}(?:-start)?\(([^)]*)\)", line)
            if not found:
                continue
            operands = found.group(1).count("%")
            op_name = re.search(r'op_name="([^"]*)"', line)
            found_names = re.findall(r"(?:gradtx|optax)__\w+", op_name.group(1)) if op_name else []
            names: list[str | None] = list(found_names)
            if len(names) == 1:
                names *= operands
            if len(names) != operands:
                names = [None] * operands
            for name in names:
                counts[name, kind] = counts.get((name, kind), 0) + 1
    return counts


def tolerance(name: str) -> dict[str, float]:
    """The tolerance of two differently compiled float32 runs of the factory `name` (1e-6, or GGT's and
    Muon's own, above: every Newton-Schulz rule, SCION's included)."""
    if "ggt" in name:
        return GGT_TOLERANCE
    if "muon" in name or "scion" in name:
        return MUON_TOLERANCE
    return {"rtol": 1e-6, "atol": 1e-6}


def problem(seed: int = 0, *, sparse: bool = False, scale: float = 1.0, shapes=SHAPES, steps: int = STEPS):
    """Float32 initial params and `steps` steps of gradients; sparse ones as `(indices, values)` pairs."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = []
    for t in range(steps):
        step = []
        for s in shapes:
            if sparse:
                idx = np.asarray(SPARSE_INDICES[t % len(SPARSE_INDICES)], np.int32) % s[0]
                step.append((idx, (scale * rng.standard_normal((len(idx), *s[1:]))).astype(np.float32)))
            else:
                step.append((scale * rng.standard_normal(s)).astype(np.float32))
        grads.append(step)
    return params, grads


def to_gradtx(grads_seq, shapes=SHAPES, dtype=None):
    """The same gradients for gradtx: `(indices, values)` pairs become `RowSparse` (optionally cast)."""
    cast = (lambda x: np.asarray(x, dtype)) if dtype is not None else (lambda x: x)
    return [
        [
            RowSparse(g[0], cast(g[1]), s) if isinstance(g, tuple) else cast(g)
            for g, s in zip(step, shapes, strict=True)
        ]
        for step in grads_seq
    ]


def random_grads(
    seed: int, shapes: Sequence[tuple[int, ...]], steps: int, scale: float = 1.0
) -> list[list[np.ndarray]]:
    """`steps` lists of float32 gradients, one per shape, reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    return [[(scale * rng.standard_normal(s)).astype(np.float32) for s in shapes] for _ in range(steps)]


def run(
    tx: gradtx.GradientTransformation,
    params: Any,
    grads_seq: Sequence[Any],
    *,
    jit: bool = False,
    extra_args_seq: Sequence[dict] | None = None,
) -> tuple[list[Any], Any]:
    """Apply `tx` for `len(grads_seq)` steps; returns the params after each step (as NumPy) and the last
    state.

    Eager by default: for the few steps a test runs, op-by-op dispatch costs less than compiling
    the step (3x less over the contract suite); `jit=True` compiles it once for all steps. That
    jit and eager agree is the contract's own test (`test_jit_no_retrace_stable_state_and_eager_agreement`).
    """
    state = tx.init(params)

    def step(params, state, grads, extra, functions=()):  # under jit, extra arrays are traced: 1 compile
        updates, state = tx.update(grads, state, params, **extra, **dict(functions))
        return gradtx.apply_updates(params, updates), state

    if jit:
        step = jax.jit(step, static_argnums=4)  # extra functions (Sophia's `obj_fn`) are static
    out = []
    for i, grads in enumerate(grads_seq):
        extra = extra_args_seq[i] if extra_args_seq is not None else {}
        functions = tuple(sorted((k, v) for k, v in extra.items() if callable(v)))
        extra = {k: v for k, v in extra.items() if not callable(v)}
        params, state = step(params, state, grads, extra, functions)
        out.append(jax.tree.map(np.asarray, params))
    return out, state


def assert_trees_close(
    actual: Any, expected: Any, *, rtol: float = 1e-5, atol: float = 1e-6, msg: str = ""
) -> None:
    """`chex.assert_trees_all_close` leaf by leaf in float64, leaves matched in order and named by the
    key paths of `expected` (so a list may be compared with a tuple, NumPy with jax)."""
    leaves_e = jax.tree_util.tree_flatten_with_path(expected)[0]
    leaves_a = jax.tree.leaves(actual)
    assert len(leaves_a) == len(leaves_e), f"{msg}: {len(leaves_a)} leaves vs {len(leaves_e)}"
    names = [jax.tree_util.keystr(path) or "<root>" for path, _ in leaves_e]
    chex.assert_trees_all_close(
        {n: np.asarray(a, np.float64) for n, a in zip(names, leaves_a, strict=True)},
        {n: np.asarray(e, np.float64) for n, (_, e) in zip(names, leaves_e, strict=True)},
        rtol=rtol,
        atol=atol,
        custom_message=msg,
    )


def shape_dtypes(tree: Any) -> Any:
    """`(treedef, [(shape, dtype) per leaf])`: comparable with `==` (packed layouts compare by value)."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, [(tuple(jnp.shape(x)), jnp.result_type(x)) for x in leaves]


def compare_to_reference(
    make_tx,
    make_ref,
    *,
    sparse: bool,
    x64: bool,
    slots=(),
    seed: int = 3,
    extra_args=None,
    atol32: float = 1e-6,
):
    """Run `make_tx()` against the float64 reference `make_ref()` (tests/reference*.py) for 20 steps.

    Float32 must agree to TF's tolerance (rtol 1e-5); float64 (jax x64) to 1e-10, which pins
    the formula itself. `extra_args(t)` gives `update`'s extra arguments at 0-based step t.
    """
    from tests import reference

    params, grads = problem(seed, sparse=sparse)
    expected, ref_slots = reference.run(make_ref(), params, grads)
    extra = None if extra_args is None else [extra_args(t) for t in range(len(grads))]
    if x64:
        with jax.enable_x64(True):
            p64 = [np.asarray(p, np.float64) for p in params]
            actual, state = run(make_tx(), p64, to_gradtx(grads, dtype=np.float64), extra_args_seq=extra)
            assert all(x.dtype == np.float64 for x in actual[-1])
        tol = {"rtol": 1e-10, "atol": 1e-10}
    else:
        actual, state = run(make_tx(), params, to_gradtx(grads), extra_args_seq=extra)
        tol = {"rtol": 1e-5, "atol": atol32}
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert_trees_close(a, e, msg=f"params after step {t + 1}", **tol)
    for slot in slots:
        assert_trees_close(
            gradtx.get_slot(state, slot), [s[slot] for s in ref_slots], msg=f"slot {slot}", **tol
        )


# --------------------------------------------------------------------------- optax.contrib side by side
# The harness of the optax.contrib comparisons (the tests of `split_real_and_imaginary`, `normalize`,
# `differentially_private_aggregate` / `dpsgd`, `galore` and `schedule_free`): each test file holds a table
# `{name: (problem, make gradtx's, make optax's)}` and runs it with `contrib_jitted_runs`.


def real_view(tree):
    """Each complex leaf as its `[real, imag]` stack (the comparison helpers compare real numbers)."""
    return jax.tree.map(lambda x: np.stack([np.real(x), np.imag(x)]) if np.iscomplexobj(x) else x, tree)


def call_optax(make):
    """`make()`, an optax optimizer: optax's dpsgd passes the deprecated `seed` on itself."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return make()


def contrib_trajectory(tx, params, grads):
    """The params after each of the steps on `grads` (stacked on a leading axis) and the last state."""

    def step(carry, g):
        p, state = carry
        u, state = tx.update(g, state, p)
        p = gradtx.apply_updates(p, u)
        return (p, state), p

    (_, state), trajectory = jax.lax.scan(step, (params, tx.init(params)), grads)
    return trajectory, state


def contrib_jitted_runs(cases):
    """Every case's 20 steps, gradtx's and optax's, in one compiled program (one compilation for all):
    `{name: ((gradtx's trajectory, state), (optax's trajectory, state))}`."""
    problems = {name: problem() for name, (problem, _, _) in cases.items()}
    stacked = {
        name: (p, jax.tree.map(lambda *g: jnp.stack(g), *grads)) for name, (p, grads) in problems.items()
    }

    @jax.jit
    def run_all(stacked):
        out = {}
        for name, (_, ours, theirs) in cases.items():
            params, grads = stacked[name]
            out[name] = (
                contrib_trajectory(ours(), params, grads),
                contrib_trajectory(call_optax(theirs), params, grads),
            )
        return out

    return run_all(stacked)


def compare_contrib_run(name, actual, state, expected, expected_state):
    """The params of each step, the schedule-free eval params, and the state as optax's (a case named
    `galore` or `schedule_free` is gradtx's own name, which keeps gradtx's state classes)."""
    import optax

    from gradtx.optax_compat import contrib

    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert_trees_close(real_view(a), real_view(e), rtol=1e-6, atol=1e-6, msg=f"{name}: step {t + 1}")
    if name.startswith("schedule_free"):  # the params to evaluate at, from the last state
        evaluate = contrib.schedule_free_eval_params if "compat" in name else gradtx.schedule_free_eval_params
        assert_trees_close(
            evaluate(state, actual[-1]),
            optax.contrib.schedule_free_eval_params(expected_state, expected[-1]),
            rtol=1e-6,
            atol=1e-6,
            msg=f"{name}: eval params",
        )
    if name in ("galore", "schedule_free"):
        return  # gradtx's own names keep gradtx's state classes (same numbers)
    # the state reads as optax's: same structure, same values (keys compared as their data)
    unwrap = gradtx.tree.unwrap_random_key_data
    assert str(jax.tree.structure(unwrap(state))) == str(jax.tree.structure(unwrap(expected_state))), name
    assert_trees_close(
        real_view(unwrap(state)), real_view(unwrap(expected_state)), rtol=1e-6, atol=1e-6, msg=name
    )


def unstack_steps(tree):
    """A trajectory stacked on a leading axis as the list of its steps."""
    return [jax.tree.map(lambda x, t=t: x[t], tree) for t in range(STEPS)]

"""What one non-finite gradient value does to each registered entry (`Entry.nonfinite`), and the guard.

Each entry (its registry `example`) runs 7 steps on a dict of a (3, 2) and a (2,) leaf; at
step 2 one gradient value is NaN, inf or -inf, every other value finite. The run is
classified (`_measure`) and must equal the entry's declaration, so a change of behaviour
fails here. Around Lion (whose momentum sticks at +-inf), a wrapper that does not skip
must stick too: it passes on what it wraps. `apply_if_finite` around every optimizer must
keep params and state finite and equal to a run without that step. The parallel wrappers
run inside `jax.shard_map` over one device.

Compilation is this file's whole cost, so the entries are tested in groups of `GROUP`,
one program each (XLA compiles one program of many transforms in about half the time of
one per transform; one test per group keeps `pytest -n` from compiling a group twice),
run once per gradient sequence of `RUNS`. A failure names the entry and the check.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx._core import walk as _walk
from tests import catalog, fast_xla

STEPS = 7
BAD = 2  # an even count: the example conditions of `conditionally_*` run the inner transform there
LEAF, INDEX = "kernel", (0, 0)  # where the one non-finite value is
FINITE = 0.3  # the value there in the runs compared with: +FINITE and -FINITE (no sign or clip matches both)
VALUES = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}
RUNS = (*VALUES, "+finite", "-finite", "skip")
"""The gradient sequences each transform runs on; "skip" leaves step `BAD` out."""
TOL = {"rtol": 1e-5, "atol": 1e-5}  # round-off: one transform compiled twice may fuse differently
GROUP = 16

ENTRIES = catalog.entries()
GROUPS = [ENTRIES[i : i + GROUP] for i in range(0, len(ENTRIES), GROUP)]
LION = catalog.entry("lion")  # sticks on +-inf: what a wrapper must pass on


def _params():
    rng = np.random.default_rng(0)
    return {
        "kernel": jnp.asarray(rng.standard_normal((3, 2)), jnp.float32),
        "bias": jnp.asarray(rng.standard_normal(2), jnp.float32),
    }


def _grads(value, *, skip_bad=False):
    """`STEPS` steps of gradients `{leaf: [STEPS, ...]}` and their 0-based step numbers, `value` at
    `INDEX` of `LEAF` in step `BAD`; with `skip_bad`, step `BAD` left out (one more finite step at the end;
    the others keep their step numbers, which AdamGS's `global_step` reads)."""
    rng = np.random.default_rng(1)
    grads = {k: rng.standard_normal((STEPS + 1, *v.shape)).astype(np.float32) for k, v in _params().items()}
    grads[LEAF][(BAD, *INDEX)] = value
    keep = [t for t in range(STEPS + 1) if not (skip_bad and t == BAD)][:STEPS]
    return {k: g[keep] for k, g in grads.items()}, np.asarray(keep)


def _inputs():
    """The gradients and step numbers of each run of `RUNS`."""
    runs = [_grads(v) for v in VALUES.values()]
    return [*runs, _grads(FINITE), _grads(-FINITE), _grads(FINITE, skip_bad=True)]


def _run(entry, tx):
    """`(grads, steps) -> (params, state, whether the state is finite)` after every step (stacked). A
    transform that needs a mapped axis runs in `jax.shard_map` over one device."""

    def run(params, grads, steps):
        def step(carry, x):
            params, state = carry
            g, t = x
            updates, state = tx.update(g, state, params, **entry.extra(t))
            params = gradtx.apply_updates(params, updates)
            return (params, state), (params, state, _walk.all_finite(state))

        return jax.lax.scan(step, (params, tx.init(params)), (grads, steps))[1]

    axis = entry.example.get("axis_name")
    if axis is not None:  # one replica: every collective on itself
        mesh = jax.make_mesh((1,), (axis,), devices=jax.devices()[:1])
        run = jax.shard_map(run, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)
    return functools.partial(run, _params())


def _around(entry, tx):
    """The wrapper's example with `tx` in place of the transform the non-finite value reaches."""
    example = dict(entry.example)
    if "transforms" in example:  # partition: the kernel's label
        example["transforms"] = {**example["transforms"], "matrices": tx}
    else:
        example["tx" if "tx" in example else "inner"] = tx
    return entry.factory(**example)


def _transforms(entry):
    """What runs for `entry`: its example; `apply_if_finite` around an optimizer; a wrapper that does not
    skip around Lion (whose momentum sticks at +-inf)."""
    out = {"example": entry.build()}
    if entry.kind == "optimizer":
        out["guarded"] = gradtx.apply_if_finite(entry.build(), max_consecutive_errors=3)
    if entry.kind == "wrapper" and entry.nonfinite != "skipped":
        out["around_lion"] = _around(entry, LION.build())
    return out


@functools.lru_cache(maxsize=None)
def _group_runs(names):
    """`{name: {what: {run: (params, state, state finite)}}}` for the entries `names` (compiled as one
    program, run once per gradient sequence of `RUNS`), or the exception raised building or tracing one."""
    errors = {}

    def all_runs(grads, steps):
        out = {}
        for name in names:
            entry = catalog.entry(name)
            try:
                out[name] = {what: _run(entry, tx)(grads, steps) for what, tx in _transforms(entry).items()}
            except Exception as e:  # noqa: BLE001 -- reported as this entry's failure
                errors[name] = e
        return out

    compiled = jax.jit(all_runs, compiler_options=fast_xla.OPTIONS)
    results = [jax.tree.map(np.asarray, compiled(*inputs)) for inputs in _inputs()]  # traced once
    out = dict(errors)
    for name in set(names) - set(errors):
        out[name] = {
            what: {run: r[name][what] for run, r in zip(RUNS, results, strict=True)}
            for what in results[0][name]
        }
    return out


def _steps(tree, start, stop=None):
    return jax.tree.map(lambda x: x[start:stop], tree)


def _close(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(np.allclose(x, y, **TOL) for x, y in zip(la, lb, strict=True))


def _measure(runs, value):
    """The behaviour (one of `registry.NONFINITE`) with `value` at step `BAD`, from the runs of `RUNS`."""
    params, _, state_finite = runs[value]
    if not bool(_walk.all_finite(_steps(params, BAD))):
        return "propagates"
    if not bool(state_finite[-1]):
        return "sticks"
    if all(_close(params, runs[other][0]) for other in ("+finite", "-finite")):
        return "ignored"
    # skipped: the params do not move at step BAD, then follow the run without it one step later
    if _close(_steps(params, BAD), _steps(runs["skip"][0], BAD - 1, STEPS - 1)):
        return "skipped"
    return "absorbed"


def _skipped_the_step(guarded, plain):
    """Whether the guarded runs keep params and state finite and equal to the plain run without step
    `BAD` (the inner state one step behind it, as its count), counting one non-finite step."""
    skip_params, skip_states, _ = plain["skip"]
    for value in VALUES:
        params, states, state_finite = guarded[value]
        if not (
            bool(_walk.all_finite(params))
            and bool(np.all(state_finite))
            and _close(_steps(params, BAD), _steps(skip_params, BAD - 1, STEPS - 1))
            and _close(_steps(states.inner_state, BAD), _steps(skip_states, BAD - 1, STEPS - 1))
            and states.total_notfinite[-1] == 1
        ):
            return False
    return True


def _problems(entry, runs):
    """What is wrong with `entry`, as lines of text."""
    if isinstance(runs, Exception):
        return [f"{entry.name}: {type(runs).__name__}: {runs}"]
    out = []
    measured = {key: _measure(runs["example"], key) for key in VALUES}
    if measured != {key: entry.on_nonfinite(key) for key in VALUES}:
        out.append(f"{entry.name}: measured {measured}, declared {entry.nonfinite!r}")
    if "around_lion" in runs:
        measured = {key: _measure(runs["around_lion"], key) for key in VALUES}
        if measured != {key: LION.on_nonfinite(key) for key in VALUES}:
            out.append(f"{entry.name} around lion: measured {measured}, lion's {LION.nonfinite!r}")
    if "guarded" in runs and not _skipped_the_step(runs["guarded"], runs["example"]):
        out.append(f"apply_if_finite({entry.name}): did not go on as if the step had not happened")
    return out


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g[0].name}..{g[-1].name}" for g in GROUPS])
def test_what_a_nonfinite_gradient_does(group):
    """For each entry: what a NaN, inf or -inf does is what it declares; a wrapper that does not skip passes
    Lion's behaviour on (it neither repairs nor reveals the inner state); `apply_if_finite` around an
    optimizer keeps params and state finite and as if the step had not happened."""
    assert "sticks" in {LION.on_nonfinite(key) for key in VALUES}  # what makes the wrapper check able to fail
    runs = _group_runs(tuple(e.name for e in group))
    problems = [line for entry in group for line in _problems(entry, runs[entry.name])]
    assert not problems, "\n".join(problems)


def _entry(nonfinite):
    return catalog.Entry("nonfinite_test_sgd", gradtx.sgd, "optimizer", nonfinite=nonfinite)


def test_the_catalogue_checks_nonfinite():
    """A catalogue row's `nonfinite` is one behaviour, or one per value (nan, inf, -inf), each a known one."""
    from tests.catalog import _entries

    for bad, why in [
        ("nan", "unknown nonfinite behaviour"),
        ({"nan": "sticks", "inf": "sticks"}, "nonfinite must be keyed by"),
        ({"nan": "sticks", "inf": "sticks", "-inf": "stays"}, "unknown nonfinite behaviour"),
    ]:
        sgd = gradtx.registry.entry("sgd")  # a registered factory: only `nonfinite` is wrong
        with pytest.raises(AssertionError, match=why):
            _entries.register(catalog.Entry(sgd.name, sgd.factory, sgd.kind, sgd.aliases, nonfinite=bad))
    both = _entry({"nan": "propagates", "inf": "absorbed", "-inf": "absorbed"})
    assert (both.on_nonfinite("nan"), both.on_nonfinite("-inf")) == ("propagates", "absorbed")
    with pytest.raises(AssertionError):
        both.on_nonfinite("NaN")

"""The sharding matrix: every registered optimizer in every parallel mode, with the single-device numbers.

Which file covers which mode (every registered optimizer in each):

=================================  ========================  ==========================================
mode                               file                      what is asserted
=================================  ========================  ==========================================
`jax.jit`, Auto axes (2-D mesh)    tests/test_sharding.py    collectives <= optax's, slots sharded like
                                                             params
`jax.jit`, Explicit axes           tests/test_explicit_mode  slots/updates placed like params, numbers
                                   .py                       of the unsharded run, no collectives but
                                                             the matrix rules' (pinned)
`jax.shard_map`, check_vma=True    this file                 numbers, state replicated like params,
                                                             all-reduces <= optax's
`jax.shard_map`, check_vma=False   this file                 numbers, state replicated like params,
                                                             all-reduces <= optax's
`jax.pmap`                         this file                 numbers, state replicated like params,
                                                             all-reduces <= optax's
ZeRO-1 in `jax.shard_map`          this file                 numbers, state in N slices (1/N per
(`sharded_state`, check_vma=True)                            device) that unshard to the single
                                                             device's state
=================================  ========================  ==========================================

Here each optimizer's example runs data parallel: `cross_shard(tx, "data")` on a batch split over 8
devices, params and state replicated (under check_vma=True each replica differentiates its own loss
through `per_replica(params, "data")`), `STEPS` steps. Every replica's params and state must equal
the single-device run on the whole batch; under check_vma=True the state must also be typed
replicated (no varying axes, like the params). In every mode the compiled step of each optimizer
has no more all-reduces than `pmean` of the gradients plus optax's equivalent (test_sharding.py's
table, else the same-named optax factory with the entry's example arguments where that runs).

Compilation is the whole cost, so the optimizers of a mode are a few programs (each optimizer's update in
its own `jax.named_scope`, by which the compiled HLO's collectives are attributed), with fast-compile
options, and one test per mode.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from gradtx._core.vma import varying
from tests import catalog, helpers
from tests.fast_xla import OPTIONS as FAST_COMPILE
from tests.test_sharding import OPTAX

AXIS = "data"
N = 8
ROWS = 8  # per replica
STEPS = 2
TOL = {"rtol": 1e-5, "atol": 1e-5}
MODES = ("shard_map_vma", "shard_map_novma", "pmap")
OPTIMIZERS = [e.name for e in catalog.entries("optimizer")]
SKIP: dict[str, str] = {}
"""Optimizers that cannot run data parallel, with the reason (none so far)."""
ROUNDING_AMPLIFIED = {
    "soap": "the kernel's 4 x 4 factor is one gradient's Gram matrix, of rank 3: the gradient's component "
    "along its null direction is rounding noise (~1e-8), which Adam's normalisation in that eigenbasis makes "
    "a step of full size (noise / sqrt(noise^2) + eps); the all-reduced gradient, summed in another order, "
    "has other noise there. pytorch-optimizer's SOAP does the same"
}
"""Optimizers whose replicas must agree with each other, not with the single-device run, and why."""
LOOSE = {"ggt": {"rtol": 1e-3, "atol": 1e-4}}
"""Rounding that an optimizer amplifies by the conditioning of its problem. GGT's: on this problem the two
first moments in its window at step 2 have cosine 0.999998, so its Gram matrix has eigenvalues 0.105 and
7e-8 (below `svd_eps` = 1e-6) and the direction of the small one is fixed only to ~eps * 0.105 / 7e-8 of
float32: the single-device float32 run is itself 2e-5 from the float64 run at step 2 (7e-5 at step 3), and
1e-6 relative noise on its gradients moves it by 3e-5. An all-reduce sums the gradients in another order,
hence the data-parallel run's 2e-5 to 4e-5 from the single-device one."""


CHUNK = 12
"""Optimizers per compiled program: XLA's compile time grows faster than a program (eight programs of an
eighth of the optimizers each compile in about two thirds of the time of one of all)."""


def _chunks(names):
    names = list(names)
    return [names[i : i + CHUNK] for i in range(0, len(names), CHUNK)]


def _problem():
    rng = np.random.default_rng(0)
    params = {
        "kernel": jnp.asarray(rng.standard_normal((4, 3)), jnp.float32),
        "bias": jnp.asarray(rng.standard_normal(3), jnp.float32),
    }
    x = rng.standard_normal((N * ROWS, 4)).astype(np.float32)
    y = rng.standard_normal((N * ROWS, 3)).astype(np.float32)
    return params, x, y


def _starts():
    """`{(kind, name): initial params}`, distinct per optimizer and kind (gradtx or optax): with equal
    starts XLA would merge the first step's gradient all-reduces of different optimizers into one (CSE)."""
    params = _problem()[0]
    kinds = [(kind, name) for kind in ("gradtx", "optax") for name in OPTIMIZERS]
    return {
        f"{kind}__{name}": jax.tree.map(lambda p, i=i: p + 1e-3 * i, params)
        for i, (kind, name) in enumerate(kinds)
    }


def _loss(params, x, y):
    return jnp.mean((x @ params["kernel"] + params["bias"] - y) ** 2)


@functools.cache
def _optax_equivalent(name):
    """optax's equivalent of the entry's example, or None where optax has none that runs."""
    if name in OPTAX:
        return OPTAX[name]()
    factory = getattr(optax, name, None)
    if factory is None:
        return None
    try:
        tx = factory(**catalog.entry(name).example)
        params, x, y = _problem()
        jax.eval_shape(lambda p: tx.update(p, tx.init(p), p), params)
    except Exception:  # noqa: BLE001 -- optax does not take these arguments: no comparison
        return None
    return tx


def _scope(kind, name):
    return f"{kind}__{name}"


def _train(tx, name, params, x, y, *, own=None, reduce=None, scope="gradtx"):
    """`STEPS` steps of `tx` from `params` on the batch `(x, y)`: `(params after each step, final state)`.
    `own` maps the params to what is differentiated (per_replica), `reduce` the gradients (optax's pmean)."""
    entry = catalog.entry(name)
    state = tx.init(params)
    out = []
    for t in range(STEPS):
        grads = jax.grad(_loss)(own(params) if own else params, x, y)
        with jax.named_scope(_scope(scope, name)):
            if reduce is not None:
                grads = reduce(grads)
            updates, state = tx.update(grads, state, params, **(entry.extra(t) if scope == "gradtx" else {}))
        params = (gradtx.apply_updates if scope == "gradtx" else optax.apply_updates)(params, updates)
        out.append(params)
    return jax.tree.map(lambda *a: jnp.stack(a), *out), state


def _traced(fn, names, errors):
    """`{name: fn(name)}`, an exception while tracing one recorded in `errors` (that entry's failure)."""
    out = {}
    for name in names:
        try:
            out[name] = fn(name)
        except Exception as e:  # noqa: BLE001 -- reported as this entry's failure
            errors[name] = e
    return out


@functools.cache
def _reference():
    """`({name: (params after each step, final state)}, errors)` on one device, the whole batch."""
    _, x, y = _problem()
    params, errors, results = _starts(), {}, {}
    for names in _chunks(OPTIMIZERS):

        def run(params, x, y, names=names):
            return _traced(
                lambda n: _train(catalog.entry(n).build(), n, params[_scope("gradtx", n)], x, y),
                names,
                errors,
            )

        compiled = jax.jit(run).lower(params, x, y).compile(FAST_COMPILE)
        results.update(jax.tree.map(np.asarray, compiled(params, x, y)))
    return results, errors


@functools.cache
def _mapped(mode):
    """`(results, errors, vma, all-reduces)` of every optimizer in `mode`: results `{name: (params, state)}`
    with a leading replica axis; vma `{name: state leaves' varying axes}` (check_vma=True only);
    all-reduces `{scope: count}` in the compiled program."""
    _, x, y = _problem()
    params, errors, vma = _starts(), {}, {}
    own = functools.partial(gradtx.parallel.per_replica, axis_name=AXIS) if mode == "shard_map_vma" else None

    def one(name, params, x, y):
        tx = gradtx.parallel.cross_shard(catalog.entry(name).build(), AXIS)
        out = _train(tx, name, params[_scope("gradtx", name)], x, y, own=own)
        if mode == "shard_map_vma":
            vma[name] = [varying(s) for s in jax.tree.leaves(out[1])]
        return out

    def body(params, x, y, names):
        out = _traced(lambda n: one(n, params, x, y), names, errors)
        optaxes = {n: tx for n in names if (tx := _optax_equivalent(n)) is not None}
        reduce = functools.partial(jax.lax.pmean, axis_name=AXIS)
        theirs = _traced(
            lambda n: _train(
                optaxes[n], n, params[_scope("optax", n)], x, y, own=own, reduce=reduce, scope="optax"
            ),
            optaxes,
            errors,
        )
        out = (out, jax.tree.map(lambda a: a.sum(), theirs))  # kept (not dead code), tiny
        return out if mode == "pmap" else jax.tree.map(lambda a: a[None], out)

    results, counts = {}, {}
    for names in _chunks(OPTIMIZERS):
        chunk = functools.partial(body, names=names)
        if mode == "pmap":
            args = (params, x.reshape(N, ROWS, -1), y.reshape(N, ROWS, -1))
            compiled = (
                jax.pmap(chunk, axis_name=AXIS, in_axes=(None, 0, 0)).lower(*args).compile(FAST_COMPILE)
            )
        else:
            mesh = jax.make_mesh((N,), (AXIS,))
            f = jax.jit(
                jax.shard_map(
                    chunk,
                    mesh=mesh,
                    in_specs=(P(), P(AXIS), P(AXIS)),
                    out_specs=P(AXIS),
                    check_vma=mode == "shard_map_vma",
                )
            )
            args = (params, *(jax.device_put(a, NamedSharding(mesh, P(AXIS))) for a in (x, y)))
            compiled = f.lower(*args).compile(FAST_COMPILE)
        for scope, n in _all_reduces(compiled.as_text()).items():
            counts[scope] = counts.get(scope, 0) + n
        results.update(jax.tree.map(np.asarray, jax.block_until_ready(compiled(*args)[0])))
    return results, errors, vma, counts


def _all_reduces(hlo):
    """Arrays all-reduced in the compiled program, by the named scope they come from (None: unattributed)."""
    return {scope: n for (scope, _), n in helpers.collectives_by_scope(hlo, ("all-reduce",)).items()}


def _close(got, want, tol=TOL):
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), **tol)


@pytest.mark.parametrize("mode", MODES)
def test_every_optimizer_runs_data_parallel_with_the_single_device_numbers(mode):
    reference, ref_errors = _reference()
    results, errors, vma, counts = _mapped(mode)
    failures = []
    for name in OPTIMIZERS:
        if name in SKIP:
            continue
        if name in ref_errors or name in errors:
            failures.append(f"{name}: raised {ref_errors.get(name) or errors.get(name)!r}")
            continue
        (params, state), (ref_params, ref_state) = results[name], reference[name]
        if name in ROUNDING_AMPLIFIED:  # every replica as replica 0
            ref_params, ref_state = (jax.tree.map(lambda a: a[0], t) for t in (params, state))
        for r in range(N):
            try:
                _close(jax.tree.map(lambda a, r=r: a[r], params), ref_params, LOOSE.get(name, TOL))
                _close(jax.tree.map(lambda a, r=r: a[r], state), ref_state, LOOSE.get(name, TOL))
            except AssertionError as e:
                failures.append(f"{name}: replica {r} differs from the single-device run: {e}")
                break
        if mode == "shard_map_vma" and any(v for v in vma[name]):
            failures.append(f"{name}: state not replicated like the params (varying axes {vma[name]})")
        if _optax_equivalent(name) is not None:
            ours, theirs = counts.get(_scope("gradtx", name), 0), counts.get(_scope("optax", name), 0)
            if ours > theirs:
                failures.append(
                    f"{name}: {ours} arrays all-reduced in {STEPS} steps, optax's equivalent {theirs}"
                )
    assert counts.get(None, 0) == 0, f"all-reduces outside any optimizer's scope: {counts}"
    assert not failures, "\n".join(failures)


@functools.cache
def _zero():
    """`(results, errors)` of every optimizer under ZeRO-1 in `shard_map` (check_vma=True): `sharded_state`
    with `gather_state=True`, so that element-wise rules and gradtx's reductions run on slices and the
    others on whole tensors with their state gathered; results `{name: (params [N, ...], state rows)}`."""
    _, x, y = _problem()
    params, errors = _starts(), {}
    own = functools.partial(gradtx.parallel.per_replica, axis_name=AXIS)

    def one(name, params, x, y):
        tx = gradtx.parallel.sharded_state(catalog.entry(name).build(), AXIS, gather_state=True)
        return _train(tx, name, params[_scope("gradtx", name)], x, y, own=own)

    def body(params, x, y, names):
        out = _traced(lambda n: one(n, params, x, y), names, errors)
        return {n: (jax.tree.map(lambda a: a[None], p), s) for n, (p, s) in out.items()}  # s: rows already

    mesh = jax.make_mesh((N,), (AXIS,))
    args = (params, *(jax.device_put(a, NamedSharding(mesh, P(AXIS))) for a in (x, y)))
    results = {}
    for names in _chunks(OPTIMIZERS):
        chunk = functools.partial(body, names=names)
        f = jax.jit(jax.shard_map(chunk, mesh=mesh, in_specs=(P(), P(AXIS), P(AXIS)), out_specs=P(AXIS)))
        results.update(
            jax.tree.map(np.asarray, jax.block_until_ready(f.lower(*args).compile(FAST_COMPILE)(*args)))
        )
    return results, errors


def test_every_optimizer_under_zero_keeps_one_nth_of_its_state_with_the_single_device_numbers():
    """No registered optimizer is refused by `sharded_state` inside `shard_map` (issue: ZeRO-1 for every
    optimizer): each replica stores ceil(size / N) of every state leaf (a scalar: its copy), the params
    equal the single-device run's, and `unshard_state` gives its state."""
    reference, ref_errors = _reference()
    results, errors = _zero()
    params = _problem()[0]
    failures = []
    for name in OPTIMIZERS:
        if name in ref_errors or name in errors:
            failures.append(f"{name}: raised {ref_errors.get(name) or errors.get(name)!r}")
            continue
        (got_params, state), (ref_params, ref_state) = results[name], reference[name]
        like = jax.eval_shape(catalog.entry(name).build().init, params)
        for row, whole in zip(jax.tree.leaves(state.inner), jax.tree.leaves(like), strict=True):
            want = (N,) if whole.shape == () else (N, -(-int(np.prod(whole.shape)) // N))
            if row.shape != want:
                failures.append(f"{name}: a state leaf {whole.shape} is stored as {row.shape}, not {want}")
                break
        if name in ROUNDING_AMPLIFIED:  # the replicas agree with each other
            ref_params = jax.tree.map(lambda a: a[0], got_params)
        try:
            for r in range(N):
                _close(jax.tree.map(lambda a, r=r: a[r], got_params), ref_params, LOOSE.get(name, TOL))
            if name not in ROUNDING_AMPLIFIED:
                _close(gradtx.parallel.unshard_state(state, like), ref_state, LOOSE.get(name, TOL))
        except AssertionError as e:
            failures.append(f"{name}: differs from the single-device run: {e}")
    assert not failures, "\n".join(failures)


WHOLE_TENSORS = {
    **dict.fromkeys(
        ("muon", "adamuon", "normuon", "muon_clip", "scion", "scion_light"), "orthogonalizes whole matrices"
    ),
    **dict.fromkeys(("shampoo", "soap", "psgd_kron"), "Kronecker factors of whole matrices"),
    **dict.fromkeys(("galore", "apollo"), "projects whole matrices onto a low-rank basis"),
    **dict.fromkeys(("sophia", "sophia_h", "adahessian"), "Hessian-vector products of the whole params"),
    "lbfgs": "its line search evaluates the loss at whole params",
    "ggt": "its buffer of the last moments is [window, *shape] per leaf, which ZeRO's flat slices do not cut",
}
"""The registered optimizers that `sharded_state` refuses inside `shard_map` without `gather_state` (they run
with it, above), and what of the whole tensors each needs."""


def test_zero_on_slices_refuses_only_the_optimizers_that_need_whole_tensors():
    """Without `gather_state`, every registered optimizer traces on the replicas' slices but those of
    `WHOLE_TENSORS`, each refused with `sharded_state`'s error (when built, or GGT's when traced)."""
    _, x, y = _problem()
    params = _starts()
    mesh = jax.make_mesh((N,), (AXIS,))
    x, y = (jax.device_put(a, NamedSharding(mesh, P(AXIS))) for a in (x, y))
    own = functools.partial(gradtx.parallel.per_replica, axis_name=AXIS)
    refused = {}
    for name in OPTIMIZERS:

        def body(params, x, y, name=name):
            tx = gradtx.parallel.sharded_state(catalog.entry(name).build(), AXIS)
            return _train(tx, name, params, x, y, own=own)[0]

        f = jax.shard_map(body, mesh=mesh, in_specs=(P(), P(AXIS), P(AXIS)), out_specs=P())
        try:
            jax.jit(f).trace(params[_scope("gradtx", name)], x, y)
        except ValueError as e:
            refused[name] = str(e)
    assert sorted(refused) == sorted(WHOLE_TENSORS)
    assert all(message.startswith("`sharded_state`: ") for message in refused.values()), refused

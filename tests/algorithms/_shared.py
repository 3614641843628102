"""Helpers shared by several files of tests/algorithms/: AddSign's and PowerSign's recipes and float64
references (test_addsign.py, test_powersign.py), and the harnesses that step a table of optimizers beside
optax's in one compiled program (the learning-rate-free ones: test_prodigy.py, test_dadapt.py,
test_mechanic.py, test_cocob.py, test_dog.py, test_polyak.py; optax's newer aliases: test_ademamix.py,
test_adopt.py, ...; SAM, Sophia and MoMo on one quartic loss: test_sam.py, test_sophia.py, test_momo.py).

The optax.contrib harness that tests/combinators/ uses too is in tests/helpers.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.schedules import cosine_sign_decay, linear_sign_decay, restart_sign_decay
from gradtx.transforms import scale_by_addsign, scale_by_powersign
from tests import helpers, reference
from tests.schedules.test_sign import ref_cosine, ref_linear, ref_restart

# --------------------------------------------------------------------------- AddSign and PowerSign


def addsign(learning_rate=0.1, alpha=1.0, beta=0.9, sign_decay=None):
    """The alias's recipe (tf.contrib.opt.AddSignOptimizer)."""
    return gradtx.chain(
        scale_by_addsign(alpha, beta, sign_decay), gradtx.scale_by_learning_rate(learning_rate)
    )


def powersign(learning_rate=0.1, base=math.e, beta=0.9, sign_decay=None):
    """The alias's recipe (tf.contrib.opt.PowerSignOptimizer)."""
    return gradtx.chain(
        scale_by_powersign(base, beta, sign_decay), gradtx.scale_by_learning_rate(learning_rate)
    )


def _sign_reference(lr, beta, multiplier):
    """`multiplier(sign_gm, t, sparse)`; m = m*beta + g*(1-beta) (sparse: densified g, every row)."""

    def step(var, g, s, t):
        m = s["m"] * beta + g * (1 - beta)
        return var - lr * multiplier(np.sign(g) * np.sign(m), t, False) * g, {"m": m}

    def sparse(var, indices, values, s, t):
        rows, g = reference.dedup(indices, values)
        dense = np.zeros_like(var)
        dense[rows] = g
        m = s["m"] * beta + dense * (1 - beta)
        var = var.copy()
        var[rows] -= lr * multiplier(np.sign(m[rows]) * np.sign(g), t, True) * g
        return var, {"m": m}

    return reference.Reference(lambda var: {"m": np.zeros_like(var)}, step, sparse)


def ref_addsign(lr, alpha, beta, decay):
    """ApplyAddSign: var -= lr * (alpha + decay(t-1) * sign(g) sign(m_new)) * g."""
    return _sign_reference(lr, beta, lambda sgm, t, sparse: alpha + decay(t - 1) * sgm)


def ref_powersign(lr, base, beta, decay):
    """ApplyPowerSign: var -= lr * exp(log(base) * decay(t-1) * sign(g) sign(m_new)) * g (sparse:
    pow(e, .))."""
    logbase = math.log(base)

    def multiplier(sgm, t, sparse):
        x = logbase * decay(t - 1) * sgm
        return np.power(np.e, x) if sparse else np.exp(x)

    return _sign_reference(lr, beta, multiplier)


# sign decays: (gradtx value, float64 reference of gs); a gradtx schedule's reference is its spec formula
DECAYS = {
    "none": (None, lambda gs: 1.0),
    "constant": (0.37, lambda gs: 0.37),
    "linear": (linear_sign_decay(16), lambda gs: ref_linear(gs, 16)),
    "cosine": (cosine_sign_decay(13, 1.7, zero_after=0.6), lambda gs: ref_cosine(gs, 13, 1.7, 0.6)),
    "restart": (restart_sign_decay(7, 2), lambda gs: ref_restart(gs, 7, 2)),
    "restart-zero-after": (restart_sign_decay(9, 3, zero_after=2), lambda gs: ref_restart(gs, 9, 3, 2)),
    "user": (lambda count: 0.5 ** (count / 4), lambda gs: 0.5 ** (gs / 4)),
}


def _sign_case(case, *, x64):
    """The optimizer of a case `(optimizer, its hyperparameters, decay key)` and its float64 reference."""
    make, hyper, decay_key = case
    value, ref_decay = DECAYS[decay_key]
    if x64 and callable(value):
        # gradtx's sign decays are float32 (as TF's), and so is `int32 count / 4`: the float64 run
        # must see the same values
        def ref_decay(gs, s=value):
            return float(s(jnp.int32(gs)))

    lr, h, beta = hyper["learning_rate"], hyper.get("alpha", hyper.get("base")), hyper["beta"]
    ref = ref_addsign if make is addsign else ref_powersign
    return make(**hyper, sign_decay=value), ref(lr, h, beta, ref_decay)


def check_sign_case(case, name, sparse, *, x64):
    """20 steps of the case against its float64 reference: float32 to TF's tolerance, float64 to 1e-10."""
    tx, ref = _sign_case(case, x64=x64)
    params, grads = helpers.problem(3, sparse=sparse)
    expected, ref_slots = reference.run(ref, params, grads)
    if x64:
        with jax.enable_x64(True):
            p64 = [np.asarray(p, np.float64) for p in params]
            actual, state = helpers.run(tx, p64, helpers.to_gradtx(grads, dtype=np.float64))
            assert all(x.dtype == np.float64 for x in actual[-1])
        tol = {"rtol": 1e-10, "atol": 1e-10}
    else:
        actual, state = helpers.run(tx, params, helpers.to_gradtx(grads))
        tol = {"rtol": 1e-5, "atol": 1e-6}
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        helpers.assert_trees_close(a, e, msg=f"{name}: params after step {t + 1}", **tol)
    helpers.assert_trees_close(
        gradtx.get_slot(state, "m"), [s["m"] for s in ref_slots], msg=f"{name}: slot m", **tol
    )
    assert int(state[0].count) == len(grads)


# --------------------------------------------------------------------------- learning-rate-free optimizers


def _lr_free_scanned(tx, params, grads, extra):
    """`(params after each step, last state)` of `tx` over the stacked gradients, in one `lax.scan`."""

    def body(carry, xs):
        p, state = carry
        g, e = xs
        u, state = tx.update(g, state, p, **e)
        p = gradtx.apply_updates(p, u)
        return (p, state), p

    (_, state), trajectory = jax.lax.scan(body, (params, tx.init(params)), (grads, extra))
    return trajectory, state


def lr_free_runs(cases, problem_for, extra_args) -> dict:
    """Every case's 20 steps, gradtx's, optax_compat's and optax's, compiled as one program (one compilation
    for the whole table): `{name: (gradtx's trajectory, compat's state, optax's trajectory, optax's state)}`.
    `cases` is `{name: (gradtx's, optax_compat's, optax's)}`, `problem_for(name)` gives a case's params and
    gradients, `extra_args[name's first word]` the extra arguments of `update` at each step."""
    problems = {name: problem_for(name) for name in cases}

    def everything():
        out = {}
        for name, (ours, compat, theirs) in cases.items():
            params, grads = problems[name]
            stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *grads)
            extra = extra_args.get(name.split("-")[0])
            extra = {} if extra is None else jax.tree.map(lambda *xs: jnp.stack(xs), *extra)
            actual, _ = _lr_free_scanned(ours(), params, stacked, extra)
            _, compat_state = _lr_free_scanned(compat(), params, stacked, extra)
            expected, optax_state = _lr_free_scanned(theirs(), params, stacked, extra)
            out[name] = (actual, compat_state, expected, optax_state)
        return out

    return jax.tree.map(np.asarray, jax.jit(everything)())


# --------------------------------------------------------------------------- gradtx, optax_compat and optax


def _scan(tx, params, grads):
    """The params after each of the steps, and the last state (to be traced inside `jax.jit`)."""

    def step(carry, g):
        p, s = carry
        u, s = tx.update(g, s, p)
        p = jax.tree.map(lambda a, b: a + b, p, u)
        return (p, s), p

    (_, state), trajectory = jax.lax.scan(step, (params, tx.init(params)), grads)
    return trajectory, state


def _numpy(x):
    return np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)


def three_library_runs(cases, problem):
    """Every case's three trajectories and final states, each library's cases compiled as one program:
    `{0: gradtx's, 1: optax_compat's, 2: optax's}`, each `{name: (trajectory, last state)}`. `cases` is
    `{name: (gradtx's, optax_compat's, optax's)}`, `problem()` the params and stacked gradients."""
    params, grads = problem()
    out = {}
    for lib in range(3):
        run = jax.jit(lambda p, g, lib=lib: {n: _scan(c[lib](), p, g) for n, c in cases.items()})
        out[lib] = jax.tree.map(_numpy, run(params, grads))
    return out


# --------------------------------------------------------------------------- SAM, Sophia and MoMo

QUARTIC_SHAPES = {"w": (4, 3), "b": (3,), "s": ()}
_RNG = np.random.default_rng(0)
PARAMS = {k: jnp.asarray(_RNG.standard_normal(s), jnp.float32) for k, s in QUARTIC_SHAPES.items()}
TARGET = {k: jnp.asarray(_RNG.standard_normal(s), jnp.float32) for k, s in QUARTIC_SHAPES.items()}
CURVE = {k: jnp.asarray(_RNG.uniform(0.5, 2.0, s), jnp.float32) for k, s in QUARTIC_SHAPES.items()}


def loss(params):
    """A separable quartic-plus-quadratic: curvature differs per element, the Hessian moves with params."""
    return sum(
        jnp.sum(CURVE[k] * (params[k] - TARGET[k]) ** 2 + 0.1 * (params[k] - TARGET[k]) ** 4)
        for k in QUARTIC_SHAPES
    )


def _extra(kind, params):
    """The extra arguments of one step of an optimizer of `kind`."""
    if kind == "grad_fn":
        return {"grad_fn": lambda p, i: jax.grad(loss)(p)}
    if kind == "obj_fn":
        return {"obj_fn": loss}
    if kind == "value":
        return {"value": loss(params)}
    return {}


def _step(tx, kind, apply):
    def step(carry, _):
        params, state = carry
        updates, state = tx.update(jax.grad(loss)(params), state, params, **_extra(kind, params))
        params = apply(params, updates)
        return (params, state), params

    return step


def _run(tx, kind, apply, steps, jit):
    state = tx.init(PARAMS)
    if jit:
        (_, state), history = jax.jit(lambda p, s: jax.lax.scan(_step(tx, kind, apply), (p, s), None, steps))(
            PARAMS, state
        )
        return history, state
    carry, out = (PARAMS, state), []
    for _ in range(steps):
        carry, params = _step(tx, kind, apply)(carry, None)
        out.append(params)
    return jax.tree.map(lambda *xs: jnp.stack(xs), *out), carry[1]


def compare_on_quartic(ours, theirs, kind, jit, state_fields=(), same_layout=True):
    """20 jitted steps (5 eager ones) of gradtx's and optax's optimizers on `loss`, each computing its extra
    argument of `kind` from its own params: the params, the state read by `state_fields`, the layout."""
    steps = helpers.STEPS if jit else 5
    mine, my_state = _run(ours, kind, gradtx.apply_updates, steps, jit)
    ref, ref_state = _run(theirs, kind, optax.apply_updates, steps, jit)
    helpers.assert_trees_close(mine, ref, rtol=1e-6, atol=1e-6)
    for read in state_fields:
        helpers.assert_trees_close(read(my_state), read(ref_state), rtol=1e-6, atol=1e-6)
    if same_layout:  # optax_compat's names: optax's state classes, field for field
        assert str(jax.tree.structure(my_state)) == str(jax.tree.structure(ref_state))


def jit_and_eager_cases(cases, eager=None):
    """Every case jitted, `eager` also eagerly (5 steps)."""
    runs = [(n, True) for n in cases] + ([(eager, False)] if eager else [])
    return pytest.mark.parametrize("name, jit", runs, ids=[*cases, *([f"{eager}-eager"] if eager else [])])


def _assert_close_to_optax(actual, expected, msg):
    helpers.assert_trees_close(actual, expected, rtol=1e-6, atol=1e-6, msg=msg)


def check_jitted_runs(runs, name, steps, own_noise=frozenset()):
    """Case `name` of `three_library_runs`: gradtx's and optax_compat's params equal optax's at each of the
    `steps` steps, and optax_compat's final state is optax's (classes, fields and numbers; only the shapes
    for a case in `own_noise`, whose noise is gradtx's own)."""
    expected, optax_state = runs[2][name]
    for lib, label in ((0, "gradtx"), (1, "optax_compat")):
        trajectory, _ = runs[lib][name]
        for t in range(steps):
            step = jax.tree.map(lambda x, t=t: x[t], (trajectory, expected))
            _assert_close_to_optax(*step, msg=f"{name} ({label}): step {t + 1}")
    compat_state = runs[1][name][1]
    assert str(jax.tree.structure(compat_state)) == str(jax.tree.structure(optax_state))
    if name in own_noise:
        compat_state, optax_state = (jax.tree.map(np.shape, s) for s in (compat_state, optax_state))
    _assert_close_to_optax(compat_state, optax_state, msg=f"{name}: state")


def check_eager_steps(name, case, problem, steps=5):
    """Case `name` (`(gradtx's, optax_compat's, optax's)` factories): gradtx's params equal optax's at each of
    `steps` eager steps on `problem()`'s first gradients."""
    params, grads = problem()
    grads = [jax.tree.map(lambda g, t=t: g[t], grads) for t in range(steps)]
    ours, _, theirs = case
    actual, _ = helpers.run(ours(), params, grads)
    expected, _ = helpers.run(theirs(), params, grads)
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        _assert_close_to_optax(a, e, msg=f"{name}: step {t + 1}")


def sparse_case():
    """Params, a first moment and a row-sparse gradient touching rows 1 and 4 (row 4 twice), of (6, 2)."""
    rng = np.random.default_rng(11)
    params = jnp.asarray(rng.standard_normal((6, 2)), jnp.float32)
    m0 = jnp.asarray(rng.standard_normal((6, 2)), jnp.float32)
    g = gradtx.sparse.RowSparse(
        jnp.array([4, 1, 4]), jnp.asarray(rng.standard_normal((3, 2)), jnp.float32), (6, 2)
    )
    return params, m0, g


def check_sparse_sign_rule(factory, cls):
    """The sign rules' sparse step (beta 0.75): `m` decays on every row, moves by the gradient on the touched
    rows; only the touched rows of the params move, the indices deduplicated and padded."""
    params, m0, g = sparse_case()
    tx = factory(beta=0.75)
    u, state = jax.jit(tx.update)(g, cls(count=jnp.int32(0), m=m0))
    untouched = np.array([0, 2, 3, 5])
    np.testing.assert_array_equal(state.m[untouched], m0[untouched] * np.float32(0.75))
    dense = g.todense()
    touched = np.array([1, 4])
    np.testing.assert_allclose(state.m[touched], m0[touched] * 0.75 + dense[touched] * 0.25, rtol=1e-6)
    assert isinstance(u, gradtx.sparse.RowSparse)
    new = gradtx.apply_updates(params, u)
    np.testing.assert_array_equal(new[untouched], params[untouched])
    assert np.asarray(u.indices).tolist() == [1, 4, 6]  # deduplicated, padded with the out-of-range row

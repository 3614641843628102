"""gradtx/_algorithms/lbfgs.py: L-BFGS (`lbfgs`, `scale_by_lbfgs`) against optax and scipy.

Iterates of `gradtx.lbfgs` and `gradtx.optax_compat.lbfgs` (zoom line search by default, and with
the backtracking one) equal optax's on Rosenbrock's function and on an L2-regularised logistic
regression: 20 jitted iterations, each library's runs in one compiled program, rtol = atol = 1e-6
(the same float32 operations in the same order: the iterates agree to the last bit here, and a
tolerance of float32's resolution leaves room for a compiler's reassociation, which Rosenbrock's
ill-conditioned valley would amplify). The loop of optax's docs with `value_and_grad_from_state`,
jitted, reaches scipy's L-BFGS-B minimum (float64) of the logistic regression within 1e-6.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize

import gradtx
from gradtx import optax_compat as compat

STEPS = 20
TOL = {"rtol": 1e-6, "atol": 1e-6}


def rosenbrock(w):
    return jnp.sum(100.0 * (w[1:] - w[:-1] ** 2) ** 2 + (1.0 - w[:-1]) ** 2)


_RNG = np.random.default_rng(0)
_X = _RNG.standard_normal((40, 4)).astype(np.float32)
_Y = np.sign(_X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.5 * _RNG.standard_normal(40)).astype(np.float32)


def logistic(w, x=_X, y=_Y):
    """Mean logistic loss with an L2 term, of `w = {"coef": (4,), "bias": ()}` (a tree, as params are)."""
    margins = y * (x @ w["coef"] + w["bias"])
    return jnp.mean(jnp.logaddexp(0.0, -margins)) + 0.05 * jnp.sum(w["coef"] ** 2)


PROBLEMS = {
    "rosenbrock": (rosenbrock, jnp.array([-1.2, 1.0], jnp.float32)),
    "logistic": (logistic, {"coef": jnp.zeros(4, jnp.float32), "bias": jnp.asarray(0.0, jnp.float32)}),
}


def _trajectory(tx, apply, f, w0, steps=STEPS):
    """The iterates of `steps` L-BFGS iterations (a scan: one compiled program)."""

    def step(carry, _):
        w, state = carry
        value, grad = jax.value_and_grad(f)(w)
        u, state = tx.update(grad, state, w, value=value, grad=grad, value_fn=f)
        w = apply(w, u)
        return (w, state), w

    return jax.lax.scan(step, (w0, tx.init(w0)), length=steps)[1]


def _searches(lib):
    return {
        "zoom": lib.lbfgs(),
        "backtracking": lib.lbfgs(linesearch=lib.scale_by_backtracking_linesearch(15, store_grad=True)),
    }


def _runs(libs, apply):
    """Each trajectory compiled on its own (in one program with others, XLA may fuse its float32 operations
    otherwise, and Rosenbrock's valley magnifies a last-bit difference to 1e-5 in 20 steps)."""
    return {
        (problem, search): jax.jit(lambda tx=tx, f=f, w0=w0: _trajectory(tx, apply, f, w0))()
        for problem, (f, w0) in PROBLEMS.items()
        for search, tx in _searches(libs[problem]).items()
    }


def test_iterates_equal_optax_on_rosenbrock_and_logistic_regression_with_zoom_and_backtracking():
    theirs = _runs({"rosenbrock": optax, "logistic": optax}, optax.apply_updates)
    # gradtx's names on Rosenbrock, optax_compat's on the logistic regression (the same code for real
    # params: its zoom search differs from gradtx's only in the first slope of complex params)
    ours = _runs({"rosenbrock": gradtx, "logistic": compat}, gradtx.apply_updates)
    for key, iterates in ours.items():
        for a, b in zip(jax.tree.leaves(iterates), jax.tree.leaves(theirs[key]), strict=True):
            np.testing.assert_allclose(a, b, **TOL, err_msg=str(key))
    f, w0 = PROBLEMS["rosenbrock"]
    assert f(ours["rosenbrock", "zoom"][-1]) < 0.05 * f(w0)  # well down the valley


def test_eager_steps_equal_optax():
    """Five eager steps of L-BFGS with a fixed rate (`linesearch=None`; the searches' loops compile even
    eagerly), state included."""
    f, w = PROBLEMS["logistic"]
    runs = {}
    for name, lib, apply in (("ours", gradtx, gradtx.apply_updates), ("theirs", optax, optax.apply_updates)):
        tx = lib.lbfgs(0.5, memory_size=3, linesearch=None)
        params, state = w, tx.init(w)
        for _ in range(5):
            u, state = tx.update(jax.grad(f)(params), state, params)
            params = apply(params, u)
        runs[name] = (params, state)
    for a, b in zip(jax.tree.leaves(runs["ours"]), jax.tree.leaves(runs["theirs"]), strict=True):
        np.testing.assert_allclose(a, b, **TOL)
    assert runs["ours"][1][0].diff_params_memory["coef"].shape == (3, 4)  # optax's fields, by name


def test_the_value_and_grad_from_state_loop_of_optax_s_docs_reaches_scipy_s_minimum():
    f, w0 = PROBLEMS["logistic"]
    solver = gradtx.lbfgs()
    value_and_grad = gradtx.value_and_grad_from_state(f)

    @jax.jit
    def run(params):
        def body(_, carry):
            params, opt_state = carry
            value, grad = value_and_grad(params, state=opt_state)
            updates, opt_state = solver.update(grad, opt_state, params, value=value, grad=grad, value_fn=f)
            return gradtx.apply_updates(params, updates), opt_state

        return jax.lax.fori_loop(0, 30, body, (params, solver.init(params)))

    params, state = run(w0)

    def f64(v):
        coef, bias = v[:4], v[4]
        margins = _Y * (_X.astype(np.float64) @ coef + bias)
        return np.mean(np.logaddexp(0.0, -margins)) + 0.05 * np.sum(coef**2)

    best = scipy.optimize.minimize(
        f64, np.zeros(5), method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15}
    )
    assert best.success
    assert abs(float(f(params)) - best.fun) <= 1e-6, (float(f(params)), best.fun)
    assert float(state[2].value) == pytest.approx(float(f(params)), abs=1e-6)  # what the next step reuses


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: gradtx.lbfgs(memory_size=0), ValueError, r"`lbfgs`: `memory_size` must be >= 1, got 0"),
        (lambda: gradtx.lbfgs(-0.1), ValueError, r"`lbfgs`: `learning_rate` must be >= 0, got -0.1"),
        (
            lambda: gradtx.lbfgs(linesearch="wolfe"),
            ValueError,
            r"`lbfgs`: `linesearch` must be one of 'zoom'",
        ),
        (lambda: gradtx.lbfgs(linesearch=3), TypeError, r"`lbfgs`: `linesearch` must be a gradient transf"),
        (
            lambda: gradtx.scale_by_lbfgs(2.5),
            TypeError,
            r"`scale_by_lbfgs`: `memory_size` must be an integer",
        ),
        (
            lambda: gradtx.scale_by_lbfgs(scale_init_precond=1),
            TypeError,
            r"`scale_by_lbfgs`: `scale_init_precond` must be True or False, got 1",
        ),
        (lambda: compat.lbfgs(memory_size=-1), ValueError, r"`lbfgs`: `memory_size` must be >= 1, got -1"),
    ],
)
def test_bad_arguments_are_refused_at_construction(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_update_needs_params():
    tx = gradtx.scale_by_lbfgs()
    with pytest.raises(ValueError, match=r"`scale_by_lbfgs`: `update` needs the current parameters"):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))

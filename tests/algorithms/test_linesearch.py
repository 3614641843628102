"""gradtx/_algorithms/linesearch.py: the backtracking line search and `value_and_grad_from_state`, and both
line searches (this one and gradtx/_algorithms/linesearch_zoom.py's zoom search, built on it) against optax.

Each search follows `sgd(1.0)` as in optax's docs, on a least-squares objective that takes its
data as extra arguments of `update` (passed on to `value_fn` by name): 5 jitted steps, params and
the whole state (step size, value, gradient, info) equal to optax's at rtol = atol = 1e-6 (the
same float32 operations: they agree to the last bit). Options that change the search's path
(a largest step size, no curvature condition, no approximate decrease, a kept guess, the stored
gradient or not, `value` and `grad` left to the search) each run once; all cases of one library are
one compiled program. The zoom search's own checks: test_linesearch_zoom.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx import optax_compat as compat

TOL = {"rtol": 1e-6, "atol": 1e-6}
_RNG = np.random.default_rng(1)
X = jnp.asarray(_RNG.standard_normal((5, 8, 3)), jnp.float32)  # 5 steps' batches
Y = jnp.asarray(_RNG.standard_normal((5, 8)), jnp.float32)


def loss(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2) + 0.1 * jnp.sum(params["w"] ** 4)


W0 = {"w": jnp.array([1.0, -2.0, 3.0], jnp.float32), "b": jnp.asarray(0.5, jnp.float32)}

CASES = {
    "zoom": lambda lib: lib.scale_by_zoom_linesearch(15),
    "zoom-max-rate-one": lambda lib: lib.scale_by_zoom_linesearch(
        10, max_learning_rate=0.3, initial_guess_strategy="one"
    ),
    "zoom-no-curvature": lambda lib: lib.scale_by_zoom_linesearch(
        10, curv_rtol=jnp.inf, approx_dec_rtol=None
    ),
    "zoom-few-steps": lambda lib: lib.scale_by_zoom_linesearch(
        2, increase_factor=3.0, stepsize_precision=1e-2
    ),
    "backtracking": lambda lib: lib.scale_by_backtracking_linesearch(15),
    "backtracking-store-grad": lambda lib: lib.scale_by_backtracking_linesearch(
        15, 1e-3, 0.5, 2.0, 2.0, store_grad=True
    ),
}


def _run(lib, sgd, apply, cases=tuple(CASES)):
    def one(search, given=True):
        tx = lib.chain(sgd(1.0), search)

        def step(carry, xy):
            params, state = carry
            value, grad = jax.value_and_grad(loss)(params, *xy)
            objective = {"value": value, "grad": grad} if given else {}
            u, state = tx.update(grad, state, params, **objective, value_fn=loss, x=xy[0], y=xy[1])
            params = apply(params, u)
            return (params, state), params

        (_, state), iterates = jax.lax.scan(step, (W0, tx.init(W0)), (X, Y))
        return iterates, state[1]

    def run():
        out = {name: one(CASES[name](lib)) for name in cases}
        if lib is not optax:  # `value` and `grad` computed by the search from `value_fn`
            out["zoom-computed"] = one(CASES["zoom"](lib), given=False)
        return out

    return jax.jit(run)()


_LBFGS_NAMES = (
    "lbfgs",
    "scale_by_backtracking_linesearch",
    "scale_by_lbfgs",
    "scale_by_zoom_linesearch",
    "value_and_grad_from_state",
)


def test_steps_and_states_equal_optax():
    theirs = _run(optax, optax.sgd, optax.apply_updates)
    ours = _run(
        type(
            "lib",
            (),
            {"chain": staticmethod(gradtx.chain), **{n: getattr(compat, n) for n in _LBFGS_NAMES}},
        ),
        gradtx.optax_compat.sgd,
        gradtx.apply_updates,
    )
    theirs["zoom-computed"] = theirs["zoom"]
    for name in ours:
        (iterates, state), (want_iterates, want_state) = ours[name], theirs[name]
        for a, b in zip(jax.tree.leaves(iterates), jax.tree.leaves(want_iterates), strict=True):
            np.testing.assert_allclose(a, b, **TOL, err_msg=name)
        assert state._fields == want_state._fields and state.info._fields == want_state.info._fields
        for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(want_state), strict=True):
            np.testing.assert_allclose(a, b, **TOL, err_msg=name)
    final = {k: v[-1] for k, v in ours["zoom"][0].items()}
    assert float(loss(final, X[-1], Y[-1])) < 0.5 * float(loss(W0, X[-1], Y[-1]))


def test_value_and_grad_from_state():
    f = lambda w: jnp.sum(w**2)  # noqa: E731
    w = jnp.array([1.0, 2.0])
    tx = gradtx.chain(gradtx.scale(-1.0), gradtx.scale_by_zoom_linesearch(10))
    value_and_grad = gradtx.value_and_grad_from_state(f)
    state = tx.init(w)
    np.testing.assert_array_equal(value_and_grad(w, state=state)[1], 2 * w)  # inf in the state: computed
    u, state = tx.update(2 * w, state, w, value_fn=f)
    w = gradtx.apply_updates(w, u)
    value, grad = value_and_grad(w, state=state)
    assert float(value) == float(state[1].value) == float(f(w))  # kept: the new params' value
    np.testing.assert_array_equal(grad, state[1].grad)
    plain = gradtx.chain(gradtx.scale(-1.0), gradtx.scale_by_backtracking_linesearch(10))
    with pytest.raises(
        ValueError, match=r"`value_and_grad_from_state`: the state holds no `value` or no `grad`"
    ):
        value_and_grad(w, state=plain.init(w))


@pytest.mark.parametrize(
    "build, error, match",
    [
        (
            lambda: gradtx.scale_by_backtracking_linesearch(5, decrease_factor=1.0),
            ValueError,
            r"`scale_by_backtracking_linesearch`: `decrease_factor` must be in \(0.0, 1.0\), got 1.0",
        ),
        (lambda: gradtx.scale_by_backtracking_linesearch(-1), ValueError, r"must be >= 0, got -1"),
        (
            lambda: gradtx.scale_by_backtracking_linesearch(5, max_learning_rate=-1.0),
            ValueError,
            r"must be > 0",
        ),
        (
            lambda: gradtx.scale_by_backtracking_linesearch(5, store_grad=1),
            TypeError,
            r"`store_grad` must be True",
        ),
        (
            lambda: compat.scale_by_backtracking_linesearch(5, 0.1, 2.0),
            ValueError,
            r"`decrease_factor` must be in",
        ),
        (lambda: gradtx.value_and_grad_from_state(3), TypeError, r"`value_fn` must be callable"),
    ],
)
def test_bad_arguments_are_refused_at_construction(build, error, match):
    with pytest.raises(error, match=match):
        build()

"""gradtx/_algorithms/linesearch_zoom.py: the zoom line search (strong Wolfe conditions) on complex params
against optax's, its errors at construction and its missing objective (its steps and states against optax's,
with the backtracking search's: test_linesearch.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx import optax_compat as compat

TOL = {"rtol": 1e-6, "atol": 1e-6}


def test_complex_params_compat_keeps_optax_s_first_slope():
    """optax_compat's zoom search is optax's on complex params too (optax conjugates the direction in the
    first slope); gradtx's turns with the params' phase (tests/test_complex.py)."""
    f = lambda w: jnp.sum(jnp.abs(w - (1.0 + 2.0j)) ** 2)  # noqa: E731
    w = jnp.array([0.5 - 1.0j, 2.0 + 0.5j], jnp.complex64)
    g = jnp.conj(jax.grad(f)(w))

    @jax.jit
    def steps():
        def step(lib):
            tx = lib.scale_by_zoom_linesearch(10)
            return tx.update(-g, tx.init(w), w, value=f(w), grad=jax.grad(f)(w), value_fn=f)[0]

        return step(compat), step(optax)

    ours, theirs = steps()
    np.testing.assert_allclose(ours, theirs, **TOL)
    assert float(f(w + ours)) < float(f(w))


@pytest.mark.parametrize(
    "build, error, match",
    [
        (
            lambda: gradtx.scale_by_zoom_linesearch(0),
            ValueError,
            r"`max_linesearch_steps` must be >= 1, got 0",
        ),
        (
            lambda: gradtx.scale_by_zoom_linesearch(2.0),
            TypeError,
            r"`max_linesearch_steps` must be an integer",
        ),
        (lambda: gradtx.scale_by_zoom_linesearch(5, slope_rtol=1.5), ValueError, r"`slope_rtol` must be in"),
        (lambda: gradtx.scale_by_zoom_linesearch(5, curv_rtol=1e-5), ValueError, r"`curv_rtol` must be > "),
        (
            lambda: gradtx.scale_by_zoom_linesearch(5, max_learning_rate=0.0),
            ValueError,
            r"must be > 0, got 0.0",
        ),
        (
            lambda: gradtx.scale_by_zoom_linesearch(5, increase_factor=1.0),
            ValueError,
            r"`increase_factor` must",
        ),
        (lambda: gradtx.scale_by_zoom_linesearch(5, tol=-1.0), ValueError, r"`tol` must be >= 0, got -1.0"),
        (
            lambda: gradtx.scale_by_zoom_linesearch(5, initial_guess_strategy="two"),
            ValueError,
            r"`scale_by_zoom_linesearch`: `initial_guess_strategy` must be one of 'one', 'keep'; got 'two'",
        ),
        (
            lambda: gradtx.scale_by_zoom_linesearch(5, tol=lambda count: 0.1),
            TypeError,
            r"`tol` must be a number or a scalar array \(a line search keeps no step count",
        ),
    ],
)
def test_bad_arguments_are_refused_at_construction(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_a_missing_objective_is_a_clear_error():
    tx = gradtx.scale_by_zoom_linesearch(5)
    with pytest.raises(
        gradtx.MissingExtraArgError,
        match=r"`scale_by_zoom_linesearch`: `update` needs the extra argument `value_fn`; call it as "
        r"`tx.update\(grads, state, params, value_fn=loss_fn\)`",
    ):
        tx.update(jnp.ones(2), tx.init(jnp.zeros(2)), jnp.zeros(2))

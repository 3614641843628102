"""`gradtx.assignment` against `optax.assignment` (same pairs, order and dtypes) and SciPy (same cost)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradtx import assignment

optax = pytest.importorskip("optax")
scipy_optimize = pytest.importorskip("scipy.optimize")

NAMES = ("hungarian_algorithm", "base_hungarian_algorithm")
SHAPES = ((1, 5), (5, 1), (4, 4), (3, 7), (7, 3))
CONTINUOUS = 8  # per shape: this many standard normal matrices, then as many of integers in {0, 1, 2}


def _costs() -> dict[tuple[int, int], np.ndarray]:
    """Per shape, float32 cost matrices: continuous ones (one optimum), then integer ones (ties)."""
    rng = np.random.default_rng(0)
    return {
        s: np.concatenate(
            [rng.normal(size=(CONTINUOUS, *s)), rng.integers(0, 3, size=(CONTINUOUS, *s))]
        ).astype(np.float32)
        for s in SHAPES
    }


@functools.cache
def _solved(lib: str, name: str) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Every batch of `_costs` solved by `lib`'s `name`, under one jit (`lax.map`: one compilation)."""
    fn = getattr(assignment if lib == "gradtx" else optax.assignment, name)
    out = jax.jit(lambda cs: {s: jax.lax.map(fn, c) for s, c in cs.items()})(_costs())
    return {s: (np.asarray(i), np.asarray(j)) for s, (i, j) in out.items()}


@pytest.mark.parametrize("name", NAMES)
def test_pairs_equal_optax(name):
    """Bit for bit, ties included: the same pairs in the same order and dtypes."""
    ours, theirs = _solved("gradtx", name), _solved("optax", name)
    for s in SHAPES:
        for a, b in zip(ours[s], theirs[s], strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b, err_msg=f"{name}, shape {s}")


@pytest.mark.parametrize("name", NAMES)
def test_optimal_as_scipy(name):
    for s, costs in _costs().items():
        rows, cols = _solved("gradtx", name)[s]
        for b, c in enumerate(costs):
            i, j = rows[b], cols[b]
            assert len(set(i)) == len(set(j)) == len(i) == min(s)  # a matching of min(n, m) pairs
            si, sj = scipy_optimize.linear_sum_assignment(c)
            if b < CONTINUOUS:  # one optimum: scipy's pairs
                assert sorted(zip(i, j, strict=True)) == sorted(zip(si, sj, strict=True)), (s, b)
            assert c[i, j].sum() == pytest.approx(c[si, sj].sum(), rel=1e-6, abs=1e-6), (s, b)


@pytest.mark.parametrize("name", NAMES)
def test_integer_costs(name):
    """optax's example, on int32 costs, under jit: pairs, dtypes and weak types equal."""
    cost = jnp.array([[8, 4, 7], [5, 2, 3], [9, 6, 7], [9, 4, 8]])
    ours, theirs = jax.jit(getattr(assignment, name))(cost), jax.jit(getattr(optax.assignment, name))(cost)
    for a, b in zip(ours, theirs, strict=True):
        assert (a.dtype, a.weak_type) == (b.dtype, b.weak_type)
        np.testing.assert_array_equal(a, b)
    assert int(cost[ours].sum()) == 15


@pytest.mark.parametrize("name", NAMES)
def test_vmap_equals_map(name):
    costs = _costs()[(3, 7)]
    i, j = jax.vmap(getattr(assignment, name))(jnp.asarray(costs))
    np.testing.assert_array_equal(i, _solved("optax", name)[(3, 7)][0])
    np.testing.assert_array_equal(j, _solved("optax", name)[(3, 7)][1])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 4)])
def test_empty(name, shape):
    costs = jnp.zeros(shape)
    fn = getattr(assignment, name)
    ours = (jax.vmap(fn) if len(shape) == 3 else fn)(costs)
    theirs = (
        jax.vmap(getattr(optax.assignment, name)) if len(shape) == 3 else getattr(optax.assignment, name)
    )(costs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype


@pytest.mark.parametrize("name", NAMES)
def test_not_a_matrix(name):
    with pytest.raises(ValueError, match=rf"`{name}`: `cost_matrix` must be a 2-D array .* got shape \(3,\)"):
        getattr(assignment, name)(jnp.zeros(3))

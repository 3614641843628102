"""PSGD Kron (gradtx/_algorithms/psgd_kron.py) against psgd-jax's `kron` and pytorch-optimizer's `Kron`.

The fixture (tools/references/psgd_kron.py) holds 20-step trajectories of both. psgd-jax's are replayed
with gradtx's own random numbers, drawn with psgd-jax's keys; pytorch-optimizer's with the normal arrays
and uniforms it drew, fed through the module's `_draws` and `_normal` (patched here: a test seam, not an API).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._algorithms import psgd_kron as kron_module
from gradtx._algorithms import psgd_kron_leaf as kron_leaf
from tests.algorithms import _references

CASES = _references.cases("psgd_kron")
TORCH = [c for c in CASES if c.path == "pytorch_optimizer.Kron"]
JAX = [c for c in CASES if c.path == "psgd_jax.kron.kron"]
LEAVES = ("conv", "matrix", "vector")

PSGD_JAX_ARGUMENTS = {
    "learning_rate": "learning_rate",
    "b1": "b1",
    "weight_decay": "weight_decay",
    "preconditioner_update_probability": "precond_update_probability",
    "max_size_triangular": "max_size_triangular",
    "min_ndim_triangular": "min_ndim_triangular",
    "memory_save_mode": "memory_save_mode",
    "momentum_into_precond_update": "momentum_into_precond_update",
    "preconditioner_lr": "precond_lr",
    "preconditioner_init_scale": "precond_init_scale",
}
"""psgd-jax's `kron` arguments used by the cases -> gradtx's `psgd_kron` arguments."""


def _psgd_jax(kwargs):
    """gradtx's `psgd_kron` configured as psgd-jax's `kron(**kwargs)`: its damping, its clip."""
    args = {PSGD_JAX_ARGUMENTS[k]: v for k, v in kwargs.items()}
    args.setdefault("learning_rate", 0.001)  # psgd-jax's default
    every_leaf = lambda params: jax.tree.map(lambda _: True, params)  # noqa: E731  (psgd-jax decays all)
    return gradtx.psgd_kron(**args, damping=kron_module.PSGD_JAX_DAMPING, clip_eps=0.0, mask=every_leaf)


def _replayed_draws(case, monkeypatch):
    """`_draws` and `_normal` giving the case's recorded numbers at each count: the uniform, and as a leaf's
    "key" its count, by which `_normal` takes the leaf's recorded normal array (the leaves' shapes differ)."""
    steps = len(case.params)
    uniforms = jnp.asarray(case.draws[-1], jnp.float32)
    normals = [jnp.stack([case.draws[len(LEAVES) * t + i] for t in range(steps)]) for i in range(len(LEAVES))]
    by_shape = {v.shape[1:]: v for v in normals}
    assert len(by_shape) == len(LEAVES)

    def draws(seed, count, n):
        assert n == len(LEAVES)
        return uniforms[count], jnp.full((n,), count, jnp.int32)

    def normal(count, like):
        return by_shape[like.shape][count].astype(like.dtype)

    monkeypatch.setattr(kron_module, "_draws", draws)
    monkeypatch.setattr(kron_leaf, "_normal", normal)  # read by a leaf's matrix work


@pytest.mark.parametrize("case", JAX, ids=repr)
def test_psgd_kron_equals_psgd_jax_with_its_own_random_numbers(case):
    _references.check_case(case, tx=_psgd_jax(case.kwargs))


@pytest.mark.parametrize("case", TORCH, ids=repr)
def test_psgd_kron_equals_pytorch_optimizer_given_its_draws(case, monkeypatch):
    _replayed_draws(case, monkeypatch)
    _references.check_case(case)


def test_the_cases_update_skip_and_balance():
    """The fixture exercises what matters: skipped updates (probability 0.5: zero draws on half the steps)
    and a balancing (a uniform below `balance_prob` at an update)."""
    half = next(c for c in TORCH if c.label == "coupled_half")
    drawn = [any(np.any(half.draws[3 * t + i]) for i in range(3)) for t in range(len(half.params))]
    assert drawn == [t % 2 == 1 for t in range(len(half.params))]
    balanced = next(c for c in TORCH if c.label == "one_diag_decay")
    assert np.any(balanced.draws[-1] < balanced.kwargs["balance_prob"])


def test_without_the_recorded_draws_pytorch_optimizer_is_not_reproduced():
    """The replay depends on the draws: gradtx's own random numbers give another trajectory."""
    case = next(c for c in TORCH if c.label == "default")
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        _references.check_case(case)


def test_psgd_kron_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("psgd_kron", "psgd_kron")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("Kron", maximize=True)
    tx = gradtx.get("Kron", precondition_dtype="torch.float64", mu_dtype="torch.bfloat16")
    state = tx.init({"w": jnp.zeros((3, 2))})
    assert state[0].preconditioners["w"][0].dtype == jnp.float64 or not jax.config.jax_enable_x64
    assert state[0].mu["w"].dtype == jnp.bfloat16


@pytest.mark.parametrize(
    "mode, shapes",
    [
        (None, [(8, 8), (5, 5)]),
        ("one_diag", [(8,), (5, 5)]),
        ("smart_one_diag", [(8,), (5, 5)]),
        ("all_diag", [(8,), (5,)]),
    ],
)
def test_memory_save_mode_chooses_the_diagonal_factors(mode, shapes):
    state = gradtx.scale_by_psgd_kron(memory_save_mode=mode).init(
        {"m": jnp.zeros((8, 5)), "s": jnp.zeros((4, 4))}
    )
    assert [q.shape for q in state.preconditioners["m"]] == shapes
    square = [q.shape for q in state.preconditioners["s"]]  # one_diag: the last of equal largest dimensions
    assert square == (
        [(4,), (4,)] if mode == "all_diag" else [(4, 4), (4,)] if mode == "one_diag" else [(4, 4)] * 2
    )


def test_small_leaves_and_large_dimensions_get_diagonal_factors():
    tx = gradtx.scale_by_psgd_kron(max_size_triangular=4, precond_init_scale=4.0)
    state = tx.init(
        {"big": jnp.zeros((5, 3)), "vec": jnp.zeros(3), "one": jnp.zeros((1, 3)), "s": jnp.zeros(())}
    )
    assert [q.shape for q in state.preconditioners["big"]] == [(5,), (3, 3)]
    assert [q.shape for q in state.preconditioners["vec"]] == [(3,)]
    assert [q.shape for q in state.preconditioners["one"]] == [(1,), (3, 3)]
    np.testing.assert_allclose(state.preconditioners["big"][1], 2.0 * np.eye(3))  # 4^(1/2) per factor
    np.testing.assert_allclose(state.preconditioners["s"][0], 4.0)


def test_probability_zero_never_updates_the_preconditioner():
    tx = gradtx.scale_by_psgd_kron(b1=0.0, precond_update_probability=0.0)
    g = {"w": jnp.array([[3.0, -1.0], [0.5, 2.0]])}
    state = tx.init(g)
    for _ in range(3):
        u, state = tx.update(g, state)
    np.testing.assert_array_equal(state.preconditioners["w"][0], np.eye(2))
    assert float(state.update_counter) == 3.0
    # identity preconditioner: the gradient itself, clipped to RMS 1.1
    rms = float(jnp.sqrt(jnp.mean(g["w"] ** 2)))
    np.testing.assert_allclose(u["w"], g["w"] * 1.1 / (rms + 1e-6), rtol=1e-6)


def test_a_probability_of_one_third_updates_every_third_step():
    tx = gradtx.scale_by_psgd_kron(precond_update_probability=1 / 3)
    g = {"w": jnp.ones((2, 2))}
    state = tx.init(g)
    counters = []
    for _ in range(6):
        _, state = tx.update(g, state)
        counters.append(float(state.update_counter))
    assert counters == [1.0, 2.0, 0.0, 1.0, 2.0, 0.0]


def test_the_default_schedule_is_flat_then_decays_to_its_floor():
    schedule = kron_module._precond_update_prob_schedule()
    np.testing.assert_allclose([schedule(0), schedule(500), schedule(1500), schedule(10**5)],
                               [1.0, 1.0, np.exp(-1.0), 0.03], rtol=1e-6)  # fmt: skip


def test_the_random_numbers_follow_the_seed_and_the_count():
    g = {"w": jnp.array([[1.0, 2.0], [-1.0, 0.5]])}
    run = lambda tx: tx.update(g, tx.init(g))[1].preconditioners["w"][0]  # noqa: E731
    a, b = run(gradtx.scale_by_psgd_kron()), run(gradtx.scale_by_psgd_kron(seed=1))
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(a, run(gradtx.scale_by_psgd_kron()))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"b1": 1.0}, ValueError, r"`psgd_kron`: `b1` must be in \[0.0, 1.0\)"),
        ({"precond_update_probability": 1.5}, ValueError, r"`precond_update_probability` must be in"),
        ({"memory_save_mode": "some_diag"}, ValueError, r"`memory_save_mode` must be one of"),
        ({"max_size_triangular": 2.5}, TypeError, r"`max_size_triangular`"),
        ({"precond_lr": 0.0}, ValueError, r"`precond_lr` must be > 0"),
        ({"balance_prob": -0.1}, ValueError, r"`balance_prob` must be in"),
        ({"damping": -1e-3}, ValueError, r"`damping` must be >= 0"),
        ({"clip_eps": float("nan")}, ValueError, r"`clip_eps`"),
        ({"weight_decay": -1.0}, ValueError, r"`weight_decay` must be >= 0"),
        ({"precond_dtype": jnp.int32}, TypeError, r"`precond_dtype` must be None or a floating"),
        ({"weight_decouple": 1}, TypeError, r"`weight_decouple` must be True or False"),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.psgd_kron(0.1, **kwargs)


def test_complex_parameters_are_refused():
    tx = gradtx.scale_by_psgd_kron()
    g = {"w": jnp.ones((2, 2), jnp.complex64)}
    with pytest.raises(TypeError, match="complex"):
        tx.update(g, tx.init(g))


def test_psgd_jax_decays_every_leaf_pytorch_optimizer_the_matrices():
    """psgd-jax's decay covers the vector too: gradtx's default mask (pytorch-optimizer's) is off on it."""
    case = next(c for c in JAX if c.kwargs.get("weight_decay"))
    args = {PSGD_JAX_ARGUMENTS[k]: v for k, v in case.kwargs.items()}
    tx = gradtx.psgd_kron(**args, damping=kron_module.PSGD_JAX_DAMPING, clip_eps=0.0)
    with pytest.raises(AssertionError, match="leaf 'vector'"):
        _references.check_case(case, tx=tx)


def test_psgd_jax_damps_the_preconditioner_input():
    """Damping moves this problem's trajectory by ~2e-6, under the 1e-5 of the fixtures: at 1e-6 psgd-jax's
    trajectory tells gradtx's with psgd-jax's damping (~1e-7 off) from gradtx's without it."""
    case = next(c for c in JAX if c.label == "jax_default")
    _references.check_case(case, tx=_psgd_jax(case.kwargs), rtol=1e-6)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        _references.check_case(case, tx=gradtx.psgd_kron(0.001, clip_eps=0.0), rtol=1e-6)

"""gradtx/_algorithms/soap.py: SOAP against pytorch-optimizer's, 20 steps on the recorded gradients (defaults;
betas, decay and a refresh every 3 steps; `max_precondition_dim` below a dimension; merged dimensions,
channels-last; `precondition_1d` with `normalize_gradient`; `correct_bias=False`), its arguments and
defaults, its layouts and errors.

Where a first statistic is rank-deficient (the (8, 5) leaf's 8 x 8 factor from one gradient, a vector's
outer product) the eigenvectors of its null space are LAPACK's arbitrary choice, and the trajectory
follows it. For those cases the test checks that gradtx's eigenbasis spans the reference's eigenspaces,
then gives gradtx the reference's eigenvectors (recorded by tools/references/soap.py) and compares the
trajectories; the other cases are compared as they are.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._algorithms import soap_basis
from tests.algorithms import _references

CASES = _references.cases("soap")
RANK_DEFICIENT = {"default", "betas", "precondition_1d"}
"""The cases with a rank-deficient first statistic: their eigenbasis is the eigensolver's choice."""


def _eigh_calls(case):
    """The reference's `torch.linalg.eigh` calls: (input matrix, eigenvectors by decreasing eigenvalue)."""
    return [(a, q[:, ::-1]) for a, q in zip(case.draws[0::2], case.draws[1::2], strict=True)]


def _clusters(values: np.ndarray) -> list[np.ndarray]:
    """Indices of (descending) eigenvalues grouped where they are equal up to float32 rounding."""
    tol = 1e-5 * max(float(np.max(np.abs(values))), 1e-30)
    groups = [[0]]
    for i in range(1, len(values)):
        (groups[-1].append(i) if values[groups[-1][-1]] - values[i] <= tol else groups.append([i]))
    return [np.array(g) for g in groups]


def _reference_basis(case):
    """`_eigenbasis` giving the reference's eigenvectors of the recorded statistic that gradtx's equals."""
    calls = _eigh_calls(case)

    def lookup(m):
        m = np.asarray(m)
        found = [(a, q) for a, q in calls if a.shape == m.shape]
        a, q = min(found, key=lambda aq: np.max(np.abs(aq[0] - m)))
        assert np.max(np.abs(a - m)) <= 1e-5 * np.max(np.abs(a)), "gradtx's statistic is not the reference's"
        return q.astype(m.dtype)

    return lambda m: jax.pure_callback(
        lookup, jax.ShapeDtypeStruct(m.shape, m.dtype), m, vmap_method="sequential"
    )


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_soap_equals_pytorch_optimizer(case, monkeypatch):
    if case.label in RANK_DEFICIENT:
        monkeypatch.setattr(soap_basis, "_eigenbasis", _reference_basis(case))
    _references.check_case(case)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_the_eigenbases_differ_only_where_the_eigensolver_chooses(case):
    """gradtx's first eigenbasis spans each of the reference's eigenspaces; the cases given the reference's
    choice are exactly those with a repeated eigenvalue."""
    repeated = False
    for a, q_ref in _eigh_calls(case):
        q = np.asarray(soap_basis._eigenbasis(jnp.asarray(a)))
        values = np.diag(q_ref.T @ a.astype(np.float64) @ q_ref)
        for idx in _clusters(values):
            repeated |= len(idx) > 1
            ours, theirs = q[:, idx], q_ref[:, idx]
            np.testing.assert_allclose(ours @ ours.T, theirs @ theirs.T, atol=2e-4)
    assert repeated == (case.label in RANK_DEFICIENT)


def test_the_cases_refresh_merge_and_precondition_vectors():
    """The non-default cases reach the modes they are meant to test within their steps."""
    kwargs = {c.label: c.kwargs for c in CASES}
    assert all(c.get("precondition_frequency", 10) < len(CASES[0].grads) for c in kwargs.values())
    assert kwargs["merged"]["merge_dims"] and kwargs["channels_last"]["data_format"] == "channels_last"
    layout = soap_basis._layout(
        (4, 3, 2, 2), soap_basis._Config(1, 6, True, False, True, False, "channels_last")
    )
    assert layout.permute and layout.dims == (4, 6, 2)
    shapes = [a.shape for a, _ in _eigh_calls(next(c for c in CASES if c.label == "precondition_1d"))]
    assert (7, 7) in shapes


def test_soap_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("soap", "soap")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("SOAP", maximize=True)
    with pytest.raises(ValueError, match="`betas` must be a tuple of 2"):
        gradtx.get("SOAP", betas=0.9)


def test_merge_small_dims_is_pytorch_optimizers():
    assert soap_basis._merge_small_dims((1, 2, 512, 1, 2048, 1, 3, 4), 1024) == (1024, 2048, 12)
    assert soap_basis._merge_small_dims((1, 2, 768, 1, 2048), 1024) == (2, 768, 2048)
    assert soap_basis._merge_small_dims((4, 3, 2, 2), 10000) == (48,)  # the reference fails here


def test_a_leaf_merged_whole_is_one_dimension_and_vectors_need_precondition_1d():
    params = {"conv": jnp.ones((4, 3, 2, 2)), "vector": jnp.ones(7), "scalar": jnp.ones(())}
    state = gradtx.scale_by_soap(merge_dims=True).init(params)
    assert [s.shape for s in state.gg["conv"]] == [(48, 48)]
    assert state.gg["vector"] == (None,) and state.gg["scalar"] == ()
    state = gradtx.scale_by_soap(precondition_1d=True, max_precondition_dim=3).init(params)
    assert state.gg["vector"] == (None,)
    assert [None if s is None else s.shape for s in state.gg["conv"]] == [None, (3, 3), (2, 2), (2, 2)]
    state = gradtx.scale_by_soap(precondition_1d=True).init(params)
    assert [s.shape for s in state.gg["vector"]] == [(7, 7)]


def test_a_scalar_leaf_takes_adams_step_after_the_first():
    b1, b2, eps = 0.9, 0.99, 1e-8
    tx = gradtx.scale_by_soap(b1, b2, eps=eps)
    state = tx.init(jnp.zeros(()))
    m = v = 0.0
    for t, g in enumerate([0.5, -1.0, 2.0, 0.25]):
        u, state = tx.update(jnp.asarray(g), state)
        if t == 0:
            assert float(u) == 0.0
            continue
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        expected = np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
        np.testing.assert_allclose(float(u), expected, rtol=1e-5)


def test_the_first_step_neither_moves_nor_decays_the_weights():
    tx = gradtx.soap(0.1, weight_decay=0.5)
    w = jnp.arange(6.0).reshape(2, 3)
    u, state = tx.update(jnp.ones((2, 3)), tx.init(w), w)
    np.testing.assert_array_equal(u, jnp.zeros((2, 3)))
    assert state[0].gg[w.ndim - 2].shape == (2, 2)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"shampoo_beta": 1.5}, ValueError, r"`soap`: `shampoo_beta` must be in \[0.0, 1.0\]"),
        ({"b2": -0.1}, ValueError, r"`soap`: `b2` must be in"),
        ({"weight_decay": -1.0}, ValueError, r"`soap`: `weight_decay` must be >= 0"),
        ({"precondition_frequency": 0}, ValueError, r"`soap`: `precondition_frequency` must be >= 1"),
        ({"max_precondition_dim": 2.5}, TypeError, r"`soap`: `max_precondition_dim` must be an integer"),
        ({"data_format": "NHWC"}, ValueError, r"`soap`: `data_format` must be one of"),
        ({"merge_dims": 1}, TypeError, r"`soap`: `merge_dims` must be True or False"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradtx.soap(0.1, **kwargs)


def test_constant_schedules_give_the_numbers_of_their_values():
    case = next(c for c in CASES if c.label == "max_dim")
    numbers = gradtx.soap(3e-3, 0.9, 0.999, max_precondition_dim=7, precondition_frequency=4)
    schedules = gradtx.soap(
        lambda c: 3e-3,
        lambda c: 0.9,
        lambda c: 0.999,
        weight_decay=lambda c: 1e-2,
        eps=lambda c: 1e-8,
        max_precondition_dim=7,
        precondition_frequency=4,
    )
    for a, b in zip(_references.replay(numbers, case), _references.replay(schedules, case), strict=True):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-7)

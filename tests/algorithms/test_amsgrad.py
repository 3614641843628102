"""gradtx/_algorithms/amsgrad.py: `amsgrad` (RETURNN's AMSGradOptimizer) against the float64 reference of
RETURNN's rule, with and without its decay, in float32 and float64, dense and row-sparse, and its errors."""

from __future__ import annotations

import pytest

import gradtx
from tests import helpers
from tests import reference_contrib as ref

CASES = {
    "amsgrad": (
        lambda: gradtx.amsgrad(0.05, 0.8, 0.9, 1e-6),
        lambda: ref.amsgrad(0.05, 0.8, 0.9, 1e-6),
        ["m", "v", "v_hat"],
    ),
    "amsgrad-decay": (
        lambda: gradtx.amsgrad(0.05, 0.8, 0.9, 1e-6, decay=True),
        lambda: ref.amsgrad(0.05, 0.8, 0.9, 1e-6, decay=True),
        ["v_hat"],
    ),
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_returnns_rule(name, sparse, x64):
    make_tx, make_ref, slots = CASES[name]
    helpers.compare_to_reference(make_tx, make_ref, sparse=sparse, x64=x64, slots=slots)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (gradtx.amsgrad, {"b2": 1.0}, r"`amsgrad`: `b2` must be in \[0.0, 1.0\), got 1.0"),
    ],
)
def test_bad_values(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)

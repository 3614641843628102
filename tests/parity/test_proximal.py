"""ProximalGradientDescentOptimizer and ProximalAdagradOptimizer against TensorFlow, dense and sparse."""

import pytest

import gradtx
from tests.parity.tf_oracle import compare, v1

SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
STRENGTHS = pytest.mark.parametrize(
    "l1, l2", [(0.0, 0.0), (0.05, 0.0), (0.0, 0.5), (0.05, 0.5)], ids=["plain", "l1", "l2", "l1-l2"]
)


@SPARSE
@STRENGTHS
def test_proximal_gradient_descent(sparse, l1, l2):
    compare(
        lambda gs: v1.train.ProximalGradientDescentOptimizer(
            0.1, l1_regularization_strength=l1, l2_regularization_strength=l2
        ),
        gradtx.proximal_sgd(0.1, l1=l1, l2=l2),
        sparse=sparse,
    )


@SPARSE
@STRENGTHS
@pytest.mark.parametrize("init", [0.1, 0.6])
def test_proximal_adagrad(sparse, l1, l2, init):
    compare(
        lambda gs: v1.train.ProximalAdagradOptimizer(
            0.2, initial_accumulator_value=init, l1_regularization_strength=l1, l2_regularization_strength=l2
        ),
        gradtx.proximal_adagrad(0.2, initial_accumulator_value=init, l1=l1, l2=l2),
        sparse=sparse,
        slots=["accumulator"],
    )

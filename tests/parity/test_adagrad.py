"""AdagradOptimizer and AdagradDAOptimizer against TensorFlow, dense and sparse."""

import pytest

import gradtx
from tests.parity.tf_oracle import compare, v1

SPARSE = pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])


@SPARSE
@pytest.mark.parametrize("init", [0.1, 0.7])
def test_adagrad(sparse, init):
    compare(
        lambda gs: v1.train.AdagradOptimizer(0.1, initial_accumulator_value=init),
        gradtx.adagrad(0.1, initial_accumulator_value=init),
        sparse=sparse,
        slots=["accumulator"],
    )


@SPARSE
@pytest.mark.parametrize(
    "l1, l2, init",
    [(0.0, 0.0, 0.1), (0.05, 0.0, 0.1), (0.0, 0.3, 0.1), (0.05, 0.3, 0.5)],
    ids=["plain", "l1", "l2", "l1-l2-init"],
)
def test_adagrad_da(sparse, l1, l2, init):
    """TF's closed form reads global_step + 1 before the increment: T = t, which gradtx takes from count."""
    compare(
        lambda gs: v1.train.AdagradDAOptimizer(
            0.2,
            gs,
            initial_gradient_squared_accumulator_value=init,
            l1_regularization_strength=l1,
            l2_regularization_strength=l2,
        ),
        gradtx.adagrad_da(0.2, initial_gradient_squared_accumulator_value=init, l1=l1, l2=l2),
        sparse=sparse,
        slots=["gradient_accumulator", "gradient_squared_accumulator"],
    )

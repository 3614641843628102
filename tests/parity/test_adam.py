"""AdamOptimizer against TensorFlow, dense and sparse (TF1 Adam moves every row on a sparse gradient)."""

import pytest

import gradtx
from tests.parity.tf_oracle import compare, v1


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize(
    "lr, b1, b2, eps", [(0.001, 0.9, 0.999, 1e-8), (0.05, 0.5, 0.9, 1e-3)], ids=["tf-defaults", "custom"]
)
def test_adam(sparse, lr, b1, b2, eps):
    compare(
        lambda gs: v1.train.AdamOptimizer(lr, beta1=b1, beta2=b2, epsilon=eps),
        gradtx.adam(lr, b1=b1, b2=b2, eps=eps),
        sparse=sparse,
        slots=["m", "v"],
        atol=5e-6,
    )

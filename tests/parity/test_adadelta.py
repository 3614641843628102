"""AdadeltaOptimizer against TensorFlow, dense and sparse."""

import pytest

import gradtx
from tests.parity.tf_oracle import compare, v1


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize(
    "lr, rho, eps", [(0.001, 0.95, 1e-8), (1.0, 0.5, 1e-3)], ids=["tf-defaults", "paper"]
)
def test_adadelta(sparse, lr, rho, eps):
    compare(
        lambda gs: v1.train.AdadeltaOptimizer(lr, rho=rho, epsilon=eps),
        gradtx.adadelta(lr, rho=rho, eps=eps),
        sparse=sparse,
        slots=["accum", "accum_update"],
    )

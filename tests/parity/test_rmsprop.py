"""RMSPropOptimizer (plain, momentum, centered) against TensorFlow, dense and sparse."""

import pytest

import gradtx
from tests.parity.tf_oracle import compare, v1


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("momentum", [0.0, 0.7], ids=["no-momentum", "momentum"])
@pytest.mark.parametrize("centered", [False, True], ids=["uncentered", "centered"])
def test_rmsprop(sparse, momentum, centered):
    slots = ["rms", "momentum"] + (["mg"] if centered else [])
    compare(
        lambda gs: v1.train.RMSPropOptimizer(
            0.01, decay=0.8, momentum=momentum, epsilon=1e-6, centered=centered
        ),
        gradtx.rmsprop(0.01, decay=0.8, momentum=momentum, eps=1e-6, centered=centered),
        sparse=sparse,
        slots=slots,
    )


def test_rmsprop_tf_defaults():
    compare(lambda gs: v1.train.RMSPropOptimizer(0.01), gradtx.rmsprop(0.01), slots=["rms", "momentum"])

"""GradientDescentOptimizer and MomentumOptimizer (with and without Nesterov) against TensorFlow, dense and
sparse."""

import pytest

import gradtx
from tests.parity.tf_oracle import compare, v1


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_gradient_descent(sparse):
    compare(lambda gs: v1.train.GradientDescentOptimizer(0.1), gradtx.sgd(0.1), sparse=sparse)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("nesterov", [False, True], ids=["plain", "nesterov"])
@pytest.mark.parametrize("mu", [0.9, 0.5])
def test_momentum(sparse, nesterov, mu):
    compare(
        lambda gs: v1.train.MomentumOptimizer(0.05, mu, use_nesterov=nesterov),
        gradtx.momentum(0.05, mu, nesterov=nesterov),
        sparse=sparse,
        slots=["momentum"],
    )


def test_momentum_with_a_decayed_learning_rate():
    """A schedule sees count = t-1 inside step t, exactly TF's global_step before its increment."""

    def make(gs):
        return v1.train.MomentumOptimizer(0.1 * 0.5 ** (v1.cast(gs, v1.float32) / 4.0), 0.9)

    compare(make, gradtx.momentum(lambda count: 0.1 * 0.5 ** (count / 4.0), 0.9))

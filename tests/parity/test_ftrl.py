"""FtrlOptimizer (ApplyFtrl and ApplyFtrlV2) against TensorFlow, dense and sparse."""

import pytest

import gradtx
from tests.parity.tf_oracle import compare, v1

CASES = {
    "plain": {},
    "power-0": {"learning_rate_power": 0.0},
    "power-0.3": {"learning_rate_power": -0.3},
    "l1": {"l1": 0.2},
    "l2": {"l2": 0.3},
    "shrinkage": {"l2_shrinkage": 0.1},
    "shrinkage-l1-l2": {"l1": 0.1, "l2": 0.2, "l2_shrinkage": 0.1},
    "beta": {"beta": 0.4, "l2": 0.1},
    "init-0.5": {"initial_accumulator_value": 0.5},
    "init-0-power-0.7": {"initial_accumulator_value": 0.0, "learning_rate_power": -0.7, "l1": 0.05},
}
TF_NAMES = {
    "l1": "l1_regularization_strength",
    "l2": "l2_regularization_strength",
    "l2_shrinkage": "l2_shrinkage_regularization_strength",
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("case", list(CASES))
def test_ftrl(sparse, case):
    kwargs = CASES[case]
    tf_kwargs = {TF_NAMES.get(k, k): v for k, v in kwargs.items()}
    compare(
        lambda gs: v1.train.FtrlOptimizer(0.3, **tf_kwargs),
        gradtx.ftrl(0.3, **kwargs),
        sparse=sparse,
        slots=["accum", "linear"],
    )


def test_ftrl_from_a_tf_config_via_the_registry():
    tf_kwargs = {
        "learning_rate_power": -0.5,
        "l1_regularization_strength": 0.1,
        "l2_shrinkage_regularization_strength": 0.05,
        "accum_name": "a",
        "linear_name": "b",
    }
    compare(
        lambda gs: v1.train.FtrlOptimizer(0.3, **tf_kwargs),
        gradtx.get("FtrlOptimizer", learning_rate=0.3, **tf_kwargs),
        slots=["accum", "linear"],
    )

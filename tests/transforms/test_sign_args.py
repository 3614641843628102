"""gradtx/transforms/_sign.py: AddSign's and PowerSign's hyperparameters (schedules, jax scalars,
traced values) and the errors their bad values raise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from gradtx.transforms import (
    scale_by_addsign,
    scale_by_powersign,
)
from tests import helpers
from tests.transforms.test_sign import addsign, powersign


@pytest.mark.parametrize(
    "make, name, value",
    [
        (addsign, "learning_rate", 0.1),
        (addsign, "alpha", 0.7),
        (addsign, "beta", 0.8),
        (addsign, "sign_decay", 0.6),
        (powersign, "learning_rate", 0.1),
        (powersign, "base", 3.0),
        (powersign, "beta", 0.8),
        (powersign, "sign_decay", 0.6),
    ],
)
def test_every_hyperparameter_accepts_a_schedule_and_a_jax_scalar(make, name, value):
    params, grads = helpers.problem(1)
    plain, _ = helpers.run(make(**{name: value}), params, grads[:5])

    def schedule(count):
        return jnp.asarray(value, jnp.float32)

    scheduled, _ = helpers.run(make(**{name: schedule}), params, grads[:5])
    scalar, _ = helpers.run(make(**{name: jnp.float32(value)}), params, grads[:5])
    helpers.assert_trees_close(scheduled[-1], plain[-1], rtol=1e-6, atol=1e-7)
    helpers.assert_trees_close(scalar[-1], plain[-1], rtol=1e-6, atol=1e-7)


def test_hyperparameters_may_be_traced():
    params, grads = helpers.problem(0)

    @jax.jit
    def built_inside_jit(lr, base, beta, decay, g, p):
        tx = powersign(lr, base, beta, decay)  # checks skip traced values
        return tx.update(g, tx.init(p), p)[0]

    out = built_inside_jit(0.1, 3.0, 0.5, 0.7, grads[0], params)
    tx = powersign(0.1, 3.0, 0.5, 0.7)
    helpers.assert_trees_close(out, tx.update(grads[0], tx.init(params), params)[0], rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (scale_by_addsign, {"beta": 1.5}, r"`scale_by_addsign`: `beta` must be in \[0.0, 1.0\], got 1.5\."),
        (scale_by_addsign, {"beta": -0.1}, r"`scale_by_addsign`: `beta` must be in \[0.0, 1.0\], got -0.1\."),
        (scale_by_addsign, {"alpha": float("inf")}, r"`scale_by_addsign`: `alpha` must be finite, got inf\."),
        (scale_by_addsign, {"alpha": float("nan")}, r"`scale_by_addsign`: `alpha` must be finite, got nan\."),
        (scale_by_addsign, {"sign_decay": float("nan")}, r"`scale_by_addsign`: `sign_decay` must be finite"),
        (scale_by_powersign, {"base": 0.0}, r"`scale_by_powersign`: `base` must be > 0, got 0.0\."),
        (scale_by_powersign, {"base": -2.0}, r"`scale_by_powersign`: `base` must be > 0, got -2.0\."),
        (
            scale_by_powersign,
            {"base": float("inf")},
            r"`scale_by_powersign`: `base` must be finite, got inf\.",
        ),
        (
            scale_by_powersign,
            {"beta": 2.0},
            r"`scale_by_powersign`: `beta` must be in \[0.0, 1.0\], got 2.0\.",
        ),
        (
            scale_by_powersign,
            {"sign_decay": float("-inf")},
            r"`scale_by_powersign`: `sign_decay` must be finite",
        ),
        (
            addsign,
            {"learning_rate": -0.1},
            r"`scale_by_learning_rate`: `learning_rate` must be >= 0, got -0.1\.",
        ),
    ],
)
def test_value_errors(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)


@pytest.mark.parametrize(
    "factory, kwargs, match",
    [
        (
            scale_by_addsign,
            {"alpha": "1"},
            r"`scale_by_addsign`: `alpha` must be a number, a scalar array or a sch",
        ),
        (
            scale_by_addsign,
            {"beta": None},
            r"`scale_by_addsign`: `beta` must be a number, a scalar array or a sch",
        ),
        (
            scale_by_addsign,
            {"sign_decay": "cosine"},
            r"`scale_by_addsign`: `sign_decay` must be a number, a scalar array or a schedule .*got 'cosine'",
        ),
        (scale_by_addsign, {"sign_decay": True}, r"`sign_decay` must be a number, .*got True of type bool"),
        (scale_by_addsign, {"sign_decay": jnp.ones(3)}, r"`scale_by_addsign`: `sign_decay` must be a scalar"),
        (
            scale_by_powersign,
            {"base": "e"},
            r"`scale_by_powersign`: `base` must be a number, a scalar array or",
        ),
        (scale_by_powersign, {"sign_decay": [0.5]}, r"`scale_by_powersign`: `sign_decay` must be a number"),
    ],
)
def test_type_errors(factory, kwargs, match):
    with pytest.raises(TypeError, match=match):
        factory(**kwargs)

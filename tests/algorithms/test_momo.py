"""gradtx/_algorithms/momo.py: MoMo and MoMo-Adam against optax.contrib's, gradtx's names and optax_compat's,
their missing extra argument and their errors.

Both sides compute the gradients (and values, Hessian-vector products) of one quartic loss
(tests/algorithms/_shared.py) from their own params: 20 steps jitted (one `lax.scan` per run), 5 eagerly;
hyperparameters are Python floats on both sides; params and state agree to 1e-6.
"""

from __future__ import annotations

import jax
import optax
import pytest

import gradtx
from gradtx.optax_compat import contrib
from tests.algorithms._shared import PARAMS
from tests.algorithms._shared import compare_on_quartic as _compare
from tests.algorithms._shared import jit_and_eager_cases as _cases


def _decaying(count):
    return 0.5 * 0.9**count


MOMO_CASES = {
    "momo": (lambda: contrib.momo(), lambda: optax.contrib.momo()),
    "momo-adapt-wd-schedule": (
        lambda: gradtx.momo(_decaying, 0.8, -1.0, 0.1, adapt_lower_bound=True),
        lambda: optax.contrib.momo(_decaying, 0.8, -1.0, 0.1, adapt_lower_bound=True),
    ),
    "momo_adam": (lambda: contrib.momo_adam(0.1), lambda: optax.contrib.momo_adam(0.1)),
    "momo_adam-adapt-wd": (
        lambda: contrib.momo_adam(0.1, 0.8, 0.99, 1e-6, -1.0, 0.1, True),
        lambda: optax.contrib.momo_adam(0.1, 0.8, 0.99, 1e-6, -1.0, 0.1, True),
    ),
}


@_cases(MOMO_CASES, eager="momo_adam-adapt-wd")
def test_momo_equals_optax(name, jit):
    ours, theirs = MOMO_CASES[name]
    fields = (lambda s: s.exp_avg, lambda s: s.barf, lambda s: s.gamma, lambda s: s.lb, lambda s: s.count)
    _compare(ours(), theirs(), "value", jit, fields)


@pytest.mark.parametrize(
    "make, arg",
    [(lambda: gradtx.momo(), "value"), (lambda: gradtx.momo_adam(), "value")],
    ids=["momo", "momo_adam"],
)
def test_a_missing_extra_argument_names_it(make, arg):
    tx = make()
    with pytest.raises(gradtx.MissingExtraArgError, match=rf"needs the extra argument `{arg}`; call it as"):
        jax.eval_shape(lambda p: tx.update(p, tx.init(p), p), PARAMS)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: gradtx.momo(beta=1.5), r"`momo`: `beta` must be in \[0.0, 1.0\)"),
        (lambda: gradtx.momo_adam(weight_decay=-1.0), r"`momo_adam`: `weight_decay` must be >= 0"),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()

"""gradtx/_algorithms/sophia.py: Sophia (and its Hutchinson estimator of the Hessian's diagonal) against
optax.contrib's, gradtx's names and optax_compat's, its missing extra argument and its errors.

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


MASK = {"w": True, "b": False, "s": False}
SOPHIA_CASES = {
    "sophia": (
        lambda: contrib.sophia(0.05, update_interval=3),
        lambda: optax.contrib.sophia(0.05, update_interval=3),
    ),
    "sophia-mask-schedule-noclip-seed": (
        lambda: contrib.sophia(
            _decaying,
            0.9,
            0.95,
            1e-6,
            0.01,
            MASK,
            0.05,
            None,
            2,
            contrib.hutchinson_estimator_diag_hessian(jax.random.PRNGKey(3)),
        ),
        lambda: optax.contrib.sophia(
            _decaying,
            0.9,
            0.95,
            1e-6,
            0.01,
            MASK,
            0.05,
            None,
            2,
            optax.contrib.hutchinson_estimator_diag_hessian(jax.random.PRNGKey(3)),
        ),
    ),  # fmt: skip
    "scale_by_sophia-gradtx": (
        lambda: gradtx.chain(gradtx.scale_by_sophia(gamma=0.05, update_interval=1), gradtx.scale(-0.05)),
        lambda: optax.chain(
            optax.contrib._sophia.scale_by_sophia(gamma=0.05, update_interval=1), optax.scale(-0.05)
        ),
    ),
}


@_cases(SOPHIA_CASES)
def test_sophia_equals_optax(name, jit):
    ours, theirs = SOPHIA_CASES[name]
    fields = (lambda s: s[0].mu, lambda s: s[0].nu, lambda s: s[0].hessian_fn_state.key)
    _compare(ours(), theirs(), "obj_fn", jit, fields, name != "scale_by_sophia-gradtx")


@pytest.mark.parametrize("make, arg", [(lambda: gradtx.sophia(0.1), "obj_fn")], ids=["sophia"])
def test_a_missing_extra_argument_names_it(make, arg):
    tx = make()
    with pytest.raises(gradtx.MissingExtraArgError, match=rf"needs the extra argument `{arg}`; call it as"):
        jax.eval_shape(lambda p: tx.update(p, tx.init(p), p), PARAMS)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: gradtx.sophia(0.1, update_interval=0), r"`sophia`: `update_interval` must be >= 1"),
        (lambda: gradtx.sophia(0.1, clip_threshold=0.0), r"`sophia`: `clip_threshold` must be > 0"),
        (lambda: gradtx.sophia(0.1, b1=1.0), r"`sophia`: `b1` must be in \[0.0, 1.0\)"),
        (lambda: gradtx.hutchinson_estimator_diag_hessian(3), r"`random_seed` must be a PRNG key"),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()

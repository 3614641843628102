"""gradtx/_algorithms/sam.py: SAM against optax.contrib's (transparent and opaque modes, gradtx's name and
optax_compat's), its missing extra argument, its errors, and optax_compat's averaging of the opaque
gradients over the batch axis (SAM's `normalize` against optax's: test_sam_normalize.py).

Both sides compute the gradients (and values, Hessian-vector products) of one quartic loss
(tests/algorithms/_shared.py) from their own params: 20 steps jitted (one `lax.scan` per run), 5 eagerly;
hyperparameters are Python floats on both sides; params and state agree to 1e-6.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx.optax_compat import contrib
from tests import helpers
from tests.algorithms._shared import PARAMS, loss
from tests.algorithms._shared import compare_on_quartic as _compare
from tests.algorithms._shared import jit_and_eager_cases as _cases

SAM_CASES = {
    "transparent": (
        lambda: gradtx.sam(gradtx.sgd(0.05), gradtx.chain(gradtx.normalize(), gradtx.sgd(0.01))),
        lambda: optax.contrib.sam(optax.sgd(0.05), optax.chain(optax.contrib.normalize(), optax.sgd(0.01))),
        "",
    ),
    "transparent-adam-no-reset-k3": (
        lambda: contrib.sam(
            gradtx.optax_compat.adam(0.05),
            gradtx.chain(contrib.normalize(), gradtx.optax_compat.adam(0.01)),
            sync_period=3,
            reset_state=False,
        ),
        lambda: optax.contrib.sam(
            optax.adam(0.05),
            optax.chain(optax.contrib.normalize(), optax.adam(0.01)),
            sync_period=3,
            reset_state=False,
        ),
        "",
    ),
    "opaque-k3": (
        lambda: contrib.sam(
            gradtx.optax_compat.adam(0.05),
            gradtx.chain(contrib.normalize(), gradtx.optax_compat.adam(0.01)),
            sync_period=3,
            opaque_mode=True,
        ),
        lambda: optax.contrib.sam(
            optax.adam(0.05),
            optax.chain(optax.contrib.normalize(), optax.adam(0.01)),
            sync_period=3,
            opaque_mode=True,
        ),
        "grad_fn",
    ),
}


@_cases(SAM_CASES, eager="opaque-k3")
def test_sam_equals_optax(name, jit):
    ours, theirs, kind = SAM_CASES[name]
    fields = (lambda s: s.steps_since_sync, lambda s: s.cache, lambda s: s.adv_state)
    _compare(
        ours(), theirs(), kind, jit, fields[:2] if name == "transparent" else fields, name != "transparent"
    )


@pytest.mark.parametrize(
    "make, arg",
    [(lambda: gradtx.sam(gradtx.sgd(0.1), gradtx.sgd(0.1), opaque_mode=True), "grad_fn")],
    ids=["sam"],
)
def test_a_missing_extra_argument_names_it(make, arg):
    tx = make()
    with pytest.raises(gradtx.MissingExtraArgError, match=rf"needs the extra argument `{arg}`; call it as"):
        jax.eval_shape(lambda p: tx.update(p, tx.init(p), p), PARAMS)


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: gradtx.sam(gradtx.sgd(0.1), gradtx.sgd(0.1), sync_period=0),
            r"`sam`: `sync_period` must be >= 1",
        ),
        (
            lambda: gradtx.sam(gradtx.sgd(0.1), "sgd"),
            r"`sam`: `adv_tx` must be a gradient transformation",
        ),
    ],
)
def test_bad_arguments_are_refused_at_construction(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_compat_sam_averages_opaque_gradients_over_the_batch_axis():
    """optax's `batch_axis_name`: each replica's adversarial gradient is averaged (`parallel.mean_over`)."""
    mesh = jax.make_mesh((2,), ("data",))
    scales = jnp.asarray([1.0, 3.0])

    def run(make, sam, normalize, sgd):
        def step(params, scale):
            tx = sam(
                sgd(0.1),
                make(normalize(), sgd(0.05)),
                sync_period=3,
                opaque_mode=True,
                batch_axis_name="data",
            )
            grad_fn = lambda p, i: jax.tree.map(lambda x: scale[0] * x, jax.grad(loss)(p))  # noqa: E731
            updates, _ = tx.update(grad_fn(params, -1), tx.init(params), params, grad_fn=grad_fn)
            return jax.tree.map(lambda u: u[None], updates)

        return jax.tree.map(
            np.asarray,
            jax.jit(
                jax.shard_map(step, mesh=mesh, in_specs=(jax.P(), jax.P("data")), out_specs=jax.P("data"))
            )(PARAMS, jax.device_put(scales, jax.NamedSharding(mesh, jax.P("data")))),
        )

    ours = run(gradtx.chain, contrib.sam, contrib.normalize, gradtx.optax_compat.sgd)
    theirs = run(optax.chain, optax.contrib.sam, optax.contrib.normalize, optax.sgd)
    helpers.assert_trees_close(ours, theirs, rtol=1e-6, atol=1e-6)
    # replica i's gradients are scaled by scales[i]; averaged, both replicas take the same outer step
    np.testing.assert_allclose(ours["w"][0], ours["w"][1], rtol=1e-6)

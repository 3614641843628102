"""SAM, Sophia and MoMo against optax.contrib itself: 20 steps on a loss whose gradients (and values,
Hessian-vector products) both sides compute from their own params, jitted (one `lax.scan` per run) and 5
steps eagerly (gradtx/combinators/_sam.py, _sophia.py, _momo.py).

Hyperparameters are Python floats on both sides; params and state agree to 1e-6.
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

SHAPES = {"w": (4, 3), "b": (3,), "s": ()}
_RNG = np.random.default_rng(0)
PARAMS = {k: jnp.asarray(_RNG.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
TARGET = {k: jnp.asarray(_RNG.standard_normal(s), jnp.float32) for k, s in SHAPES.items()}
CURVE = {k: jnp.asarray(_RNG.uniform(0.5, 2.0, s), jnp.float32) for k, s in SHAPES.items()}


def loss(params):
    """A separable quartic-plus-quadratic: curvature differs per element, the Hessian moves with params."""
    return sum(
        jnp.sum(CURVE[k] * (params[k] - TARGET[k]) ** 2 + 0.1 * (params[k] - TARGET[k]) ** 4) for k in SHAPES
    )


def _extra(kind, params):
    """The extra arguments of one step of an optimizer of `kind`."""
    if kind == "grad_fn":
        return {"grad_fn": lambda p, i: jax.grad(loss)(p)}
    if kind == "obj_fn":
        return {"obj_fn": loss}
    if kind == "value":
        return {"value": loss(params)}
    return {}


def _step(tx, kind, apply):
    def step(carry, _):
        params, state = carry
        updates, state = tx.update(jax.grad(loss)(params), state, params, **_extra(kind, params))
        params = apply(params, updates)
        return (params, state), params

    return step


def _run(tx, kind, apply, steps, jit):
    state = tx.init(PARAMS)
    if jit:
        (_, state), history = jax.jit(lambda p, s: jax.lax.scan(_step(tx, kind, apply), (p, s), None, steps))(
            PARAMS, state
        )
        return history, state
    carry, out = (PARAMS, state), []
    for _ in range(steps):
        carry, params = _step(tx, kind, apply)(carry, None)
        out.append(params)
    return jax.tree.map(lambda *xs: jnp.stack(xs), *out), carry[1]


def _compare(ours, theirs, kind, jit, state_fields=(), same_layout=True):
    steps = helpers.STEPS if jit else 5
    mine, my_state = _run(ours, kind, gradtx.apply_updates, steps, jit)
    ref, ref_state = _run(theirs, kind, optax.apply_updates, steps, jit)
    helpers.assert_trees_close(mine, ref, rtol=1e-6, atol=1e-6)
    for read in state_fields:
        helpers.assert_trees_close(read(my_state), read(ref_state), rtol=1e-6, atol=1e-6)
    if same_layout:  # optax_compat's names: optax's state classes, field for field
        assert str(jax.tree.structure(my_state)) == str(jax.tree.structure(ref_state))


def _decaying(count):
    return 0.5 * 0.9**count


def _cases(cases, eager=None):
    """Every case jitted, `eager` also eagerly (5 steps)."""
    runs = [(n, True) for n in cases] + ([(eager, False)] if eager else [])
    return pytest.mark.parametrize("name, jit", runs, ids=[*cases, *([f"{eager}-eager"] if eager else [])])


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
    [
        (lambda: gradtx.sam(gradtx.sgd(0.1), gradtx.sgd(0.1), opaque_mode=True), "grad_fn"),
        (lambda: gradtx.sophia(0.1), "obj_fn"),
        (lambda: gradtx.momo(), "value"),
        (lambda: gradtx.momo_adam(), "value"),
    ],
    ids=["sam", "sophia", "momo", "momo_adam"],
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
        (lambda: gradtx.sophia(0.1, update_interval=0), r"`sophia`: `update_interval` must be >= 1"),
        (lambda: gradtx.sophia(0.1, clip_threshold=0.0), r"`sophia`: `clip_threshold` must be > 0"),
        (lambda: gradtx.sophia(0.1, b1=1.0), r"`sophia`: `b1` must be in \[0.0, 1.0\)"),
        (lambda: gradtx.momo(beta=1.5), r"`momo`: `beta` must be in \[0.0, 1.0\)"),
        (lambda: gradtx.momo_adam(weight_decay=-1.0), r"`momo_adam`: `weight_decay` must be >= 0"),
        (lambda: gradtx.hutchinson_estimator_diag_hessian(3), r"`random_seed` must be a PRNG key"),
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

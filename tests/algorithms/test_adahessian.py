"""gradtx/_algorithms/adahessian.py and hutchinson.py: AdaHessian against pytorch-optimizer's, 20 steps on the
standard problem with the reference's own Hutchinson probes replayed (tools/references/adahessian.py);
the estimate from `obj_fn` and a key; the refresh period; the paper's spatial averaging; the errors.

The reference draws its probes with torch's generator; the fixture holds them, and `hutchinson_replay`
turns them into the `hessian` each refresh step reads (`hutchinson_diag_hessian(..., probes=...)` on the
problem's loss, whose Hessian is diagonal, `c + 0.3 p^2`).
"""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests.algorithms import _references

# the reference's defaults of the arguments that decide its draws, per class
_DRAWS = {
    "AdaHessian": {"update_period": 1, "num_samples": 1, "hessian_distribution": "rademacher"},
    "SophiaH": {"update_period": 10, "num_samples": 1, "hessian_distribution": "gaussian"},
}


def case_loss(case):
    """The problem's loss without its noise (the noise is linear: it leaves the Hessian alone)."""
    curv = {k: jnp.asarray(v) for k, v in case.curv.items()}
    return lambda params: _references.loss(params, curv)


def hutchinson_replay(case):
    """`extra_args(t, params, grads)` for `_references.replay`: the estimate from the recorded probes on a
    refresh step (torch's random signs are `randint_like(0, 2) * 2 - 1`), zeros (not read) on the others."""
    kw = {**_DRAWS[case.class_name], **case.kwargs}
    period, n = kw["update_period"], kw["num_samples"]
    draws = [d * 2.0 - 1.0 for d in case.draws] if kw["hessian_distribution"] == "rademacher" else case.draws
    leaves = sorted(case.init)  # the reference's parameter order (tools/references.SHAPES)
    assert len(draws) == -(-len(case.grads) // period) * n * len(leaves)  # every refresh drew its probes
    loss = case_loss(case)

    def extra(t, params, grads):
        del grads
        if t % period:
            return {"hessian": jax.tree.map(jnp.zeros_like, params)}
        first = (t // period) * n * len(leaves)
        probes = [
            {k: jnp.asarray(draws[first + i * len(leaves) + j]) for j, k in enumerate(leaves)}
            for i in range(n)
        ]
        return {"hessian": gradtx.hutchinson_diag_hessian(loss, params, probes=probes)}

    return extra


def with_obj_fn(tx, obj_fn):
    """`tx` with `obj_fn` given to every `update` (a function cannot be an argument of the jitted step)."""
    return gradtx.GradientTransformation(
        tx.init, lambda u, s, p=None, **kw: tx.update(u, s, p, obj_fn=obj_fn, **kw)
    )


def largest_difference(ours, case):
    return max(
        float(np.max(np.abs(mine[k] - ref[k])) / np.max(np.abs(ref[k])))
        for mine, ref in zip(ours, case.params, strict=True)
        for k in ref
    )


# --- AdaHessian: pytorch-optimizer's trajectories -------------------------------------------------------


@pytest.mark.parametrize("case", _references.cases("adahessian"), ids=repr)
def test_adahessian_equals_pytorch_optimizer(case):
    _references.check_case(case, extra_args=hutchinson_replay(case))


@pytest.mark.parametrize(
    "case",
    [c for c in _references.cases("adahessian") if c.kwargs.get("hessian_distribution") != "gaussian"],
    ids=repr,
)
def test_adahessian_from_obj_fn_equals_pytorch_optimizer(case):
    # with random signs, z * (H z) is H's diagonal exactly for a diagonal H: gradtx's own draws give the
    # reference's numbers through `obj_fn`
    tx = with_obj_fn(gradtx.get("AdaHessian", **case.kwargs), case_loss(case))
    _references.check_case(case, tx=tx)


def test_adahessian_needs_the_recorded_probes():
    # a Gaussian estimate depends on its probes: gradtx's own draws miss the reference's trajectory
    (case,) = [c for c in _references.cases("adahessian") if c.label == "gaussian_coupled"]
    tx = with_obj_fn(gradtx.get("AdaHessian", **case.kwargs), case_loss(case))
    assert largest_difference(_references.replay(tx, case), case) > 1e-3


def test_adahessian_takes_pytorch_optimizers_arguments_and_defaults():
    _references.check_signature("adahessian", "adahessian")
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("AdaHessian", maximize=True)
    with pytest.raises(TypeError, match="unknown argument `p`"):
        gradtx.get("AdaHessian", p=0.1)


# --- the estimate: from `obj_fn` and a key, or given ------------------------------------------------------

PARAMS = {"k": jnp.linspace(-1.0, 1.0, 24).reshape(2, 3, 2, 2), "v": jnp.array([0.5, -1.5, 2.0])}


def _quartic(params):
    return sum(jnp.sum(0.5 * (1.0 + i) * x**2 + 0.1 * x**4) for i, x in enumerate(jax.tree.leaves(params)))


def _diag(params):
    return {k: (1.0 + i) + 1.2 * x**2 for i, (k, x) in enumerate(sorted(params.items()))}


def _leaf_key(key, name):
    return jax.random.fold_in(key, zlib.crc32(name.encode()) & 0x7FFFFFFF)


def test_hutchinson_diag_hessian():
    key = jax.random.PRNGKey(1)
    exact = gradtx.hutchinson_diag_hessian(_quartic, PARAMS, key)  # random signs: exact for a diagonal H
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), exact, _diag(PARAMS))
    normal = gradtx.hutchinson_diag_hessian(_quartic, PARAMS, key, num_samples=3, distribution="gaussian")
    keys = jax.random.split(key, 3)
    probes = []
    for k in keys:  # the draws: one key per sample, folded with each leaf's key path
        probes.append({n: jax.random.normal(_leaf_key(k, n), x.shape) for n, x in PARAMS.items()})
    want = {n: sum(z[n] ** 2 for z in probes) / 3 * d for n, d in _diag(PARAMS).items()}
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5), normal, want)
    given = gradtx.hutchinson_diag_hessian(_quartic, PARAMS, probes=probes)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), given, normal)

    # a leaf's probes depend on its key path only: another leaf leaves them as they are (Hessian I: z^2)
    def half_sq(params):
        return sum(0.5 * jnp.sum(x**2) for x in jax.tree.leaves(params))

    more = gradtx.hutchinson_diag_hessian(half_sq, {**PARAMS, "a": jnp.ones(3)}, key, distribution="gaussian")
    alone = gradtx.hutchinson_diag_hessian(half_sq, PARAMS, key, distribution="gaussian")
    np.testing.assert_array_equal(more["v"], alone["v"])
    np.testing.assert_allclose(
        alone["v"], jax.random.normal(_leaf_key(jax.random.split(key, 1)[0], "v"), (3,)) ** 2
    )
    with pytest.raises(ValueError, match="`hutchinson_diag_hessian`: give the PRNG `key`"):
        gradtx.hutchinson_diag_hessian(_quartic, PARAMS)
    with pytest.raises(ValueError, match="`distribution` must be one of 'rademacher', 'gaussian'"):
        gradtx.hutchinson_diag_hessian(_quartic, PARAMS, key, distribution="uniform")
    with pytest.raises(ValueError, match="`num_samples` must be >= 1"):
        gradtx.hutchinson_diag_hessian(_quartic, PARAMS, key, num_samples=0)


def test_the_estimate_from_obj_fn_is_the_given_one_with_the_default_keys():
    tx = gradtx.adahessian(0.1, hessian_distribution="gaussian", update_period=2, seed=5)
    a = b = tx.init(PARAMS)
    params = PARAMS
    for t in range(5):
        grads = jax.grad(_quartic)(params)
        key = jax.random.fold_in(jax.random.PRNGKey(5), t)  # `seed` folded with the count
        given = gradtx.hutchinson_diag_hessian(_quartic, params, key, distribution="gaussian")
        ua, a = jax.jit(lambda g, s, p: tx.update(g, s, p, obj_fn=_quartic))(grads, a, params)
        ub, b = tx.update(grads, b, params, hessian=given)
        jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6), ua, ub)
        estimate = a[0].hessian  # refreshed on steps 1, 3, 5 only
        jax.tree.map(
            lambda x, y, t=t: np.testing.assert_array_equal(x, y) if t % 2 == 0 else None, estimate, given
        )
        params = gradtx.apply_updates(params, ua)
    # an explicit `key` replaces the default one
    key = jax.random.PRNGKey(9)
    s = tx.init(PARAMS)
    _, s = tx.update(PARAMS, s, PARAMS, obj_fn=_quartic, key=key)
    want = gradtx.hutchinson_diag_hessian(_quartic, PARAMS, key, distribution="gaussian")
    jax.tree.map(np.testing.assert_array_equal, s[0].hessian, want)


def test_the_estimate_is_read_on_refresh_steps_only():
    tx = gradtx.scale_by_adahessian(b1=0.0, update_period=3)
    state = tx.init(PARAMS)
    seen = []
    for t in range(6):
        hessian = jax.tree.map(lambda x, t=t: jnp.full_like(x, t + 1.0), PARAMS)
        _, state = tx.update(PARAMS, state, PARAMS, hessian=hessian)
        seen.append(float(state.hessian["v"][0]))
    assert seen == [1.0, 1.0, 1.0, 4.0, 4.0, 4.0]
    # v averages D^2 on steps 1 and 4: 0.999 * 0.001 * 1 + 0.001 * 16
    np.testing.assert_allclose(state.exp_hessian_diag_sq["v"], 0.999 * 0.001 + 0.001 * 16.0, rtol=1e-6)


def test_spatial_axes_average_the_estimate_over_the_kernel_of_4d_leaves():
    plain, averaged = gradtx.scale_by_adahessian(), gradtx.scale_by_adahessian(spatial_axes=(2, 3))
    _, s = plain.update(PARAMS, plain.init(PARAMS), PARAMS, obj_fn=_quartic)
    _, a = averaged.update(PARAMS, averaged.init(PARAMS), PARAMS, obj_fn=_quartic)
    want = jnp.broadcast_to(jnp.mean(jnp.abs(s.hessian["k"]), axis=(2, 3), keepdims=True), (2, 3, 2, 2))
    np.testing.assert_allclose(a.hessian["k"], want, rtol=1e-6)
    assert not np.allclose(a.hessian["k"], s.hessian["k"])
    np.testing.assert_array_equal(a.hessian["v"], s.hessian["v"])  # not 4-D: as it is


def test_adahessian_errors():
    with pytest.raises(
        gradtx.MissingExtraArgError, match="`adahessian`: `update` needs the extra argument `obj_fn`"
    ):
        jax.jit(lambda p: gradtx.adahessian(0.1).update(p, gradtx.adahessian(0.1).init(p), p))(PARAMS)
    with pytest.raises(ValueError, match="`adahessian`: `update` needs the current parameters"):
        tx = gradtx.adahessian(0.1)
        tx.update(PARAMS, tx.init(PARAMS), obj_fn=_quartic)
    with pytest.raises(ValueError, match=r"`adahessian`: `hessian_power` must be in \(0.0, 1.0\]"):
        gradtx.adahessian(0.1, hessian_power=0.0)
    with pytest.raises(ValueError, match=r"`scale_by_adahessian`: `b2` must be in \[0.0, 1.0\)"):
        gradtx.scale_by_adahessian(b2=1.0)
    with pytest.raises(ValueError, match="`adahessian`: `hessian_distribution` must be one of"):
        gradtx.adahessian(0.1, hessian_distribution="uniform")
    with pytest.raises(ValueError, match="`adahessian`: `update_period` must be >= 1"):
        gradtx.adahessian(0.1, update_period=0)
    with pytest.raises(TypeError, match="`adahessian`: `num_samples` must be an integer"):
        gradtx.adahessian(0.1, num_samples=1.5)
    with pytest.raises(TypeError, match="`adahessian`: `spatial_axes` must be a tuple"):
        gradtx.adahessian(0.1, spatial_axes=[2, 3])

"""gradtx/_algorithms/scion.py: SCION and SCION-light against pytorch-optimizer's `SCION` and `SCIONLight`
(20 steps on the recorded gradients: defaults, constraint, both weight decays, and parameter groups giving
each leaf its norm, every norm among them), each norm's oracle against its definition, and the errors."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._algorithms.scion import LMONorm, lmo
from gradtx._core.matrix_work import evaluate
from tests.algorithms import _references


def _lmo(d, norm, options):
    return evaluate(lmo(d, norm, options))


def _tx(case):
    """`gradtx.get(<class>, **kwargs)`; a case with parameter groups: `partition` of one per leaf."""
    kwargs = dict(case.kwargs)
    groups = kwargs.pop("groups", None)
    if groups is None:
        return None
    return gradtx.partition(
        {leaf: gradtx.get(case.class_name, **(kwargs | own)) for leaf, own in groups.items()},
        {leaf: leaf for leaf in groups},
    )


@pytest.mark.parametrize("case", _references.cases("scion"), ids=repr)
def test_scion_equals_pytorch_optimizer(case):
    _references.check_case(case, tx=_tx(case))


@pytest.mark.parametrize("name", ["scion", "scion_light"])
def test_scion_takes_pytorch_optimizers_arguments_and_defaults(name):
    # the reference's default `norm_type` is its `LMONorm.AUTO`, recorded as its repr: gradtx's LMONorm has it
    _references.check_signature("scion", name)
    assert repr(LMONorm.AUTO) == "<LMONorm.AUTO: 1>"
    with pytest.raises(ValueError, match="maximize=False"):
        gradtx.get("SCION", maximize=True)


def test_each_norm_is_its_definition():
    d = jnp.asarray(np.random.default_rng(0).standard_normal((4, 6)), jnp.float32)
    x = np.asarray(d, np.float64)
    u, _, vt = np.linalg.svd(x, full_matrices=False)
    spectral = {"max_scale": False, "normalize": True, "num_steps": 5}
    polar = _lmo(d, LMONorm.SPECTRAL, spectral)
    np.testing.assert_allclose(
        polar, np.sqrt(4 / 6) * u @ vt, atol=0.3 * np.sqrt(4 / 6)
    )  # the quintic: ~UV^T
    np.testing.assert_allclose(_lmo(d, LMONorm.SIGN, {"normalize": True}), np.sign(x) / 6)
    col = x / (np.sqrt(np.sum(x * x, axis=0)) / 2.0 * 6 + 1e-8)
    np.testing.assert_allclose(_lmo(d, LMONorm.COL, {"normalized": True, "transpose": False}), col, rtol=1e-6)
    row = x / (np.sqrt(np.sum(x * x, axis=1, keepdims=True)) + 1e-8)
    row_options = {"normalized": False, "transpose": False}
    np.testing.assert_allclose(_lmo(d, LMONorm.ROW, row_options), row, rtol=1e-6)
    b = jnp.array([3.0, -4.0])
    np.testing.assert_allclose(_lmo(b, LMONorm.AUTO, {}), np.array([3.0, -4.0]) / np.sqrt(12.5), rtol=1e-6)
    k = jnp.ones((2, 3, 2, 2))
    np.testing.assert_allclose(  # the kernel flattened, its polar factor times sqrt(out / in) / kernel size
        _lmo(k, LMONorm.AUTO, {}),
        _lmo(k.reshape(2, 12), LMONorm.SPECTRAL, spectral).reshape(k.shape)
        / np.sqrt(2 / 12)
        * np.sqrt(2 / 3)
        / 4,
        rtol=1e-5,
    )


def test_light_keeps_a_decaying_sum_and_scion_an_average():
    g = jnp.ones(3)
    light, plain = (f(1.0, momentum=0.25, norm_type="none") for f in (gradtx.scion_light, gradtx.scion))
    sl, sp = light.init(g), plain.init(g)
    for _ in range(3):
        ul, sl = light.update(g, sl, g)
        up, sp = plain.update(g, sp, g)
    np.testing.assert_allclose(ul, -(1 + 0.75 + 0.75**2) * g)
    np.testing.assert_allclose(up, -(1 - 0.75**3) * g)


def test_constraint_shrinks_the_weights_by_the_rate():
    tx = gradtx.scion(0.1, momentum=1.0, norm_type="none", constraint=True, weight_decay=5.0)  # decay unused
    w = jnp.array([2.0, -1.0])
    u, _ = tx.update(jnp.zeros(2), tx.init(w), w)
    np.testing.assert_allclose(w + u, 0.9 * w)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"momentum": 0.0}, ValueError, "`momentum`"),
        ({"scale": 0.0}, ValueError, "`scale`"),
        ({"weight_decay": -1.0}, ValueError, "`weight_decay`"),
        ({"norm_type": 8}, ValueError, "`norm_type` must be"),
        ({"norm_type": "frobenius"}, ValueError, "`norm_type` must be"),
        ({"norm_type": "spectral", "norm_kwargs": {"transpose": True}}, ValueError, "takes max_scale"),
        ({"norm_type": "spectral", "norm_kwargs": {"num_steps": 0}}, ValueError, "num_steps"),
        ({"norm_type": "row", "norm_kwargs": {"normalized": 1}}, TypeError, "normalized"),
        ({"norm_type": "row", "norm_kwargs": [1]}, TypeError, "`norm_kwargs` must be a dict"),
        ({"constraint": 1}, TypeError, "`constraint`"),
    ],
)
@pytest.mark.parametrize("factory", [gradtx.scion, gradtx.scion_light])
def test_bad_arguments_are_refused(factory, kwargs, error, match):
    with pytest.raises(error, match=match):
        factory(0.01, **kwargs)


def test_a_norm_refuses_a_leaf_of_another_rank():
    tx = gradtx.scion(0.01, norm_type="spectral")
    with pytest.raises(ValueError, match="the SPECTRAL norm takes leaves of rank 2"):
        tx.update(jnp.ones(3), tx.init(jnp.ones(3)), jnp.ones(3))


def test_scion_light_under_its_gradtx_name_is_its_pytorch_class():
    params = {"w": jnp.asarray(np.random.default_rng(1).standard_normal((4, 3)), jnp.float32)}
    grads = {"w": jnp.ones((4, 3))}
    ours, theirs = gradtx.scion_light(0.05, momentum=0.5), gradtx.get("SCIONLight", lr=0.05, momentum=0.5)
    a = ours.update(grads, ours.init(params), params)[0]["w"]
    b = theirs.update(grads, theirs.init(params), params)[0]["w"]
    np.testing.assert_array_equal(a, b)
    assert float(jnp.max(jnp.abs(a))) > 0

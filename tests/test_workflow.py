"""gradtx/_workflow.py and gradtx/_dependence.py: a parameter the loss has no gradient path to gets
`None` from `compute_gradients` (TF's semantics), so `minimize` leaves it and its slots alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx

PARAMS = {"a": jnp.array(1.5), "b": jnp.array(-0.5), "c": jnp.array(2.0)}


def _gradients(loss_fn, params, *args, jit, **kwargs):
    fn = lambda p, *a: gradtx.compute_gradients(loss_fn, p, *a, **kwargs)  # noqa: E731
    return (jax.jit(fn) if jit else fn)(params, *args)


@jax.custom_vjp
def _solve(a):
    """sqrt(a) by 20 Newton steps in a while_loop (not reverse-differentiable); the gradient by hand."""
    return jax.lax.while_loop(lambda c: c[0] < 20, lambda c: (c[0] + 1, (c[1] + a / c[1]) / 2), (0, a))[1]


def _solve_fwd(a):
    root = _solve(a)
    return root, root


_solve.defvjp(_solve_fwd, lambda root, g: (g / (2 * root),))


@jax.custom_vjp
def _double(a):
    return 2 * a


def _halving_bwd(_, g):  # the backward pass has a while_loop of the cotangent
    return (jax.lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, 2 * c[1]), (0, g))[1],)


_double.defvjp(lambda a: (2 * a, None), _halving_bwd)


def _swap(carry, _):
    return (carry[1], 2 * carry[0]), None


CASES = {  # loss, the params it has a gradient for (the others are None)
    "zero_times": (lambda p: 0 * p["a"] + p["b"] ** 2, "ab"),
    "stop_gradient": (lambda p: p["a"] * jax.lax.stop_gradient(p["b"]), "a"),
    "cond_predicate": (lambda p: jax.lax.cond(p["b"] > 0, lambda: p["a"] ** 2, lambda: p["a"]), "a"),
    "cond_branches": (
        lambda p: jax.lax.cond(p["b"] > 0, lambda a, c: a, lambda a, c: c, p["a"], p["c"]),
        "ac",
    ),
    "scan_body": (lambda p: jax.lax.scan(lambda x, t: (x * p["a"] + t, None), 1.0, jnp.arange(3.0))[0], "a"),
    "scan_carry": (lambda p: jax.lax.scan(_swap, (p["a"], p["b"]), None, length=2)[0][0], "ab"),
    "scan_xs_unread": (
        lambda p: jax.lax.scan(lambda x, t: (x * p["a"], None), 1.0, jnp.stack([p["c"]] * 3))[0],
        "a",
    ),
    "custom_vjp_while": (lambda p: _solve(p["a"] ** 2 + p["b"] ** 2), "ab"),
    "custom_vjp_bwd_while": (lambda p: _double(p["c"]), "c"),
    "custom_jvp": (lambda p: jax.nn.relu(p["a"]) + jax.nn.softplus(p["c"]), "ac"),
    "while_trip_count": (
        lambda p: jax.lax.while_loop(lambda x: x < p["b"] + 3, lambda x: x + 1, 0.0) * p["a"],
        "a",
    ),
    "fori_loop": (lambda p: jax.lax.fori_loop(0, 3, lambda i, x: x * p["c"], 1.0), "c"),
    "integer_cast": (lambda p: p["a"] + p["b"].astype(jnp.int32), "a"),
    "jit": (lambda p: jax.jit(lambda a, c: 3 * a)(p["a"], p["c"]), "a"),
    "checkpoint": (lambda p: jax.checkpoint(lambda a, b: jnp.sin(a))(p["a"], p["b"]), "a"),
}


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "nojit"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_parameter_without_a_gradient_path_gets_none(case, jit):
    loss_fn, used = CASES[case]
    loss, grads = _gradients(loss_fn, PARAMS, jit=jit)
    expected = jax.grad(loss_fn)(PARAMS)
    assert sorted(k for k, g in grads.items() if g is not None) == list(used)
    for k in used:
        np.testing.assert_allclose(grads[k], expected[k], rtol=1e-6)
    np.testing.assert_allclose(loss, loss_fn(PARAMS), rtol=1e-6)


def test_python_control_flow_on_the_values_still_works_outside_jit():
    _, grads = gradtx.compute_gradients(lambda p: p["a"] if p["a"] > 0 else p["b"], PARAMS)
    assert float(grads["a"]) == 1.0 and grads["b"] is None and grads["c"] is None


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "nojit"])
def test_minimize_leaves_a_parameter_the_loss_never_reads_and_its_slots_alone(jit):
    tx = gradtx.adamw(0.1, weight_decay=0.01)
    params = {"used": jnp.array(1.0), "unused": jnp.array(3.0)}
    state = tx.init(params)
    step = gradtx.minimize(lambda p, x: (p["used"] - x) ** 2, tx)
    step = jax.jit(step) if jit else step
    for _ in range(3):
        params, state, _ = step(params, state, jnp.array(2.0))
    assert float(params["unused"]) == 3.0 and float(params["used"]) > 1.2  # TF: 3.0; decayed: 2.91
    for slot in ("m", "v"):
        assert float(gradtx.get_slot(state, slot, "unused")) == 0.0
        assert float(gradtx.get_slot(state, slot, "used")) != 0.0


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "nojit"])
@pytest.mark.parametrize(
    "loss_fn",
    [
        lambda p, x: jnp.sum(x**2),
        lambda p, x: jax.lax.stop_gradient(p["w"]["kernel"]) @ x,
        lambda p, x: jnp.floor(p["w"]["bias"]) + p["steps"] * x[0],
    ],
    ids=["constant", "stop_gradient", "floor_and_integer"],
)
def test_a_loss_without_a_gradient_for_any_parameter_raises(loss_fn, jit):
    params = {"w": {"kernel": jnp.ones(2), "bias": jnp.array(0.5)}, "steps": jnp.array(3)}
    match = (
        r"`compute_gradients`: no gradients provided for any variable: the loss does not depend on any "
        r"of the parameters \['w'\]\['bias'\], \['w'\]\['kernel'\] \(or only through `jax.lax.stop_gradient`"
    )
    with pytest.raises(ValueError, match=match):
        _gradients(loss_fn, params, jnp.ones(2), jit=jit)
    step = gradtx.minimize(loss_fn, gradtx.sgd(0.1))
    with pytest.raises(ValueError, match=match):
        (jax.jit(step) if jit else step)(params, gradtx.sgd(0.1).init(params), jnp.ones(2))


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "nojit"])
def test_has_aux_and_grad_loss_with_a_parameter_only_the_aux_reads(jit):
    def loss_fn(p, x):
        return p["a"] * x, {"c_squared": p["c"] ** 2, "x": x}

    (loss, aux), grads = _gradients(loss_fn, PARAMS, jnp.array(4.0), has_aux=True, grad_loss=0.5, jit=jit)
    assert float(loss) == 6.0 and float(aux["c_squared"]) == 4.0 and float(aux["x"]) == 4.0
    assert float(grads["a"]) == 2.0 and grads["b"] is None and grads["c"] is None


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "nojit"])
def test_var_list_with_parameters_the_loss_does_not_read(jit):
    def loss_fn(p):
        return p["a"] * p["b"]

    _, grads = _gradients(loss_fn, PARAMS, var_list=["a", "c"], jit=jit)
    assert float(grads["a"]) == -0.5 and grads["b"] is None and grads["c"] is None
    match = (
        r"`compute_gradients`: no gradients provided for any variable: `var_list` selects none of the "
        r"parameters the loss depends on, \['a'\], \['b'\]; add them to `var_list`."
    )
    with pytest.raises(ValueError, match=match):
        _gradients(loss_fn, PARAMS, var_list=["c"], jit=jit)
    step = gradtx.minimize(loss_fn, gradtx.sgd(0.1), var_list=["c"])
    with pytest.raises(ValueError, match=match):
        (jax.jit(step) if jit else step)(PARAMS, gradtx.sgd(0.1).init(PARAMS))

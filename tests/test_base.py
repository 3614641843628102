"""gradtx/_base.py: apply_updates, the argument checks, the tree-mismatch error, extra-arg support."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._core import checks as _checks
from gradtx._core import control
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol


def test_apply_updates_adds_and_keeps_each_param_dtype():
    params = {"a": jnp.ones(2, jnp.bfloat16), "b": jnp.ones(2, jnp.float32), "c": jnp.ones(2, jnp.float16)}
    updates = {
        "a": jnp.array([0.5, -0.25], jnp.float32),
        "b": jnp.array([1.0, 2.0]),
        "c": jnp.array([0.5, 0.5]),
    }
    out = gradtx.apply_updates(params, updates)
    assert {k: v.dtype for k, v in out.items()} == {"a": jnp.bfloat16, "b": jnp.float32, "c": jnp.float16}
    np.testing.assert_array_equal(np.asarray(out["a"], np.float32), [1.5, 0.75])
    np.testing.assert_array_equal(out["b"], [2.0, 3.0])


def test_apply_updates_keeps_none_leaves():
    out = gradtx.apply_updates({"a": jnp.ones(2), "b": None}, {"a": jnp.ones(2), "b": None})
    assert out["b"] is None
    np.testing.assert_array_equal(out["a"], [2.0, 2.0])


def test_apply_updates_reports_mismatched_trees_with_key_paths():
    with pytest.raises(
        gradtx.TreeMismatchError, match=r"`apply_updates`: params and updates.*only in params: \['b'\]"
    ):
        gradtx.apply_updates({"a": jnp.ones(2), "b": jnp.ones(2)}, {"a": jnp.ones(2)})


def test_tree_mismatch_error_lists_key_paths_of_both_trees():
    err = _protocol.tree_mismatch_error("f", "updates", {"x": [1, 2]}, "state.m", {"x": [1], "y": 3})
    text = str(err)
    assert "only in updates: ['x'][1]" in text
    assert "only in state.m: ['y']" in text
    assert "updates: leaves at ['x'][0], ['x'][1]" in text
    assert "state.m: leaves at ['x'][0], ['y']" in text


def test_tree_mismatch_error_reports_node_type_differences():
    text = str(_protocol.tree_mismatch_error("f", "a", (1, 2), "b", [1, 2]))
    assert "same key paths, different node types" in text


def test_update_with_wrong_state_structure_names_the_transform():
    tx = gradtx.trace(0.9)
    state = tx.init({"a": jnp.ones(2)})
    with pytest.raises(gradtx.TreeMismatchError, match=r"`trace`: updates and state.momentum"):
        tx.update({"a": jnp.ones(2), "b": jnp.ones(1)}, state)


@pytest.mark.parametrize(
    "check, value, match",
    [
        (_checks.check_positive, 0.0, r"`f`: `x` must be > 0, got 0.0\."),
        (_checks.check_nonnegative, -1, r"`f`: `x` must be >= 0, got -1\."),
        (_checks.check_nonpositive, 0.5, r"`f`: `x` must be <= 0, got 0.5\."),
        (_checks.check_finite, float("inf"), r"`f`: `x` must be finite, got inf\."),
        (_checks.check_positive, float("nan"), r"`f`: `x` must be finite, got nan\."),
        (_checks.check_nonnegative, float("inf"), r"`f`: `x` must be finite, got inf\."),
        (_checks.check_hyperparam, -float("inf"), r"`f`: `x` must be finite, got -inf\."),
        (
            functools.partial(_checks.check_in_range, low=0.0, high=1.0),
            10**400,
            r"`f`: `x` must be finite, got an integer of 401 digits\.",
        ),
        (_checks.check_int, 2**40, r"`f`: `x` must be <= 2147483647, got 1099511627776\."),
    ],
)
def test_value_checks_raise_value_error_in_the_house_form(check, value, match):
    with pytest.raises(ValueError, match=match):
        check("f", "x", value)


def test_range_check_shows_open_and_closed_ends():
    with pytest.raises(ValueError, match=r"`f`: `b1` must be in \[0.0, 1.0\), got 1.0\."):
        _checks.check_in_range("f", "b1", 1.0, 0.0, 1.0, high_open=True)
    _checks.check_in_range("f", "b1", 0.0, 0.0, 1.0, high_open=True)


@pytest.mark.parametrize("value", [True, "0.1", None, [0.1], jnp.ones(2), jnp.array(1 + 1j)])
def test_hyperparam_type_check_refuses_non_numbers(value):
    with pytest.raises(TypeError, match=r"`f`: `x` must be"):
        _checks.check_hyperparam("f", "x", value)


@pytest.mark.parametrize("value", [0.1, 3, np.float32(0.5), jnp.asarray(0.5), lambda count: 0.1])
def test_hyperparam_type_check_accepts_numbers_arrays_and_schedules(value):
    _checks.check_hyperparam("f", "x", value)
    _checks.check_positive("f", "x", value)


def test_checks_skip_schedules_and_tracers():
    _checks.check_positive("f", "x", lambda count: -1.0)  # a schedule is not evaluated at construction
    jax.jit(lambda v: _checks.check_positive("f", "x", v) or v)(-1.0)


def test_int_bool_and_choice_checks():
    with pytest.raises(TypeError, match=r"`f`: `n` must be an integer, got 2.0"):
        _checks.check_int("f", "n", 2.0)
    with pytest.raises(TypeError, match=r"`f`: `n` must be an integer, got True"):
        _checks.check_int("f", "n", True)
    with pytest.raises(ValueError, match=r"`f`: `n` must be >= 1, got 0"):
        _checks.check_int("f", "n", 0, minimum=1)
    with pytest.raises(TypeError, match=r"`f`: `flag` must be True or False, got 'yes'"):
        _checks.check_bool("f", "flag", "yes")
    with pytest.raises(ValueError, match=r"`f`: `reduction` must be one of 'mean', 'sum'; got 'max'"):
        _checks.check_one_of("f", "reduction", "max", ("mean", "sum"))
    with pytest.raises(TypeError, match=r"`f`: `tx` must be a gradient transformation"):
        _checks.check_transform("f", "tx", object())


def test_api_decorator_names_the_outermost_public_function():
    with pytest.raises(ValueError, match=r"^`momentum`: `momentum` must be"):
        gradtx.momentum(0.1, -1.0)
    with pytest.raises(ValueError, match=r"^`trace`: `momentum` must be"):
        gradtx.trace(-1.0)


def test_missing_extra_arg_error_shows_the_call():
    err = _protocol.missing_extra_arg("adam_gs", "global_step", "step")
    assert isinstance(err, TypeError)
    assert str(err) == (
        "`adam_gs`: `update` needs the extra argument `global_step`; "
        "call it as `tx.update(grads, state, params, global_step=step)`."
    )


def test_with_extra_args_support_drops_args_for_foreign_transforms():
    class Foreign:
        def init(self, params):
            return ()

        def update(self, updates, state, params=None):
            return updates, state

    tx = _factory.with_extra_args_support(Foreign())
    assert tx.update(1.0, (), None, global_step=3) == (1.0, ())
    native = gradtx.identity()
    assert _factory.with_extra_args_support(native).update is native.update


def test_a_schedule_must_return_a_real_scalar():
    with pytest.raises(
        ValueError, match=r"^`sgd`: the schedule given as `learning_rate` must return a scalar .*\(2,\)"
    ):
        gradtx.sgd(lambda count: 0.1 * jnp.ones(2))
    with pytest.raises(ValueError, match=r"^`adam`: the schedule given as `b1` must return a scalar"):
        gradtx.adam(0.1, b1=lambda count: jnp.full((3,), 0.9))
    with pytest.raises(
        TypeError, match=r"^`momentum`: the schedule given as `learning_rate` must return a real"
    ):
        gradtx.momentum(lambda count: count > 3, 0.9)
    tx = gradtx.sgd(lambda count: 0.1 * 0.5 ** (count // 2))  # a scalar: fine
    np.testing.assert_allclose(tx.update(jnp.ones(2), tx.init(jnp.ones(2)))[0], [-0.1, -0.1])


def test_an_eager_cond_calls_only_the_branch_it_takes_and_a_traced_one_is_lax_cond():
    calls = []

    def branch(name, value):
        def fn(x):
            calls.append(name)
            return x + value

        return fn

    x = jnp.arange(3.0)
    np.testing.assert_array_equal(
        control.cond(jnp.array(True), branch("yes", 1.0), branch("no", 2.0), x), x + 1
    )
    assert calls == ["yes"]  # eagerly: the branch not taken is not even traced
    traced = jax.jit(lambda p, x: control.cond(p, branch("yes", 1.0), branch("no", 2.0), x))
    np.testing.assert_array_equal(traced(jnp.array(False), x), x + 2)
    assert sorted(calls[1:]) == ["no", "yes"]  # under a trace: `lax.cond`, both branches traced
    assert "cond" in str(jax.make_jaxpr(traced)(jnp.array(False), x))

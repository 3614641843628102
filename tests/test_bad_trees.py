"""Trees every registered factory meets at `update`: a state made for params of another shape, Python
numbers as leaves, integer parameters (issue 28, items 1 and 8 and its "unclear errors").

Each check traces the step only (`jax.eval_shape`): the errors are raised at trace time and the
accepted trees need no run, so the whole registry costs a few seconds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from tests import catalog
from tests.parallel._util import mapped

ENTRIES = catalog.entries()
IDS = [e.name for e in ENTRIES]


def _tx(entry):
    tx = entry.build()
    axis = entry.example.get("axis_name")
    return tx if axis is None else mapped(tx, axis)


def _params(kernel_shape, dtype=jnp.float32):
    # `kernel` and `bias`: the names the examples of clip_variables and scale_gradients select
    return {"kernel": jnp.ones(kernel_shape, dtype), "bias": jnp.ones(3, dtype)}


def _traced_step(entry, tx, grads, state, params):
    return jax.eval_shape(lambda g, s, p: tx.update(g, s, p, **entry.extra(0)), grads, state, params)


def _holds_per_leaf_arrays(state, shape):
    return any(getattr(x, "shape", None) == shape for x in jax.tree.leaves(state))


MISMATCHES = {  # (the params the state is made for, the params of the step)
    "rank_down": ((4, 3), (3,)),
    "rank_up": ((3,), (4, 3)),
    "broadcastable": ((1, 3), (4, 3)),
    "same_rank": ((4, 2), (4, 3)),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_a_state_made_for_params_of_another_shape_is_refused_naming_the_leaf(entry, case):
    """A state whose slots were made for other params is never broadcast into the step (72 cases of the
    sweep were), and the error names the transform, the leaf and both shapes (muon, shampoo, ggt and
    adafactor's were `NoneType * float`, `cannot reshape`, `incompatible shapes`)."""
    made_for, shape = MISMATCHES[case]
    tx = _tx(entry)
    try:
        state = jax.eval_shape(tx.init, _params(made_for))
    except ValueError as err:  # clip_variables' axes are out of range for a (3,) kernel: its own error
        pytest.skip(f"no state for these params: {err}")
    if not _holds_per_leaf_arrays(state, made_for):
        pytest.skip("no state shaped by the params")
    p = _params(shape)
    with pytest.raises(
        ValueError, match=r"^`\w+`: the gradient at \['kernel'\] has shape .*, but the .*slot `"
    ):
        _traced_step(entry, tx, p, state, p)


def test_a_nested_state_names_its_class():
    """In a chain the slot's own state class is named: it is not the outer factory's."""
    tx = gradtx.ggt(0.1)
    state = tx.init({"w": jnp.ones((4, 3))})
    p = {"w": jnp.ones(3)}
    with pytest.raises(
        ValueError,
        match=r"`ggt`: the gradient at \['w'\] has shape \(3,\), but the state's ScaleByGGTState, its slot "
        r"`moment1` there has shape \(4, 3\)",
    ):
        tx.update(p, state, p)


def test_a_slot_made_by_a_function_of_the_param_is_checked_against_what_init_makes():
    """Adafactor's factored statistics: a (3,) param's state (unfactored `v`) meeting a (4, 3) gradient."""
    tx = gradtx.scale_by_factored_rms(min_dim_size_to_factor=1)
    state = tx.init({"w": jnp.ones(3)})
    with pytest.raises(
        ValueError,
        match=r"`scale_by_factored_rms`: the gradient at \['w'\] has shape \(4, 3\), but the state's slot "
        r"`v_row` there has shape \(1,\) \(`init` makes it \(3,\) for such a parameter\)",
    ):
        tx.update({"w": jnp.ones((4, 3))}, state)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_python_number_leaves_are_taken_as_optax_takes_them(entry):
    """`{"w": 1.0}` is a tree optax accepts: every factory takes it (as a 0-d float32 array)."""
    tx = _tx(entry)
    params = {**_params((4, 3)), "w": 1.0}
    state = tx.init(params)
    updates, new_state = _traced_step(entry, tx, params, state, params)
    assert updates["w"].shape == () and updates["w"].dtype == jnp.float32
    assert jax.tree.structure(new_state) == jax.tree.structure(state)


@pytest.mark.parametrize("name", ["adam", "sgd", "clip_by_global_norm", "accumulate_gradients", "ggt"])
def test_python_number_leaves_step_as_arrays_do(name):
    entry = catalog.entry(name)
    tx = entry.build()
    numbers = {"kernel": 0.5, "bias": jnp.ones(3)}
    arrays = {"kernel": jnp.asarray(0.5), "bias": jnp.ones(3)}
    got = tx.update(numbers, tx.init(numbers), numbers, **entry.extra(0))
    want = tx.update(arrays, tx.init(arrays), arrays, **entry.extra(0))
    jax.tree.map(np.testing.assert_array_equal, got, want)


# transforms of gradients (their updates stay in the gradients' float dtype) and routing: an integer
# parameter loses nothing in them; the optimizers after them refuse it
INTEGER_PARAMS_OK = {
    "adaptive_grad_clip",
    "add_decayed_weights",
    "add_noise",
    "clip",
    "clip_by_global_norm",
    "clip_by_norm",
    "freeze",
    "identity",
    "keep_params_nonnegative",
    "monitor",  # measures the updates, passes them on
    "scale_gradients",
    "set_to_zero",
    "snapshot",  # measures the updates, passes them on
    "transform_gradients",
    "zero_nans",
}


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_integer_params_are_refused_where_every_update_would_round_away(entry):
    """int32 params with float gradients never move (optax steps them silently): refused, naming the leaf."""
    tx = _tx(entry)
    params = _params((4, 3), jnp.int32)
    grads = _params((4, 3))
    if entry.name in INTEGER_PARAMS_OK:
        _traced_step(entry, tx, grads, jax.eval_shape(tx.init, params), params)
        return
    with pytest.raises(TypeError, match=r"the (parameter|gradient)( at \[|) ?'(bias|kernel)'\]? is int32"):
        _traced_step(entry, tx, grads, jax.eval_shape(tx.init, params), params)


def test_integer_gradients_are_refused():
    with pytest.raises(TypeError, match=r"`scale_by_adam`: the gradient at \['w'\] is int32"):
        gradtx.adam(0.1).update({"w": jnp.ones(3, jnp.int32)}, gradtx.adam(0.1).init({"w": jnp.ones(3)}))


def test_integer_leaves_kept_out_of_the_optimizer_train():
    """The way the error points to: the integer leaf frozen, the float ones trained."""
    params = {"step": jnp.zeros((), jnp.int32), "w": jnp.ones(3)}
    tx = gradtx.partition(
        {"train": gradtx.adam(0.1), "keep": gradtx.set_to_zero()}, {"step": "keep", "w": "train"}
    )
    grads = {"step": jnp.zeros(()), "w": jnp.ones(3)}
    updates, _ = tx.update(grads, tx.init(params), params)
    new = gradtx.apply_updates(params, updates)
    assert new["step"].dtype == jnp.int32 and int(new["step"]) == 0
    assert float(new["w"][0]) < 1.0

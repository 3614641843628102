"""`gradtx.combinators._aggregating` against `optax.experimental.aggregating`: outputs, states and layouts."""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx._core import protocol as _protocol
from gradtx.combinators import _aggregating as agg

optax = pytest.importorskip("optax")
from optax.experimental import aggregating as oagg  # noqa: E402

STEPS = 4
PARAMS = {"w": jnp.zeros((3, 2)), "b": jnp.zeros((2,)), "deep": (jnp.zeros((1, 4)),)}


def _per_example(shape: tuple[int, ...], seed: int) -> list[Any]:
    """`STEPS` batches of per-element gradients with batch axes `shape`, one leaf per param."""
    key = jax.random.key(seed)
    out = []
    for _ in range(STEPS):
        leaves, treedef = jax.tree.flatten(PARAMS)
        keys = jax.random.split(key, len(leaves) + 1)
        key = keys[0]
        draws = [jax.random.normal(k, shape + x.shape) for k, x in zip(keys[1:], leaves, strict=True)]
        out.append(treedef.unflatten(draws))
    return out


def _layout(node: Any) -> Any:
    """The state's layout, node by node: NamedTuple classes and fields, containers, shapes and dtypes."""
    if isinstance(node, tuple) and hasattr(node, "_fields"):
        return (type(node).__name__, tuple((f, _layout(getattr(node, f))) for f in node._fields))
    if isinstance(node, (tuple, list)):
        return (type(node).__name__, tuple(_layout(x) for x in node))
    if isinstance(node, dict):
        return ("dict", tuple((k, _layout(v)) for k, v in sorted(node.items())))
    if node is None:
        return None
    x = jnp.asarray(node)
    return ("array", x.shape, str(x.dtype), x.weak_type)


def _assert_same(ours: Any, theirs: Any) -> None:
    """Same layout, and every leaf equal bit for bit."""
    assert _layout(ours) == _layout(theirs)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _run_both(ours: Any, theirs: Any, grads: list[Any], **extra: Any) -> list[Any]:
    """Step both transforms under jit on `grads`; outputs and states equal after every step."""
    state_o, state_t = ours.init(PARAMS), theirs.init(PARAMS)
    _assert_same(state_o, state_t)
    step_o = jax.jit(lambda g, s: ours.update(g, s, PARAMS, **extra))
    step_t = jax.jit(lambda g, s: theirs.update(g, s, PARAMS, **extra))
    states = []
    for g in grads:
        out_o, state_o = step_o(g, state_o)
        out_t, state_t = step_t(g, state_t)
        _assert_same(out_o, out_t)
        _assert_same(state_o, state_t)
        states.append(state_o)
    return states


@pytest.mark.parametrize("axis, shape", [(0, (4,)), ((0, 1), (2, 3))])
def test_average_per_element_updates(axis, shape):
    ours = agg.average_per_element_updates(axis)
    assert isinstance(ours, agg.Aggregator)
    _run_both(ours, oagg.average_per_element_updates(axis), _per_example(shape, 0))


@pytest.mark.parametrize("k", [1, 3])
def test_accumulate_avg_updates(k):
    grads = [jax.tree.map(lambda x: x[0], g) for g in _per_example((1,), 1)] * 2
    states = _run_both(agg.accumulate_avg_updates(k), oagg.accumulate_avg_updates(k), grads)
    if k == 3:
        assert [bool(s.ready) for s in states] == [False, False, True, False, False, True, False, False]


@pytest.mark.parametrize("axis, k", [(0, 1), (0, 2), (None, 2)])
def test_average_incrementally_updates(axis, k):
    grads = _per_example((4,), 2)
    if axis is None:
        grads = [jax.tree.map(lambda x: x.mean(0), g) for g in grads]
    ours = agg.average_incrementally_updates(axis, k)
    assert isinstance(ours, agg.Aggregator) == (axis is not None)
    _run_both(ours, oagg.average_incrementally_updates(axis, k), grads)


@pytest.mark.parametrize("k", [1, 2])
def test_mean_and_sum_sq_diff(k):
    _run_both(
        agg.get_per_element_mean_and_sum_sq_diff_grads(0, k),
        oagg.get_per_element_mean_and_sum_sq_diff_grads(0, k),
        _per_example((5,), 3),
    )


def test_track_ema():
    grads = [jax.tree.map(lambda x: x[0], g) for g in _per_example((1,), 4)]
    extra = {"sum_sq_diff_grads": jax.tree.map(jnp.abs, grads[0]), "sample_size": 6}
    states = _run_both(
        agg.track_per_element_mean_and_variance_with_ema(0.8),
        oagg.track_per_element_mean_and_variance_with_ema(0.8),
        grads,
        **extra,
    )
    _assert_same(
        agg.get_unbiased_mean_and_variance_ema(states[-1]),
        oagg.get_unbiased_mean_and_variance_ema(states[-1]),
    )


def _clip_each(gs, params):
    del params
    return jax.vmap(lambda g: jax.tree.map(lambda x: jnp.clip(x, -0.5, 0.5), g))(gs)


@pytest.mark.parametrize("k", [1, 2])
def test_process(k):
    ours = agg.process(gradtx.stateless(_clip_each), agg.average_incrementally_updates(0, k), optax.adam(0.1))
    theirs = oagg.process(
        optax.stateless(_clip_each), oagg.average_incrementally_updates(0, k), optax.adam(0.1)
    )
    assert isinstance(ours, agg.Aggregator)
    _run_both(ours, theirs, _per_example((4,), 5))


@pytest.mark.parametrize("decay, k", [(0.9, 1), (0.0, 2)])
def test_add_mean_variance_to_opt(decay, k):
    ours = agg.add_mean_variance_to_opt(optax.sgd(0.1), decay, 0, k)
    states = _run_both(
        ours, oagg.add_mean_variance_to_opt(optax.sgd(0.1), decay, 0, k), _per_example((4,), 6)
    )
    _assert_same(
        agg.get_unbiased_mean_and_variance_ema(states[-1]),
        oagg.get_unbiased_mean_and_variance_ema(states[-1]),
    )


def test_add_mean_variance_with_gradtx_optimizer():
    """`gradtx.optax_compat.adam` inside: the program `import gradtx.optax_compat as optax` runs."""
    import gradtx.optax_compat as compat

    ours = agg.add_mean_variance_to_opt(compat.adam(0.1), 0.9)
    _run_both(ours, oagg.add_mean_variance_to_opt(optax.adam(0.1), 0.9), _per_example((4,), 7))


def test_chain_takes_per_element_gradients():
    tx = gradtx.chain(agg.average_per_element_updates(), gradtx.sgd(1.0))
    out, _ = tx.update({"w": jnp.array([[1.0], [3.0]])}, tx.init({"w": jnp.zeros(1)}), {"w": jnp.zeros(1)})
    np.testing.assert_array_equal(out["w"], [-2.0])


def test_process_of_optax_aggregator_is_an_aggregator():
    tx = agg.process(gradtx.identity(), oagg.average_per_element_updates(), gradtx.sgd(1.0))
    assert isinstance(tx, agg.Aggregator)
    tx = agg.process(gradtx.identity(), agg.accumulate_avg_updates(2), gradtx.sgd(1.0))
    assert not isinstance(tx, agg.Aggregator) and isinstance(tx, _protocol.GradientTransformation)


def test_batch_size():
    grads = {"a": jnp.zeros((2, 3, 5)), "b": jnp.zeros((2, 3))}
    assert agg.get_batch_size_from_per_elt_updates(grads, 0) == 2
    assert agg.get_batch_size_from_per_elt_updates(grads, [0, 1]) == 6
    with pytest.raises(ValueError, match=r"same batch size .* got 3 at \['a'\], 5 at \['b'\]"):
        agg.get_batch_size_from_per_elt_updates({"a": jnp.zeros((3,)), "b": jnp.zeros((5,))}, 0)
    with pytest.raises(ValueError, match="no leaves"):
        agg.get_batch_size_from_per_elt_updates({}, 0)
    with pytest.raises(TypeError, match="`per_elt_axis` must be an int or a sequence of ints"):
        agg.get_batch_size_from_per_elt_updates(grads, 0.0)


def test_errors():
    with pytest.raises(ValueError, match="`accumulation_steps` must be >= 1, got 0"):
        agg.accumulate_avg_updates(0)
    with pytest.raises(ValueError, match="`accumulation_steps` must be >= 1, got 0"):
        agg.get_per_element_mean_and_sum_sq_diff_grads(0, 0)
    with pytest.raises(TypeError, match="`per_elt_axis` must be an int"):
        agg.average_per_element_updates("batch")
    with pytest.raises(ValueError, match=r"`ema_decay` must be in \[0.0, 1.0\)"):
        agg.track_per_element_mean_and_variance_with_ema(1.0)
    with pytest.raises(TypeError, match="`postprocessor` must be a gradient transformation"):
        agg.process(gradtx.identity(), agg.average_per_element_updates(), None)
    with pytest.raises(ValueError, match="holds no PerElementMeanAndVarianceEMAState"):
        agg.get_unbiased_mean_and_variance_ema(gradtx.sgd(0.1).init(PARAMS))
    tx = agg.track_per_element_mean_and_variance_with_ema()
    with pytest.raises(_protocol.MissingExtraArgError, match="needs the extra arguments `sum_sq_diff_grads`"):
        tx.update(PARAMS, tx.init(PARAMS))


def test_public_names_and_signatures_are_optax():
    mine = oagg.__name__
    theirs = {n for n in dir(oagg) if getattr(getattr(oagg, n), "__module__", None) == mine}
    theirs |= {
        "AggregatedUpdates",
        "MaybeAxis",
        "PerElementUpdates",
    }  # aliases (their __module__ is typing's)
    assert set(agg.__all__) == theirs
    for name in agg.__all__:
        ours, optax_one = getattr(agg, name), getattr(oagg, name)
        if isinstance(optax_one, type) and hasattr(optax_one, "_fields"):
            assert ours._fields == optax_one._fields, name
        elif inspect.isfunction(optax_one):
            params_o = inspect.signature(ours).parameters.values()
            params_t = inspect.signature(optax_one).parameters.values()
            assert [(p.name, p.kind, p.default) for p in params_o] == [
                (p.name, p.kind, p.default) for p in params_t
            ], name

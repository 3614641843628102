"""`gradtx.update_rule`, the one constructor of building blocks, and what it promises its callers.  Every
building block in gradtx/_algorithms is written on it (checked here by reading the modules; the few that
hold another transform's state say why they cannot be), a traceback from an alias to its formula is
short, `api`'s checks run once per step whatever the nesting, the dtype policy is the one its docstring
states, and slots of the wrong shape (any rank) are refused at trace time."""

from __future__ import annotations

import ast
import pathlib
import sys
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx._core import formulas as _formulas
from gradtx._core import shapes as _shapes

ALGORITHMS = pathlib.Path(gradtx.__file__).parent / "_algorithms"


class _State(NamedTuple):
    count: gradtx.OptState
    velocity: gradtx.Updates


def _heavy_ball(g, velocity, h):
    velocity = h.beta * velocity + g
    return velocity, velocity


NO_RULES = {
    "muon_dims.py": "Muon's dimension numbers, the reshapes they describe and the routing by them: no update",
    "newton_schulz.py": "the orthogonalising iteration Muon's rule calls per matrix: a function, no update",
    "kron_factors.py": "the Kronecker factors' math PSGD Kron's rule calls per leaf: functions, no update",
    "shampoo_roots.py": "the matrix roots Shampoo's rule calls per statistic: functions, no update",
    "shampoo_statistics.py": "Shampoo's per-dimension statistics, their slots and renewals, which its rule "
    "calls per leaf: functions, no update",
    "psgd_kron_leaf.py": "PSGD Kron's factors slot, random numbers and per-leaf matrix work, which its "
    "rule calls: functions, no update",
    "soap_basis.py": "SOAP's layouts, eigenbases and their slots, which its rule calls per leaf: functions, "
    "no update",
}
"""Modules under `_algorithms/` that hold no transform, with the reason."""

MODULES = sorted(p for p in ALGORITHMS.glob("*.py") if p.name != "__init__.py" and p.name not in NO_RULES)

OWN_SKELETON = {
    "cautious.py": "it masks a member optimizer's update by the gradient's signs, keeping its state",
    "hutchinson.py": "its Hessian estimate differentiates the objective (every k steps) before a member rule",
    "galore.py": "it runs a base optimizer (a member transform) in each matrix's low-rank projection",
    "lbfgs.py": "its step is a two-loop recursion over a history of pairs, then a member line search",
    "linesearch.py": "it evaluates the objective in a loop until a decrease condition holds",
    "linesearch_zoom.py": "it evaluates the objective and its slope in a loop (zoom on strong Wolfe)",
    "mechanic.py": "it scales a member optimizer's steps, keeping that optimizer's state",
    "muonclip.py": "QK-clip reads per-attention logits (a dict extra argument) and rescales whole heads",
    "momo.py": "its model-based step needs the loss value and a global inner product before any leaf",
    "sam.py": "it alternates two member optimizers (the ascent and the descent step)",
    "sophia.py": "its Hessian estimate is a member transform fed the objective every k steps",
}
"""Algorithm modules that hold another transform's state or loop over the objective, with the reason."""


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_building_block_is_a_formula_and_a_declaration(path):
    """No building block writes its own skeleton (`init_fn` / `update_fn`, `split_map`, `densify`, slots made
    by hand): each module declares its rules with `update_rule` (or a sibling's family helper that does)."""
    text = path.read_text()
    tree = ast.parse(text)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    if path.name in OWN_SKELETON:
        assert defined & {"init_fn", "update_fn"}, f"{path.name} is declared now: drop it from OWN_SKELETON"
        return
    assert not defined & {"init_fn", "update_fn"}, f"{path.name} defines {defined & {'init_fn', 'update_fn'}}"
    skeleton = {
        ast.unparse(n.func)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id in ("_walk", "_placement", "sparse")
        and n.func.attr in ("split_map", "map_updates", "densify", "lift", "full_like", "zeros_like")
    }
    assert not skeleton, f"{path.name} calls {skeleton}"
    siblings = [
        n
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("gradtx._algorithms.")
    ]
    declared = "update_rule(" in text or "restated(" in text
    chains_only = "chain(" in text  # a module of optimizers over another module's blocks (AdamW, Fromage)
    assert declared or chains_only or any(a.name.endswith("_family") for n in siblings for a in n.names), (
        path.name
    )


def test_the_adam_moment_is_five_frames_below_update():
    """From `gradtx.adam(...).update` to the function that updates Adam's moment: at most 5 frames."""
    tx = gradtx.adam(0.1)
    state = tx.init(jnp.zeros(2))
    here = sys._getframe(0)
    stacks = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is _formulas.moment_increment.__code__:
            names, f = [], frame
            while f is not None and f is not here:
                names.append(f.f_code.co_name)
                f = f.f_back
            stacks.append(names)

    sys.setprofile(profile)
    try:
        tx.update(jnp.ones(2), state)
    finally:
        sys.setprofile(None)
    assert stacks and all(len(s) <= 5 for s in stacks), stacks
    assert stacks[0][1] == "_tf1_leaf"  # the formula, called by the constructor's loop


def test_the_shape_checks_run_once_per_step(monkeypatch):
    """`api`'s trace-time checks run at the factory the user called, not at every nesting level."""
    calls = []
    original = _shapes.check_shapes
    monkeypatch.setattr(_shapes, "check_shapes", lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    params = {"w": jnp.zeros(3)}
    for tx, name in [
        (gradtx.adam(0.1), "adam"),
        (gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.adamw(0.1, weight_decay=1e-4)), "chain"),
        (gradtx.accumulate_gradients(gradtx.lamb(0.1), every_k=2), "accumulate_gradients"),
    ]:
        calls.clear()
        jax.jit(tx.update).trace(params, tx.init(params), params)
        assert calls == [name], calls


def test_a_rule_from_its_formula():
    tx = gradtx.update_rule("heavy_ball", _State, _heavy_ball, hyper={"beta": 0.5}, slots={"velocity": 0.0})
    assert isinstance(tx, gradtx.ElementWise)
    params = {"w": jnp.zeros(2), "frozen": None}
    state = tx.init(params)
    for _ in range(2):
        u, state = tx.update({"w": jnp.ones(2), "frozen": None}, state)
    np.testing.assert_array_equal(u["w"], [1.5, 1.5])
    assert u["frozen"] is None and state.velocity["frozen"] is None and int(state.count) == 2


def test_a_schedule_is_called_with_the_count():
    seen = []
    tx = gradtx.update_rule(
        "heavy_ball",
        _State,
        _heavy_ball,
        hyper={"beta": lambda c: seen.append(c) or 0.5},
        slots={"velocity": 0.0},
    )
    state = tx.init(jnp.zeros(1))
    for _ in range(3):
        _, state = tx.update(jnp.ones(1), state)
    assert [int(c) for c in seen[-3:]] == [0, 1, 2]  # step t sees count = t - 1


def test_undeclared_state_fields_are_refused():
    class S(NamedTuple):
        count: gradtx.OptState
        velocity: gradtx.Updates
        other: gradtx.Updates

    with pytest.raises(TypeError, match=r"`update_rule` \(heavy_ball\): the fields \['other'\] of S are not"):
        gradtx.update_rule("heavy_ball", S, _heavy_ball, slots={"velocity": 0.0})


@pytest.mark.parametrize("shape", [(3,), (4, 3), (2, 4, 3), ()], ids=["rank1", "same", "rank3", "scalar"])
def test_a_state_of_other_params_is_refused_whatever_its_rank(shape):
    """A state made for params of another shape is never broadcast into the step: refused at trace time."""
    tx = gradtx.adam(0.1)
    p = {"a": jnp.ones((4, 4))}
    state = tx.init({"a": jnp.ones(shape)})
    with pytest.raises(
        ValueError,
        match=r"`adam`: the gradient at \['a'\] has shape \(4, 4\), but the state's ScaleByAdamState",
    ):
        tx.update(p, state, p)


def test_python_numbers_combine_in_double_precision_as_optax_does():
    """RAdam's rho_inf = 2 / (1 - b2) - 1 from Python floats: optax's numbers over 20 steps (issue 22)."""
    rng = np.random.default_rng(0)
    params = jnp.asarray(rng.standard_normal(1), jnp.float32)
    grads = [jnp.asarray(rng.standard_normal(1), jnp.float32) for _ in range(20)]
    for jit in (False, True):
        out = {}
        for name, tx in (("gradtx", gradtx.radam(1e-2)), ("optax", optax.radam(1e-2))):
            p, s = params, tx.init(params)
            step = jax.jit(tx.update) if jit else tx.update
            traj = []
            for g in grads:
                u, s = step(g, s, p)
                p = p + u
                traj.append(p)
            out[name] = np.asarray(traj)
        np.testing.assert_allclose(out["gradtx"], out["optax"], rtol=1e-6, atol=1e-7)


def test_tf_scalars_compute_in_float32_as_tf_does():
    """`tf_scalars=True`: `1 - beta` of a Python 0.9 is float32's 0.100000024 (TF), not double's (optax's)."""
    seen = {}

    def leaf(g, velocity, h):
        seen["one_minus_beta"] = 1 - h.beta
        return g, velocity

    for tf in (False, True):
        tx = gradtx.update_rule(
            "x", _State, leaf, hyper={"beta": 0.9}, slots={"velocity": 0.0}, tf_scalars=tf
        )
        tx.update(jnp.ones(1), tx.init(jnp.zeros(1)))
        want = np.float32(1) - np.float32(0.9) if tf else 1 - 0.9
        assert seen["one_minus_beta"] == want and type(seen["one_minus_beta"]) is type(want)


def test_scalars_take_each_leafs_dtype_once():
    """bf16 leaves get bf16 scalars, f32 leaves f32 ones; a rule may ask for float32 at least."""
    seen = []

    def leaf(g, velocity, h):
        seen.append((g.dtype, jnp.result_type(h.beta)))
        return g, velocity

    params = {"a": jnp.zeros(2, jnp.bfloat16), "b": jnp.zeros(2, jnp.float32)}
    for compute_dtype, want in ((None, jnp.bfloat16), (gradtx._core.scalars.at_least_float32, jnp.float32)):
        seen.clear()
        tx = gradtx.update_rule(
            "x",
            _State,
            leaf,
            hyper={"beta": np.float32(0.9)},
            slots={"velocity": 0.0},
            compute_dtype=compute_dtype,
        )
        tx.update(params, tx.init(params))
        assert dict(seen) == {jnp.dtype(jnp.bfloat16): jnp.dtype(want), jnp.dtype(jnp.float32): jnp.float32}


class _Moments(NamedTuple):
    count: jax.Array
    m: jax.Array
    v: jax.Array


class _CountLast(NamedTuple):
    m: jax.Array
    v: jax.Array
    steps: jax.Array


class _NoCount(NamedTuple):
    trace: jax.Array


def _trajectory(tx, n=5):
    params = {"w": jnp.arange(3.0)}
    state = tx.init(params)
    for _ in range(n):
        updates, state = jax.jit(tx.update)(params, state, params)
    return updates, state


def test_restated_keeps_the_numbers_under_other_field_names():
    from gradtx._core.restated import restated

    plain = gradtx.scale_by_bias_corrected_adam()
    u0, s0 = _trajectory(plain)
    u1, s1 = _trajectory(restated(plain, _Moments, {"mu": "m", "nu": "v"}))
    assert type(s1) is _Moments and int(s1.count) == 5
    chex.assert_trees_all_equal((u0, s0.mu, s0.nu), (u1, s1.m, s1.v))
    u2, s2 = _trajectory(restated(plain, _CountLast, {"count": "steps", "mu": "m", "nu": "v"}))
    assert int(s2.steps) == 5
    chex.assert_trees_all_equal((u0, s0.mu, s0.nu), (u2, s2.m, s2.v))


def test_restated_without_a_count_and_its_refusals():
    from gradtx._core.restated import restated

    u0, s0 = _trajectory(gradtx.trace(0.9))
    u1, s1 = _trajectory(restated(gradtx.trace(0.9), _NoCount, {"momentum": "trace"}))
    assert s1._fields == ("trace",)
    chex.assert_trees_all_equal((u0, s0.momentum), (u1, s1.trace))
    with pytest.raises(TypeError, match="has schedules"):
        restated(gradtx.trace(lambda c: 0.9), _NoCount, {"momentum": "trace"})
    with pytest.raises(TypeError, match="does not correspond"):
        restated(gradtx.trace(0.9), _NoCount, {"velocity": "trace"})
    with pytest.raises(TypeError, match="does not correspond"):
        restated(gradtx.scale_by_bias_corrected_adam(), _Moments, {"mu": "m"})
    with pytest.raises(TypeError, match="was not made by `update_rule`"):
        restated(gradtx.chain(gradtx.trace(0.9)), _NoCount)

"""`gradtx.tree` beside `optax.tree`: every name with optax's signature, the same results bit for bit (f32,
bf16, complex, `None` leaves; eager and jitted), `get` / `set` / `map_params` on optax's, optax_compat's and
gradtx's states as optax's find them, and gradtx's errors of optax's types."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
import gradtx.optax_compat as compat

optax = pytest.importorskip("optax")

OPTAX_NAMES = sorted(
    n for n in dir(optax.tree) if not n.startswith("_") and not inspect.ismodule(getattr(optax.tree, n))
)


def _params(p):
    return [(p.name, p.kind, p.default) for p in p.parameters.values()]


@pytest.mark.parametrize("name", OPTAX_NAMES)
def test_every_optax_tree_name_is_here_with_optax_s_signature(name):
    ours, theirs = getattr(gradtx.tree, name), getattr(optax.tree, name)
    assert _params(inspect.signature(ours)) == _params(inspect.signature(theirs))


def test_the_module_is_optax_compat_s_tree_and_has_only_optax_s_names():
    assert "tree" in compat.__all__ and "tree" in gradtx.__all__
    assert all(getattr(compat.tree, name) is getattr(gradtx.tree, name) for name in gradtx.tree.__all__)
    assert sorted(compat.tree.__all__) == sorted(gradtx.tree.__all__)
    assert sorted(gradtx.tree.__all__) == OPTAX_NAMES


# --------------------------------------------------------------------------- same numbers as optax


def _tree(kind, seed=0):
    """A nested tree with a `None` leaf, of one kind of leaves."""
    rng = np.random.default_rng(seed)

    def leaf(*shape):
        x = rng.standard_normal(shape)
        if kind == "complex":
            return jnp.asarray(x + 1j * rng.standard_normal(shape), jnp.complex64)
        return jnp.asarray(x, {"f32": jnp.float32, "bf16": jnp.bfloat16}[kind])

    return {"a": leaf(5), "b": {"c": leaf(3, 4)}, "none": None, "e": [leaf(5)]}


def _assert_same(ours, theirs):
    """Equal structure, dtypes and values, bit for bit (NaN where NaN)."""
    is_none = lambda x: x is None  # noqa: E731
    assert jax.tree.structure(ours, is_leaf=is_none) == jax.tree.structure(theirs, is_leaf=is_none)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        assert jnp.result_type(a) == jnp.result_type(b) and jnp.shape(a) == jnp.shape(b), (a, b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


REAL, ALL, F32 = ("f32", "bf16"), ("f32", "bf16", "complex"), ("f32",)
CALLS = [  # (name, kinds, call(lib, x, y)): leaf-by-leaf maps in f32, reductions in every dtype
    ("add", F32, lambda t, x, y: t.add(x, y, x)),
    ("sub-mul-div", F32, lambda t, x, y: (t.sub(x, y), t.mul(x, y), t.div(x, y))),
    ("scale", F32, lambda t, x, y: t.scale(0.3, x)),
    ("add_scale", ALL, lambda t, x, y: t.add_scale(x, jnp.asarray(0.3, jnp.float32), y)),
    ("vdot", ALL, lambda t, x, y: t.vdot(x, y)),
    ("sum", ALL, lambda t, x, y: (t.sum(x), t.sum(x, associative_reduction=True))),
    ("max-min", REAL, lambda t, x, y: (t.max(x), t.min(x))),
    ("size", F32, lambda t, x, y: t.size(x)),
    ("conj-real", ("complex",), lambda t, x, y: (t.conj(x), t.real(x))),
    ("clip", F32, lambda t, x, y: (t.clip(x, -0.5, 0.25), t.clip(x, max_value=0.25))),
    ("where", F32, lambda t, x, y: t.where(jnp.asarray(False), x, y)),
    ("allclose", F32, lambda t, x, y: (t.allclose(x, y), t.allclose(x, x), t.allclose(x, y, rtol=10.0))),
    ("batch_shape", F32, lambda t, x, y: t.batch_shape(x, (2, 1))),
    ("zeros-ones-like", F32, lambda t, x, y: (t.zeros_like(x), t.ones_like(x, jnp.bfloat16))),
    ("full_like", F32, lambda t, x, y: (t.full_like(x, 0.7), t.full_like(x, 3, jnp.float16))),
    ("cast", F32, lambda t, x, y: (t.cast(x, jnp.bfloat16), t.cast(x, None))),
    (
        "cast_like",
        F32,
        lambda t, x, y: (t.cast_like(x, t.cast(y, jnp.bfloat16)), t.cast_like(x, {**y, "a": 1.0})),
    ),
    ("dtype", F32, lambda t, x, y: (t.dtype(x), t.dtype({"x": x, "i": jnp.ones(2, jnp.int8)}, "promote"))),
    (
        "dtype-order",
        REAL,
        lambda t, x, y: (t.dtype([x, jnp.ones(1)], "highest"), t.dtype([x, 1.0], "lowest")),
    ),
    ("dtype-empty", F32, lambda t, x, y: t.dtype({"none": None})),
    ("norm-2", ALL, lambda t, x, y: (t.norm(x, 2), t.norm(x, 2, True))),
]
CALLS += [
    (f"norm-{o}-{s}", REAL if o in ("infinity", jnp.inf) else ALL, lambda t, x, y, o=o, s=s: t.norm(x, o, s))
    for o in (None, 1, jnp.inf, "infinity")
    for s in (False, True)
]
CASES = [(name, kind, call) for name, kinds, call in CALLS for kind in kinds]


@pytest.mark.parametrize("name, kind, call", CASES, ids=[f"{n}-{k}" for n, k, _ in CASES])
def test_each_function_gives_optax_s_result(name, kind, call):
    x, y = _tree(kind, 0), _tree(kind, 1)
    _assert_same(call(gradtx.tree, x, y), call(optax.tree, x, y))


def test_python_numbers_empty_leaves_and_empty_trees_reduce_as_in_optax():
    trees = [{"none": None}, {"a": jnp.zeros((0, 3))}, {"a": 2.0, "b": [3, jnp.ones(2)]}]
    for tree in trees:
        for name in ("sum", "max", "min", "size", "norm"):
            _assert_same(getattr(gradtx.tree, name)(tree), getattr(optax.tree, name)(tree))
        _assert_same(gradtx.tree.vdot(tree, tree), optax.tree.vdot(tree, tree))
        _assert_same(gradtx.tree.add_scale(tree, 2.0, tree), optax.tree.add_scale(tree, 2.0, tree))
        _assert_same(gradtx.tree.allclose(tree, tree), optax.tree.allclose(tree, tree))


# --------------------------------------------------------------------------- moments


MOMENT_CALLS = {
    "update_moment-1": lambda t, g, m: t.update_moment(g, m, 0.9, 1),
    "update_moment-2": lambda t, g, m: t.update_moment(g, m, jnp.asarray(0.999), 2),
    "update_moment_per_elem_norm-2": lambda t, g, m: t.update_moment_per_elem_norm(g, m, 0.999, 2),
    "update_moment_per_elem_norm-1": lambda t, g, m: t.update_moment_per_elem_norm(g, m, 0.9, 1),
    "update_moment_per_elem_norm-3.0": lambda t, g, m: t.update_moment_per_elem_norm(g, m, 0.9, 3.0),
    "update_infinity_moment": lambda t, g, m: t.update_infinity_moment(t.real(g), t.real(m), 0.999, 1e-8),
    "bias_correction": lambda t, g, m: t.bias_correction(m, 0.999, jnp.asarray(3)),
}


def _moments(t, g, m):
    """Every moment function of library `t` on updates `g`, moments `m` (real moments where |g|^k is real)."""
    real_m = t.real(m)
    return {
        name: call(t, g, real_m if name.startswith("update_moment_per_elem_norm") else m)
        for name, call in MOMENT_CALLS.items()
    }


@pytest.mark.parametrize("kind", ALL)
def test_moments_are_optax_s_with_none_leaves(kind):
    g, m = _tree(kind, 0), _tree(kind, 1)
    ours = _moments(gradtx.tree, g, m)
    _assert_same(ours, _moments(optax.tree, g, m))
    assert all(tree["none"] is None for name, tree in ours.items() if name != "bias_correction")


def _jitted(t, g, m):
    """The moments and reductions in one jitted step (where XLA fuses products into FMAs by operand order)."""
    return _moments(t, g, m), t.norm(g), t.norm(g, 1, True), t.vdot(g, m), t.sum(m), t.add_scale(g, 0.5, m)


@pytest.mark.parametrize("kind", ALL)
def test_moments_and_reductions_are_optax_s_under_jit_too(kind):
    g, m = _tree(kind, 0), _tree(kind, 1)
    _assert_same(
        jax.jit(lambda g, m: _jitted(gradtx.tree, g, m))(g, m),
        jax.jit(lambda g, m: _jitted(optax.tree, g, m))(g, m),
    )


# --------------------------------------------------------------------------- random


def test_random_trees_and_keys_are_optax_s():
    """(optax's own tests, run by test_optax_tree_suite.py, cover the samplers and dtypes.)"""
    key, target = jax.random.key(3), _tree("f32")
    no_sharding = lambda k, shape, dtype: jax.random.bernoulli(k, 0.5, shape).astype(dtype)  # noqa: E731
    for lib in (gradtx.tree, optax.tree):
        assert lib.split_key_like(key, target)["e"][0].dtype == key.dtype
    _assert_same(
        gradtx.tree.random_like(key, target, no_sharding), optax.tree.random_like(key, target, no_sharding)
    )


# --------------------------------------------------------------------------- errors


def test_value_errors_name_the_function_the_argument_and_what_is_allowed():
    x = {"a": jnp.ones(2), "b": jnp.ones(2, jnp.bfloat16)}
    with pytest.raises(ValueError, match=r"`gradtx.tree.norm`: `ord` must be None, 1, 2 or inf .*got 3"):
        gradtx.tree.norm(x, 3)
    with pytest.raises(
        ValueError, match=r"`gradtx.tree.dtype`: the leaves have several dtypes \(\['a'\]: float32"
    ):
        gradtx.tree.dtype(x)
    with pytest.raises(
        ValueError, match=r"`mixed_dtype_handler` must be one of None, 'promote', .*got 'max'"
    ):
        gradtx.tree.dtype(x, "max")
    with pytest.raises(ValueError, match=r"`gradtx.tree.dtype`: float16 and bfloat16 are not ordered"):
        gradtx.tree.dtype([jnp.ones(1, jnp.float16), jnp.ones(1, jnp.bfloat16)], "highest")
    with pytest.raises(ValueError, match=r"`gradtx.tree.vdot`: two leaves have shapes \(2,\) and \(3,\)"):
        gradtx.tree.vdot({"a": jnp.ones(2)}, {"a": jnp.ones(3)})


def test_vdot_and_norm_run_on_leaves_sharded_over_explicit_axes():
    """`jnp.vdot` flattens (which a leaf sharded over Explicit axes refuses); `vdot` contracts it whole."""
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    x = np.arange(32.0, dtype=np.float32).reshape(8, 4) / 10
    tree = {"w": jax.device_put(x, jax.sharding.NamedSharding(mesh, jax.P("data", "model")))}
    with jax.set_mesh(mesh):
        got = jax.jit(lambda t: (gradtx.tree.vdot(t, t), gradtx.tree.norm(t)))(tree)
    np.testing.assert_allclose(np.asarray(got[0]), np.vdot(x, x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), np.linalg.norm(x), rtol=1e-6)

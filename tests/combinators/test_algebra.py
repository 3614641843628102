"""Properties of the combinator algebra (hypothesis): associativity, identity, masking equivalences."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import gradtx
from tests import helpers

BLOCKS = {
    "momentum": lambda: gradtx.trace(0.9),
    "adam": lambda: gradtx.scale_by_adam(),
    "clip": lambda: gradtx.clip_by_global_norm(1.0),
    "rms": lambda: gradtx.scale_by_rmsprop(0.1, momentum=0.5),
    "scale": lambda: gradtx.scale(-0.3),
    "clip_value": lambda: gradtx.clip(0.7),
}
names = st.sampled_from(sorted(BLOCKS))
PARAMS = {"a": jnp.arange(4.0).reshape(2, 2), "b": jnp.ones(3)}


def _grads(seed, n=3):
    rng = np.random.default_rng(seed)
    return [
        jax.tree.map(lambda p: jnp.asarray(rng.standard_normal(p.shape), jnp.float32), PARAMS)
        for _ in range(n)
    ]


def _run(tx, seed):
    return helpers.run(tx, PARAMS, _grads(seed), jit=False)[0]


@settings(max_examples=15, deadline=None)
@given(a=names, b=names, c=names, seed=st.integers(0, 2**16))
def test_chain_is_associative(a, b, c, seed):
    left = gradtx.chain(gradtx.chain(BLOCKS[a](), BLOCKS[b]()), BLOCKS[c]())
    right = gradtx.chain(BLOCKS[a](), gradtx.chain(BLOCKS[b](), BLOCKS[c]()))
    flat = gradtx.chain(BLOCKS[a](), BLOCKS[b](), BLOCKS[c]())
    helpers.assert_trees_close(_run(left, seed), _run(flat, seed), rtol=0, atol=0)
    helpers.assert_trees_close(_run(right, seed), _run(flat, seed), rtol=0, atol=0)


@settings(max_examples=15, deadline=None)
@given(a=names, seed=st.integers(0, 2**16))
def test_identity_is_neutral(a, seed):
    plain = _run(BLOCKS[a](), seed)
    for tx in (
        gradtx.chain(gradtx.identity(), BLOCKS[a]()),
        gradtx.chain(BLOCKS[a](), gradtx.identity()),
        gradtx.chain(BLOCKS[a]()),
    ):
        helpers.assert_trees_close(_run(tx, seed), plain, rtol=0, atol=0)


@settings(max_examples=15, deadline=None)
@given(a=names, seed=st.integers(0, 2**16), mask_a=st.booleans(), mask_b=st.booleans())
def test_masked_with_a_full_mask_is_the_inner_and_with_an_empty_mask_the_identity(a, seed, mask_a, mask_b):
    mask = {"a": mask_a, "b": mask_b}
    masked = _run(gradtx.masked(BLOCKS[a](), mask), seed)
    inner = _run(BLOCKS[a](), seed)
    ident = _run(gradtx.identity(), seed)
    for k, on in mask.items():
        if a != "clip" or (mask_a and mask_b):  # a global norm depends on which leaves it sees
            helpers.assert_trees_close(masked[-1][k], (inner if on else ident)[-1][k], rtol=0, atol=0)
        elif not on:
            helpers.assert_trees_close(masked[-1][k], ident[-1][k], rtol=0, atol=0)


@settings(max_examples=15, deadline=None)
@given(a=names, b=names, seed=st.integers(0, 2**16))
def test_partition_into_one_group_is_the_transform(a, b, seed):
    one = gradtx.partition({"all": BLOCKS[a]()}, lambda p: jax.tree.map(lambda _: "all", p))
    helpers.assert_trees_close(_run(one, seed), _run(BLOCKS[a](), seed), rtol=0, atol=0)
    two = gradtx.partition({"x": BLOCKS[a](), "y": BLOCKS[b]()}, {"a": "x", "b": "y"})
    split = _run(two, seed)
    helpers.assert_trees_close(
        split[-1]["a"],
        _run(gradtx.masked(BLOCKS[a](), {"a": True, "b": False}), seed)[-1]["a"],
        rtol=0,
        atol=0,
    )
    helpers.assert_trees_close(
        split[-1]["b"],
        _run(gradtx.masked(BLOCKS[b](), {"a": False, "b": True}), seed)[-1]["b"],
        rtol=0,
        atol=0,
    )

"""What the tests of gradtx.losses share: random inputs, and the comparison with optax's own loss."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def normal(seed: int, shape: tuple[int, ...], dtype: Any = jnp.float32, scale: float = 1.0) -> jax.Array:
    """Standard normal values (times `scale`) of `shape`, from NumPy's generator `seed`, as `dtype`."""
    return jnp.asarray(scale * np.random.default_rng(seed).standard_normal(shape), dtype)


def uniform(seed: int, shape: tuple[int, ...], low: float = 0.0, high: float = 1.0) -> jax.Array:
    """Uniform float32 values in [low, high) of `shape`."""
    return jnp.asarray(np.random.default_rng(seed).uniform(low, high, shape), jnp.float32)


def integers(seed: int, shape: tuple[int, ...], high: int) -> jax.Array:
    """int32 values in [0, high) of `shape`."""
    return jnp.asarray(np.random.default_rng(seed).integers(0, high, shape), jnp.int32)


def simplex(seed: int, shape: tuple[int, ...]) -> jax.Array:
    """Probability distributions along the last axis (some entries 0)."""
    p = np.random.default_rng(seed).uniform(0.0, 1.0, shape)
    p[p < 0.2] = 0.0
    p[..., 0] += 0.1
    return jnp.asarray(p / p.sum(-1, keepdims=True), jnp.float32)


def mask(seed: int, shape: tuple[int, ...], p: float = 0.7) -> jax.Array:
    """A bool mask, True with probability `p`."""
    return jnp.asarray(np.random.default_rng(seed).uniform(size=shape) < p)


def assert_equal(got: Any, want: Any) -> None:
    """Trees of arrays alike in structure, shape and dtype, and equal bit for bit (NaN to NaN)."""
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert jnp.shape(g) == jnp.shape(w), (jnp.shape(g), jnp.shape(w))
        assert jnp.result_type(g) == jnp.result_type(w), (jnp.result_type(g), jnp.result_type(w))
        np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))  # bf16 exactly


class Case(NamedTuple):
    """The arguments of one call: `args` (their arrays traced under jit) and `kwargs` (closed over)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def case(*args: Any, **kwargs: Any) -> Case:
    """The call `fn(*args, **kwargs)`."""
    return Case(args, kwargs)


def _summed(fn: Any, kwargs: dict[str, Any]) -> Any:
    """`fn` with `kwargs`, its outputs summed into one scalar (to differentiate)."""
    return lambda *args: sum(jnp.sum(y) for y in jax.tree.leaves(fn(*args, **kwargs)))


def assert_same(
    ours: Any,
    theirs: Any,
    *cases: Case,
    grad: tuple[int, ...] = (),
    eager: bool = True,
) -> list[Any]:
    """`ours` equals `theirs` on every case under `jax.jit`, and (with `eager`) eagerly on the first.

    The jitted calls of all cases, and the gradients of the summed outputs with respect to the
    first argument of the cases numbered in `grad`, run in one compiled program (compiling is most
    of the time). Returns our jitted values (and gradients), in that order.
    """
    if eager:
        first = cases[0]
        assert_equal(ours(*first.args, **first.kwargs), theirs(*first.args, **first.kwargs))

    def run(fn: Any, all_args: Any) -> Any:
        out = []
        for i, (c, args) in enumerate(zip(cases, all_args, strict=True)):
            out.append(fn(*args, **c.kwargs))
            if i in grad:
                out.append(jax.grad(_summed(fn, c.kwargs))(*args))
        return out

    all_args = [c.args for c in cases]
    got, want = jax.jit(lambda a: (run(ours, a), run(theirs, a)))(all_args)
    assert_equal(got, want)
    return got

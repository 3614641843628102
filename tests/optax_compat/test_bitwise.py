"""gradtx.optax_compat's optimizers against optax's, bit for bit: five jitted steps on one multi-leaf tree.

Every optimizer-like name of optax (top level and `optax.contrib`) that optax_compat has, found from optax's
namespace: a name whose factory takes a `learning_rate`, plus the optimizers that take none (`EXTRA`). Each
is built with a learning rate and optax's defaults, or with `ARGS` where it needs more; one `jax.jit` of
the bare step (update, then apply) runs five times on the same random float32 tree of a matrix, a vector
and a 4-D leaf, with fixed random gradients (or, for the rules that read the objective, `value`, `grad` or
`obj_fn`, the gradients of a fixed quadratic). The params after every step must equal optax's bit for bit,
except for the names in `NOT_BITWISE`, which say why and are held to a tolerance instead.

XLA's fused multiply-add keeps one product of a sum unrounded, which one depends on the operand order, so
the optax-origin rules write optax's order (`_formulas.optax_moment`). The names are optax's bits both with
the suite's fast-compile flags (tests/conftest.py) and with XLA's defaults (`GRADTX_TEST_XLA_DEFAULT=1`),
but for the exceptions `NOT_BITWISE` states for the defaults alone.
"""

from __future__ import annotations

import inspect
import os
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx.optax_compat as compat

optax = pytest.importorskip("optax")

LR = 1e-2
STEPS = 5


def _tree(key: jax.Array, batch: tuple[int, ...] = ()) -> dict[str, jax.Array]:
    kw, kb, kk = jax.random.split(key, 3)
    return {
        "w": jax.random.normal(kw, (*batch, 8, 6)),
        "b": jax.random.normal(kb, (*batch, 6)),
        "k": jax.random.normal(kk, (*batch, 2, 3, 4, 5)),
    }


PARAMS = _tree(jax.random.key(0))
GRADS = [_tree(jax.random.key(1 + i)) for i in range(STEPS)]
PER_EXAMPLE_GRADS = [_tree(jax.random.key(10 + i), batch=(4,)) for i in range(STEPS)]
_CURVATURE = jax.tree.map(lambda x: 1 + jnp.abs(x), _tree(jax.random.key(20)))
_TARGET = _tree(jax.random.key(21))


def objective(params: Any) -> jax.Array:
    """A fixed quadratic, `sum(a (p - t)^2) / 2`, for the rules that read the loss or its gradients."""
    terms = jax.tree.map(lambda p, a, t: jnp.sum(a * (p - t) ** 2) / 2, params, _CURVATURE, _TARGET)
    return sum(jax.tree.leaves(terms))


class Case(NamedTuple):
    """How to build and step one name: its arguments (given the library: optax or optax_compat, for the
    ones that take an optimizer), the extra arguments its update reads (from `objective`), and whether its
    gradients are per example."""

    args: Callable[[Any], dict[str, Any]] = lambda lib: {"learning_rate": LR}
    extra: tuple[str, ...] = ()
    per_example: bool = False


ARGS: dict[str, Case] = {
    "lbfgs": Case(extra=("value", "grad", "value_fn")),  # its zoom line search evaluates the objective
    "polyak_sgd": Case(lambda lib: {}, extra=("value",)),
    "noisy_sgd": Case(lambda lib: {"learning_rate": LR, "eta": 0.0}),  # its draws are gradtx's, not optax's
    "contrib.momo": Case(extra=("value",)),
    "contrib.momo_adam": Case(extra=("value",)),
    "contrib.sophia": Case(extra=("obj_fn",)),
    "contrib.reduce_on_plateau": Case(lambda lib: {"patience": 1, "cooldown": 1}, extra=("value",)),
    "contrib.dpsgd": Case(
        lambda lib: {"learning_rate": LR, "l2_norm_clip": 1.0, "noise_multiplier": 0.1, "seed": 0},
        per_example=True,
    ),
    "contrib.schedule_free": Case(lambda lib: {"base_optimizer": lib.adam(LR, b1=0.0), "learning_rate": LR}),
    "contrib.mechanize": Case(lambda lib: {"base_optimizer": lib.adam(LR)}),
    "contrib.sam": Case(lambda lib: {"optimizer": lib.sgd(LR), "adv_optimizer": lib.sgd(LR)}),
}
"""The names that need more than a learning rate (or another one), or extra arguments in `update`."""

EXTRA = ("polyak_sgd", "contrib.mechanize", "contrib.reduce_on_plateau", "contrib.sam")
"""Optimizers without a `learning_rate` argument: optax's Polyak step, and contrib's wrappers."""

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "sgd-nesterov": ("sgd", {"momentum": 0.9, "nesterov": True}),
    "rmsprop-centered-momentum": ("rmsprop", {"centered": True, "momentum": 0.9}),
    "adafactor-factored": ("adafactor", {"min_dim_size_to_factor": 4}),
}
"""Other settings of some names, which take other formulas of their rules."""


class NotBitwise(NamedTuple):
    """Why a name's params are not optax's bit for bit, and what it is held to instead."""

    why: str
    max_ulps: int | None  # the params' tolerance; None: they differ by design, the state is compared instead
    xla_defaults_only: bool = False  # bit for bit under the suite's fast-compile flags (asserted there)


_RPROP = (
    "a deliberate difference: gradtx's update is this step's, the one the state stores, where optax 0.2.8 "
    "returns the previous step's, so the params differ by a whole step (sign and size; ~2e9 ulp); the "
    "state (step sizes and the stored updates) equals optax's bit for bit"
)
NOT_BITWISE: dict[str, NotBitwise] = {
    "rprop": NotBitwise(_RPROP, None),
    "scale_by_rprop": NotBitwise(_RPROP, None),
    "contrib.sam": NotBitwise(
        "1 ulp at every step under XLA's default flags (measured; equal under the suite's flags): optax "
        "picks the adversarial or the outer update by arithmetic, `c * a + (1 - c) * b`, gradtx by `where`, "
        "so that a NaN in the branch not taken stays out; XLA contracts the step's multiply-add differently "
        "across the two (a fusion choice, not an operand order)",
        4,
        xla_defaults_only=True,
    ),
}
"""The names whose params are not optax's bit for bit."""
XLA_DEFAULTS = bool(os.environ.get("GRADTX_TEST_XLA_DEFAULT"))
"""Whether this process compiles with XLA's default flags (tests/conftest.py), not the suite's fast ones."""


def _get(root: Any, name: str) -> Any:
    for part in name.split("."):
        root = getattr(root, part)
    return root


def _optimizer_names() -> list[str]:
    """optax's names (and `optax.contrib`'s) whose factory takes a `learning_rate`, that optax_compat has."""
    names = []
    for prefix, module in (("", optax), ("contrib.", optax.contrib)):
        for name in sorted(dir(module)):
            obj = getattr(module, name)
            if name.startswith("_") or inspect.isclass(obj) or not callable(obj):
                continue
            try:
                parameters = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            full = prefix + name
            if "learning_rate" in parameters and _has(full):
                names.append(full)
    return names


def _has(name: str) -> bool:
    try:
        _get(compat, name)
    except AttributeError:
        return False
    return True


NAMES = _optimizer_names()
CASES = {**{name: (name, {}) for name in (*NAMES, *EXTRA)}, **VARIANTS}


def _build(lib: Any, name: str, overrides: dict[str, Any]) -> Any:
    case = ARGS.get(name, Case())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optax's deprecations (optimistic_adam, dpsgd's seed)
        return _get(lib, name)(**{**case.args(lib), **overrides})


def _run(lib: Any, name: str, overrides: dict[str, Any]) -> list[tuple[Any, Any]]:
    """`(params, state)` after each of the five steps of one jitted step function."""
    tx, case = _build(lib, name, overrides), ARGS.get(name, Case())

    @jax.jit
    def step(params, state, grads):
        extra = {}
        if case.extra:
            value, grad = jax.value_and_grad(objective)(params)
            extra = {"value": value, "grad": grad, "value_fn": objective, "obj_fn": objective}
            grads = grad if {"value", "grad"} & set(case.extra) else grads  # a loss and its own gradients
        updates, state = tx.update(grads, state, params, **{k: extra[k] for k in case.extra})
        return lib.apply_updates(params, updates), state

    params, state, out = PARAMS, tx.init(PARAMS), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for grads in PER_EXAMPLE_GRADS if case.per_example else GRADS:
            params, state = step(params, state, grads)
            out.append((params, state))
    return out


def ulps(a: Any, b: Any) -> int:
    """The largest difference of two float32 arrays in units in the last place (0 where they are equal)."""
    a, b = (np.asarray(x, np.float32).view(np.int32).astype(np.int64) for x in (a, b))
    a, b = (np.where(x < 0, -(x & 0x7FFFFFFF), x) for x in (a, b))
    return int(np.max(np.abs(a - b), initial=0))


def test_the_names_are_found():
    assert {"adam", "sgd", "lbfgs", "contrib.muon", "contrib.schedule_free_adamw"} <= set(NAMES)
    assert len(NAMES) >= 45, NAMES
    assert set(ARGS) <= set(CASES) and set(NOT_BITWISE) <= set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bit_for_bit(case):
    name, overrides = CASES[case]
    ours, theirs = _run(compat, name, overrides), _run(optax, name, overrides)
    exception = NOT_BITWISE.get(case)
    if exception is not None and exception.xla_defaults_only and not XLA_DEFAULTS:
        exception = None
    for step, ((p, s), (p_ref, s_ref)) in enumerate(zip(ours, theirs, strict=True), 1):
        for key in p_ref:
            diff = ulps(p[key], p_ref[key])
            msg = f"{case}, step {step}, leaf {key!r}: {diff} ulp"
            if exception is None:
                np.testing.assert_array_equal(p[key], p_ref[key], err_msg=msg)
            elif exception.max_ulps is not None:
                assert diff <= exception.max_ulps, msg
        if exception is not None and exception.max_ulps is None:
            for x, y in zip(jax.tree.leaves(s), jax.tree.leaves(s_ref), strict=True):
                np.testing.assert_array_equal(x, y, err_msg=f"{case}, step {step}: the state")


@pytest.mark.parametrize("jitted", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize(
    "name, args",
    [
        ("scale_by_factored_rms", {"min_dim_size_to_factor": 4}),
        ("clip_by_block_rms", {"threshold": 0.5}),
        ("scale_by_param_block_rms", {}),
        ("adafactor", {"learning_rate": LR, "min_dim_size_to_factor": 4}),
    ],
)
def test_adafactor_bit_for_bit_in_every_float_dtype_jitted_and_eager(name, args, dtype, jitted):
    """Adafactor's statistics and block RMS are optax's bits, jitted and eagerly, in every float dtype.

    In a 16-bit float leaf: optax's float32 decay rate (the statistics blended in float32, stored in the
    leaf's dtype) and its means in the leaf's dtype (summed in float32); an array of the rate in the leaf's
    dtype, or an RMS kept in float32, gave other bits. Eagerly: the means are `jnp.mean`'s own programs (a
    sum and a division of their own differed by an ulp in float32)."""
    cast = lambda tree: jax.tree.map(lambda x: x.astype(dtype), tree)  # noqa: E731
    params, runs = cast(PARAMS), []
    for lib in (compat, optax):
        tx = getattr(lib, name)(**args)
        step = jax.jit(tx.update) if jitted else tx.update
        state, out = tx.init(params), []
        for g in GRADS:
            u, state = step(cast(g), state, params)
            out.append((u, state))
        runs.append(out)
    for (u, s), (u_ref, s_ref) in zip(*runs, strict=True):
        for x, y in zip(jax.tree.leaves((u, s)), jax.tree.leaves((u_ref, s_ref)), strict=True):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(np.asarray(x, np.float32), np.asarray(y, np.float32))

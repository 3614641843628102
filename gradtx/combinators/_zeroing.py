"""Updates set to zero, in whole or in part: `set_to_zero`, `zero_nans`, `keep_params_nonnegative`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core import walk as _walk


def _zeros(g: Any) -> Any:
    """A zero update shaped like `g` (a row-sparse one keeps its indices)."""
    return _walk.with_values(g, jnp.zeros_like(_walk.values_of(g)))


@_registry.transform()
def set_to_zero() -> _protocol.GradientTransformation:
    """Replace every update by zeros, so the parameters stay as they are (`optax.set_to_zero`).

    Put it in a `partition` or `masked` branch to freeze a group of parameters; inside one
    jitted step XLA drops the work whose result it zeroes.

    Returns:
      An `ElementWise` transform with state `EmptyState()`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.partition({"train": gradtx.sgd(0.1), "fixed": gradtx.set_to_zero()},
        ...                       {"w": "train", "b": "fixed"})
        >>> params = {"w": jnp.ones(2), "b": jnp.ones(2)}
        >>> out, _ = tx.update(params, tx.init(params), params)
        >>> out["w"], out["b"]
        (Array([-0.1, -0.1], dtype=float32), Array([0., 0.], dtype=float32))
    """

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        return _walk.map_updates("set_to_zero", _zeros, updates), state

    return _protocol.ElementWise(init_fn, update_fn)


class ZeroNansState(NamedTuple):
    """State of `zero_nans`."""

    found_nan: Any  # per parameter (per buffer on packed params): a bool, True if the last update had a NaN


@_registry.transform()
def zero_nans() -> _protocol.GradientTransformation:
    r"""Replace NaN entries of the updates by 0, and record where NaNs were found (`optax.zero_nans`).

    .. math:: u \leftarrow \begin{cases} 0 & u \text{ is NaN} \\ u & \text{otherwise} \end{cases}

    Infinities are kept (use `apply_if_finite` to skip a whole step). The state's
    `found_nan` holds one bool per parameter, True where the last update had a NaN; it is
    for inspection and is never read by the rule. On packed parameters (`gradtx.packing`)
    it holds one bool per buffer. A row-sparse update is cleaned in its values.

    Returns:
      An `ElementWise` transform with state `ZeroNansState(found_nan)`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.zero_nans()
        >>> g = {"a": jnp.array([1.0, jnp.nan]), "b": jnp.array([jnp.inf])}
        >>> out, state = tx.update(g, tx.init(g))
        >>> out["a"], out["b"], bool(state.found_nan["a"]), bool(state.found_nan["b"])
        (Array([1., 0.], dtype=float32), Array([inf], dtype=float32), True, False)
    """

    def init_fn(params):
        return ZeroNansState(jax.tree.map(lambda p: jnp.zeros([], bool), params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args

        def leaf(g, found):
            del found
            v = _walk.values_of(g)
            nan = jnp.isnan(v)
            return _walk.with_values(g, jnp.where(nan, jnp.zeros_like(v), v)), jnp.any(nan)

        out, found = _walk.split_map(
            "zero_nans", leaf, 2, updates, state.found_nan, names=("updates", "state.found_nan")
        )
        return out, ZeroNansState(_sliced.total(found, "any"))  # one reduction for all flags (`_sliced`)

    return _protocol.ElementWise(init_fn, update_fn)


@_registry.transform()
@_factory.real_only("complex numbers are not ordered")
def keep_params_nonnegative() -> _protocol.GradientTransformation:
    r"""Change the updates so that no parameter becomes negative (`optax.keep_params_nonnegative`).

    .. math:: u \leftarrow \begin{cases} -w & w + u < 0 \\ u & \text{otherwise} \end{cases}

    A parameter the update would take below zero is set to exactly zero instead; a
    parameter that is already negative is moved to zero. Put it last in a chain (after the
    learning rate), where the updates are the final ones. A row-sparse update is densified
    first (its duplicate rows are summed before the bound applies). An update of -inf sets
    the parameter to 0, +inf and NaN reach it; wrap in `apply_if_finite` to skip such steps.

    Returns:
      An `ElementWise` transform with state `EmptyState()`.

    Raises:
      ValueError: at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.chain(gradtx.sgd(1.0), gradtx.keep_params_nonnegative())
        >>> params = jnp.array([0.5, 2.0])
        >>> u, _ = tx.update(jnp.array([1.0, 1.0]), tx.init(params), params)
        >>> gradtx.apply_updates(params, u)
        Array([0., 1.], dtype=float32)
    """
    fn = "keep_params_nonnegative"

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise _protocol.missing_params(fn)

        def leaf(u, p):
            p = p.astype(u.dtype)
            return jnp.where(p + u < 0, -p, u)

        out = _walk.map_updates(fn, leaf, sparse.densify(updates), params, names=("updates", "params"))
        return out, state

    return _protocol.ElementWise(init_fn, update_fn)

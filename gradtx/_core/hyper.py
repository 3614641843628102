"""Hyperparameters at a step (a schedule called with the count) and the step count itself."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import scalars as _scalars
from gradtx._core import scheduled as _scheduled
from gradtx._core.walk import is_row_sparse, values_of


def resolve(value: _protocol.ScalarOrSchedule, count: jax.Array, name: str | None = None) -> Any:
    """The value of a hyperparameter at step `count`: schedules are called, scalars returned as is.

    Inside step t a schedule sees `count = t - 1`, which is TF's `global_step` before its
    increment. A schedule's value is checked against the range of the argument it was given as
    (`name`, when the caller knows it): out of range, it raises where it is known at trace time,
    else the step's updates are NaN (`gradtx._core.scheduled`).
    """
    if not _checks.is_schedule(value):
        return value
    return _scheduled.check(value, value(count), count, name)


def any_schedule(*values: Any) -> bool:
    """True when any of the hyperparameters is a schedule (so its transform needs a `count`)."""
    return any(_checks.is_schedule(v) for v in values)


def scalar(value: Any, tree: Any = None) -> jax.Array:
    """A hyperparameter as a float scalar of the variables' dtype: float64 when `tree` holds a float64 leaf,
    else float32 (TF keeps its scalars in the variables' dtype, with or without x64).

    For the scalar arithmetic a combinator does once per step, before `like` casts it to each
    leaf's dtype (building blocks leave this to `gradtx.update_rule`).
    """
    leaves = jax.tree.leaves(tree, is_leaf=is_row_sparse)
    wide = any(getattr(values_of(x), "dtype", None) == jnp.float64 for x in leaves)
    return jnp.asarray(value, jax.dtypes.canonicalize_dtype(jnp.float64) if wide else jnp.float32)


def like(value: Any, x: jax.Array) -> Any:
    """A resolved scalar hyperparameter for array `x`, by `gradtx.update_rule`'s dtype policy (`_scalars`): a
    Python number as it is (it takes `x`'s dtype where it meets it), an array cast to `x`'s dtype (so bf16
    leaves stay bf16)."""
    return _scalars.cast(value, x.dtype)


def zero_count() -> jax.Array:
    """The initial `count`: no update completed yet."""
    return jnp.zeros([], jnp.int32)


def increment(count: jax.Array) -> jax.Array:
    """`count + 1`, saturating at its integer type's maximum instead of wrapping to negative.

    An int32 or int64 array keeps its dtype (a TF1 global step may be int64); anything else
    becomes int32.
    """
    dtype = count.dtype if hasattr(count, "dtype") and jnp.issubdtype(count.dtype, jnp.integer) else jnp.int32
    count = jnp.asarray(count, dtype)
    top = np.asarray(jnp.iinfo(dtype).max, dtype)  # typed (uint32's, uint64's maxima overflow a weak int);
    # a NumPy constant, not a device array: a committed one would commit the new count and miss jit's cache
    return count + (count < top).astype(dtype)  # no nested jit (jnp.where) per count

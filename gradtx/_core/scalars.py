"""The dtype policy of a step's scalars (`gradtx.update_rule`): how hyperparameters meet a leaf.

A hyperparameter given as a Python number stays one: it combines with other Python numbers
in double precision (as optax's do) and takes a leaf's dtype where it meets an array. An
array (a jax or NumPy scalar, a schedule's value, an injected hyperparameter) is cast once
to each leaf's dtype. TF's rules convert every hyperparameter to the variables' float dtype
first (TF's `_prepare`), then to the leaf's. A scalar known at trace time is a NumPy scalar
(float32 / float64), so the arithmetic a formula does on it (`1 - beta`) runs once in NumPy
and adds nothing to the traced step.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def is_python_number(x: Any) -> bool:
    """A Python int or float (a NumPy float64 too, its subclass), not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def static(x: Any) -> Any:
    """A hyperparameter given as a value: a Python number stays one (a NumPy float64 becomes a float); a
    concrete array becomes a NumPy scalar of its dtype; a traced one (`inject_hyperparams`) stays traced."""
    if is_python_number(x):
        return x if isinstance(x, int) else float(x)
    if isinstance(x, (jax.Array, np.ndarray, np.generic)) and not isinstance(x, jax.core.Tracer):
        return np.asarray(x)[()]
    return x


def as_scalar(x: Any, dtype: Any) -> Any:
    """`x` as a scalar of `dtype`: a NumPy scalar when it is known at trace time, so that the arithmetic a
    formula does on it (`1 - beta`) runs once in NumPy, in `dtype`, and adds nothing to the traced step.

    NumPy's float32 and float64 scalars compute in their own dtype; a bfloat16 or float16 one
    is a jax array instead (NumPy would widen `1.0 + bfloat16(x)` to float32, where TF and jax
    round each operation to the leaf's dtype).
    """
    if isinstance(x, jax.core.Tracer):
        return x.astype(dtype)
    if jnp.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        return jnp.asarray(x, dtype)
    with np.errstate(all="ignore"):  # a finite double beyond float32's range becomes inf, as in TF
        return np.asarray(x, dtype)[()]


def cast(x: Any, dtype: Any) -> Any:
    """`x` (a resolved scalar) for a leaf of `dtype`: Python numbers as they are, arrays cast once."""
    if is_python_number(x) or x is None or isinstance(x, bool):
        return x
    if not isinstance(x, (jax.Array, np.ndarray, np.generic)):
        x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return x  # ints (a step), bools (flags): as they are
    if x.dtype == dtype:
        return x
    return as_scalar(x, dtype) if x.shape == () else x.astype(dtype)


def real(dtype: Any) -> Any:
    """The real dtype of a complex one (a leaf's scalars are real); any other dtype as it is."""
    return jnp.finfo(dtype).dtype if jnp.issubdtype(dtype, jnp.complexfloating) else dtype


def at_least_float32(dtype: Any) -> Any:
    """`compute_dtype` of rules that compute in float32 at least (float64 leaves stay float64)."""
    return jax.dtypes.canonicalize_dtype(jnp.promote_types(real(dtype), jnp.float32))


def variables_dtype(leaves: Any) -> Any:
    """float64 when a leaf is float64 (x64), else float32: TF's scalars follow the variables' dtype."""
    for x in leaves:
        values = getattr(x, "values", x) if getattr(type(x), "_gradtx_row_sparse", False) else x
        if values is not None and getattr(values, "dtype", None) == jnp.float64:
            return jax.dtypes.canonicalize_dtype(jnp.float64)
    return jnp.dtype(jnp.float32)

"""AdamGS (tf.contrib's `AdamGSOptimizer`): Adam whose bias corrections follow TF's global step."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._algorithms.adam import _adam_family, _doc, _tf1_leaf, _tf1_rows
from gradtx._algorithms.lazy_adam import _lazy_sparse
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._scale import scale_by_learning_rate


def _powers_from_global_step(fn, h, state, extra):
    """AdamGS: `beta_power = pow(beta, float(global_step + 1))` from the extra argument `global_step`."""
    global_step = extra.get("global_step")
    if global_step is None:
        raise _protocol.missing_extra_arg(fn, "global_step", "step")
    dtype = state.beta1_power.dtype
    if isinstance(global_step, (int, np.integer)) and not isinstance(global_step, bool):
        if global_step < 0:
            raise ValueError(f"`{fn}`: `global_step` must be a scalar >= 0, got {global_step!r}.")
        # TF's int64 step, of any size: cast(global_step + 1, float), the sum exact in Python
        t = jnp.asarray(float(int(global_step) + 1), dtype)
    else:
        step = jnp.asarray(global_step)
        if not isinstance(step, jax.core.Tracer) and (step.ndim or not step >= 0):
            raise ValueError(f"`{fn}`: `global_step` must be a scalar >= 0, got {global_step!r}.")
        # cast(global_step + 1, float), added in float so that int32's 2**31 - 1 does not wrap to
        # -2**31; a traced negative step (no error possible) counts as 0.
        t = jnp.maximum(step.astype(dtype), 0) + 1
    b1p, b2p = jnp.power(h.b1, t), jnp.power(h.b2, t)
    return {"c": jnp.sqrt(1 - b2p) / (1 - b1p), "beta1_power": b1p * h.b1, "beta2_power": b2p * h.b2}


@_registry.transform()
@_doc
def scale_by_adam_gs(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""`scale_by_adam` with the bias correction from TF's global step (contrib's AdamGS).

    .. math:: \beta^t = \operatorname{pow}(\beta, \text{global\_step} + 1)

    replaces the running products: call `update(..., global_step=step)` with TF's global
    step as read during the step (`t - 1`). The state keeps `beta1_power` / `beta2_power`
    (TF's slots of the same names) but the step does not read them. The step is converted
    to float before the `+ 1` (an int32 `2**31 - 1` does not wrap); a negative one is
    refused when known, and counts as 0 when traced.

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState`.

    Raises:
      {RAISES}
      MissingExtraArgError: (when traced) if `update` gets no `global_step`.
      ValueError: (at update time) for a known `global_step` < 0 or not a scalar.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adam_gs()
        >>> u, _ = tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)), global_step=0)
        >>> round(float(u[0]), 4)
        1.0

    References:
      TensorFlow, `tf.contrib.opt.AdamGSOptimizer` (adam_gs_optimizer.py).
    """
    fn = "scale_by_adam_gs"
    powers = functools.partial(_powers_from_global_step, _checks.api_name(fn))
    return _adam_family(fn, b1, b2, eps, mu_dtype, _tf1_leaf, _tf1_rows, powers, nu_dtype)


@_registry.transform()
@_doc
def scale_by_lazy_adam_gs(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""`scale_by_lazy_adam` with AdamGS's bias correction (contrib's LazyAdamGS).

    .. math:: \beta^t = \operatorname{pow}(\beta, \text{global\_step} + 1)

    with the leaf rule of `scale_by_lazy_adam`: call `update(..., global_step=step)`.

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState`.

    Raises:
      {RAISES}
      MissingExtraArgError: (when traced) if `update` gets no `global_step`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_lazy_adam_gs()
        >>> round(float(tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)), global_step=0)[0][0]), 4)
        1.0

    References:
      TensorFlow, `tf.contrib.opt.LazyAdamGSOptimizer` (lazy_adam_gs_optimizer.py).
    """
    fn = "scale_by_lazy_adam_gs"
    powers = functools.partial(_powers_from_global_step, _checks.api_name(fn))
    return _adam_family(fn, b1, b2, eps, mu_dtype, _tf1_leaf, _lazy_sparse, powers, nu_dtype)


@_registry.optimizer("AdamGS")
@_doc
def adam_gs(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdamGS: `tf.contrib.opt.AdamGSOptimizer`, Adam whose bias correction comes from the global step.

    Call `update(..., global_step=step)` with TF's global step as read during the step
    (`t - 1`): `beta_power = pow(beta, float(global_step + 1))`. This is
    `chain(scale_by_adam_gs(b1, b2, eps), scale_by_learning_rate(learning_rate))`;
    row-sparse gradients behave as TF1 Adam (all rows move).

    Args:
      {ADAM_ARGS}
      {MU_DTYPE}

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.
      MissingExtraArgError: (when traced) if `update` gets no `global_step`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adam_gs(0.1)
        >>> u, _ = tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)), global_step=0)
        >>> round(float(u[0]), 4)
        -0.1
    """
    return chain(
        scale_by_adam_gs(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


@_registry.optimizer("LazyAdamGS")
@_doc
def lazy_adam_gs(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""LazyAdamGS: `tf.contrib.opt.LazyAdamGSOptimizer`: `lazy_adam` with AdamGS's bias correction.

    Call `update(..., global_step=step)` (TF's global step during the step, `t - 1`). This is
    `chain(scale_by_lazy_adam_gs(b1, b2, eps), scale_by_learning_rate(learning_rate))`.

    Args:
      {ADAM_ARGS}
      {MU_DTYPE}

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.
      MissingExtraArgError: (when traced) if `update` gets no `global_step`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.lazy_adam_gs(0.1)
        >>> round(float(tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)), global_step=0)[0][0]), 4)
        -0.1
    """
    return chain(
        scale_by_lazy_adam_gs(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["adam_gs", "lazy_adam_gs", "scale_by_adam_gs", "scale_by_lazy_adam_gs"]

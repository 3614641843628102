"""The Adam variants of tf.contrib.opt (AdaMax, AdamGS, LazyAdam, LazyAdamGS, Nadam, AdamW), as chains."""

from __future__ import annotations

from typing import Any

from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import chain, decoupled_weight_decay
from gradtx.transforms import (
    scale_by_adam,
    scale_by_adam_gs,
    scale_by_adamax,
    scale_by_lazy_adam,
    scale_by_lazy_adam_gs,
    scale_by_learning_rate,
    scale_by_nesterov_adam,
)

_ADAM_ARGS = """learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: epsilon-hat, >= 0."""

_MU_DTYPE = """mu_dtype: dtype of the first moment `m` (default: each param's dtype; see `scale_by_adam`).
      nu_dtype: dtype of the second moment `v` (default: each param's dtype)."""


def _doc(fn):
    fn.__doc__ = fn.__doc__.replace("{ADAM_ARGS}", _ADAM_ARGS).replace("{MU_DTYPE}", _MU_DTYPE)
    return fn


@_doc
@_factory.api
def adamax(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
) -> _protocol.GradientTransformation:
    r"""AdaMax: contrib's `AdaMaxOptimizer` (`ApplyAdaMax`), not `optax.adamax` (`optax_compat.adamax`).

    `var -= lr / (1 - b1**t) * m / (v + eps)` with `v = max(b2 * v, |g|)`. This is
    `chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))`; row-sparse
    gradients change the touched rows only.

    Args:
      {ADAM_ARGS}

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adamax(0.1, eps=0.0)
        >>> [round(float(x), 5) for x in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.1, 0.1]
    """
    return chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


@_doc
@_factory.api
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


@_doc
@_factory.api
def lazy_adam(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""LazyAdam: `tf.contrib.opt.LazyAdamOptimizer`: Adam, but a row-sparse gradient changes its rows only.

    Dense gradients give exactly `adam`. With a row-sparse gradient (an embedding lookup)
    only the touched rows of `m`, `v` and the variable change, so a step costs O(touched
    rows). This is `chain(scale_by_lazy_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))`.

    Args:
      {ADAM_ARGS}
      {MU_DTYPE}

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> from gradtx.sparse import RowSparse
        >>> tx = gradtx.lazy_adam(0.1)
        >>> u, _ = tx.update(RowSparse(jnp.array([1]), jnp.ones((1, 2)), (3, 2)), tx.init(jnp.zeros((3, 2))))
        >>> [round(float(x), 4) for x in gradtx.apply_updates(jnp.zeros((3, 2)), u)[:, 0]]
        [0.0, -0.1, 0.0]
    """
    return chain(
        scale_by_lazy_adam(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


@_doc
@_factory.api
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


@_doc
@_factory.api
def nadam(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Nadam: contrib's `NadamOptimizer` (TF's Nesterov kernel), not `optax.nadam` (`optax_compat.nadam`).

    `var -= alpha * ((1 - b1) * g + b1 * m) / (sqrt(v) + eps)`; there is no momentum
    schedule, and it is NOT Keras' Nadam. Row-sparse gradients: the moments decay on all
    rows, the variable moves on the touched rows only (contrib's sparse rule). This is
    `chain(scale_by_nesterov_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))`.

    Args:
      {ADAM_ARGS}
      {MU_DTYPE}

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.nadam(0.1)
        >>> round(float(tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))[0][0]), 4)
        -0.19
    """
    return chain(
        scale_by_nesterov_adam(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


@_doc
@_factory.api
def adamw(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    *,
    weight_decay: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    mask: Any = None,
    scale_decay_by_learning_rate: bool = False,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdamW: contrib's `AdamWOptimizer` (decay not times the rate), not `optax.adamw` (`optax_compat`'s).

    TF's decay is NOT multiplied by the learning rate; `scale_decay_by_learning_rate=True`
    gives optax's convention (`var -= lr * weight_decay * var`). `mask` plays
    `decay_var_list`. With a row-sparse gradient only its rows decay (then TF1 Adam's sparse
    step, which moves all rows). This is
    `decoupled_weight_decay(adam(...), weight_decay, mask=mask)`.

    Args:
      {ADAM_ARGS}
      {MU_DTYPE}
      weight_decay: the decay factor, >= 0 (number, scalar array or schedule).
      mask: which params decay (tree of bools, function or key-path patterns); all if None.
      scale_decay_by_learning_rate: multiply the decay by the learning rate.

    Returns:
      A `GradientTransformation`; the Adam slots are in `state.inner_state`.

    Raises:
      ValueError: for a bad beta, epsilon, rate or weight decay.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adamw(0.1, weight_decay=0.5)
        >>> params = jnp.array([2.0])
        >>> round(float(tx.update(jnp.array([1.0]), tx.init(params), params)[0][0]), 4)  # -0.5 * 2 - 0.1
        -1.1
    """
    _checks.check_bool("adamw", "scale_decay_by_learning_rate", scale_decay_by_learning_rate)
    adam_chain = chain(
        scale_by_adam(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )  # = adam(...)
    return decoupled_weight_decay(
        adam_chain,
        weight_decay,
        mask=mask,
        learning_rate=learning_rate if scale_decay_by_learning_rate else None,
    )


__all__ = ["adam_gs", "adamax", "adamw", "lazy_adam", "lazy_adam_gs", "nadam"]

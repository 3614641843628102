"""AdamW (tf.contrib's `AdamWOptimizer`): Adam with decoupled weight decay not scaled by the rate."""

from __future__ import annotations

from typing import Any

from gradtx._algorithms.adam import _doc, scale_by_adam
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import decoupled_weight_decay


@_registry.optimizer("AdamW")
@_doc
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


__all__ = ["adamw"]

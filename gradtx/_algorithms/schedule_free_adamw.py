"""Schedule-free AdamW (optax.contrib's numbers): `schedule_free_adamw`, the gradient divided by the root of
its bias-corrected second moment, then schedule-free steps (`schedule_free.py`'s `scale_by_schedule_free`)."""

from __future__ import annotations

from typing import Any

from gradtx._algorithms.rmsprop_optax import scale_by_bias_corrected_rms
from gradtx._algorithms.schedule_free import scale_by_schedule_free
from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._weight_decay import add_decayed_weights


@_registry.optimizer("AdamWScheduleFree")
def schedule_free_adamw(
    learning_rate: _protocol.ScalarOrSchedule = 0.0025,
    warmup_steps: int | None = 0,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    weight_lr_power: _protocol.ScalarOrSchedule = 2.0,
    *,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""Schedule-free AdamW: Adam's normalisation without momentum, the momentum replaced by averaging.

    `chain(scale_by_bias_corrected_rms(b2, eps), add_decayed_weights(weight_decay, mask=mask),
    scale_by_schedule_free(learning_rate, b1, weight_lr_power, warmup_steps=warmup_steps))`:
    the gradient (taken at the params :math:`y`) is divided by the root of its
    bias-corrected second moment, the decay is added at :math:`y`, and the result steps the
    sequence :math:`z`; see `scale_by_schedule_free`. No decaying schedule is needed: keep
    the rate constant after the warmup. Evaluate and save
    `gradtx.schedule_free_eval_params(state, params)`, not the params. With a constant rate
    these are the numbers of `optax.contrib.schedule_free_adamw`. A row-sparse gradient is
    densified.

    Args:
      learning_rate: the peak rate, >= 0 (number, scalar array or schedule).
      warmup_steps: the length of the linear warmup (an int >= 0; 0 or None: none).
      b1: the interpolation between `z` and its average `x`, in (0, 1].
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      weight_decay: added to the direction as `weight_decay * params` (then multiplied by the rate), >= 0.
      weight_lr_power: the power of the rate in the averaging weights, >= 0.
      mask: which parameters decay (tree of bools, function or key-path patterns); all if None.

    Returns:
      An `ElementWise` chain (a `LeafWise` one with a `mask`); its slots are `v` and `z`.

    Raises:
      ValueError: for a bad rate, `b1`, `b2`, `eps`, weight decay, power or warmup.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.schedule_free_adamw(0.1, warmup_steps=10)
        >>> params = {"w": jnp.array([1.0, -1.0])}
        >>> state = tx.init(params)
        >>> for _ in range(20):
        ...     u, state = tx.update(params, state, params)  # the gradient of |w|^2 / 2
        ...     params = gradtx.apply_updates(params, u)
        >>> x = gradtx.schedule_free_eval_params(state, params)
        >>> bool(jnp.all(jnp.abs(x["w"]) < 1.0))
        True

    References:
      Defazio, Yang, Mehta, Mishchenko, Khaled, Cutkosky, *The road less scheduled*,
      NeurIPS 2024 (arXiv:2405.15682), Algorithm 1 (AdamW).
    """
    _checks.check_in_range("schedule_free_adamw", "b2", b2, 0.0, 1.0, high_open=True)  # `decay` below
    return chain(
        scale_by_bias_corrected_rms(b2, eps),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_schedule_free(learning_rate, b1, weight_lr_power, warmup_steps=warmup_steps),
    )


__all__ = ["schedule_free_adamw"]

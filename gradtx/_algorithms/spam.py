"""SPAM: Adam with spike clipping and periodic momentum resets (pytorch-optimizer's).

StableSPAM is in `stable_spam.py`, whose names this module re-exports.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax.numpy as jnp

from gradtx._algorithms.adam import _REAL_ONLY, _dtype, _moments
from gradtx._algorithms.stable_spam import StableSpamState as StableSpamState
from gradtx._algorithms.stable_spam import scale_by_stable_spam as scale_by_stable_spam
from gradtx._algorithms.stable_spam import stable_spam as stable_spam
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.rule import SQUARES, update_rule


class SpamState(NamedTuple):
    """State of `spam`."""

    count: _protocol.Count  # int32: completed updates (the reference's `step` and `total_step`)
    exp_avg: _protocol.Updates  # first moment (starts at 0, zeroed every `update_proj_gap` steps)
    exp_avg_sq: _protocol.Updates  # second moment (likewise)


def _spam_leaf(g, exp_avg, exp_avg_sq, w, h, *, gap, warmup, accu):
    """One leaf of SPAM: moments reset at step multiples of `gap`, spikes clipped, the Adam step scaled by the
    cosine warmup after each reset, the decay applied to the stepped weights."""
    dtype = _dtype(g)
    phase = h.t % gap  # the step within its period; 0: the moments restart
    m = jnp.where(phase == 0, 0, exp_avg)
    v = jnp.where(phase == 0, 0, exp_avg_sq)
    limit = h.threshold * v
    clip = (h.threshold != 0) & (h.t >= accu) & (phase >= accu) & (g * g > limit)
    g = jnp.where(clip, jnp.sign(g) * jnp.sqrt(limit), g)
    m, v = _moments(g, m, v, h)
    # 0.99 (1 + cos(pi (j + 1) / (warmup + 1))) / 2 taken off the rate j steps after a reset, j < warmup
    warming = (h.t >= gap) & (phase < warmup)
    death = 0.495 * (1 + jnp.cos(math.pi * (phase + 1).astype(dtype) / (warmup + 1)))
    scale = 1 - jnp.where(warming, death, 0)
    rate = (
        h.learning_rate
        * scale
        * jnp.sqrt(_formulas.torch_debias(h.b2, h.t, dtype))
        / _formulas.torch_debias(h.b1, h.t, dtype)
    )
    step = -rate * m / (jnp.sqrt(v) + h.eps)
    return step - h.learning_rate * h.weight_decay * (w + step), m, v


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.SPAM",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "warmup_epoch": "warmup_epoch",
            "threshold": "threshold",
            "grad_accu_steps": "grad_accu_steps",
            "update_proj_gap": "update_proj_gap",
            "eps": "eps",
        },
        defaults={"lr": 1e-3, "betas": (0.9, 0.999)},
        fixed={"density": 1.0, "maximize": False},
    )
)
def spam(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    warmup_epoch: int = 50,
    threshold: _protocol.ScalarOrSchedule = 5000,
    grad_accu_steps: int = 20,
    update_proj_gap: int = 500,
    eps: _protocol.ScalarOrSchedule = 1e-6,
) -> _protocol.GradientTransformation:
    r"""SPAM: Adam whose moments restart every `update_proj_gap` steps, with gradient spikes clipped.

    With :math:`t` the step, :math:`T` = `update_proj_gap`, :math:`j = t \bmod T`, :math:`W` =
    `warmup_epoch`, :math:`\theta` = `threshold` and :math:`N` = `grad_accu_steps`:

    .. math::
        m, v \leftarrow 0 \text{ where } j = 0, \qquad
        \tilde g = \begin{cases} \operatorname{sign}(g)\sqrt{\theta v_{t-1}} & g^2 > \theta v_{t-1},
            \ t \ge N,\ j \ge N \\ g & \text{else} \end{cases} \\
        m_t = \beta_1 m_{t-1} + (1-\beta_1)\tilde g, \qquad
        v_t = \beta_2 v_{t-1} + (1-\beta_2)\tilde g^2, \\
        s_t = 1 - [t \ge T,\ j < W]\ 0.99\,\tfrac{1}{2}\big(1 + \cos\tfrac{\pi (j+1)}{W+1}\big), \qquad
        w_t = \Big(w_{t-1} - \eta s_t \frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}
            \frac{m_t}{\sqrt{v_t}+\epsilon}\Big) (1 - \eta\lambda)

    These are the numbers of pytorch-optimizer's `SPAM` with `density=1` (`gradtx.get("SPAM", lr=...)`
    takes its arguments and defaults). Its details are the reference's, where the paper's text leaves
    them open or may differ: the bias corrections follow the global step (they do not restart with the
    moments), the cosine warmup multiplies the rate from about 0.01 back to 1 over the `warmup_epoch`
    steps after each reset (none before the first), clipping is off for the first `grad_accu_steps`
    steps after a reset (and of the run), and the decoupled weight decay multiplies the weights after
    the step. The reference's random masks (`density < 1`, which update a random subset of each
    matrix) are not reproduced: `density` is fixed at 1. A row-sparse gradient is densified.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      weight_decay: :math:`\lambda`, >= 0 (decoupled, scaled by the rate).
      warmup_epoch: :math:`W`, the steps of the cosine warmup after each reset (an int >= 0).
      threshold: :math:`\theta`, >= 0: a gradient with :math:`g^2 > \theta v` is clipped; 0: never.
      grad_accu_steps: :math:`N`, steps after a reset before clipping starts (an int >= 0).
      update_proj_gap: :math:`T`, the period of the momentum resets (an int >= 1).
      eps: added to :math:`\sqrt{v}`, >= 0.

    Returns:
      An `ElementWise` transform with state `SpamState(count, exp_avg, exp_avg_sq)`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative rate, decay, threshold or `eps`, or a step count
        out of range.
      TypeError: for a non-int step count.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.spam(0.1)
        >>> params = jnp.zeros(2)
        >>> u = tx.update(jnp.array([0.5, -2.0]), tx.init(params), params)[0]
        >>> (u / 0.1).round(3)  # -lr sign(g) at first
        Array([-1.,  1.], dtype=float32)

    References:
      Huang, Zhu, Jin, Liu, Wang, Liu, *SPAM: spike-aware Adam with momentum reset for stable LLM
      training*, ICLR 2025 (arXiv:2501.06842); pytorch-optimizer's `SPAM` (the reference of the tests).
    """
    fn = "spam"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_int(fn, "warmup_epoch", warmup_epoch, minimum=0)
    _checks.check_nonnegative(fn, "threshold", threshold)
    _checks.check_int(fn, "grad_accu_steps", grad_accu_steps, minimum=0)
    _checks.check_int(fn, "update_proj_gap", update_proj_gap, minimum=1)
    _checks.check_nonnegative(fn, "eps", eps)
    return update_rule(
        fn, SpamState,
        functools.partial(_spam_leaf, gap=int(update_proj_gap), warmup=int(warmup_epoch),
                          accu=int(grad_accu_steps)),
        hyper={"learning_rate": learning_rate, "b1": b1, "b2": b2, "weight_decay": weight_decay,
               "threshold": threshold, "eps": eps},
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES},
        reads_params=True, real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


__all__ = ["SpamState", "spam"]

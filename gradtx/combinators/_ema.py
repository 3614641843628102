"""An exponential moving average of the updates: `ema` (the momentum of Adafactor, optax's `ema`)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.formulas import corrections
from gradtx._core.rule import Slot, update_rule


class EmaState(NamedTuple):
    """State of `ema`."""

    count: _protocol.Count  # int32: completed updates
    ema: _protocol.Updates  # the moving average of the updates (starts at 0)


def _ema_leaf(u, m, h, *, debias: bool):
    m = _formulas.moment_blend(m, u, h.decay)
    return (m / h.bc1 if debias else m), m


@_registry.transform()
def ema(
    decay: _protocol.ScalarOrSchedule, *, debias: bool = False, mu_dtype: Any = None
) -> _protocol.GradientTransformation:
    r"""The updates' exponential moving average, debiased if asked: not `optax.ema` (`optax_compat.ema`).

    .. math::
        m_t = \beta m_{t-1} + (1 - \beta) u_t, \qquad
        u_t \leftarrow \begin{cases} m_t / (1 - \beta^t) & \text{debias} \\ m_t & \text{otherwise} \end{cases}

    This is `optax.ema`, Adafactor's optional momentum. Unlike `trace` (TF's momentum,
    :math:`a_t = \mu a_{t-1} + g_t`) the new update enters with weight :math:`1-\beta`.
    The update is returned in the dtype of the incoming one; `m` is stored in `mu_dtype`.
    A row-sparse update is densified first (`m` decays on every row).

    Args:
      decay: :math:`\beta`, in [0, 1].
      debias: divide by :math:`1 - \beta^t` (Adam's bias correction).
      mu_dtype: dtype of `m` (default: each param's dtype).

    Returns:
      An `ElementWise` transform with state `EmaState(count, ema)`.

    Raises:
      ValueError: if `decay` is outside [0, 1].
      TypeError: for a non-bool `debias` or a `mu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.ema(0.75)
        >>> u, state = tx.update(jnp.ones(2), tx.init(jnp.zeros(2)))
        >>> u  # 0.75 * 0 + 0.25 * 1
        Array([0.25, 0.25], dtype=float32)

    References:
      Shazeer, Stern, *Adafactor: adaptive learning rates with sublinear memory cost*,
      ICML 2018 (section 5: Adafactor with momentum :math:`\beta_1`).
    """
    fn = "ema"
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0)
    _checks.check_bool(fn, "debias", debias)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)

    return update_rule(
        fn,
        EmaState,
        functools.partial(_ema_leaf, debias=debias),
        hyper={"decay": decay},
        slots={"ema": Slot(0.0, mu_dtype)},
        prepare=functools.partial(corrections, b1="decay", b2=None) if debias else None,
    )

"""Fromage (optax's numbers): `fromage`."""

from __future__ import annotations

from typing import Any

from gradtx._algorithms.lamb import scale_by_trust_ratio
from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import decoupled_weight_decay


def _fromage_multiplier(learning_rate: Any) -> Any:
    r"""Fromage's :math:`1/\sqrt{1+\eta^2}` for a rate given as a number or array."""
    return 1 / (1 + learning_rate**2) ** 0.5


def fromage_rates(learning_rate: _protocol.ScalarOrSchedule) -> tuple[Any, Any]:
    r"""Fromage's step size :math:`\eta/\sqrt{1+\eta^2}` and shrinkage :math:`1 - 1/\sqrt{1+\eta^2}`, as optax
    computes them (schedules for a scheduled rate)."""
    if not _checks.is_schedule(learning_rate):
        mult = _fromage_multiplier(learning_rate)
        return learning_rate * mult, 1 - mult

    def rate(count):
        lr = _hyper.resolve(learning_rate, count, "learning_rate")
        return _fromage_multiplier(lr) * lr

    def shrink(count):
        return 1 - _fromage_multiplier(_hyper.resolve(learning_rate, count, "learning_rate"))

    return rate, shrink


@_registry.optimizer("Fromage")
def fromage(
    learning_rate: _protocol.ScalarOrSchedule, min_norm: _protocol.ScalarOrSchedule = 1e-6
) -> _protocol.GradientTransformation:
    r"""Fromage: a step of relative size :math:`\eta` per layer (the trust ratio), then a norm-keeping shrink.

    .. math::
        w \leftarrow \frac{1}{\sqrt{1+\eta^2}}\Big(w - \eta\,\frac{\lVert w\rVert}{\lVert g\rVert}\,g\Big)

    `decoupled_weight_decay(chain(scale_by_trust_ratio(min_norm), scale_by_learning_rate(rate)),
    shrink)` with `rate, shrink = fromage_rates(learning_rate)`: the numbers of `optax.fromage`
    (which writes the shrink as `add_decayed_weights(mult - 1)`, a negative decay; the shrink
    is exact, it is the same product). The step is relative to each layer's norm, so one
    rate suits every layer; the shrink undoes the growth of the norm that a step
    orthogonal to the weights causes. With a row-sparse gradient the step is that of the
    densified gradient and the shrink reaches its rows only (`decoupled_weight_decay`).

    Args:
      learning_rate: the relative step size :math:`\eta` (number, scalar array or schedule), >= 0.
      min_norm: the smallest norm of a parameter or update in the trust ratio, >= 0.

    Returns:
      A `LeafWise` transform (the trust ratio is per leaf); its state is
      `DecoupledWeightDecayState(count, inner_state)`.

    Raises:
      ValueError: for a negative rate or `min_norm`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.fromage(0.75)
        >>> params = jnp.array([3.0, 4.0])
        >>> u, _ = tx.update(jnp.array([0.0, 1.0]), tx.init(params), params)
        >>> [round(float(x), 4) for x in params + u]  # (w - 0.75 * 5 * (0, 1)) / 1.25
        [2.4, 0.2]

    References:
      Bernstein, Vahdat, Yue, Liu, *On the distance between two neural networks and the
      stability of learning*, NeurIPS 2020 (arXiv:2002.03432).
    """
    _checks.check_learning_rate("fromage", learning_rate)
    rate, shrink = fromage_rates(learning_rate)
    return decoupled_weight_decay(chain(scale_by_trust_ratio(min_norm), scale_by_learning_rate(rate)), shrink)


__all__ = ["fromage"]

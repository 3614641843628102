"""Sign steps: `scale_by_sign`, signSGD and Signum (optax's numbers)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx._core.rule import update_rule
from gradtx.combinators._ema import ema
from gradtx.combinators._scale import scale_by_learning_rate


def _sign_leaf(g, h):
    del h
    return (jnp.sign(g),)


@_registry.transform()
def scale_by_sign() -> _protocol.GradientTransformation:
    r"""Replace every update by its sign: each element moves by one unit, up, down or not at all.

    .. math:: u_t = \operatorname{sign}(g_t)

    Followed by the learning rate this is signSGD (`optax.sign_sgd`); after `ema(beta)` it
    is Signum (the sign of the momentum, `optax.signum`). A row-sparse gradient keeps its
    rows: their duplicates are summed, then the sign is taken (the untouched rows' sign is
    0, so this is also the dense rule). An update of +-inf becomes +-1, NaN stays NaN; wrap
    in `apply_if_finite` to skip such steps.

    Args:
      (none)

    Returns:
      An `ElementWise` transform with state `EmptyState()`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_sign()
        >>> tx.update(jnp.array([0.3, -2.0, 0.0]), tx.init(jnp.zeros(3)))[0]
        Array([ 1., -1.,  0.], dtype=float32)

    References:
      Bernstein, Wang, Azizzadenesheli, Anandkumar, *signSGD: compressed optimisation for
      non-convex problems*, ICML 2018 (Algorithms 1 and 3).
    """
    return update_rule("scale_by_sign", _protocol.EmptyState, _sign_leaf, sparse="rows", count="if_scheduled")


@_registry.optimizer("SignSGD")
def sign_sgd(learning_rate: _protocol.ScalarOrSchedule) -> _protocol.GradientTransformation:
    r"""signSGD: every element moves by the learning rate against its gradient's sign.

    `chain(scale_by_sign(), scale_by_learning_rate(learning_rate))`: `optax.sign_sgd`. A
    row-sparse gradient moves its rows only (the sign of each row's summed gradient). A
    gradient of +-inf is taken as its sign, NaN reaches the params; wrap in
    `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).

    Returns:
      An `ElementWise` chain with no slots.

    Raises:
      ValueError: for a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sign_sgd(0.1)
        >>> tx.update(jnp.array([3.0, -1e-4]), tx.init(jnp.zeros(2)))[0]
        Array([-0.1,  0.1], dtype=float32)

    References:
      Bernstein, Wang, Azizzadenesheli, Anandkumar, *signSGD: compressed optimisation for
      non-convex problems*, ICML 2018.
    """
    return chain(scale_by_sign(), scale_by_learning_rate(learning_rate))


@_registry.optimizer("Signum")
def signum(
    learning_rate: _protocol.ScalarOrSchedule,
    beta: _protocol.ScalarOrSchedule = 0.9,
    *,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Signum: every element moves by the learning rate against the sign of its gradients' moving average.

    `chain(ema(beta, mu_dtype=mu_dtype), scale_by_sign(), scale_by_learning_rate(learning_rate))`:
    `optax.signum` (`mu_dtype` is its `accumulator_dtype`). The average is not
    bias-corrected (the sign does not need it). A row-sparse gradient is densified (the
    average decays on every row). A gradient of +-inf leaves the average infinite for good:
    the params stay finite but that element moves by the rate in one direction whatever the
    later gradients (NaN reaches the params); wrap in `apply_if_finite` to skip such steps.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      beta: decay of the moving average of the gradients, in [0, 1].
      mu_dtype: dtype of the average (default: each param's dtype).

    Returns:
      An `ElementWise` chain; its slot is `ema`.

    Raises:
      ValueError: for `beta` outside [0, 1] or a negative rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.signum(0.1)
        >>> state = tx.init(jnp.zeros(2))
        >>> u, state = tx.update(jnp.array([3.0, -1.0]), state)
        >>> tx.update(jnp.array([-1.0, -1.0]), state)[0]  # the average of 3, -1 is still positive
        Array([-0.1,  0.1], dtype=float32)

    References:
      Bernstein, Wang, Azizzadenesheli, Anandkumar, *signSGD: compressed optimisation for
      non-convex problems*, ICML 2018 (Algorithm 3, Signum).
    """
    _checks.check_in_range("signum", "beta", beta, 0.0, 1.0)  # `ema` would name it `decay`
    return chain(ema(beta, mu_dtype=mu_dtype), scale_by_sign(), scale_by_learning_rate(learning_rate))


__all__ = ["scale_by_sign", "sign_sgd", "signum"]

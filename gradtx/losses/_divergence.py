"""Kullback-Leibler divergences: of a predicted distribution from a target one, and the generalized form."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp

from gradtx.losses._common import ArrayLike, Axis, axis_where, check_floating


def _kl_divergence(
    log_predictions: ArrayLike, targets: ArrayLike, axis: Axis, where: ArrayLike | None
) -> jax.Array:
    log_targets = jnp.where(targets == 0, 0, jnp.log(targets))
    loss = targets * (log_targets - log_predictions)
    return jnp.sum(loss, axis=axis, where=where)


@axis_where
def kl_divergence(
    log_predictions: ArrayLike,
    targets: ArrayLike,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Kullback-Leibler divergence (relative entropy) of the predicted distribution from the targets.

    .. math:: \mathrm{KL}(y \,\|\, p) = \sum_j y_j (\log y_j - \log p_j)

    with the predictions given as log-probabilities and a target of 0 contributing 0.

    Args:
      log_predictions: the log-probabilities :math:`\log p` of the predicted distribution,
        `[..., dim]`, floating-point.
      targets: the probabilities :math:`y` of the target distribution, `[..., dim]`,
        floating-point.
      {AXIS_WHERE}

    Returns:
      The divergence of each prediction, `[...]`.

    Raises:
      TypeError: for `log_predictions` or `targets` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> losses.kl_divergence(jnp.log(jnp.array([0.5, 0.5])), jnp.array([1.0, 0.0]))
        Array(0.6931472, dtype=float32)

    References:
      Kullback, Leibler, *On information and sufficiency*, Annals of Mathematical Statistics 1951.
    """
    check_floating("kl_divergence", "log_predictions", log_predictions)
    check_floating("kl_divergence", "targets", targets)
    return _kl_divergence(log_predictions, targets, axis, where)


@axis_where
def kl_divergence_with_log_targets(
    log_predictions: ArrayLike,
    log_targets: ArrayLike,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Kullback-Leibler divergence with both distributions given as log-probabilities.

    .. math:: \mathrm{KL}(y \,\|\, p) = \sum_j e^{\log y_j} (\log y_j - \log p_j)

    Args:
      log_predictions: the log-probabilities :math:`\log p` of the predicted distribution,
        `[..., dim]`, floating-point.
      log_targets: the log-probabilities :math:`\log y` of the target distribution, `[..., dim]`,
        floating-point.
      {AXIS_WHERE}

    Returns:
      The divergence of each prediction, `[...]`.

    Raises:
      TypeError: for `log_predictions` or `log_targets` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> log_predictions = jnp.log(jnp.array([0.5, 0.5]))
        >>> log_targets = jnp.log(jnp.array([0.75, 0.25]))
        >>> round(float(losses.kl_divergence_with_log_targets(log_predictions, log_targets)), 4)
        0.1308
        >>> round(float(losses.kl_divergence(log_predictions, jnp.exp(log_targets))), 4)  # the same
        0.1308
    """
    check_floating("kl_divergence_with_log_targets", "log_predictions", log_predictions)
    check_floating("kl_divergence_with_log_targets", "log_targets", log_targets)
    loss = jnp.exp(log_targets) * (log_targets - log_predictions)  # type: ignore[operator]
    return jnp.sum(loss, axis=axis, where=where)


@axis_where
def generalized_kl_divergence(
    log_predictions: ArrayLike,
    targets: ArrayLike,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    r"""Generalized Kullback-Leibler divergence, for unnormalized distributions.

    .. math:: D(y \,\|\, p) = \sum_j y_j (\log y_j - \log p_j) + \sum_j (p_j - y_j)

    the Bregman divergence of :math:`f(x) = x \log x - x`; it is the KL divergence when both
    distributions sum to 1.

    Args:
      log_predictions: the log-probabilities :math:`\log p` of the predicted distribution,
        `[..., dim]`, floating-point.
      targets: the probabilities :math:`y` of the target distribution, `[..., dim]`,
        floating-point.
      {AXIS_WHERE}

    Returns:
      The divergence of each prediction, `[...]`.

    Raises:
      TypeError: for `log_predictions` or `targets` that are not floating-point.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> log_predictions = jnp.log(jnp.array([2.0, 2.0]))  # twice the targets' mass
        >>> targets = jnp.array([1.0, 1.0])
        >>> round(float(losses.kl_divergence(log_predictions, targets)), 4)  # negative off the simplex
        -1.3863
        >>> round(float(losses.generalized_kl_divergence(log_predictions, targets)), 4)
        0.6137

    References:
      Boyd, Vandenberghe, *Convex Optimization*, 2004, p. 90.
    """
    check_floating("generalized_kl_divergence", "log_predictions", log_predictions)
    check_floating("generalized_kl_divergence", "targets", targets)
    kl = _kl_divergence(log_predictions, targets, axis, where)
    mass = jnp.sum(jnp.exp(log_predictions) - targets, axis=axis, where=where)
    return kl + mass


def convex_kl_divergence(
    log_predictions: ArrayLike,
    targets: ArrayLike,
    axis: Axis = -1,
    where: ArrayLike | None = None,
) -> jax.Array:
    """optax's deprecated name of `generalized_kl_divergence`: a `DeprecationWarning`, then that loss.

    Args:
      log_predictions: as in `generalized_kl_divergence`.
      targets: as in `generalized_kl_divergence`.
      axis: as in `generalized_kl_divergence`.
      where: as in `generalized_kl_divergence`.

    Returns:
      The divergence of each prediction, `[...]`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     out = losses.convex_kl_divergence(jnp.log(jnp.array([2.0, 2.0])), jnp.array([1.0, 1.0]))
        >>> [w.category.__name__ for w in caught]
        ['DeprecationWarning']
        >>> round(float(out), 4)  # generalized_kl_divergence's value
        0.6137
    """
    warnings.warn(
        "The function convex_kl_divergence is deprecated. Please use generalized_kl_divergence instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    return generalized_kl_divergence(log_predictions, targets, axis=axis, where=where)

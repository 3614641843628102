"""optax's AdEMAMix, simplified AdEMAMix, ADOPT, ACProp and MADGRAD (`optax.contrib` names), under optax's
names, signatures, defaults and state classes: gradtx's rules and chains, no math.

`gradtx.optax_compat.contrib` re-exports them (they are not top-level optax names). Where
optax's state holds what gradtx keeps otherwise (AdEMAMix's second count), `relaid`
converts the state at the boundary.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core.rule import restated
from gradtx.optax_compat import _combinators as C
from gradtx.optax_compat import _states
from gradtx.transforms._delayed_moment import adopt_clip_value

_CONTRIB_DOC = """optax's `contrib.{name}`, with optax's numbers and state layout: `{chain}`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      **kwargs: as optax's `contrib.{name}` (same names, order and defaults).

    Returns:
      A `GradientTransformation`, state as optax's.

    Raises:
      ValueError: for hyperparameters out of range (named, with the value given).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> from gradtx.optax_compat import contrib
        >>> params = {{"w": jnp.ones(3)}}
        >>> tx = contrib.{name}(1e-2)
        >>> updates, state = tx.update(params, tx.init(params), params)
        >>> gradtx.apply_updates(params, updates)["w"].shape
        (3,)
"""


def _contrib_documented(chain: str) -> Any:
    def decorate(fn: Any) -> Any:
        fn.__doc__ = _CONTRIB_DOC.format(name=fn.__name__, chain=chain)
        return fn

    return decorate


def relaid(
    tx: _protocol.GradientTransformation, to_optax: Callable[[Any], Any], from_optax: Callable[[Any], Any]
) -> _protocol.GradientTransformation:
    """`tx` with its state shown in optax's layout: `to_optax(state)` after each call, `from_optax` before."""
    inner = _factory.member(tx)

    def init_fn(params):
        return to_optax(inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        updates, state = inner.update(updates, from_optax(state), params, **extra_args)
        return updates, to_optax(state)

    return _factory.composite(init_fn, update_fn, inner)


# --------------------------------------------------------------------------- AdEMAMix


class ScaleByAdemamixState(NamedTuple):
    """State of `scale_by_ademamix` (optax's layout: a second count, always equal to the first)."""

    count: _protocol.Count  # int32: completed updates
    count_m2: _protocol.Count  # int32: completed updates (optax's count for `b3` and `alpha`)
    m1: _protocol.Updates  # the fast moving average of the gradients
    m2: _protocol.Updates  # the slow moving average of the gradients
    nu: _protocol.Updates  # second moment


class ScaleBySimplifiedAdEMAMixState(NamedTuple):
    """State of `scale_by_simplified_ademamix` (optax's layout: the count named `t`)."""

    t: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # the undamped momentum
    n: _protocol.Updates  # second moment


@_factory.api
def scale_by_ademamix(
    b1: Any = 0.9,
    b2: Any = 0.999,
    b3: Any = 0.9999,
    alpha: Any = 6.0,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """optax's `contrib.scale_by_ademamix`: `gradtx.scale_by_ademamix` in `ScaleByAdemamixState`.

    Args:
      b1: decay of the fast first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      b3: decay of the slow first moment, in [0, 1).
      alpha: the weight of the slow moment, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      mu_dtype: dtype of the moments (default: each param's dtype).

    Returns:
      A transform with state `ScaleByAdemamixState(count, count_m2, m1, m2, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `alpha` or epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import contrib
        >>> contrib.scale_by_ademamix().init(jnp.zeros(2))._fields
        ('count', 'count_m2', 'm1', 'm2', 'nu')
    """
    inner = gradtx.scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype=mu_dtype)
    return relaid(
        inner,
        lambda s: ScaleByAdemamixState(s.count, s.count, s.m1, s.m2, s.nu),
        lambda s: gradtx.ScaleByAdemamixState(s.count, s.m1, s.m2, s.nu),
    )


@_factory.api
@_contrib_documented(
    "chain(scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype), add_decayed_weights(weight_decay, "
    "mask), scale_by_learning_rate(learning_rate))"
)
def ademamix(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    b3: Any = 0.9999,
    alpha: Any = 5.0,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    weight_decay: Any = 0.0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        scale_by_ademamix(b1, b2, b3, alpha, eps, eps_root, mu_dtype),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
def scale_by_simplified_ademamix(
    b1: Any = 0.99, b2: Any = 0.95, alpha: Any = 0.0, eps: Any = 1e-8, eps_root: Any = 0.0
) -> _protocol.GradientTransformation:
    """optax's `contrib.scale_by_simplified_ademamix`: gradtx's in `ScaleBySimplifiedAdEMAMixState(t, m, n)`.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      alpha: the weight of the current gradient, >= 0.
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.

    Returns:
      A transform with state `ScaleBySimplifiedAdEMAMixState(t, m, n)`.

    Raises:
      ValueError: for a beta outside [0, 1), or a negative `alpha` or epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import contrib
        >>> contrib.scale_by_simplified_ademamix().init(jnp.zeros(2))._fields
        ('t', 'm', 'n')
    """
    inner = gradtx.scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root)
    return restated(inner, ScaleBySimplifiedAdEMAMixState, {"count": "t"})


@_factory.api
@_contrib_documented(
    "chain(scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root), add_decayed_weights(weight_decay, "
    "mask), scale_by_learning_rate(learning_rate))"
)
def simplified_ademamix(
    learning_rate: Any,
    b1: Any = 0.99,
    b2: Any = 0.95,
    alpha: Any = 0.0,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    weight_decay: Any = 0.0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        scale_by_simplified_ademamix(b1, b2, alpha, eps, eps_root),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )


# --------------------------------------------------------------------------- ADOPT, ACProp


@_factory.api
def scale_by_adopt(
    b1: Any = 0.9,
    b2: Any = 0.9999,
    eps: Any = 1e-6,
    mu_dtype: Any = None,
    *,
    nesterov: bool = False,
    use_clipping: bool = True,
    clip_value_fn: Callable[[Any], Any] = adopt_clip_value,
) -> _protocol.GradientTransformation:
    """optax's `contrib.scale_by_adopt`: `gradtx.scale_by_adopt` in `ScaleByAdamState(count, mu, nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: the smallest denominator, >= 0.
      mu_dtype: dtype of `mu` (default: each param's dtype).
      nesterov: step along Nesterov's look-ahead of the momentum.
      use_clipping: clip the normalised gradient to `clip_value_fn(count)`.
      clip_value_fn: the clipping bound as a function of the completed steps.

    Returns:
      A transform with state `ScaleByAdamState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative `eps`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import contrib
        >>> contrib.scale_by_adopt().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    inner = gradtx.scale_by_adopt(
        b1,
        b2,
        eps,
        mu_dtype=mu_dtype,
        nesterov=nesterov,
        use_clipping=use_clipping,
        clip_value_fn=clip_value_fn,
    )
    return restated(inner, _states.ScaleByAdamState, {"m": "mu", "v": "nu"})


@_factory.api
@_contrib_documented(
    "chain(scale_by_adopt(b1, b2, eps, mu_dtype, nesterov=..., use_clipping=..., clip_value_fn=...), "
    "scale_by_learning_rate(learning_rate))"
)
def adopt(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.9999,
    eps: Any = 1e-6,
    mu_dtype: Any = None,
    *,
    nesterov: bool = False,
    use_clipping: bool = True,
    clip_value_fn: Callable[[Any], Any] = adopt_clip_value,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        scale_by_adopt(
            b1, b2, eps, mu_dtype, nesterov=nesterov, use_clipping=use_clipping, clip_value_fn=clip_value_fn
        ),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
def scale_by_acprop(
    b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-16, eps_root: Any = 1e-16
) -> _protocol.GradientTransformation:
    """optax's `contrib.scale_by_acprop`: `gradtx.scale_by_acprop` in `ScaleByBeliefState(count, mu, nu)`.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second statistic, in [0, 1).
      eps: added to the root of the corrected statistic, >= 0.
      eps_root: added to the statistic at every step, >= 0.

    Returns:
      A transform with state `ScaleByBeliefState(count, mu, nu)`.

    Raises:
      ValueError: for a beta outside [0, 1) or a negative epsilon.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import contrib
        >>> contrib.scale_by_acprop().init(jnp.zeros(2))._fields
        ('count', 'mu', 'nu')
    """
    inner = gradtx.scale_by_acprop(b1, b2, eps, eps_root)
    return restated(inner, _states.ScaleByBeliefState, {"m": "mu", "s": "nu"})


@_factory.api
@_contrib_documented(
    "chain(scale_by_acprop(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask), "
    "scale_by_learning_rate(learning_rate))"
)
def acprop(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-16,
    eps_root: Any = 1e-16,
    weight_decay: Any = 0.0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        scale_by_acprop(b1, b2, eps, eps_root),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )


# --------------------------------------------------------------------------- MADGRAD


class MadgradState(NamedTuple):
    """State of `scale_by_madgrad` (optax's class)."""

    count: _protocol.Count  # int32: completed updates
    grad_sum_sq: _protocol.Updates  # the weighted sum of squared gradients
    s: _protocol.Updates  # the weighted sum of gradients
    x0: _protocol.Params  # the initial parameters


@_factory.api
def scale_by_madgrad(
    learning_rate: Any, momentum: Any = 0.9, eps: Any = 1e-6
) -> _protocol.GradientTransformation:
    """optax's `contrib.scale_by_madgrad`: `gradtx.scale_by_madgrad` in optax's `MadgradState`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      momentum: the weight of the current parameters in the average, in [0, 1).
      eps: added to the learning rate and to the cube root, >= 0.

    Returns:
      A transform with state `MadgradState(count, grad_sum_sq, s, x0)`.

    Raises:
      ValueError: for a negative rate or `eps`, or a `momentum` outside [0, 1).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import contrib
        >>> contrib.scale_by_madgrad(0.1).init(jnp.zeros(2))._fields
        ('count', 'grad_sum_sq', 's', 'x0')
    """
    return restated(gradtx.scale_by_madgrad(learning_rate, momentum, eps), MadgradState)


@_factory.api
@_contrib_documented(
    "chain(add_decayed_weights(weight_decay), scale_by_madgrad(learning_rate, momentum, eps))"
)
def madgrad(
    learning_rate: Any, momentum: Any = 0.9, weight_decay: Any = 0.0, eps: Any = 1e-6
) -> _protocol.GradientTransformation:
    return gradtx.chain(C.add_decayed_weights(weight_decay), scale_by_madgrad(learning_rate, momentum, eps))

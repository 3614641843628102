"""optax's other optimizers under optax's names, signatures and defaults: chains of its blocks.

Each alias is the chain optax builds, member for member, so a state has optax's layout as
well as its numbers. No math here.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.optax_compat import _combinators as C
from gradtx.optax_compat import _masked
from gradtx.optax_compat import _scalings as S
from gradtx.optax_compat import _transforms as T

_DOC = """optax's `{name}`, with optax's numbers and state layout: `{chain}`.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      **kwargs: as optax's `{name}` (same names, order and defaults).

    Returns:
      A `GradientTransformation`, state as optax's.

    Raises:
      ValueError: for hyperparameters out of range (named, with the value given).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> params = {{"w": jnp.ones(3)}}
        >>> tx = optax.{name}(1e-2)
        >>> updates, state = tx.update(params, tx.init(params), params)
        >>> optax.apply_updates(params, updates)["w"].shape
        (3,)
"""


def _documented(chain: str) -> Any:
    def decorate(fn: Any) -> Any:
        fn.__doc__ = _DOC.format(name=fn.__name__, chain=chain)
        return fn

    return decorate


@_factory.api
@_documented("chain(trace(momentum) or identity(), scale_by_learning_rate(learning_rate))")
def sgd(
    learning_rate: Any, momentum: Any = None, nesterov: bool = False, accumulator_dtype: Any = None
) -> _protocol.GradientTransformation:
    first = gradtx.identity() if momentum is None else S.trace(momentum, nesterov, accumulator_dtype)
    return gradtx.chain(first, gradtx.scale_by_learning_rate(learning_rate))


@_factory.api
@_documented(
    "chain(scale_by_lion(b1, b2, mu_dtype), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)"
)
def lion(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.99,
    mu_dtype: Any = None,
    weight_decay: Any = 1e-3,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_lion(b1, b2, mu_dtype),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("chain(scale_by_novograd(...), scale_by_learning_rate(learning_rate))")
def novograd(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.25,
    eps: Any = 1e-6,
    eps_root: Any = 0.0,
    weight_decay: Any = 0.0,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_novograd(b1, b2, eps, eps_root, weight_decay),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("chain(scale_by_sm3(momentum), scale(-learning_rate))")
def sm3(learning_rate: Any, momentum: Any = 0.9) -> _protocol.GradientTransformation:
    return gradtx.chain(S.scale_by_sm3(momentum), gradtx.scale(-learning_rate))


@_factory.api
@_documented("chain(scale_by_sign(), scale_by_learning_rate(learning_rate))")
def sign_sgd(learning_rate: Any) -> _protocol.GradientTransformation:
    return gradtx.chain(gradtx.scale_by_sign(), gradtx.scale_by_learning_rate(learning_rate))


@_factory.api
@_documented("chain(ema(beta, debias=False), scale_by_sign(), scale_by_learning_rate(learning_rate))")
def signum(
    learning_rate: Any, beta: Any = 0.9, accumulator_dtype: Any = None
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        S.ema(beta, debias=False, accumulator_dtype=accumulator_dtype),
        gradtx.scale_by_sign(),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented(
    "chain(scale_by_factored_rms(...), clip_by_block_rms, scale_by_learning_rate(flip_sign=False), "
    "scale_by_param_block_rms, ema (momentum), add_decayed_weights, scale(-1))"
)
def adafactor(
    learning_rate: Any = None,
    min_dim_size_to_factor: int = 128,
    decay_rate: Any = 0.8,
    decay_offset: Any = 0,
    multiply_by_parameter_scale: bool = True,
    clipping_threshold: Any = 1.0,
    momentum: Any = None,
    dtype_momentum: Any = jnp.float32,
    weight_decay_rate: Any = None,
    eps: Any = 1e-30,
    factored: bool = True,
    weight_decay_mask: Any = None,
) -> _protocol.GradientTransformation:
    tx = [S.scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor, eps)]
    if clipping_threshold is not None:
        tx.append(gradtx.clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        tx.append(gradtx.scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        tx.append(gradtx.scale_by_param_block_rms())
    if momentum is not None:
        tx.append(S.ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        tx.append(C.add_decayed_weights(weight_decay_rate, weight_decay_mask))
    tx.append(gradtx.scale(-1))
    return gradtx.chain(*tx)


@_factory.api
@_documented(
    "chain(scale_by_rms(...) or scale_by_stddev(...) if centered, scale_by_learning_rate, "
    "trace(momentum, nesterov) or identity())"
)
def rmsprop(
    learning_rate: Any,
    decay: Any = 0.9,
    eps: Any = 1e-8,
    initial_scale: Any = 0.0,
    eps_in_sqrt: bool = True,
    centered: bool = False,
    momentum: Any = None,
    nesterov: bool = False,
    bias_correction: bool = False,
) -> _protocol.GradientTransformation:
    scaling = S.scale_by_stddev if centered else S.scale_by_rms
    return gradtx.chain(
        scaling(decay, eps, initial_scale, eps_in_sqrt, bias_correction),
        gradtx.scale_by_learning_rate(learning_rate),
        gradtx.identity() if momentum is None else S.trace(momentum, nesterov),
    )


@_factory.api
@_documented("chain(scale_by_rss(initial_accumulator_value, eps), scale_by_learning_rate(learning_rate))")
def adagrad(
    learning_rate: Any, initial_accumulator_value: Any = 0.1, eps: Any = 1e-7
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        S.scale_by_rss(initial_accumulator_value, eps), gradtx.scale_by_learning_rate(learning_rate)
    )


@_factory.api
@_documented("chain(scale_by_rprop(learning_rate, ...), scale(-1.0))")
def rprop(
    learning_rate: Any,
    eta_minus: Any = 0.5,
    eta_plus: Any = 1.2,
    min_step_size: Any = 1e-6,
    max_step_size: Any = 50.0,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        S.scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size, max_step_size), gradtx.scale(-1.0)
    )


@_factory.api
@_documented("chain(add_decayed_weights(weight_decay, weight_decay_mask), scale_by_adadelta(rho, eps), lr)")
def adadelta(
    learning_rate: Any = None,
    rho: Any = 0.9,
    eps: Any = 1e-6,
    weight_decay: Any = 0.0,
    weight_decay_mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        C.add_decayed_weights(weight_decay, weight_decay_mask),
        S.scale_by_adadelta(rho, eps),
        S.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented(
    "chain(masked(add_decayed_weights), masked(scale_by_trust_ratio), learning rate, trace(momentum))"
)
def lars(
    learning_rate: Any,
    weight_decay: Any = 0.0,
    weight_decay_mask: Any = True,
    trust_coefficient: Any = 0.001,
    eps: Any = 0.0,
    trust_ratio_mask: Any = True,
    momentum: Any = 0.9,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        C.add_decayed_weights(weight_decay, weight_decay_mask),
        _masked.masked(
            gradtx.scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps), trust_ratio_mask
        ),
        gradtx.scale_by_learning_rate(learning_rate),
        S.trace(momentum, nesterov),
    )

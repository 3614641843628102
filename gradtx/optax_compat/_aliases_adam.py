"""optax's Adam-family optimizers under optax's names, signatures and defaults: chains of its blocks.

Each alias is the chain optax builds, member for member, so a state has optax's layout as
well as its numbers. No math here.
"""

from __future__ import annotations

from typing import Any

import gradtx
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.optax_compat import _combinators as C
from gradtx.optax_compat import _transforms as T
from gradtx.optax_compat._aliases import _documented


@_factory.api
@_documented(
    "chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov), scale_by_learning_rate)"
)
def adam(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("adam with nesterov=True")
def nadam(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    *,
    nesterov: bool = True,
) -> _protocol.GradientTransformation:
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov)


@_factory.api
@_documented("chain(scale_by_adam(...), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)")
def adamw(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    weight_decay: Any = 1e-4,
    mask: Any = None,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("adamw with nesterov=True")
def nadamw(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    weight_decay: Any = 1e-4,
    mask: Any = None,
    *,
    nesterov: bool = True,
) -> _protocol.GradientTransformation:
    return adamw(learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask, nesterov=nesterov)


@_factory.api
@_documented("chain(scale_by_radam(...), scale_by_learning_rate(learning_rate))")
def radam(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    threshold: Any = 5.0,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("chain(scale_by_belief(...), scale_by_learning_rate(learning_rate))")
def adabelief(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-16,
    eps_root: Any = 1e-16,
    *,
    nesterov: bool = False,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("chain(scale_by_yogi(b1, b2, eps), scale_by_learning_rate(learning_rate))")
def yogi(
    learning_rate: Any, b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-3
) -> _protocol.GradientTransformation:
    return gradtx.chain(T.scale_by_yogi(b1, b2, eps), gradtx.scale_by_learning_rate(learning_rate))


@_factory.api
@_documented(
    "chain(scale_by_adam(...), add_decayed_weights(...), scale_by_trust_ratio(), scale_by_learning_rate)"
)
def lamb(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-6,
    eps_root: Any = 0.0,
    weight_decay: Any = 0.0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_adam(b1, b2, eps, eps_root),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_trust_ratio(),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("chain(scale_by_adan(...), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)")
def adan(
    learning_rate: Any,
    b1: Any = 0.98,
    b2: Any = 0.92,
    b3: Any = 0.99,
    eps: Any = 1e-8,
    eps_root: Any = 1e-8,
    weight_decay: Any = 0.0,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_adan(b1=b1, b2=b2, b3=b3, eps=eps, eps_root=eps_root),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("chain(scale_by_amsgrad(...), scale_by_learning_rate(learning_rate))")
def amsgrad(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    eps_root: Any = 0.0,
    mu_dtype: Any = None,
    bias_correction_mu: bool = True,
    bias_correction_nu: bool = True,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_amsgrad(b1, b2, eps, eps_root, mu_dtype, bias_correction_mu, bias_correction_nu),
        gradtx.scale_by_learning_rate(learning_rate),
    )


@_factory.api
@_documented("chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))")
def adamax(
    learning_rate: Any, b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8
) -> _protocol.GradientTransformation:
    return gradtx.chain(T.scale_by_adamax(b1, b2, eps), gradtx.scale_by_learning_rate(learning_rate))


@_factory.api
@_documented(
    "chain(scale_by_adamax(b1, b2, eps), add_decayed_weights(weight_decay, mask), scale_by_learning_rate)"
)
def adamaxw(
    learning_rate: Any,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    weight_decay: Any = 1e-4,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    return gradtx.chain(
        T.scale_by_adamax(b1, b2, eps),
        C.add_decayed_weights(weight_decay, mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )

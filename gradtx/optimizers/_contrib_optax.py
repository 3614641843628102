"""optax.contrib's Sophia as a chain: `sophia` (SAM and MoMo are whole optimizers in `gradtx.combinators`)."""

from __future__ import annotations

from typing import Any

from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain, scale_by_sophia
from gradtx.transforms import scale_by_learning_rate


@_factory.api
def sophia(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.965,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    gamma: _protocol.ScalarOrSchedule = 0.01,
    clip_threshold: _protocol.ScalarOrSchedule | None = 1.0,
    update_interval: int = 10,
    hessian_diagonal_fn: Any = None,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
    verbose: bool = False,
    print_win_rate_every_n_steps: int = 0,
) -> _protocol.GradientTransformation:
    r"""Sophia: a clipped Newton step on a diagonal-Hessian estimate, with decoupled weight decay.

    `chain(scale_by_sophia(b1, b2, eps, gamma, clip_threshold, update_interval,
    hessian_diagonal_fn, ...), add_decayed_weights(weight_decay, mask=mask),
    scale_by_learning_rate(learning_rate))`: the chain and numbers of `optax.contrib.sophia`.
    The default estimator (Hutchinson's) needs the extra argument `obj_fn(params) -> loss`:
    `tx.update(grads, state, params, obj_fn=lambda p: loss(p, batch))`. A row-sparse gradient
    is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1).
      b2: decay of the Hessian-diagonal average (per refresh), in [0, 1).
      eps: the smallest denominator, >= 0.
      weight_decay: the decay added to the step (scaled by the rate), >= 0.
      gamma: the scale of the Hessian estimate, >= 0.
      clip_threshold: the bound of each element of the step before the rate, > 0; None: none.
      update_interval: refresh the Hessian estimate every this many steps, an int >= 1.
      hessian_diagonal_fn: the estimator; None: `hutchinson_estimator_diag_hessian()`.
      mask: which parameters decay: a tree of bools (or a prefix), a function of the params, or None.
      mu_dtype: dtype of the momentum (default: each param's dtype).
      verbose: print the share of unclipped elements every `print_win_rate_every_n_steps` steps.
      print_win_rate_every_n_steps: the period of that print.

    Returns:
      A chain; its slots are `mu` and `nu`.

    Raises:
      ValueError: as `scale_by_sophia`, or for a negative rate or weight decay.
      TypeError: as `scale_by_sophia`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sophia(0.1, weight_decay=0.0)
        >>> params = jnp.array([1.0, -2.0])
        >>> u, _ = tx.update(params, tx.init(params), params, obj_fn=lambda w: jnp.sum(w**2) / 2)
        >>> u  # step 1 is clipped: -lr * sign(m)
        Array([-0.1,  0.1], dtype=float32)

    References:
      Liu, Li, Hall, Liang, Ma, *Sophia: a scalable stochastic second-order optimizer for
      language model pre-training*, ICLR 2024 (arXiv:2305.14342).
    """
    return chain(
        scale_by_sophia(
            b1,
            b2,
            eps,
            gamma,
            clip_threshold,
            update_interval,
            hessian_diagonal_fn,
            mu_dtype=mu_dtype,
            verbose=verbose,
            print_win_rate_every_n_steps=print_win_rate_every_n_steps,
        ),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )

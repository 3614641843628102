"""optax.contrib's SAM, Sophia and MoMo under optax's names, signatures, defaults and state classes.

Each is the gradtx transform of the same algorithm (or the chain optax builds of them), so states read as
optax's (`state.steps_since_sync`, `state[0].mu`, `state.exp_avg`). No math here. These names are optax's
`optax.contrib.*`, not top-level ones: `gradtx.optax_compat.contrib` re-exports them (Muon's are in
`_aliases_muon.py`).
"""

from __future__ import annotations

from typing import Any

import gradtx
from gradtx import parallel
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import HutchinsonState, MomoAdamState, MomoState, SAMState, SophiaState
from gradtx.optax_compat import _combinators as C

NormalizeState = _protocol.EmptyState
"""optax.contrib's name for the state of `normalize`: `EmptyState`."""

__all__ = [
    "HutchinsonState",
    "MomoAdamState",
    "MomoState",
    "NormalizeState",
    "SAMState",
    "SophiaState",
    "hutchinson_estimator_diag_hessian",
    "momo",
    "momo_adam",
    "normalize",
    "sam",
    "sophia",
]


def normalize() -> _protocol.GradientTransformation:
    """optax.contrib's `normalize`: `gradtx.normalize()`, the updates divided by their global norm.

    Returns:
      A `GradientTransformation` with state `EmptyState()`.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _aliases_contrib as contrib
        >>> tx = contrib.normalize()
        >>> tx.update(jnp.array([3.0, 4.0]), tx.init(None))[0]
        Array([0.6, 0.8], dtype=float32)
    """
    return gradtx.normalize()


def sam(
    optimizer: Any,
    adv_optimizer: Any,
    sync_period: int = 2,
    reset_state: bool = True,
    opaque_mode: bool = False,
    batch_axis_name: str | None = None,
) -> _protocol.GradientTransformation:
    """optax.contrib's `sam`: `gradtx.sam`, whose opaque mode's `grad_fn` is averaged over `batch_axis_name`.

    Args:
      optimizer: the outer optimizer.
      adv_optimizer: the adversarial optimizer.
      sync_period: the steps per period, an int >= 1.
      reset_state: re-initialise the adversarial optimizer's state after each outer step.
      opaque_mode: run a whole period per call (`update` then needs `grad_fn`).
      batch_axis_name: with `opaque_mode`, the mapped axis over which the gradients `grad_fn`
        returns are averaged (`gradtx.parallel.mean_over`); None: not averaged.

    Returns:
      A `GradientTransformation` with state `SAMState(steps_since_sync, opt_state, adv_state, cache)`.

    Raises:
      ValueError: for `sync_period` < 1.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import optax_compat as optax
        >>> from gradtx.optax_compat import _aliases_contrib as contrib
        >>> tx = contrib.sam(optax.sgd(0.1), optax.chain(contrib.normalize(), optax.sgd(0.5)))
        >>> int(tx.init(jnp.zeros(2)).steps_since_sync)
        0
    """
    tx = gradtx.sam(optimizer, adv_optimizer, sync_period, reset_state, opaque_mode)  # tx, adv_tx
    if batch_axis_name is None or not opaque_mode:
        return tx

    def update(updates, state, params=None, *, grad_fn=None, **extra_args):
        if grad_fn is not None:  # the averaging is routing: gradtx.parallel does the collective
            fn = grad_fn

            def grad_fn(p, i):
                return parallel.mean_over(fn(p, i), batch_axis_name)

        return tx.update(updates, state, params, grad_fn=grad_fn, **extra_args)

    return _factory.composite(tx.init, update, tx)


def hutchinson_estimator_diag_hessian(random_seed: Any = None) -> _protocol.GradientTransformation:
    """optax.contrib's `hutchinson_estimator_diag_hessian`: `gradtx.hutchinson_estimator_diag_hessian`.

    Args:
      random_seed: the initial PRNG key; None: `jax.random.PRNGKey(0)`.

    Returns:
      A `GradientTransformation` with state `HutchinsonState(key)`; `update` needs `obj_fn`.

    Raises:
      TypeError: for a `random_seed` that is not a key array.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _aliases_contrib as contrib
        >>> tx = contrib.hutchinson_estimator_diag_hessian()
        >>> w = jnp.array([1.0, 2.0])
        >>> tx.update(w, tx.init(w), w, obj_fn=lambda p: jnp.sum(p**2))[0]
        Array([2., 2.], dtype=float32)
    """
    return gradtx.hutchinson_estimator_diag_hessian(random_seed)


_HUTCHINSON = hutchinson_estimator_diag_hessian()
"""optax's default estimator of `sophia` (made once, as optax's default argument is)."""


@_factory.api
def sophia(
    learning_rate: Any,
    b1: Any = 0.965,
    b2: Any = 0.99,
    eps: Any = 1e-8,
    weight_decay: Any = 1e-4,
    weight_decay_mask: Any = None,
    gamma: Any = 0.01,
    clip_threshold: Any = 1.0,
    update_interval: int = 10,
    hessian_diagonal_fn: Any = _HUTCHINSON,
    mu_dtype: Any = None,
    verbose: bool = False,
    print_win_rate_every_n_steps: int = 0,
) -> _protocol.GradientTransformation:
    """optax.contrib's `sophia`: `chain(scale_by_sophia(...), add_decayed_weights(weight_decay,
    weight_decay_mask), scale_by_learning_rate(learning_rate))`, optax's chain member for member.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum.
      b2: decay of the Hessian-diagonal average.
      eps: the smallest denominator.
      weight_decay: the decay added to the step.
      weight_decay_mask: which parameters decay (a tree of bools, a function of the params, None).
      gamma: the scale of the Hessian estimate.
      clip_threshold: the bound of each element of the step; None: none.
      update_interval: refresh the Hessian estimate every this many steps.
      hessian_diagonal_fn: the estimator (Hutchinson's by default).
      mu_dtype: dtype of the momentum.
      verbose: print the win rate.
      print_win_rate_every_n_steps: the period of that print.

    Returns:
      A chain, state as optax's.

    Raises:
      ValueError: for hyperparameters out of range (named, with the value given).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.optax_compat import _aliases_contrib as contrib
        >>> tx = contrib.sophia(0.1)
        >>> w = jnp.array([1.0, -2.0])
        >>> u, state = tx.update(w, tx.init(w), w, obj_fn=lambda p: jnp.sum(p**2))
        >>> state[0].nu
        Array([0.02, 0.02], dtype=float32)
    """
    return gradtx.chain(
        gradtx.scale_by_sophia(
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
        ),  # fmt: skip
        C.add_decayed_weights(weight_decay, weight_decay_mask),
        gradtx.scale_by_learning_rate(learning_rate),
    )


def momo(
    learning_rate: Any = 1.0,
    beta: Any = 0.9,
    lower_bound: Any = 0.0,
    weight_decay: Any = 0.0,
    adapt_lower_bound: bool = False,
) -> _protocol.GradientTransformation:
    """optax.contrib's `momo`: `gradtx.momo`, `adapt_lower_bound` positional; `update` needs `value`.

    Args:
      learning_rate: the largest step size (number, scalar array or schedule).
      beta: the decay of the averages.
      lower_bound: a lower bound of the loss.
      weight_decay: the decoupled weight decay.
      adapt_lower_bound: estimate the lower bound on the fly.

    Returns:
      A `GradientTransformation` with state `MomoState(exp_avg, barf, gamma, lb, count)`.

    Raises:
      ValueError: for hyperparameters out of range (named, with the value given).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from gradtx.optax_compat import _aliases_contrib as contrib
        >>> tx = contrib.momo()
        >>> w = jnp.array([1.0, 2.0, 3.0])
        >>> value, grad = jax.value_and_grad(lambda p: jnp.sum(p**2))(w)
        >>> float(tx.update(grad, tx.init(w), w, value=value)[1].barf)
        14.0
    """
    return gradtx.momo(learning_rate, beta, lower_bound, weight_decay, adapt_lower_bound=adapt_lower_bound)


def momo_adam(
    learning_rate: Any = 1e-2,
    b1: Any = 0.9,
    b2: Any = 0.999,
    eps: Any = 1e-8,
    lower_bound: Any = 0.0,
    weight_decay: Any = 0.0,
    adapt_lower_bound: bool = False,
) -> _protocol.GradientTransformation:
    """optax.contrib's `momo_adam`: `gradtx.momo_adam` (`adapt_lower_bound` positional); reads `value`.

    Args:
      learning_rate: the largest step size (number, scalar array or schedule).
      b1: the decay of the averages.
      b2: the decay of Adam's second moment.
      eps: added to its root.
      lower_bound: a lower bound of the loss.
      weight_decay: the decoupled weight decay.
      adapt_lower_bound: estimate the lower bound on the fly.

    Returns:
      A `GradientTransformation` with state `MomoAdamState(exp_avg, exp_avg_sq, barf, gamma, lb, count)`.

    Raises:
      ValueError: for hyperparameters out of range (named, with the value given).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from gradtx.optax_compat import _aliases_contrib as contrib
        >>> tx = contrib.momo_adam()
        >>> w = jnp.array([1.0, 2.0, 3.0])
        >>> value, grad = jax.value_and_grad(lambda p: jnp.sum(p**2))(w)
        >>> int(tx.update(grad, tx.init(w), w, value=value)[1].count)
        1
    """
    return gradtx.momo_adam(
        learning_rate, b1, b2, eps, lower_bound, weight_decay, adapt_lower_bound=adapt_lower_bound
    )

"""TF's `tf.train.Optimizer` workflow, functional: `compute_gradients`, `apply_gradients`, `minimize`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from gradtx import _base, _checks, _masks, _protocol, packing


def compute_gradients(
    loss_fn: Callable[..., Any],
    params: _protocol.Params,
    *args: Any,
    var_list: Any = None,
    grad_loss: Any = None,
    has_aux: bool = False,
) -> tuple[Any, Any]:
    """The loss and its gradients (TF's `Optimizer.compute_gradients`), for the params in `var_list`.

    Args:
      loss_fn: `loss_fn(params, *args)` -> scalar (or `(scalar, aux)` with `has_aux`).
      params: the parameters (packed ones, `gradtx.packing`, included: `loss_fn` gets their
        views and the gradients come out packed).
      *args: the rest of `loss_fn`'s arguments (the batch).
      var_list: which params get a gradient (a tree of bools, a function of the params, or
        key-path patterns); the others get `None`, which `apply_gradients` leaves alone. All
        when None.
      grad_loss: the gradient of the final objective with respect to the loss (TF's
        `grad_loss`): the gradients are multiplied by it. Default 1.
      has_aux: `loss_fn` returns `(loss, aux)`.

    Returns:
      `(loss, grads)`, or `((loss, aux), grads)` with `has_aux`.

    Raises:
      ValueError: if the loss is not a scalar, or `var_list` is given with packed params.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> params = {"a": jnp.array(2.0), "b": jnp.array(3.0)}
        >>> loss, grads = gradtx.compute_gradients(lambda p: p["a"] * p["b"], params, var_list=["a"])
        >>> float(loss), float(grads["a"]), grads["b"]
        (6.0, 3.0, None)
    """

    def scalar_loss(p):
        out = loss_fn(packing.unpack(p), *args)
        loss = out[0] if has_aux else out
        if jnp.ndim(loss) != 0:
            raise ValueError(f"`compute_gradients`: the loss must be a scalar, got shape {jnp.shape(loss)}.")
        return loss, out

    loss, pullback, out = jax.vjp(scalar_loss, params, has_aux=True)
    cotangent = jnp.ones_like(loss) if grad_loss is None else jnp.asarray(grad_loss, loss.dtype)
    (grads,) = pullback(cotangent)
    if var_list is not None:
        if packing.has_packed(params):
            raise ValueError(
                "`compute_gradients`: `var_list` selects parameters by key path, which packed "
                "parameters do not have; pass `var_list=None` (or train them unpacked)."
            )
        grads = _masks.select(
            "compute_gradients",
            _masks.resolve_mask("compute_gradients", var_list, params, arg="var_list"),
            grads,
        )
    return out, grads


def apply_gradients(
    tx: _protocol.GradientTransformation,
    grads: Any,
    opt_state: Any,
    params: _protocol.Params,
    **extra_args: Any,
) -> tuple[_protocol.Params, Any]:
    """One optimizer step from given gradients (TF's `Optimizer.apply_gradients`): `(new_params, new_state)`.

    A `None` gradient leaves its parameter and its slots unchanged (TF skips variables
    without a gradient). Extra keyword arguments go to `tx.update` (e.g. `global_step`).

    Args:
      tx: the optimizer.
      grads: gradients with the structure of `params` (`None` where a variable has none).
      opt_state: the state of `tx`.
      params: the current parameters.
      **extra_args: passed to `tx.update`.

    Returns:
      `(new_params, new_opt_state)`.

    Raises:
      ValueError: if no parameter has a gradient (as TF).

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sgd(0.5)
        >>> params = {"a": jnp.array(1.0), "b": jnp.array(1.0)}
        >>> new, _ = gradtx.apply_gradients(tx, {"a": jnp.array(1.0), "b": None}, tx.init(params), params)
        >>> float(new["a"]), float(new["b"])
        (0.5, 1.0)
    """
    _checks.check_transform("apply_gradients", "tx", tx)
    if not any(g is not None for g in jax.tree.leaves(grads, is_leaf=lambda x: x is None)):
        raise ValueError("`apply_gradients`: no gradients provided for any variable.")
    updates, opt_state = _base.with_extra_args_support(tx).update(grads, opt_state, params, **extra_args)
    return _base.apply_updates(params, updates), opt_state


def minimize(
    loss_fn: Callable[..., Any],
    tx: _protocol.GradientTransformation,
    *,
    var_list: Any = None,
    has_aux: bool = False,
) -> Callable[..., tuple[_protocol.Params, Any, Any]]:
    """TF's `Optimizer.minimize` as a jitted step: `(params, opt_state, *batch) -> (params, opt_state, loss)`.

    `compute_gradients` then `apply_gradients`; with `has_aux` the last output is `(loss, aux)`.

    Args:
      loss_fn: `loss_fn(params, *batch)` -> scalar loss (or `(loss, aux)` with `has_aux`).
      tx: the optimizer.
      var_list: which params train (as in `compute_gradients`); all if None.
      has_aux: `loss_fn` also returns auxiliary data.

    Returns:
      A pure function `step(params, opt_state, *batch) -> (params, opt_state, loss)`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> tx = gradtx.sgd(0.5)
        >>> step = jax.jit(gradtx.minimize(lambda p, t: jnp.sum((p - t) ** 2), tx))
        >>> params, state = jnp.zeros(2), tx.init(jnp.zeros(2))
        >>> for _ in range(20):
        ...     params, state, loss = step(params, state, jnp.array([1.0, -1.0]))
        >>> params
        Array([ 1., -1.], dtype=float32)
    """
    _checks.check_callable("minimize", "loss_fn", loss_fn)
    _checks.check_transform("minimize", "tx", tx)

    def step(params, opt_state, *batch):
        out, grads = compute_gradients(loss_fn, params, *batch, var_list=var_list, has_aux=has_aux)
        params, opt_state = apply_gradients(tx, grads, opt_state, params)
        return params, opt_state, out

    return step

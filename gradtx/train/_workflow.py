"""TF's `tf.train.Optimizer` workflow, functional: `compute_gradients`, `apply_gradients`, `minimize`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from gradtx import packing
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import masks as _masks
from gradtx._core import protocol as _protocol
from gradtx._core import updates as _updates
from gradtx.train import _dependence as _dependence


def compute_gradients(
    loss_fn: Callable[..., Any],
    params: _protocol.Params,
    *args: Any,
    var_list: Any = None,
    grad_loss: Any = None,
    has_aux: bool = False,
) -> tuple[Any, Any]:
    """The loss and its gradients (TF's `Optimizer.compute_gradients`), for the params in `var_list`.

    As in TF, a parameter the loss has no gradient path to gets `None`, not a zero, so
    `apply_gradients` leaves it and its slots alone (no weight decay, no momentum): one the
    loss never reads, reads only through `jax.lax.stop_gradient`, or only through ops without
    a gradient (integer casts, comparisons, rounding, a `while_loop`'s condition). It is found
    at trace time in the jaxpr of the backward pass, which is linear in the loss's
    cotangent: a gradient with no data-dependence path from it is exactly zero, and one with a
    path (`0 * p`, a branch of `lax.cond` not taken) keeps its gradient. Custom rules
    (`jax.custom_vjp`) decide by their backward function. Packed params skip this (their
    gradients come out as JAX computes them); integer params keep their `float0` gradients.

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
      `(loss, grads)`, or `((loss, aux), grads)` with `has_aux`; `grads` has the structure of
      `params`, with `None` for the params outside `var_list` and those without a gradient.

    Raises:
      ValueError: if the loss is not a scalar, `var_list` is given with packed params, or no
        float parameter (in `var_list`) gets a gradient (TF's "No gradients provided for any
        variable").

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> params = {"a": jnp.array(2.0), "b": jnp.array(3.0)}
        >>> loss, grads = gradtx.compute_gradients(lambda p: p["a"] * p["b"], params, var_list=["a"])
        >>> float(loss), float(grads["a"]), grads["b"]
        (6.0, 3.0, None)
        >>> gradtx.compute_gradients(lambda p: p["a"] ** 2, params)[1]["b"] is None  # never read
        True
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
    if packing.has_packed(params):
        if var_list is not None:
            raise ValueError(
                "`compute_gradients`: `var_list` selects parameters by key path, which packed "
                "parameters do not have; pass `var_list=None` (or train them unpacked)."
            )
        return out, grads
    flat, treedef = jax.tree_util.tree_flatten_with_path(grads)
    names = [jax.tree_util.keystr(path) or "<root>" for path, _ in flat]
    found = _dependence.reached(pullback, cotangent)
    grads = jax.tree.unflatten(
        treedef, [g if f is not False else None for (_, g), f in zip(flat, found, strict=True)]
    )
    if var_list is not None:
        grads = _masks.select(
            "compute_gradients",
            _masks.resolve_mask("compute_gradients", var_list, params, arg="var_list"),
            grads,
        )
    _check_some_gradient(names, found, grads)
    return out, grads


def _check_some_gradient(names: list[str], found: list[bool | None], grads: Any) -> None:
    """Raise TF's "No gradients provided for any variable" when no float parameter gets one."""
    if all(f is None for f in found) or any(
        jnp.issubdtype(g.dtype, jnp.inexact) for g in jax.tree.leaves(grads)
    ):
        return
    reached = [n for n, f in zip(names, found, strict=True) if f]
    if not reached:
        unused = _listing([n for n, f in zip(names, found, strict=True) if f is False])
        raise ValueError(
            "`compute_gradients`: no gradients provided for any variable: the loss does not depend on "
            f"any of the parameters {unused} (or only through `jax.lax.stop_gradient`, integer casts, "
            "comparisons or rounding, which have no gradient); check that `loss_fn` reads its first "
            "argument."
        )
    raise ValueError(
        "`compute_gradients`: no gradients provided for any variable: `var_list` selects none of the "
        f"parameters the loss depends on, {_listing(reached)}; add them to `var_list`."
    )


def _listing(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return f"{shown}, ... ({len(names)} in all)" if len(names) > limit else shown


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
    updates, opt_state = _factory.with_extra_args_support(tx).update(grads, opt_state, params, **extra_args)
    return _updates.apply_updates(params, updates), opt_state


def minimize(
    loss_fn: Callable[..., Any],
    tx: _protocol.GradientTransformation,
    *,
    var_list: Any = None,
    has_aux: bool = False,
) -> Callable[..., tuple[_protocol.Params, Any, Any]]:
    """TF's `Optimizer.minimize` as a jitted step: `(params, opt_state, *batch) -> (params, opt_state, loss)`.

    `compute_gradients` then `apply_gradients`; with `has_aux` the last output is `(loss, aux)`.
    A parameter the loss has no gradient for keeps its value and its slots (as in TF).

    Args:
      loss_fn: `loss_fn(params, *batch)` -> scalar loss (or `(loss, aux)` with `has_aux`).
      tx: the optimizer.
      var_list: which params train (as in `compute_gradients`); all if None.
      has_aux: `loss_fn` also returns auxiliary data.

    Returns:
      A pure function `step(params, opt_state, *batch) -> (params, opt_state, loss)`.

    Raises:
      ValueError: when `step` is traced, if no parameter in `var_list` gets a gradient (see
        `compute_gradients`).

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

"""Target networks: trees of parameters moved toward another tree, `incremental_update` (Polyak averaging)
and `periodic_update` (a copy every K steps). Tree functions, not transforms (optax's `update.py`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import rounding as _rounding
from gradtx._core import walk as _walk
from gradtx._core.protocol import Params, Updates


def _check_trees(fn: str, new_tensors: Any, old_tensors: Any) -> None:
    new_def: Any = jax.tree.structure(new_tensors, is_leaf=lambda x: x is None)  # a PyTreeDef
    if new_def != jax.tree.structure(old_tensors, is_leaf=lambda x: x is None):
        raise _protocol.tree_mismatch_error(fn, "new_tensors", new_tensors, "old_tensors", old_tensors)


def incremental_update(new_tensors: Any, old_tensors: Any, step_size: Any) -> Any:
    r"""Move a moving average of parameters a step toward their latest values (Polyak averaging).

    .. math:: \bar\theta \leftarrow \tau\, \theta + (1 - \tau)\, \bar\theta

    leaf by leaf (`None` leaves stay `None`), in optax's arithmetic
    (`optax.incremental_update`): a target network for reinforcement learning, or averaged
    weights for evaluation. `gradtx.moving_average` keeps such an average as a transform's
    state; this is the bare tree function.

    Args:
      new_tensors: the latest values :math:`\theta` (the online parameters).
      old_tensors: the average :math:`\bar\theta`, a tree of the same structure.
      step_size: :math:`\tau`, in [0, 1] (a number or a scalar array).

    Returns:
      The new average, a tree like `old_tensors`.

    Raises:
      TypeError: for a non-number `step_size`.
      ValueError: for a `step_size` outside [0, 1], or trees of different structures.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.incremental_update({"w": jnp.array([1.0])}, {"w": jnp.array([0.0])}, 0.25)
        {'w': Array([0.25], dtype=float32)}

    References:
      Polyak, Juditsky, *Acceleration of stochastic approximation by averaging*, SIAM
      Journal on Control and Optimization, 1992.
    """
    fn = "incremental_update"
    _checks.check_number(fn, "step_size", step_size)
    _checks.check_in_range(fn, "step_size", step_size, 0.0, 1.0)
    _check_trees(fn, new_tensors, old_tensors)
    return jax.tree.map(
        lambda new, old: None if new is None else _formulas.moment_blend(new, old, step_size),
        new_tensors,
        old_tensors,
        is_leaf=lambda x: x is None,
    )


def periodic_update(new_tensors: Any, old_tensors: Any, steps: Any, update_period: Any) -> Any:
    r"""Every `update_period` steps, a copy of the latest parameters; otherwise the old copy.

    .. math:: \bar\theta \leftarrow \begin{cases} \theta & \text{steps} \bmod K = 0 \\
        \bar\theta & \text{otherwise} \end{cases}

    DQN's target network (`optax.periodic_update`); jittable: `steps` may be traced.

    Args:
      new_tensors: the latest values :math:`\theta` (the online parameters).
      old_tensors: the slow copy :math:`\bar\theta`, a tree of the same structure.
      steps: the number of updates of the online parameters (an int or an int array).
      update_period: :math:`K`, every how many steps the copy is made, >= 1.

    Returns:
      `new_tensors` or `old_tensors`.

    Raises:
      TypeError: for a non-integer `update_period`.
      ValueError: for an `update_period` below 1, or trees of different structures.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> new, old = {"w": jnp.array([1.0])}, {"w": jnp.array([0.0])}
        >>> gradtx.periodic_update(new, old, 3, 2), gradtx.periodic_update(new, old, 4, 2)
        ({'w': Array([0.], dtype=float32)}, {'w': Array([1.], dtype=float32)})

    References:
      Mnih et al., *Human-level control through deep reinforcement learning*, Nature 2015.
    """
    fn = "periodic_update"
    if not _checks._is_traced(update_period):
        period = int(update_period) if _is_int_array(update_period) else update_period
        _checks.check_int(fn, "update_period", period, minimum=1)
    _check_trees(fn, new_tensors, old_tensors)
    return jax.lax.cond(jnp.mod(steps, update_period) == 0, lambda: new_tensors, lambda: old_tensors)


def _is_int_array(value: Any) -> bool:
    """A concrete 0-d integer array (given where a Python int is expected)."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.integer) and jnp.ndim(value) == 0


def apply_updates(params: Params, updates: Updates, *, key: Any = None) -> Params:
    """`params + updates`, leaf by leaf, each result cast back to its param's dtype.

    With `key`, bfloat16 params take the sum (computed in float32) rounded stochastically
    (`gradtx._core.rounding.stochastic_round`, each leaf with its own fold of `key`): an update
    smaller than half a bfloat16 step moves the param on average instead of never, so a bfloat16
    model trains without a float32 master copy. Pass a new key each step. Other params are as without it.

    A row-sparse update (`gradtx.sparse.RowSparse`) is scattered into its rows only; an
    `agn` update sets its parameter to the center on a communicating step (TF assigns it).
    A `None` update leaves its param unchanged (a variable without a gradient); `None`
    params stay `None`.

    Args:
      params: the current parameters.
      updates: updates with the structure of `params` (the output of a transform's `update`).
      key: a PRNG key (`jax.random.key`) for stochastic rounding of bfloat16 params, or None.

    Returns:
      The new parameters, with the dtypes of `params`.

    Raises:
      TreeMismatchError: if `updates` and `params` differ in structure.
      TypeError: with `key`, for a bfloat16 param with a row-sparse update.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.apply_updates({"w": jnp.ones(2, jnp.bfloat16)}, {"w": jnp.array([0.5, -0.5])})["w"]
        Array([1.5, 0.5], dtype=bfloat16)
    """
    leaf = iter(range(2**31))

    def add(p, u):
        if p is None or u is None:
            return p
        p = jnp.asarray(p)
        rounds = key is not None and p.dtype == jnp.bfloat16
        if _walk.is_update_object(u):  # a row-sparse update scatters its rows; AGN's pull assigns
            if rounds:
                raise TypeError(
                    "`apply_updates`: `key` rounds dense updates of bfloat16 params stochastically; got a"
                    f" {type(u).__name__} update of a bfloat16 param (pass key=None for it)."
                )
            return u.applied_to(p)
        if rounds:
            total = p.astype(jnp.float32) + jnp.asarray(u).astype(jnp.float32)
            return _rounding.stochastic_round(total, jax.random.fold_in(key, next(leaf)))
        return jnp.asarray(p + u).astype(p.dtype)

    return _walk.map_updates("apply_updates", add, params, updates, names=("params", "updates"))

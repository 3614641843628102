"""Local steps with periodic communication: `model_average`, `elastic_average` (EASGD); `agn` in `_agn.py`.

Each replica updates its own copy of the parameters with `tx` (no communication), and
every `interval_steps` / `communication_period` local steps the replicas communicate. The
step counter is identical on all replicas, so they all take the communicating branch of a
`lax.cond` together and the collectives run only on those steps. The parameters are
per-replica values: under `jax.shard_map(..., check_vma=True)` the gradients must be each
replica's own (see `_axes.require_per_replica`), and the parameters leave the mapped
function per replica (e.g. `out_specs=P(axis)` on a stacked copy).

A row-sparse gradient reaches `tx` as is on local steps, but the updates these wrappers
return are dense (the communicating steps change every row): untouched rows get exact zeros.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import hyper as _hyper
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import walk as _walk
from gradtx.parallel import _axes


def _to_varying(tree: Any, axes: tuple, checked: bool) -> Any:
    """Updates are per-replica: type them as varying over `axes` in both branches of the cond."""
    if not checked:
        return tree

    def cast(x):
        missing = tuple(a for a in axes if a not in _axes.varying(x))
        return jax.lax.pcast(x, missing, to="varying") if missing else x

    return jax.tree.map(cast, tree)


def _plus(p: jax.Array, u: jax.Array) -> jax.Array:
    """The new parameter `p + u` in the parameter's dtype (what `apply_updates` makes of a dense update)."""
    return (p + u).astype(p.dtype)


def _start(fn: str, axes: tuple, updates: Any, params: Any):
    if params is None:
        raise _protocol.missing_params(fn)
    n = _axes.bound_size(fn, axes)
    checked = _axes.vma_checked(axes)
    _axes.require_per_replica(fn, updates, axes, checked)
    return n, checked


class ModelAverageState(NamedTuple):
    """State of `model_average` (per replica)."""

    count: _protocol.Count  # int32: local steps (TF's local_step); params are averaged when k divides it
    inner: _protocol.OptState  # the replica's own state of the wrapped transform (never averaged, as in TF)


@_registry.wrapper("ModelAverageOptimizer")
def model_average(
    tx: Any, axis_name: _axes.AxisName, interval_steps: int = 100
) -> _protocol.GradientTransformation:
    r"""Local steps with `tx`; every `interval_steps` steps the parameters are averaged over the replicas.

    .. math::
        \theta_r \leftarrow \theta_r + u_r \ \text{(each step)}, \qquad
        \theta_r \leftarrow \frac{1}{N}\sum_{s} \theta_s \ \text{(when } \mathrm{count} \bmod k = 0\text{)}

    (TF's ModelAverageOptimizer: the local step is applied first, then the average is
    taken.) The inner optimizers' states stay per replica. The returned update on an
    averaging step is `mean - params`, so after `apply_updates` the replicas agree up to
    the rounding of `params + (mean - params)` (exactly when they are within a factor of
    two of each other).

    Step numbers: `tx`'s schedules see its own `count`, the local step (0, 1, 2, ... at
    the 1st, 2nd, 3rd step). TF's inner optimizer gets no step of its own; a schedule
    written on TF's `global_step` sees the number of averages done so far, since the
    chief increments `global_step` once per average. For TF's numbers give `tx` the
    schedule `lambda count: schedule(count // interval_steps)`.

    Args:
      tx: the local optimizer (gradtx or optax).
      axis_name: the mapped axis (or tuple of axes) of the replicas.
      interval_steps: local steps between averages, an int >= 1.

    Returns:
      A `GradientTransformation` with state `ModelAverageState`; `update` needs `params`.

    Raises:
      ValueError: if `interval_steps` < 1; at trace time, when `axis_name` is not bound or
        (under `check_vma=True`) the gradients are not per replica.
      TypeError: if `tx` is not a transform.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> n = jax.device_count()
        >>> mesh = jax.make_mesh((n,), ("data",))
        >>> tx = gradtx.parallel.model_average(gradtx.sgd(1.0), "data", interval_steps=2)
        >>> def run(g):  # replica r's gradient is -r: the copies drift apart, then meet
        ...     w, state = jnp.zeros(1), tx.init(jnp.zeros(1))
        ...     out = []
        ...     for _ in range(2):
        ...         u, state = tx.update(-g, state, w)
        ...         w = gradtx.apply_updates(w, u)
        ...         out.append(w)
        ...     return out[0], out[1]
        >>> g = jax.device_put(jnp.arange(n, dtype=jnp.float32), jax.NamedSharding(mesh, P("data")))
        >>> run = jax.jit(jax.shard_map(run, mesh=mesh, in_specs=P("data"), out_specs=P("data")))
        >>> first, second = map(np.asarray, run(g))
        >>> first.tolist() == list(range(n)), second.tolist() == [n - 1.0] * n  # step 2: all hold the mean
        (True, True)

    References:
      `tf.contrib.opt.ModelAverageOptimizer` (model_average_optimizer.py).
    """
    fn = "model_average"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_int(fn, "interval_steps", interval_steps, minimum=1)
    inner = _factory.member(tx)

    def init_fn(params):
        return ModelAverageState(count=_hyper.zero_count(), inner=inner.init(params))

    def update_fn(updates, state, params=None, **extra_args):
        _, checked = _start(fn, axes, updates, params)
        u, new_inner = inner.update(updates, state.inner, params, **extra_args)
        u = sparse.densify(u)
        count = _hyper.increment(state.count)

        keep = _to_varying(u, axes, checked)

        def average(_):
            def leaf(uu, p):
                return None if uu is None else jax.lax.pmean(_plus(p, uu), axes) - p

            return _axes.match_type(_to_varying(_walk.map_leaves(leaf, u, params), axes, checked), keep)

        u = jax.lax.cond(count % interval_steps == 0, average, lambda _: keep, None)
        return u, ModelAverageState(count=count, inner=new_inner)

    return _factory.composite(init_fn, update_fn, inner)


class ElasticAverageState(NamedTuple):
    """State of `elastic_average`."""

    count: _protocol.Count  # int32: local steps (TF's local_step)
    inner: _protocol.OptState  # the replica's own state of the wrapped transform
    global_center: _protocol.Updates  # TF's "global_center_variable": the center (identical on all replicas)
    local_center: _protocol.Updates  # TF's "local_center_variable": the center read at the last communication


def _check_rate(fn: str, name: str, value: Any) -> None:
    if value is not None:
        _checks.check_nonnegative(fn, name, value)
        _checks.check_finite(fn, name, value)


@_registry.wrapper("ElasticAverageOptimizer")
def elastic_average(
    tx: Any,
    axis_name: _axes.AxisName,
    communication_period: int = 10,
    moving_rate: _protocol.ScalarOrSchedule | None = None,
    rho: _protocol.ScalarOrSchedule | None = None,
    *,
    learning_rate: _protocol.ScalarOrSchedule | None = None,
) -> _protocol.GradientTransformation:
    r"""Elastic averaging SGD (EASGD): every `communication_period` steps replicas and center attract.

    Each step the gradient gets the elastic term of TF's `compute_gradients`
    (the gradient of :math:`\rho \cdot \tfrac12\lVert\theta_r - \tilde c\rVert^2`, with
    :math:`\tilde c` the center read at the last communication) and `tx` makes the local
    step :math:`\theta_r \leftarrow \theta_r + \mathrm{tx}(g_r + \rho(\theta_r - \tilde c))`.
    When `count` divides by the period, with :math:`c` the center and
    :math:`d_r = \theta_r - c`:

    .. math::
        \theta_r \leftarrow \theta_r - \alpha d_r, \qquad
        c \leftarrow c + \alpha \sum_r d_r, \qquad \tilde c \leftarrow c_{\text{old}}

    -- TF's update, with all replicas communicating at once (synchronous EASGD).
    :math:`\alpha` is `moving_rate`, by default :math:`0.9 / (\text{period} \cdot N)` as
    in TF. TF's default `rho` is `moving_rate / learning_rate` of the inner optimizer; a
    transform does not expose its rate, so give either `learning_rate` (TF's default
    `rho` then follows) or `rho` itself (`rho=0.0`: no elastic term, TF's suggestion for
    async training); with neither, the factory raises rather than train with another
    `rho` than TF's. Both centers start at the initial parameters. The update on a
    communicating step is returned as an increment, so after `apply_updates` a replica
    holds :math:`\theta_r - \alpha d_r` up to the rounding of one addition (TF assigns).

    Args:
      tx: the local optimizer (gradtx or optax).
      axis_name: the mapped axis (or tuple of axes) of the replicas.
      communication_period: local steps between communications, an int >= 1.
      moving_rate: :math:`\alpha` >= 0 (a number or schedule); None: 0.9 / period / N.
      rho: the elastic coefficient >= 0 (a number or schedule); None: TF's default
        `moving_rate / learning_rate` (needs `learning_rate`).
      learning_rate: the inner optimizer's learning rate, used only for TF's default
        `rho = moving_rate / learning_rate`.

    Returns:
      A `GradientTransformation` with state `ElasticAverageState`; `update` needs `params`.

    Raises:
      ValueError: for a negative rate or a period < 1, or neither `rho` nor `learning_rate`;
        at trace time, when `axis_name` is not bound or (under `check_vma=True`) the
        gradients are not per replica.
      TypeError: if `tx` is not a transform.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, gradtx
        >>> from jax.sharding import PartitionSpec as P
        >>> n = jax.device_count()
        >>> mesh = jax.make_mesh((n,), ("data",))
        >>> tx = gradtx.parallel.elastic_average(gradtx.sgd(1.0), "data", 1, moving_rate=0.5, rho=0.0)
        >>> def step(g):  # from 0, replica r steps to r, then moves half-way back to the center 0
        ...     u, state = tx.update(-g, tx.init(jnp.zeros(1)), jnp.zeros(1))
        ...     return u, state.global_center
        >>> g = jax.device_put(jnp.arange(n, dtype=jnp.float32), jax.NamedSharding(mesh, P("data")))
        >>> step = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=P("data"), out_specs=(P("data"), P())))
        >>> u, center = map(np.asarray, step(g))
        >>> u.tolist() == [r / 2 for r in range(n)], center.tolist() == [0.5 * n * (n - 1) / 2]
        (True, True)

    References:
      Zhang, Choromanska, LeCun, *Deep learning with elastic averaging SGD*, NeurIPS 2015;
      `tf.contrib.opt.ElasticAverageOptimizer` (elastic_average_optimizer.py).
    """
    fn = "elastic_average"
    _checks.check_transform(fn, "tx", tx)
    axes = _axes.check_axis_name(fn, axis_name)
    _checks.check_int(fn, "communication_period", communication_period, minimum=1)
    _check_rate(fn, "moving_rate", moving_rate)
    _check_rate(fn, "rho", rho)
    if learning_rate is not None:
        _checks.check_positive(fn, "learning_rate", learning_rate)
    if rho is None and learning_rate is None:
        raise ValueError(
            f"`{_checks.api_name(fn)}`: TF's default `rho` is `moving_rate / learning_rate` of the inner "
            f"optimizer, which a transform does not expose: pass `learning_rate=` (the inner optimizer's "
            f"rate) for TF's default, or `rho=` itself (`rho=0.0` for no elastic term)."
        )
    inner = _factory.member(tx)
    period = communication_period
    no_rho = isinstance(rho, (int, float)) and rho == 0

    def init_fn(params):
        return ElasticAverageState(
            count=_hyper.zero_count(),
            inner=inner.init(params),
            global_center=jax.tree.map(jnp.asarray, params),
            local_center=jax.tree.map(jnp.asarray, params),
        )

    def update_fn(updates, state, params=None, **extra_args):
        n, checked = _start(fn, axes, updates, params)
        alpha = (
            _hyper.scalar(0.9 / period / n)
            if moving_rate is None
            else _hyper.scalar(_hyper.resolve(moving_rate, state.count))
        )
        if not no_rho:
            rho_ = (
                _hyper.scalar(_hyper.resolve(rho, state.count))
                if rho is not None
                else alpha / _hyper.scalar(_hyper.resolve(learning_rate, state.count))
            )
            updates = _walk.map_leaves(
                lambda g, p, lc: None if g is None else g + _hyper.like(rho_, g) * (p - lc).astype(g.dtype),
                sparse.densify(updates),
                params,
                state.local_center,
            )
        u, new_inner = inner.update(updates, state.inner, params, **extra_args)
        u = sparse.densify(u)
        count = _hyper.increment(state.count)
        keep = (_to_varying(u, axes, checked), state.global_center, state.local_center)

        def communicate(_):
            def leaf(uu, p, c, lc):
                if uu is None:  # no gradient, no step: TF communicates the variables that got one
                    return None, c, lc
                d = _plus(p, uu) - c
                a = _hyper.like(alpha, d)
                return uu - a * d, c + a * jax.lax.psum(d, axes), c

            step, center, local_center = _walk.split_leaves(
                leaf, 3, u, params, state.global_center, state.local_center
            )
            return _axes.match_type((_to_varying(step, axes, checked), center, local_center), keep)

        u, center, local_center = jax.lax.cond(count % period == 0, communicate, lambda _: keep, None)
        return u, ElasticAverageState(
            count=count, inner=new_inner, global_center=center, local_center=local_center
        )

    return _factory.composite(init_fn, update_fn, inner)

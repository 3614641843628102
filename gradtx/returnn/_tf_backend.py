"""RETURNN's TensorFlow-backend update step (`returnn/tf/updater.py`) from a config, as one gradtx transform.

`Updater.get_apply_grads_op` takes the raw gradients, runs `_post_process_grad` on each
(accumulation, noise, value clip, per-tensor norm clip, average-norm clip, global-norm clip,
NaN/inf filter, zeroing on a high global norm, in that order; both global-norm members use
the norm of the RAW gradients), applies the decoupled L2 constraints (`var -= var * 2 * l2`)
and then the optimizer at the step's learning rate (the epoch's rate, times
`dynamic_learning_rate`'s factor, times the optimizer dict's `learning_rate_multiplier`).
`tf_update` builds the same step from gradtx's building blocks; the optimizer itself is
chosen by `_tf_optimizer.optimizer_choice`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import walk as _walk
from gradtx.combinators import _clip, accumulate_gradients, add_noise, chain, clip, clip_by_norm
from gradtx.returnn._common import BackendUpdate, ReturnnConfigError
from gradtx.returnn._tf_optimizer import OptimizerChoice, optimizer_choice

_RAW_NORM = "returnn_raw_grad_norm"
"""The extra argument `_with_raw_global_norm` passes down: the global norm of the step's raw gradients."""

_CLIP_KEYS = (
    "gradient_noise",
    "gradient_clip",
    "gradient_clip_norm",
    "gradient_clip_avg_norm",
    "gradient_clip_global_norm",
    "grad_norm_to_clip_to_zero",
)
"""The numeric per-gradient keys of `_post_process_grad` (0 or absent: off; else > 0)."""

_ACCEPTED = (
    "accum_grad_multiple_step",
    "gradient_nan_inf_filter",
    "dynamic_learning_rate",
    "optimizer_use_locking",
)


def _positive_or_off(config: Mapping[str, Any], key: str) -> float:
    value = config.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`tf_update`: `{key}` must be a number, got {value!r}.")
    if value < 0:
        raise ReturnnConfigError(f"`tf_update`: `{key}` must be > 0 (or 0 for off), got {value!r}.")
    return float(value)


def _accum_steps(config: Mapping[str, Any]) -> int:
    value = config.get("accum_grad_multiple_step")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReturnnConfigError(
            f"`tf_update`: `accum_grad_multiple_step` must be an int >= 0 (0, 1: none), got {value!r}."
        )
    return value


def _dynamic_lr(config: Mapping[str, Any]) -> tuple[int, float] | None:
    value = config.get("dynamic_learning_rate")
    if not value:
        return None
    if not isinstance(value, Mapping) or set(value) != {"interval", "decay"}:
        raise ReturnnConfigError(
            f'`tf_update`: `dynamic_learning_rate` must be the dict {{"interval": n, "decay": d}} (the rate '
            f"times d ** (step % n)), got {value!r}; a function of the step is code, which a config read "
            "without executing it cannot run: give the schedule to the lead's learning-rate control instead."
        )
    interval, decay = value["interval"], value["decay"]
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise ReturnnConfigError(
            f'`tf_update`: `dynamic_learning_rate["interval"]` must be an int >= 1, got {interval!r}.'
        )
    if isinstance(decay, bool) or not isinstance(decay, (int, float)):
        raise TypeError(f'`tf_update`: `dynamic_learning_rate["decay"]` must be a number, got {decay!r}.')
    return interval, float(decay)


def _refuse_unsupported(config: Mapping[str, Any]) -> None:
    for key in ("gradient_clip_global_norm_tag", "global_norm_tag"):
        if config.get(key) is not None:
            raise ReturnnConfigError(
                f"`tf_update`: `{key}` = {config[key]!r}: a norm tag selects the variables of the layers "
                "whose `updater_opts` carry the tag, and gradtx has no layers; remove it, or clip each group "
                "with `gradtx.partition(...)` around `gradtx.clip_by_global_norm`."
            )
    if config.get("maximize_grad_norm"):
        raise ReturnnConfigError(
            f"`tf_update`: `maximize_grad_norm` = {config['maximize_grad_norm']!r} adds the gradient of "
            "-factor * (global gradient norm), a second backprop through the loss, which a gradient "
            "transformation never sees; remove it, or add that term to the loss."
        )


def _check_l2(l2: Any) -> None:
    for leaf in jax.tree.leaves(l2):
        if isinstance(leaf, bool) or not isinstance(leaf, (int, float)) or leaf < 0:
            raise TypeError(
                f"`tf_update`: `l2` must be a float >= 0 or a pytree of them (None: no L2), got {leaf!r}."
            )


def _l2_leaves(l2: Any, params: Any) -> list[Any]:
    """One L2 value (or None) per leaf of `params`, `l2` being a number or a prefix tree of them."""
    treedef: Any = jax.tree.structure(params)  # a PyTreeDef
    if isinstance(l2, (int, float)):
        return [l2] * treedef.num_leaves
    try:
        full = jax.tree.map(
            lambda v, sub: jax.tree.map(lambda _: v, sub), l2, params, is_leaf=lambda x: x is None
        )
    except ValueError:
        raise _protocol.tree_mismatch_error(
            "tf_update", "l2", l2, "params", params, want="must match (l2 may be a prefix of params)"
        ) from None
    return treedef.flatten_up_to(full)


def _decoupled_constraints(opt: Any, l2: Any) -> _protocol.GradientTransformation:
    """Before `opt`, `param -= param * 2 * l2` on each parameter with an L2 and a gradient."""
    inner = _factory.member(opt)

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params("tf_update (decouple_constraints)")
        treedef: Any  # a PyTreeDef
        p_leaves, treedef = jax.tree.flatten(params)
        g_leaves = treedef.flatten_up_to(updates)
        decay = [
            None if g is None or not c else p * jnp.asarray(c * 2.0, p.dtype)
            for g, p, c in zip(g_leaves, p_leaves, _l2_leaves(l2, params), strict=True)
        ]
        decayed = [p if d is None else p - d for p, d in zip(p_leaves, decay, strict=True)]
        out, state = inner.update(updates, state, treedef.unflatten(decayed), **extra_args)
        o_leaves = treedef.flatten_up_to(out)
        o_leaves = [o if d is None else o - d for o, d in zip(o_leaves, decay, strict=True)]
        return treedef.unflatten(o_leaves), state

    return _factory.composite(inner.init, update_fn, inner)


def _with_raw_global_norm(tx: Any) -> _protocol.GradientTransformation:
    """Run `tx` with the global norm of the incoming (raw) gradients as the extra argument `_RAW_NORM`."""
    inner = _factory.member(tx)

    def update_fn(updates, state, params=None, **extra_args):
        return inner.update(
            updates, state, params, **{**extra_args, _RAW_NORM: _formulas.global_norm(updates)}
        )

    return _factory.composite(inner.init, update_fn, inner)


def _raw_norm(fn: str, extra_args: Mapping[str, Any]) -> jax.Array:
    if _RAW_NORM not in extra_args:
        raise _protocol.missing_extra_arg(fn, _RAW_NORM, "gradtx.global_norm(raw_grads)")
    return extra_args[_RAW_NORM]


def _by_raw_norm(fn: str, leaf_of_norm: Any) -> _protocol.GradientTransformation:
    """A stateless transform `g -> leaf_of_norm(g, raw_norm)` with the raw global norm from the extra args."""

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params
        norm = _raw_norm(fn, extra_args)

        def leaf(g):  # a row-sparse gradient in its values, as TF treats `IndexedSlices`
            return _walk.with_values(g, leaf_of_norm(_walk.values_of(g), norm))

        return _walk.map_updates(fn, leaf, updates), state

    return _protocol.ElementWise(init_fn, update_fn)


def _clip_by_raw_global_norm(max_norm: float) -> _protocol.GradientTransformation:
    """`tf.clip_by_global_norm(grads, max_norm, use_norm=raw_norm)`: scale `c * min(1/n, 1/c)` (NaN: NaN)."""

    def leaf(g, norm):
        return g * _clip.global_norm_scale(norm, max_norm).astype(g.dtype)

    return _by_raw_norm("gradient_clip_global_norm", leaf)


def _zero_on_high_raw_norm(threshold: float) -> _protocol.GradientTransformation:
    """`grad_norm_to_clip_to_zero`: all gradients 0 when the raw global norm is > `threshold` or NaN/inf."""

    def leaf(g, norm):
        high = jnp.logical_or(~jnp.isfinite(norm), norm > jnp.asarray(threshold, norm.dtype))
        return jnp.where(high, jnp.zeros_like(g), g)

    return _by_raw_norm("grad_norm_to_clip_to_zero", leaf)


def _clip_by_average_norm(max_norm: float) -> _protocol.GradientTransformation:
    """`tf.compat.v1.clip_by_average_norm` per tensor: `g * c * min(size / |g|, 1 / c)`."""

    def leaf(g):
        c = jnp.asarray(max_norm, g.dtype)
        inv = jax.lax.rsqrt(jnp.sum(g * g)) * jnp.asarray(g.size, g.dtype)
        return g * c * jnp.minimum(inv, jnp.asarray(1.0, g.dtype) / c)

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        return _walk.map_updates("gradient_clip_avg_norm", leaf, sparse.densify(updates)), state

    return _protocol.LeafWise(init_fn, update_fn)


def _nan_inf_to_zero() -> _protocol.GradientTransformation:
    """RETURNN's `nan_to_num(grad, nan_num=0, inf_num=0)`: every NaN and infinity becomes 0."""

    def init_fn(params):
        del params
        return _protocol.EmptyState()

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args

        def leaf(g):  # a row-sparse gradient in its values (RETURNN's `nan_to_num` of `IndexedSlices`)
            v = _walk.values_of(g)
            return _walk.with_values(g, jnp.where(jnp.isfinite(v), v, jnp.zeros_like(v)))

        return _walk.map_updates("gradient_nan_inf_filter", leaf, updates), state

    return _protocol.ElementWise(init_fn, update_fn)


def _step_rate(
    learning_rate: Any, choice: OptimizerChoice, dynamic: tuple[int, float] | None, accum: int
) -> Any:
    """The optimizer's rate, in TF's float32: `lr * decay ** (global_step % interval) * multiplier`.

    With `dynamic`, a schedule of the optimizer's count (applied updates): with accumulation over
    `n` steps the k-th applied update runs at global step `k * n + n - 1`.
    """
    if dynamic is None and choice.lr_multiplier is None:
        return learning_rate

    def rate(count: Any = None) -> jax.Array:
        lr = jnp.asarray(learning_rate, jnp.float32)
        if dynamic is not None:
            interval, decay = dynamic
            n = max(accum, 1)
            step = (jnp.asarray(count, jnp.int32) * n + (n - 1)) % interval
            lr = lr * jnp.power(jnp.float32(decay), step.astype(jnp.float32))
        if choice.lr_multiplier is not None:
            lr = lr * jnp.float32(choice.lr_multiplier)
        return lr

    return rate if dynamic is not None else rate()


def tf_update(config: Mapping[str, Any], *, l2: Any = None) -> BackendUpdate:
    """RETURNN's TF updater for `config`: gradient processing, decoupled constraints and the optimizer.

    The step, in RETURNN's order (`Updater.get_apply_grads_op` / `_post_process_grad`):
    `accum_grad_multiple_step` n (sum n gradients, apply at steps where `step % n == n - 1`:
    the optimizer and everything after the accumulation run only then), `gradient_noise`
    (truncated normal, stddev the value; seed `random_seed`, default 42), `gradient_clip`
    (value), `gradient_clip_norm` (per tensor), `gradient_clip_avg_norm`
    (`clip_by_average_norm`), `gradient_clip_global_norm` and `grad_norm_to_clip_to_zero`
    (both by the global norm of the step's raw gradients, before accumulation and clipping;
    a NaN/inf norm counts as too high), `gradient_nan_inf_filter` (NaN and inf become 0), then
    `decouple_constraints` (`param -= param * 2 * l2`, with `l2` given here, since gradtx has
    no layers; not scaled by the rate: `decouple_constraints_factor` is not read, as the
    installed RETURNN computes that factor and never uses it), then the optimizer
    (`_tf_optimizer.optimizer_choice`) at the rate
    `learning_rate * decay ** (step % interval) * learning_rate_multiplier`.

    Args:
      config: the config's globals (a dict; values as written in the config).
      l2: the L2 constraint per parameter that `decouple_constraints` decays by: a float for
        all, or a pytree of floats / None (no L2) matching the params or a prefix of them.
        Only with `decouple_constraints = True` (without it, L2 is a loss term).

    Returns:
      A `BackendUpdate`: `factory(learning_rate)` builds the step at the epoch's rate (a
      number or a traced scalar); `keys` are the config keys read and applied.

    Raises:
      ReturnnConfigError: for a key RETURNN refuses, one with no effect, or one gradtx
        cannot apply (norm tags, `maximize_grad_norm`, a callable `dynamic_learning_rate`).
      TypeError: for a value of the wrong type.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.returnn._tf_backend import tf_update
        >>> up = tf_update({"optimizer": {"class": "adam"}, "gradient_clip": 1.0})
        >>> tx = up.factory(0.1)
        >>> tx.update(jnp.array([5.0, -0.5]), tx.init(jnp.zeros(2)))[0]
        Array([-0.1,  0.1], dtype=float32)
        >>> sorted(up.keys)
        ['gradient_clip', 'optimizer']
    """
    if not isinstance(config, Mapping):
        raise TypeError(
            f"`tf_update`: `config` must be a dict of the config's globals, got {type(config).__name__}."
        )
    _refuse_unsupported(config)
    choice = optimizer_choice(config)
    accum = _accum_steps(config)
    noise, value, norm, avg_norm, global_norm, to_zero = (_positive_or_off(config, k) for k in _CLIP_KEYS)
    nan_filter = config.get("gradient_nan_inf_filter")
    if nan_filter is not None and not isinstance(nan_filter, (bool, int)):
        raise TypeError(f"`tf_update`: `gradient_nan_inf_filter` must be a bool, got {nan_filter!r}.")
    dynamic = _dynamic_lr(config)
    decouple = config.get("decouple_constraints")
    if decouple and l2 is None:
        raise ReturnnConfigError(
            "`tf_update`: `decouple_constraints = True` decays every parameter whose layer has an L2 "
            "(`param -= param * 2 * l2`), and gradtx has no layers: pass `l2=` (a float for all parameters, "
            "or a pytree of floats / None matching the params)."
        )
    if l2 is not None and not decouple:
        raise ReturnnConfigError(
            "`tf_update`: `l2` has no effect without `decouple_constraints = True`: RETURNN then adds L2 to "
            "the loss, not in the updater; add it to your loss, or set `decouple_constraints = True`."
        )
    if l2 is not None:
        _check_l2(l2)
    seed = config.get("random_seed", 42)
    if noise and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(
            f"`tf_update`: `random_seed` must be an int (the gradient noise's seed), got {seed!r}."
        )
    keys = set(choice.keys) | {k for k in (*_CLIP_KEYS, *_ACCEPTED, "decouple_constraints") if k in config}
    keys |= {
        k for k in ("gradient_clip_global_norm_tag", "global_norm_tag", "maximize_grad_norm") if k in config
    }
    if noise and "random_seed" in config:
        keys.add("random_seed")

    def factory(learning_rate: Any) -> _protocol.GradientTransformation:
        members: list[Any] = []
        if noise:
            members.append(add_noise(noise, seed))
        if value:
            members.append(clip(value))
        if norm:
            members.append(clip_by_norm(norm))
        if avg_norm:
            members.append(_clip_by_average_norm(avg_norm))
        if global_norm:
            members.append(_clip_by_raw_global_norm(global_norm))
        if nan_filter:
            members.append(_nan_inf_to_zero())
        if to_zero:
            members.append(_zero_on_high_raw_norm(to_zero))
        opt = choice.build(_step_rate(learning_rate, choice, dynamic, accum))
        members.append(_decoupled_constraints(opt, l2) if decouple else opt)
        tx = chain(*members) if len(members) > 1 else members[0]
        if accum > 1:
            tx = accumulate_gradients(tx, accum, use_grad_mean=False)
        if global_norm or to_zero:
            tx = _with_raw_global_norm(tx)
        return tx

    return BackendUpdate(factory, frozenset(keys))

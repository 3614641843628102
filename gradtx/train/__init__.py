"""The TF1 training step in functional form: `optimize_loss` and its `TrainState` (and, from
`gradtx.train._workflow`, `compute_gradients`, `apply_gradients`, `minimize`).

`optimize_loss` follows `tf.contrib.layers.optimize_loss` step by step: gradients, then
noise (`gradient_noise_scale`), then multipliers (`gradient_multipliers`), then clipping
(`clip_gradients`), then the optimizer, which alone sees the learning rate.
"""

from __future__ import annotations

import inspect
import numbers
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx import combinators, packing, registry
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import masks as _masks
from gradtx._core import naming as _naming
from gradtx._core import protocol as _protocol
from gradtx._core import updates as _updates
from gradtx._core import walk as _walk
from gradtx.train._workflow import apply_gradients, compute_gradients, minimize  # noqa: F401  (gradtx.train's names)

OPTIMIZER_SUMMARIES = ("learning_rate", "loss", "gradients", "gradient_norm", "global_gradient_norm")
"""The summaries `optimize_loss` can return (TF's `OPTIMIZER_SUMMARIES`)."""
DEFAULT_SUMMARIES = ("loss", "learning_rate", "global_gradient_norm")
"""The summaries returned when `summaries` is None (TF's default list)."""


class TrainState(NamedTuple):
    """What `optimize_loss` trains: params, optimizer state, TF's global step, the RNG of the noise."""

    params: _protocol.Params
    opt_state: Any  # OptimizeLossState
    global_step: jax.Array  # int32; incremented by each step unless increment_global_step=False
    rng: jax.Array  # uint32 PRNG key data; split each step for the gradient noise


class OptimizeLossState(NamedTuple):
    """The optimizer state inside a `TrainState`, one part per stage of optimize_loss."""

    preprocess: Any  # noise and multipliers
    clip: Any  # clip_gradients
    optimizer: Any  # the optimizer (get_slot finds its slots here)


class OptimizeLoss(NamedTuple):
    """The result of `optimize_loss`: pure `init(params)` and `step(train_state, *batch)`."""

    init: Callable[[_protocol.Params], TrainState]
    step: Callable[..., tuple[TrainState, dict]]


def _error(message: str) -> ValueError:
    return ValueError(f"`optimize_loss`: {message}")


def _check_learning_rate(learning_rate: Any) -> None:
    if learning_rate is None or _checks.is_schedule(learning_rate):
        return
    if (
        isinstance(learning_rate, bool)
        or not isinstance(learning_rate, (numbers.Real, jax.Array))
        or getattr(learning_rate, "ndim", 0) != 0  # a Python number is 0-d
    ):
        raise _error(f"`learning_rate` must be a float, a 0-d array or a schedule, got {learning_rate!r}.")
    if not isinstance(learning_rate, jax.core.Tracer) and not float(learning_rate) >= 0:
        raise _error(f"`learning_rate` must be >= 0, got {learning_rate!r}.")


def _optimizer_builder(
    optimizer: Any, learning_rate: Any
) -> Callable[[Any], _protocol.GradientTransformation]:
    """A function `lr -> transform` for each way TF accepts an optimizer."""
    if isinstance(optimizer, str):
        if learning_rate is None:
            raise _error(
                f"`learning_rate` is None, but it must be given when `optimizer` is a name ({optimizer!r})."
            )
        try:
            factory = registry.entry(optimizer).factory
        except _protocol.UnknownNameError as err:
            raise _error(f"`optimizer` {optimizer!r} is unknown: {err}") from None
        needed = [
            p.name
            for p in inspect.signature(factory).parameters.values()
            if p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name != "learning_rate"
        ]
        if needed:
            args = ", ".join(f"{n}=..." for n in needed)
            raise _error(
                f"`optimizer` {optimizer!r} (`gradtx.{factory.__name__}`) needs "
                f"{', '.join(f'`{n}`' for n in needed)}, "
                f"which a name cannot give; pass a function of the learning rate instead, e.g. "
                f"`optimizer=lambda lr: gradtx.{factory.__name__}(lr, {args})`."
            )
        return lambda lr: factory(learning_rate=lr)
    if callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None)):
        return lambda lr: optimizer  # an instance: the rate only shows in the metrics, as in TF
    if callable(optimizer):

        def build(lr):
            tx = optimizer(lr) if learning_rate is not None else optimizer()
            if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
                raise _error(f"`optimizer` must return a gradient transformation, got {tx!r}.")
            return tx

        return build
    raise _error(
        "`optimizer` must be a registry name, a transform, a function of the learning rate, or (with "
        f"learning_rate=None) a function of no arguments; got {optimizer!r}."
    )


@_factory.api
def optimize_loss(
    loss_fn: Callable[..., Any],
    optimizer: Any,
    learning_rate: _protocol.ScalarOrSchedule | None = None,
    *,
    learning_rate_decay_fn: Callable[[Any, jax.Array], Any] | None = None,
    clip_gradients: float | Callable[[Any, Any], Any] | None = None,
    gradient_noise_scale: float | None = None,
    gradient_multipliers: dict[str, float] | None = None,
    variables: Any = None,
    summaries: Sequence[str] | None = None,
    axis_name: Any = None,
    increment_global_step: bool = True,
    has_aux: bool = False,
    seed: int = 0,
) -> OptimizeLoss:
    """`tf.contrib.layers.optimize_loss` as a pure `init` / `step` pair.

    Packed parameters (`gradtx.packing`) take one line: `trainer.init(gradtx.packing.pack(params))`;
    `loss_fn` still receives the params leaf by leaf (unpacked views), the gradients and the
    optimizer's slots stay packed, and `train_state.params` is the `Packed`.

    Each step: gradients of `loss_fn(params, *batch)`; `gradient_noise_scale` noise;
    `gradient_multipliers`; `clip_gradients` (a float: clip by global norm; a callable
    `fn(grads, params) -> grads`); then the optimizer with the (decayed) learning rate;
    then the global step increments. Only `variables` train; the others keep their values
    and get no slots.

    Args:
      loss_fn: `loss_fn(params, *batch)` -> scalar loss (or `(loss, aux)` with `has_aux`).
      optimizer: a registry name (`"SGD"`, `"Adam"`, `"Adagrad"`, `"Ftrl"`, `"Momentum"`,
        `"RMSProp"`, any gradtx name), a factory called with the learning rate (e.g.
        `gradtx.adagrad` or `lambda lr: gradtx.momentum(lr, 0.5)`), a zero-argument factory
        when `learning_rate` is None, or a transform (its own rate is used).
      learning_rate: a float >= 0, a 0-d array, a schedule of the global step, or None.
      learning_rate_decay_fn: `fn(learning_rate, global_step) -> rate` (e.g. a TF-style
        decay); ignored when `learning_rate` is None, as in TF.
      clip_gradients: a float (global-norm clipping) or `fn(grads, params) -> grads`.
      gradient_noise_scale: scale of the truncated-normal noise added to the gradients.
      gradient_multipliers: key path or pattern -> factor (see `scale_gradients`).
      variables: which params train (a tree of bools, a function of the params, or key-path
        patterns); all when None. Not with packed parameters (all of them train; freeze some
        inside the optimizer with `gradtx.freeze`).
      summaries: metrics to return, from `OPTIMIZER_SUMMARIES`; default
        `("loss", "learning_rate", "global_gradient_norm")`.
      axis_name: train data-parallel over this mapped axis as `CrossShardOptimizer` inside
        optimize_loss does: each replica takes the gradient of its own loss / N (TF scales
        the loss in `compute_gradients`), adds its own noise, multiplies and clips that,
        and the replicas' results are summed (`gradtx.parallel.cross_shard(..., "sum")`)
        just before the optimizer. So `clip_gradients` bounds each replica's 1/N-scaled
        gradient, and the norms in the metrics are of it. Call `step` inside `jax.shard_map`
        (either `check_vma`) or `jax.pmap`; the metrics are averaged over the replicas, so
        the `TrainState` stays replicated.
      increment_global_step: whether the step increments `global_step`.
      has_aux: `loss_fn` returns `(loss, aux)`; `aux` is returned in the metrics.
      seed: seed of the RNG in the `TrainState` (used for the gradient noise).

    Returns:
      `OptimizeLoss(init, step)`: `init(params) -> TrainState`,
      `step(train_state, *batch) -> (train_state, metrics)`; both jittable, the step
      donation-friendly (`jax.jit(trainer.step, donate_argnums=0)`).

    Raises:
      ValueError: as TF: the loss is not a scalar (when traced), an invalid learning rate,
        an optimizer of the wrong type or an unknown name, `clip_gradients` neither float
        nor callable, an unknown summary, no gradients (no trainable parameter), `variables`
        with packed parameters.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> loss = lambda p, x, y: jnp.mean((x @ p["w"] - y) ** 2)
        >>> trainer = gradtx.optimize_loss(loss, "SGD", learning_rate=0.1, clip_gradients=1.0)
        >>> state = trainer.init({"w": jnp.zeros(2)})
        >>> state, metrics = jax.jit(trainer.step)(state, jnp.eye(2), jnp.ones(2))
        >>> int(state.global_step), sorted(metrics)
        (1, ['clipped_gradient_norm', 'global_gradient_norm', 'learning_rate', 'loss'])
    """
    _checks.check_callable("optimize_loss", "loss_fn", loss_fn)
    _check_learning_rate(learning_rate)
    if learning_rate_decay_fn is not None:
        _checks.check_callable("optimize_loss", "learning_rate_decay_fn", learning_rate_decay_fn)
    if clip_gradients is not None and (
        isinstance(clip_gradients, bool)
        or not (isinstance(clip_gradients, numbers.Real) or callable(clip_gradients))
    ):
        raise _error(
            f"`clip_gradients` must be a float or a callable, got {clip_gradients!r} "
            f"of type {type(clip_gradients).__name__}."
        )
    if isinstance(clip_gradients, numbers.Real):
        _checks.check_positive("optimize_loss", "clip_gradients", clip_gradients)
    if gradient_noise_scale is not None:
        _checks.check_nonnegative("optimize_loss", "gradient_noise_scale", gradient_noise_scale)
    summaries = DEFAULT_SUMMARIES if summaries is None else tuple(summaries)
    for name in summaries:
        if name not in OPTIMIZER_SUMMARIES:
            raise _error(f"`summaries` must be from {list(OPTIMIZER_SUMMARIES)}, got {name!r}.")
    for flag in ("increment_global_step", "has_aux"):
        _checks.check_bool("optimize_loss", flag, locals()[flag])
    _checks.check_int("optimize_loss", "seed", seed)

    build_optimizer = _optimizer_builder(optimizer, learning_rate)
    initial_lr = (
        None if learning_rate is None else _lr_at(learning_rate, learning_rate_decay_fn, jnp.int32(0))
    )
    probe = build_optimizer(initial_lr)  # fail now on an unknown name or a bad factory
    optimizer_name = _naming.name_of(probe)

    pre = combinators.chain(
        *([combinators.add_noise(gradient_noise_scale, seed)] if gradient_noise_scale is not None else []),
        *([combinators.scale_gradients(gradient_multipliers)] if gradient_multipliers is not None else []),
    )
    if clip_gradients is None:
        clip = combinators.identity()
    elif callable(clip_gradients):
        clip = combinators.transform_gradients(clip_gradients)
    else:
        clip = combinators.clip_by_global_norm(clip_gradients)

    def optimizer_at(lr):
        tx = build_optimizer(lr)
        if axis_name is not None:
            from gradtx import parallel  # collectives live there

            tx = parallel.cross_shard(tx, axis_name, "sum")  # the replicas' gradients of loss / N
        return tx

    def trainable(params):
        if variables is None:
            return jax.tree.map(lambda _: True, params)
        if packing.has_packed(params):
            raise _error(
                "`variables` selects parameters by key path, which packed parameters do not have; "
                "pass `variables=None` and freeze parameters inside the optimizer (`gradtx.freeze`), "
                "or train them unpacked."
            )
        return _masks.resolve_mask("optimize_loss", variables, params, arg="variables")

    def init(params):
        p = _masks.select("optimize_loss", trainable(params), params)
        opt_state = OptimizeLossState(pre.init(p), clip.init(p), optimizer_at(initial_lr).init(p))
        rng = jax.random.key_data(jax.random.key(seed))
        return TrainState(params, opt_state, jnp.zeros([], jnp.int32), rng)

    def step(train_state, *batch):
        params, st = train_state.params, train_state.opt_state

        def checked_loss(p, *b):
            out = loss_fn(packing.unpack(p), *b)  # packed parameters: the loss reads their views
            loss = out[0] if has_aux else out
            if jnp.ndim(loss) != 0:
                raise _error(f"the loss must be a scalar, got shape {jnp.shape(loss)}.")
            return out

        differentiate_at = params
        if axis_name is not None:  # each replica's own gradient, also under shard_map(check_vma=True)
            from gradtx import parallel

            differentiate_at = parallel.per_replica(params, axis_name)
        out, grads = jax.value_and_grad(checked_loss, has_aux=has_aux)(differentiate_at, *batch)
        loss, aux = out if has_aux else (out, None)
        mask = trainable(params)
        grads = _masks.select("optimize_loss", mask, grads)
        if not any(g is not None for g in jax.tree.leaves(grads, is_leaf=lambda x: x is None)):
            raise _error("there are no gradients: no parameter is trainable (check `variables`).")
        p = _masks.select("optimize_loss", mask, params)
        rng, noise_key = jax.random.split(jax.random.wrap_key_data(train_state.rng))
        if axis_name is not None:  # CrossShardOptimizer.compute_gradients: d(loss / N); noise per replica
            scale = 1.0 / parallel.axis_size(axis_name)
            grads = _walk.map_updates(
                "optimize_loss",
                lambda g: _walk.with_values(
                    g, _walk.values_of(g) * jnp.asarray(scale, _walk.values_of(g).dtype)
                ),
                grads,
            )
            noise_key = parallel.replica_key(noise_key, axis_name)
        lr = (
            None
            if learning_rate is None
            else _lr_at(learning_rate, learning_rate_decay_fn, train_state.global_step)
        )

        grads, pre_state = pre.update(grads, st.preprocess, p, key=noise_key)
        pre_clip = grads
        grads, clip_state = clip.update(grads, st.clip, p)
        updates, opt_state = optimizer_at(lr).update(grads, st.optimizer, p)
        new_params = _updates.apply_updates(params, updates)

        metrics = _metrics(summaries, loss, lr, pre_clip, grads, clip_gradients, clip_state, aux, has_aux)
        if axis_name is not None:  # replicated outputs: metrics and the clip's recorded norm, averaged
            from gradtx import parallel

            metrics = parallel.mean_over(metrics, axis_name)
            clip_state = parallel.mean_over(clip_state, axis_name)
        global_step = (  # saturates at the int32 maximum (TF's int64 step would not wrap either)
            _hyper.increment(train_state.global_step) if increment_global_step else train_state.global_step
        )
        new_state = TrainState(
            new_params,
            OptimizeLossState(pre_state, clip_state, opt_state),
            jnp.asarray(global_step, jnp.int32),
            jax.random.key_data(rng),
        )
        return new_state, metrics

    _naming.label(step, f"optimize_loss({optimizer_name})")  # what a checkpoint of its TrainState records
    return OptimizeLoss(init, step)


def _lr_at(learning_rate: Any, decay_fn: Any, global_step: jax.Array) -> Any:
    lr = _hyper.resolve(learning_rate, global_step)
    if decay_fn is not None:
        lr = decay_fn(jnp.asarray(lr, jnp.float32), global_step)
    return lr


def _metrics(summaries, loss, lr, pre_clip, grads, clip_gradients, clip_state, aux, has_aux) -> dict:
    metrics = {}
    if "loss" in summaries:
        metrics["loss"] = loss
    if "learning_rate" in summaries and lr is not None:
        metrics["learning_rate"] = jnp.asarray(lr, jnp.float32)
    if "global_gradient_norm" in summaries or "gradient_norm" in summaries:
        if isinstance(clip_state, combinators.ClipByGlobalNormState):  # computed once, by the clip
            norm = clip_state.global_norm
            metrics["global_gradient_norm"] = norm
            c = jnp.asarray(clip_gradients, norm.dtype)
            metrics["clipped_gradient_norm"] = norm * (c * jnp.minimum(1.0 / norm, 1.0 / c)) + (norm - norm)
        else:
            metrics["global_gradient_norm"] = _formulas.global_norm(pre_clip)
            if clip_gradients is not None:
                metrics["clipped_gradient_norm"] = _formulas.global_norm(grads)
    if "gradients" in summaries or "gradient_norm" in summaries:
        per_variable = _walk.map_updates(
            "optimize_loss", lambda g: jnp.sqrt(_formulas.squared_norm(g)), packing.unpack(grads)
        )
        for name in ("gradients", "gradient_norm"):
            if name in summaries:
                metrics[name] = per_variable
    if has_aux:
        metrics["aux"] = aux
    return metrics

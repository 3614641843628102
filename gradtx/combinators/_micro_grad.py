"""`micro_vmap` and `micro_grad`: vmap and per-example gradients computed microbatch by microbatch
(`optax.microbatching`), built on `microbatch`."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx.combinators._microbatch import AccumulationType, _accumulator, microbatch


class MicrobatchOutputs(NamedTuple):
    """`micro_grad`'s per-example outputs (optax's `Aux`)."""

    values: Any  # the loss of each example
    metrics: Any  # `metrics_fn` of each example's gradient
    aux: Any  # the function's auxiliary output of each example (None without `has_aux`)


def micro_vmap(
    fun: Callable[..., Any],
    in_axes: int | Sequence[int | None] = 0,
    out_axes: Any = 0,
    *,
    microbatch_size: int | None = None,
    vmap_fn: Callable[..., Any] = jax.vmap,
    accumulator: Any = AccumulationType.CONCAT,
    num_real_microbatches: int | jax.Array | None = None,
) -> Callable[..., Any]:
    """`jax.vmap(fun, in_axes)` run `microbatch_size` rows at a time; the outputs concatenated or reduced.

    With the default CONCAT the result is `vmap`'s; MEAN or SUM (or a pytree prefix of
    them) reduce over the batch instead, without the whole batch of outputs ever in memory.
    `optax.microbatching.micro_vmap`.

    Args:
      fun: the function to map.
      in_axes: the mapped axis of each positional argument (None: not mapped).
      out_axes: must be 0.
      microbatch_size: the rows per microbatch; None: one vmap over the whole batch.
      vmap_fn: a function with `jax.vmap`'s signature.
      accumulator: how the microbatches' outputs combine (see `microbatch`).
      num_real_microbatches: run only this many microbatches.

    Returns:
      The mapped function.

    Raises:
      NotImplementedError: for `out_axes` other than 0.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.micro_vmap(lambda x: x**2, microbatch_size=2)(jnp.arange(6))
        Array([ 0,  1,  4,  9, 16, 25], dtype=int32)
    """
    if out_axes != 0:
        raise NotImplementedError(f"`micro_vmap`: `out_axes` must be 0, got {out_axes!r}.")
    in_axes = (in_axes,) if isinstance(in_axes, int) else tuple(in_axes)

    def reduced(*args, kwargs):
        out = vmap_fn(fun, in_axes, out_axes)(*args, **kwargs)
        return _accumulator(accumulator, jax.tree.leaves(out)[0].shape[0]).aggregate(out)

    run = microbatch(
        reduced,
        argnums=tuple(i for i, ax in enumerate(in_axes) if ax is not None),
        argnames="kwargs",
        microbatch_size=microbatch_size,
        accumulator=accumulator,
        in_axes=(*(ax for ax in in_axes if ax is not None), 0),
        num_real_microbatches=num_real_microbatches,
    )
    return lambda *args, **kwargs: run(*args, kwargs=kwargs)


def micro_grad(
    fun: Callable[..., Any],
    has_aux: bool = False,
    argnums: int | Sequence[int] = 0,
    *,
    batch_argnums: int | Sequence[int] = 1,
    keep_batch_dim: bool = True,
    microbatch_size: int | None = None,
    accumulator: Any = AccumulationType.SUM,
    transform_fn: Callable[[Any], Any] = lambda x: x,
    metrics_fn: Callable[[Any], Any] = lambda x: None,
    num_real_microbatches: int | jax.Array | None = None,
) -> Callable[..., Any]:
    """Per-example gradients of `fun`, each transformed by `transform_fn` (a clip, a square), then combined.

    Each example's gradient is taken on its own (`jax.value_and_grad` under `micro_vmap`),
    `metrics_fn` of it is kept per example, and `transform_fn` of it is summed (or
    averaged: `accumulator`) over the batch, `microbatch_size` examples at a time.
    `optax.microbatching.micro_grad`.

    Args:
      fun: `fun(params, batch, ...) -> loss` (or `(loss, aux)` with `has_aux`).
      has_aux: `fun` returns `(loss, aux)`.
      argnums: the arguments to differentiate.
      batch_argnums: the arguments with a batch axis (axis 0).
      keep_batch_dim: `fun` expects its batch arguments with a batch axis (of size 1).
      microbatch_size: the examples per microbatch; None: all at once.
      accumulator: how the transformed gradients combine over the batch (SUM by default).
      transform_fn: applied to each example's gradient before combining.
      metrics_fn: applied to each example's gradient; returned per example.
      num_real_microbatches: run only this many microbatches.

    Returns:
      A function of `fun`'s arguments returning `(combined, MicrobatchOutputs(values, metrics, aux))`,
      the outputs per example.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> loss = lambda w, x, y: 0.5 * jnp.mean((x @ w - y) ** 2)
        >>> grads, out = gradtx.micro_grad(loss, batch_argnums=(1, 2), microbatch_size=2)(
        ...     jnp.zeros(1), jnp.ones((4, 1)), jnp.array([0.0, 2.0, 4.0, 6.0]))
        >>> grads, out.values  # per-example gradients -y: summed
        (Array([-12.], dtype=float32), Array([ 0.,  2.,  8., 18.], dtype=float32))
    """
    batch_argnums = (batch_argnums,) if isinstance(batch_argnums, int) else tuple(batch_argnums)
    with_aux = fun if has_aux else (lambda *a, **k: (fun(*a, **k), None))
    value_and_grad = jax.value_and_grad(with_aux, argnums, has_aux=True)

    def grad_fn(*args, **kwargs):
        (value, aux), grad = value_and_grad(*args, **kwargs)
        return transform_fn(grad), MicrobatchOutputs(value, metrics_fn(grad), aux)

    in_axes = [0 if i in batch_argnums else None for i in range(max(batch_argnums) + 1)]
    run = micro_vmap(
        grad_fn,
        in_axes=in_axes,
        accumulator=(accumulator, AccumulationType.CONCAT),
        microbatch_size=microbatch_size,
        num_real_microbatches=num_real_microbatches,
    )
    if not keep_batch_dim:
        return run

    def with_batch_axis(*args, **kwargs):
        args = list(args)
        for i in batch_argnums:
            args[i] = jax.tree.map(lambda x: jnp.expand_dims(x, 1), args[i])
        return run(*args, **kwargs)

    return with_batch_axis

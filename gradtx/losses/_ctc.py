"""Connectionist temporal classification (CTC): the loss and its forward (alpha) log-probabilities."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import docs as _docs
from gradtx.losses._common import ArrayLike, check_rank, check_same_shape

_ctc_args = _docs.sections(
    CTC_ARGS="""
    logits: the logits of each class, `[B, T, K]` (batch, time frames, classes including the blank).
    logit_paddings: `[B, T]`, 1.0 where a frame `logits[b, t]` is padding, else 0.0.
    labels: the integer label sequences, `[B, N]`.
    label_paddings: `[B, N]`, 1.0 where `labels[b, n]` is padding, else 0.0; the labels must be
      right-padded (each row zeros, then ones).
    blank_id: the class of the blank symbol.
    log_epsilon: the stand-in for :math:`\\log 0`, finite so that the recursion stays stable.
    """
)


def _check(fn: str, logits: Any, logit_paddings: Any, labels: Any, label_paddings: Any) -> None:
    check_rank(fn, "logits", logits, 3, "batch, time, classes")
    check_rank(fn, "labels", labels, 2, "batch, label position")
    check_same_shape(fn, "labels", labels, "label_paddings", label_paddings)
    if jnp.shape(logits)[:2] != jnp.shape(logit_paddings):
        raise ValueError(
            f"`{fn}`: `logit_paddings` must have the shape of `logits[..., 0]`, {jnp.shape(logits)[:2]}; "
            f"got {jnp.shape(logit_paddings)}."
        )
    if jnp.shape(labels)[0] != jnp.shape(logits)[0]:
        raise ValueError(
            f"`{fn}`: `labels` must have the batch size of `logits`, {jnp.shape(logits)[0]}; "
            f"got {jnp.shape(labels)[0]}."
        )


@_ctc_args
def ctc_loss_with_forward_probs(
    logits: ArrayLike,
    logit_paddings: ArrayLike,
    labels: ArrayLike,
    label_paddings: ArrayLike,
    *,
    blank_id: int = 0,
    log_epsilon: ArrayLike = -1e5,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""CTC loss and the forward log-probabilities of the blank and label states.

    CTC scores every alignment :math:`\pi` of the labels to the frames, the labels with blanks
    :math:`\phi` inserted and symbols repeated; the loss is :math:`-\log \sum_\pi p(\pi)`, by the
    forward recursion over the states "after label n, on a blank" and "on label n":

    .. math::
        \alpha_{\mathrm{BLANK}}(t, n) = \sum_{\pi_{1:t-1}} p(\pi_t = \phi \mid \pi_{1:t-1}, y_{1:n}), \quad
        \alpha_{\mathrm{LABEL}}(t, n) = \sum_{\pi_{1:t-1}} p(\pi_t = y_n \mid \pi_{1:t-1}, y_{1:n-1})

    Args:
      {CTC_ARGS}

    Returns:
      `(loss, logalpha_blank, logalpha_nonblank)`: the loss of each sequence, `[B]`, and
      :math:`\log \alpha_{\mathrm{BLANK}}` and :math:`\log \alpha_{\mathrm{LABEL}}`, `[T, B, N + 1]`
      and `[T, B, N]`.

    Raises:
      ValueError: for `logits` not of rank 3, `labels` not of rank 2, paddings whose shapes are
        not those of `labels` and `logits[..., 0]`, or batch sizes that differ.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits = jnp.zeros((1, 2, 2))  # two frames, the blank and one symbol: 1/2 each
        >>> loss, logalpha_blank, logalpha_label = losses.ctc_loss_with_forward_probs(
        ...     logits, jnp.zeros((1, 2)), jnp.array([[1]]), jnp.zeros((1, 1))
        ... )
        >>> round(float(jnp.exp(-loss[0])), 4)  # three of the four paths align to [1]: "1 1", "1 -", "- 1"
        0.75
        >>> logalpha_blank.shape, logalpha_label.shape  # [T, B, N + 1] and [T, B, N]
        ((2, 1, 2), (2, 1, 1))

    References:
      Graves, Fernandez, Gomez, Schmidhuber, *Connectionist temporal classification: labelling
      unsegmented sequence data with recurrent neural networks*, ICML 2006.
    """
    _check("ctc_loss_with_forward_probs", logits, logit_paddings, labels, label_paddings)
    labels = jnp.asarray(labels)
    batch, max_label_len = labels.shape
    num_classes = jnp.shape(logits)[-1]

    logprobs = jax.nn.log_softmax(logits)
    label_lens = max_label_len - jnp.sum(label_paddings, axis=1).astype(jnp.int32)
    # repeat[b, n] = 1.0 where labels[b, n] == labels[b, n + 1]
    repeat = (labels[:, :-1] == labels[:, 1:]).astype(jnp.float32)
    repeat = jnp.pad(repeat, ((0, 0), (0, 1)))

    logprobs_phi = jnp.transpose(logprobs[:, :, blank_id : blank_id + 1], (1, 0, 2))  # [T, B, 1]
    one_hot = jax.nn.one_hot(labels, num_classes=num_classes)  # [B, N, K]
    logprobs_emit = jnp.transpose(jnp.einsum("btk,bnk->btn", logprobs, one_hot), (1, 0, 2))  # [T, B, N]

    logalpha_phi_init = (jnp.ones((batch, max_label_len + 1)) * log_epsilon).at[:, 0].set(0.0)
    logalpha_emit_init = jnp.ones((batch, max_label_len)) * log_epsilon

    def add_to_phi(phi: jax.Array, score: jax.Array) -> jax.Array:
        """`phi` with `score` added, in log space, to its states after a label (`phi[:, 1:]`)."""
        return jnp.concatenate([phi[:, :1], jnp.logaddexp(phi[:, 1:], score)], axis=-1)

    def step(carry: Any, frame: Any) -> Any:
        prev_phi, prev_emit = carry
        logprob_emit, logprob_phi, pad = frame
        # label -> blank (epsilon) transition, unless the next label repeats this one
        phi = add_to_phi(prev_phi, prev_emit + log_epsilon * repeat)
        # blank -> label and label -> same label
        next_emit = jnp.logaddexp(phi[:, :-1] + logprob_emit, prev_emit + logprob_emit)
        # blank self-loop, and label -> blank only where the next label repeats
        next_phi = add_to_phi(phi + logprob_phi, prev_emit + logprob_phi + log_epsilon * (1.0 - repeat))
        pad = pad.reshape((batch, 1))
        next_emit = pad * prev_emit + (1.0 - pad) * next_emit
        next_phi = pad * prev_phi + (1.0 - pad) * next_phi
        return (next_phi, next_emit), (next_phi, next_emit)

    frames = (logprobs_emit, logprobs_phi, jnp.transpose(logit_paddings, (1, 0)))
    _, (logalpha_phi, logalpha_emit) = jax.lax.scan(step, (logalpha_phi_init, logalpha_emit_init), frames)

    # the last frame's final label -> blank transition
    logalpha_phi_last = add_to_phi(logalpha_phi[-1], logalpha_emit[-1])
    logalpha_phi = logalpha_phi.at[-1].set(logalpha_phi_last)
    at_label_len = jax.nn.one_hot(label_lens, num_classes=max_label_len + 1)  # [B, N + 1]
    per_seq_loss = -jnp.einsum("bn,bn->b", logalpha_phi_last, at_label_len)
    return per_seq_loss, logalpha_phi, logalpha_emit


@_ctc_args
def ctc_loss(
    logits: ArrayLike,
    logit_paddings: ArrayLike,
    labels: ArrayLike,
    label_paddings: ArrayLike,
    *,
    blank_id: int = 0,
    log_epsilon: ArrayLike = -1e5,
) -> jax.Array:
    r"""CTC loss of each sequence: :math:`-\log` the total probability of the label sequence's alignments.

    See `ctc_loss_with_forward_probs` for the recursion.

    Args:
      {CTC_ARGS}

    Returns:
      The loss of each sequence, `[B]`.

    Raises:
      ValueError: for `logits` not of rank 3, `labels` not of rank 2, paddings whose shapes are
        not those of `labels` and `logits[..., 0]`, or batch sizes that differ.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx import losses
        >>> logits = jnp.zeros((1, 2, 2))  # two frames, the blank and one symbol: 1/2 each
        >>> losses.ctc_loss(logits, jnp.zeros((1, 2)), jnp.array([[1]]), jnp.zeros((1, 1)))
        Array([0.2876821], dtype=float32)
    """
    per_seq_loss, _, _ = ctc_loss_with_forward_probs(
        logits, logit_paddings, labels, label_paddings, blank_id=blank_id, log_epsilon=log_epsilon
    )
    return per_seq_loss

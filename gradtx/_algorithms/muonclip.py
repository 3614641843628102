"""MuonClip: pytorch-optimizer's Muon (heavy-ball momentum, orthogonalised) with Kimi K2's QK-clip of the
attention query and key weights after each step (`muon_clip`, `qk_clip`)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx import packing
from gradtx._algorithms.newton_schulz import rows_work, shape_ratio
from gradtx._algorithms.normuon import check_adamw, check_ns, muon_family
from gradtx._core import checks as _checks
from gradtx._core import hyper as _hyper
from gradtx._core import masks as _masks
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import rule_parts as _rule_parts
from gradtx._core import walk as _walk
from gradtx._core.chain import chain
from gradtx._core.rule import Slot, update_rule

QK_ROLES = {"query": "alpha", "key": "1 - alpha", "query_rotary": "1", "key_rotary": None}
"""A clipped weight's role -> the exponent of its head's factor (`key_rotary`: left as it is)."""


def _check_spec(fn: str, qk_clip: Any) -> Callable[[str], tuple[str, str] | None]:
    """`qk_clip` (a mapping `leaf path -> (attention name, role)` or a function of the path) as a function."""
    if callable(qk_clip):
        return qk_clip
    if not isinstance(qk_clip, Mapping):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `qk_clip` must be a dict `{{leaf path: (attention name, role)}}`, a "
            f"function of the leaf path giving one or None, or None; got {qk_clip!r}."
        )
    for path, spec in qk_clip.items():
        if not (
            isinstance(path, str)
            and isinstance(spec, Sequence)
            and len(spec) == 2
            and isinstance(spec[0], str)
            and spec[1] in QK_ROLES
        ):
            raise ValueError(
                f"`{_checks.api_name(fn)}`: `qk_clip[{path!r}]` must be (attention name, role) with the "
                f"role one of {', '.join(map(repr, QK_ROLES))}; got {spec!r}."
            )
    return lambda path: qk_clip.get(path)


def _clip_leaf(u, w, logits, role, *, threshold: float, alpha: float):
    """`(w + u) s - w`: the step `u`, then the rows of each head of `w + u` times its factor `s`."""
    if jnp.ndim(logits) != 1 or jnp.size(logits) == 0:  # shapes are static, traced or not
        raise ValueError("`qk_clip`: attention maximum logits must be a nonempty one-dimensional array.")
    heads = jnp.shape(logits)[0]
    if jnp.ndim(w) == 0 or w.shape[0] % heads:
        raise ValueError(
            f"`qk_clip`: a clipped weight's first axis must be divisible by its attention's {heads} heads; "
            f"got shape {jnp.shape(w)}."
        )
    exponent = {"query": alpha, "key": 1.0 - alpha, "query_rotary": 1.0}[role]
    logits = jnp.asarray(logits, jnp.float32)
    scales = (threshold / jnp.maximum(logits, threshold)) ** exponent
    rows = jnp.repeat(scales.astype(w.dtype), w.shape[0] // heads).reshape((-1,) + (1,) * (w.ndim - 1))
    return _placement.placed_like((w + u) * rows - w, w)


class QKClipState(NamedTuple):
    """State of `qk_clip` with a scheduled threshold or alpha (else `EmptyState()`)."""

    count: _protocol.Count  # int32: completed updates


@_registry.transform()
def qk_clip(
    qk_clip: Any, threshold: _protocol.ScalarOrSchedule = 100.0, alpha: _protocol.ScalarOrSchedule = 0.5
) -> _protocol.GradientTransformation:
    r"""Kimi K2's QK-clip: after the step, scale down each attention head whose logits grew too large.

    With :math:`S_h` the largest pre-softmax logit of head :math:`h` in this step's batch
    (`update`'s extra argument `attention_max_logits`, `{attention name: (heads,) array}`,
    reduced over microbatches and devices by the caller), :math:`\tau` = `threshold` and
    :math:`\gamma_h = \tau / \max(S_h, \tau)`, the rows of head :math:`h` of each weight
    (its first axis split into equal blocks, one per head) become

    .. math::
        W_h \leftarrow \gamma_h^{e} \,(W_h + u_h), \qquad
        e = \alpha \ (\text{query}),\ 1-\alpha \ (\text{key}),\ 1 \ (\text{query\_rotary})

    and 'key_rotary' weights (MLA's shared rotary key) are left alone: the update returned
    is :math:`\gamma^e (W + u) - W`, for a `u` this transform is chained after. An attention
    name missing from `attention_max_logits`, or no such argument, leaves its weights alone.
    pytorch-optimizer's `MuonClip.step(attention_max_logits=...)`.

    Args:
      qk_clip: which leaves are clipped: `{leaf path: (attention name, role)}` with the path
        slash-separated (`"layer0/attn/wq"`) and the role 'query', 'key', 'query_rotary' or
        'key_rotary', or a function of the path giving such a pair or None.
      threshold: :math:`\tau`, > 0 (number, scalar array or schedule).
      alpha: the query's share :math:`\alpha` of the factor, in [0, 1] (number, scalar array
        or schedule).

    Returns:
      A `LeafWise` transform with state `EmptyState()` (`QKClipState(count)` with a schedule);
      its `update` needs the params (with `attention_max_logits`). A row-sparse update of a
      clipped weight is densified.

    Raises:
      ValueError: for a non-positive `threshold`, `alpha` outside [0, 1], an unknown role;
        (at update time) logits that are not a nonempty vector, or a weight whose first axis
        the heads do not divide.
      TypeError: for a `qk_clip` that is neither a dict nor a function.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.qk_clip({"wq": ("attn", "query_rotary")}, threshold=10.0)
        >>> w = {"wq": jnp.ones((2, 3))}
        >>> u, _ = tx.update({"wq": jnp.zeros((2, 3))}, tx.init(w), w,
        ...                  attention_max_logits={"attn": jnp.array([20.0, 5.0])})
        >>> (w["wq"] + u["wq"])[:, 0]  # head 0 halved, head 1 under the threshold
        Array([0.5, 1. ], dtype=float32)

    References:
      Kimi Team, *Kimi K2: open agentic intelligence*, 2025 (arXiv:2507.20534); pytorch-optimizer's
      `MuonClip`.
    """
    fn = "qk_clip"
    spec = _check_spec(fn, qk_clip)
    _checks.check_finite(fn, "threshold", threshold)
    _checks.check_positive(fn, "threshold", threshold)
    _checks.check_in_range(fn, "alpha", alpha, 0.0, 1.0)
    scheduled = _hyper.any_schedule(threshold, alpha)

    def init_fn(params):
        del params
        return QKClipState(_hyper.zero_count()) if scheduled else _protocol.EmptyState()

    def update_fn(updates, state, params=None, *, attention_max_logits=None, **extra_args):
        del extra_args
        count = state.count if scheduled else None
        new_state = QKClipState(_hyper.increment(count)) if scheduled else state
        if attention_max_logits is None:
            return updates, new_state
        if params is None:
            raise _protocol.missing_params(fn)
        h = {"threshold": _hyper.resolve(threshold, count), "alpha": _hyper.resolve(alpha, count)}
        flat, treedef = jax.tree_util.tree_flatten_with_path(updates, is_leaf=_walk.is_update_leaf)
        ws = treedef.flatten_up_to(params)
        _rule_parts.refuse_integers(fn, updates, [u for _, u in flat], treedef, params, ws)
        out = []
        for (path, u), w in zip(flat, ws, strict=True):
            which = None if u is None else spec(_masks.path_str(path))
            if which is None or QK_ROLES[which[1]] is None or which[0] not in attention_max_logits:
                out.append(u)
            else:
                u = u.todense() if _walk.is_row_sparse(u) else u
                out.append(_clip_leaf(u, w, attention_max_logits[which[0]], which[1], **h))
        return treedef.unflatten(out), new_state

    return packing.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))


_clip = qk_clip  # under another name: `muon_clip`'s argument `qk_clip` hides it there


class ScaleByMuonClipState(NamedTuple):
    """State of MuonClip's direction."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # the heavy-ball velocity `beta m + g` (starts at 0)


def _muonclip_leaf(g, m, h, *, coeffs, use_adjusted_lr):
    """One matrix leaf: `(rho NS(m), m)` with `m <- beta m + g`."""
    m = h.beta * m + g
    if g.size == 0:
        return g, m
    o = (yield rows_work(m, coeffs))[0].reshape(g.shape) * shape_ratio(g.shape, use_adjusted_lr)
    return _placement.placed_like(o, g), m


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.MuonClip",
        {
            "lr": "learning_rate",
            "momentum": "beta",
            "weight_decay": "weight_decay",
            "qk_clip_threshold": "qk_clip_threshold",
            "qk_clip_alpha": "qk_clip_alpha",
            "ns_steps": "ns_steps",
            "ns_coeffs": "ns_coeffs",
            "use_adjusted_lr": "use_adjusted_lr",
            "adamw_lr": "adam_learning_rate",
            "adamw_betas": ("adam_b1", "adam_b2"),
            "adamw_wd": "adam_weight_decay",
            "adamw_eps": "adam_eps",
            # taken by the class through **kwargs (Muon's) and by its parameter groups: gradtx's names
            "weight_decouple": "weight_decouple",
            "qk_clip": "qk_clip",
            "use_muon": "use_muon",
        },
        defaults={"lr": 2e-2, "adamw_betas": (0.9, 0.95)},
        fixed={"maximize": False, "ns_method": "newton_schulz"},
        free=("foreach", "ns_reset_steps"),
    )
)
def muon_clip(
    learning_rate: _protocol.ScalarOrSchedule,
    beta: _protocol.ScalarOrSchedule = 0.95,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    qk_clip_threshold: _protocol.ScalarOrSchedule = 100.0,
    qk_clip_alpha: _protocol.ScalarOrSchedule = 0.5,
    ns_steps: int = 5,
    ns_coeffs: str | Sequence[float] | Sequence[Sequence[float]] = "original",
    adam_learning_rate: _protocol.ScalarOrSchedule = 3e-4,
    adam_b1: _protocol.ScalarOrSchedule = 0.9,
    adam_b2: _protocol.ScalarOrSchedule = 0.95,
    adam_eps: _protocol.ScalarOrSchedule = 1e-10,
    adam_weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    use_adjusted_lr: bool = True,
    weight_decouple: bool = True,
    qk_clip: Any = None,
    use_muon: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""MuonClip: Muon with a heavy-ball momentum, then Kimi K2's QK-clip of the attention weights.

    A Muon leaf :math:`W` (seen as a matrix of `shape[0]` rows, the other axes flattened):

    .. math::
        m_t = \beta m_{t-1} + g_t, \qquad W \leftarrow W - \eta\,\rho\,\operatorname{NS}(m_t)

    with :math:`\operatorname{NS}` the Newton-Schulz iteration from
    :math:`m / \max(\lVert m\rVert_F, 10^{-7})` (coefficients `ns_coeffs`) and :math:`\rho`
    Moonlight's shape factor :math:`0.2\sqrt{\max(m, n)}` (Keller Jordan's
    :math:`\sqrt{\max(1, m/n)}` without `use_adjusted_lr`); the leaves of rank < 2 get AdamW
    (`adam_*`; `use_muon` overrides: the reference's parameter groups); both with
    pytorch-optimizer's weight decay, decoupled (:math:`W \leftarrow W(1-\eta\lambda)`) or, with
    `weight_decouple=False`, added to the gradient. Then the weights `qk_clip` names are clipped
    by the largest attention logits of the step (`update`'s extra argument
    `attention_max_logits`): `gradtx.qk_clip(qk_clip, qk_clip_threshold, qk_clip_alpha)`, whose
    docstring has the formula. These are the numbers of pytorch-optimizer's `MuonClip`
    (`gradtx.get("MuonClip", ...)` takes its arguments, and `qk_clip` for its parameter groups'
    `qk_clip` and `attention_name` flags): it follows Kimi K2's MuonClip in the velocity
    :math:`\beta m + g` (not Muon's average) and the per-head clip, with Moonlight's RMS-matching
    factor. Its Newton-Schulz runs in bfloat16 there; here in the parameters' dtype (the tests
    compare with the reference's iteration in float32). A row-sparse gradient is densified.

    Args:
      learning_rate: :math:`\eta`, the Muon leaves' rate (number, scalar array or schedule).
      beta: the velocity's decay :math:`\beta`, in [0, 1).
      weight_decay: :math:`\lambda` of the Muon leaves, >= 0.
      qk_clip_threshold: the logit threshold :math:`\tau`, > 0.
      qk_clip_alpha: the query's share :math:`\alpha` of a head's factor, in [0, 1].
      ns_steps: the number of Newton-Schulz iterations, an int >= 1.
      ns_coeffs: the iteration's coefficients: a schedule's name ('original', 'quintic',
        'polar_express', 'polar_express_safer'), one triple :math:`(a, b, c)` or one per
        iteration (the last repeated if fewer than `ns_steps`).
      adam_learning_rate: the AdamW leaves' rate.
      adam_b1: the AdamW part's first-moment decay, in [0, 1).
      adam_b2: the AdamW part's second-moment decay, in [0, 1).
      adam_eps: the AdamW part's epsilon, >= 0.
      adam_weight_decay: the AdamW leaves' decay, >= 0.
      use_adjusted_lr: Moonlight's shape factor (True) or Keller Jordan's (False).
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      qk_clip: the clipped weights, as `gradtx.qk_clip`'s; None: no clipping (pytorch-optimizer's
        `Muon` with this velocity).
      use_muon: which leaves are Muon's: a tree of bools shaped like the params (or a prefix),
        a function of the params giving one, or None (the leaves of rank >= 2).
      mu_dtype: dtype of the velocity (default: each param's dtype).

    Returns:
      A `LeafWise` chain of the partition ``{"muon": ..., "adamw": ...}`` and the clip; its
      slots are `momentum` of the Muon leaves, `mu` and `nu` of the others; its `update` takes
      the extra argument `attention_max_logits`.

    Raises:
      ValueError: for a decay outside [0, 1), a negative rate, decay or epsilon, `ns_steps` < 1,
        malformed `ns_coeffs`, a non-positive threshold, `qk_clip_alpha` outside [0, 1] or an
        unknown role.
      TypeError: for non-bool flags, a `use_muon` tree with other leaves or a malformed `qk_clip`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.muon_clip(0.1, qk_clip={"wq": ("attn", "query")}, qk_clip_threshold=10.0)
        >>> params = {"wq": jnp.eye(2), "b": jnp.zeros(2)}
        >>> grads = {"wq": jnp.zeros((2, 2)), "b": jnp.zeros(2)}
        >>> u, _ = tx.update(grads, tx.init(params), params, attention_max_logits={"attn": jnp.array([40.0])})
        >>> params["wq"] + u["wq"]  # a zero step, then the head times (10 / 40)^0.5
        Array([[0.5, 0. ],
               [0. , 0.5]], dtype=float32)

    References:
      Kimi Team, *Kimi K2: open agentic intelligence*, 2025 (arXiv:2507.20534); Liu et al., *Muon
      is scalable for LLM training*, 2025 (arXiv:2502.16982); pytorch-optimizer's `MuonClip` (the
      reference of the tests).
    """
    fn = "muon_clip"
    coeffs = check_ns(fn, ns_coeffs, ns_steps)
    _checks.check_in_range(fn, "beta", beta, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "learning_rate", learning_rate)
    _checks.check_finite(fn, "qk_clip_threshold", qk_clip_threshold)
    _checks.check_positive(fn, "qk_clip_threshold", qk_clip_threshold)
    _checks.check_in_range(fn, "qk_clip_alpha", qk_clip_alpha, 0.0, 1.0)
    _checks.check_bool(fn, "use_adjusted_lr", use_adjusted_lr)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    check_adamw(fn, adam_learning_rate, adam_b1, adam_b2, adam_eps, adam_weight_decay)
    if qk_clip is not None:
        _check_spec(fn, qk_clip)
    matrices = update_rule(
        fn,
        ScaleByMuonClipState,
        functools.partial(_muonclip_leaf, coeffs=coeffs, use_adjusted_lr=use_adjusted_lr),
        hyper={"beta": beta},
        slots={"momentum": Slot(0.0, mu_dtype)},
        kind=_protocol.LeafWise,  # matrices are orthogonalised whole
        real_only="its Newton-Schulz iteration orthogonalizes real matrices",
    )
    muon = muon_family(
        fn,
        matrices,
        learning_rate,
        weight_decay,
        (adam_learning_rate, adam_b1, adam_b2, adam_eps, adam_weight_decay),
        weight_decouple=weight_decouple,
        use_muon=use_muon,
    )
    if qk_clip is None:
        return muon
    return chain(muon, _clip(qk_clip, qk_clip_threshold, qk_clip_alpha))


__all__ = ["QKClipState", "muon_clip", "qk_clip"]

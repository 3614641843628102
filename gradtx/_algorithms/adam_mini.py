"""Adam-mini: Adam with one second moment per block of parameters; pytorch-optimizer's `AdamMini`."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import masks as _masks
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import sliced as _sliced
from gradtx._core.rule import update_rule
from gradtx.combinators._masking import partition
from gradtx.combinators._weight_decay import torch_weight_decay

EMBED_BLOCKS = ("embed", "embd", "wte", "lm_head/weight", "output/weight")
"""Key-path patterns of the embeddings and output layers: a second moment per element (the reference's
`embed_blocks`, its dotted names written as key paths)."""

QK_BLOCKS = ("k_proj/weight", "q_proj/weight", "wq/weight", "wk/weight")
"""Key-path patterns of the query and key projections: a second moment per head."""

ATTN_BLOCKS = ("attn/attn/weight", "attn/qkv/weight")
"""Key-path patterns of fused query-key-value projections: one per query group and projection."""

NO_DECAY = ("norm", "ln_f")
"""Key-path patterns of the parameters that do not decay (normalisation layers)."""

BLOCKINGS = ("embed", "heads", "attn", "whole")
"""How a leaf is cut into blocks that share a second moment: per element, per head, per query group and
projection, or the whole leaf."""


class ScaleByAdamMiniState(NamedTuple):
    """State of `scale_by_adam_mini` (pytorch-optimizer's names)."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # the first moment, shaped like the param (starts at 0)
    v_mean: _protocol.Updates  # one second moment per block: shaped like the param ("embed"), (heads,),
    # (groups, projections) or () (starts at 0)


# per-block statistics: not compared with the params' shapes (`_tree_checks.check_shapes`)
setattr(ScaleByAdamMiniState, "slots_shaped_like_params", False)  # noqa: B010  (not a field)


def block_shape(shape: tuple[int, ...], blocking: str, head_size: int, groups: int, per_group: int):
    """The shape of a leaf's `v_mean`: the leaf's axes (`"embed"`), `(size // head_size,)` (`"heads"`),
    `(groups, per_group)` (`"attn"`) or `()` (`"whole"`); the leaf's size must divide evenly."""
    size = math.prod(shape)
    if blocking == "embed":
        return tuple(shape)
    if blocking == "whole":
        return ()
    blocks = (size // head_size,) if blocking == "heads" else (groups, per_group)
    if size % (head_size if blocking == "heads" else groups * per_group):
        raise ValueError(
            f"`adam_mini`: a leaf of shape {tuple(shape)} does not split into {blocking} blocks "
            f"{blocks if blocking == 'attn' else f'of {head_size} elements'} (check `num_embeds`, "
            f"`num_heads`, `num_query_groups` and the key-path patterns)."
        )
    return blocks


def _v_mean(p, path=(), **blocks):
    """A leaf's second moments, one per block of the whole leaf (on ZeRO's slices too)."""
    return _placement.replicated_on(p, block_shape(_sliced.whole_shape(path, p), **blocks))


def _adam_mini_leaf(g, m, v, h, *, path, blocking):
    """Adam with the second moment averaged over each block: per element (`"embed"`), over the leaf
    (`"whole"`), or over the rows of the leaf viewed as `v.shape + (-1,)`; on ZeRO's slices of a leaf, the
    blocks are the whole leaf's (`_sliced`)."""
    m = _formulas.moment_increment(m, g, h.b1)  # torch's lerp
    if blocking == "embed":
        mean_sq = g * g
    elif blocking == "whole":
        (mean_sq,) = _sliced.leaf_means(path, g * g, (None,))
    else:  # this part's share of each block's mean, combined over the parts
        share = jnp.reshape(_sliced.in_leaf(path, g * g), v.shape + (-1,))
        mean_sq = _sliced.total(jnp.mean(share, axis=-1))
    v = _formulas.moment_increment(v, mean_sq, h.b2)
    scale = 1 / ((jnp.sqrt(v) / jnp.sqrt(h.bc2) + h.eps) * h.bc1)
    if blocking in ("embed", "whole"):
        return m * scale, m, v

    def per_element(shape):
        return jnp.reshape(jnp.broadcast_to(scale[..., None], (*v.shape, math.prod(shape) // v.size)), shape)

    return _placement.placed_like(m * _sliced.leaf_part(path, g, per_element), g), m, v


@_registry.transform()
def scale_by_adam_mini(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    blocking: str = "whole",
    head_size: int = 1,
    groups: int = 1,
    per_group: int = 1,
) -> _protocol.GradientTransformation:
    r"""Adam-mini's direction: Adam with one second moment for each block of a leaf.

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad
        v_{t,b} = \beta_2 v_{t-1,b} + (1-\beta_2)\,\operatorname{mean}_{i \in b} g_{t,i}^2, \qquad
        u_{t,i} = \frac{m_{t,i}}{(1-\beta_1^t)\,\big(\sqrt{v_{t,b(i)}} / \sqrt{1-\beta_2^t} + \epsilon\big)}

    The blocks of a leaf, in its row-major order: each element (`"embed"`: Adam itself), each run of
    `head_size` elements (`"heads"`), `groups` x `per_group` equal runs (`"attn"`), or the whole leaf
    (`"whole"`). `adam_mini` picks the blocking of each leaf by its key path. A row-sparse gradient is
    densified.

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the block second moments, in [0, 1).
      eps: added to the corrected root, >= 0.
      blocking: `"embed"`, `"heads"`, `"attn"` or `"whole"`.
      head_size: the elements of a block of `"heads"`, >= 1.
      groups, per_group: the blocks of `"attn"`, >= 1.

    Returns:
      A `LeafWise` transform with state `ScaleByAdamMiniState(count, m, v_mean)`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps`, an unknown `blocking`, a size below 1;
        at `init`, for a leaf whose size the blocks do not divide.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adam_mini()
        >>> u, state = tx.update(jnp.array([3.0, -4.0]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 4) for x in u], round(float(state.v_mean), 4)  # g / rms(g); 0.001 mean(g^2)
        ([0.8485, -1.1314], 0.0125)

    References:
      Zhang et al., *Adam-mini: Use fewer learning rates to gain more*, ICLR 2025 (arXiv:2406.16793);
      pytorch-optimizer's `AdamMini` (the reference of the tests).
    """
    fn = "scale_by_adam_mini"
    _check(fn, b1, b2, eps)
    _checks.check_one_of(fn, "blocking", blocking, BLOCKINGS)
    for name, value in (("head_size", head_size), ("groups", groups), ("per_group", per_group)):
        _checks.check_int(fn, name, value, minimum=1)
    return _adam_mini_rule(fn, b1, b2, eps, blocking, head_size, groups, per_group)


def _adam_mini_rule(fn, b1, b2, eps, blocking, head_size, groups, per_group):
    blocks = {"blocking": blocking, "head_size": head_size, "groups": groups, "per_group": per_group}
    return update_rule(
        fn,
        ScaleByAdamMiniState,
        functools.partial(_adam_mini_leaf, blocking=blocking),
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": 0.0, "v_mean": 0.0 if blocking == "embed" else functools.partial(_v_mean, **blocks)},
        prepare=_formulas.torch_corrections,
        kind=_protocol.ElementWise if blocking == "embed" else _protocol.SliceWise,  # blocks: the leaf's
        paths=True,
        real_only="pytorch-optimizer's AdamMini refuses complex parameters",
    )


def _check(fn, b1, b2, eps):
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)


def _check_patterns(fn: str, name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"`{_checks.api_name(fn)}`: `{name}` must be a sequence of key-path patterns.")
    return tuple(value)


def _matches(path: Any, patterns: tuple[str, ...]) -> bool:
    return any(_masks.path_matches(p, path) for p in patterns)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.AdamMini",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "num_embeds": "num_embeds",
            "num_heads": "num_heads",
            "num_query_groups": "num_query_groups",
            "eps": "eps",
        },
        defaults={"lr": 1.0, "betas": (0.9, 0.999)},
        fixed={"model_sharding": False, "maximize": False},
    )
)
def adam_mini(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    weight_decay: _protocol.ScalarOrSchedule = 0.1,
    *,
    num_embeds: int = 2048,
    num_heads: int = 32,
    num_query_groups: int | None = None,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    embed_blocks: Sequence[str] = EMBED_BLOCKS,
    qk_blocks: Sequence[str] = QK_BLOCKS,
    attn_blocks: Sequence[str] = ATTN_BLOCKS,
    no_decay: Sequence[str] = NO_DECAY,
) -> _protocol.GradientTransformation:
    r"""Adam-mini: `scale_by_adam_mini` with each leaf's blocks chosen by its key path; pytorch-optimizer's
    `AdamMini`.

    .. math::
        w_t = w_{t-1} (1 - \eta\lambda) - \eta\, u_t

    with :math:`u_t` of `scale_by_adam_mini` and the blocking of each leaf by the first of these its key
    path matches (as a `mask`'s key-path patterns: a glob, or a substring of the slash-separated path):
    `embed_blocks` per element, `qk_blocks` per head of `num_embeds**2 // num_heads` elements,
    `attn_blocks` in `(num_query_groups, num_heads // num_query_groups + 2)` blocks, and any other leaf
    whole. The leaves matching `no_decay` do not decay. The reference takes a torch model and matches
    the same substrings in its parameters' dotted names: the torch parameter `h.0.attn.qkv.weight` is the
    leaf at key path `h/0/attn/qkv/weight` (`params["h"][0]["attn"]["qkv"]["weight"]`), and the default
    patterns are the reference's names in that form. `gradtx.get("AdamMini", lr=..., num_heads=...)` takes
    the reference's other arguments. The decay is decoupled and applied to every leaf but the norms, as
    the reference's groups do. The paper (Algorithm 3) gives values, projections and MLP layers one
    second moment per output neuron; the reference (and its authors' code) one per whole leaf, which is
    what this does.

    Args:
      learning_rate: :math:`\eta` (number, scalar array or schedule).
      b1, b2: decays of the first and the block second moments, in [0, 1).
      weight_decay: :math:`\lambda`, >= 0.
      num_embeds: the model's width, a multiple of `num_heads`.
      num_heads: attention heads, a multiple of `num_query_groups`.
      num_query_groups: query groups of grouped-query attention (default: `num_heads`).
      eps: added to the corrected root, >= 0.
      embed_blocks, qk_blocks, attn_blocks, no_decay: key-path patterns (see above).

    Returns:
      A `LeafWise` chain: a partition "embed" / "heads" / "attn" / "whole" of `scale_by_adam_mini`,
      the decay and the rate.

    Raises:
      ValueError: for an argument out of its range or sizes that do not divide; at `init`, for a leaf
        whose size its blocks do not divide.
      TypeError: for patterns that are not a sequence of strings.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adam_mini(0.1, weight_decay=0.0)
        >>> params = {"embed": jnp.zeros(2), "mlp": jnp.zeros(2)}
        >>> g = {"embed": jnp.array([3.0, -4.0]), "mlp": jnp.array([3.0, -4.0])}
        >>> u, _ = tx.update(g, tx.init(params), params)
        >>> [[round(float(x), 4) for x in u[k]] for k in ("embed", "mlp")]  # Adam's step; -lr g / rms(g)
        [[-0.1, 0.1], [-0.0849, 0.1131]]

    References:
      Zhang et al., *Adam-mini: Use fewer learning rates to gain more*, ICLR 2025 (arXiv:2406.16793);
      pytorch-optimizer's `AdamMini` (the reference of the tests).
    """
    fn = "adam_mini"
    _check(fn, b1, b2, eps)
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_int(fn, "num_embeds", num_embeds, minimum=1)
    _checks.check_int(fn, "num_heads", num_heads, minimum=1)
    groups = num_heads if num_query_groups is None else num_query_groups
    _checks.check_int(fn, "num_query_groups", groups, minimum=1)
    if num_embeds % num_heads or num_heads % groups:
        raise ValueError(
            f"`adam_mini`: `num_embeds` ({num_embeds}) must be a multiple of `num_heads` ({num_heads}), "
            f"and `num_heads` of `num_query_groups` ({groups})."
        )
    patterns = {
        "embed": _check_patterns(fn, "embed_blocks", embed_blocks),
        "heads": _check_patterns(fn, "qk_blocks", qk_blocks),
        "attn": _check_patterns(fn, "attn_blocks", attn_blocks),
    }
    no_decay = _check_patterns(fn, "no_decay", no_decay)

    def labels(params):
        def label(path, _):
            return next((k for k, pats in patterns.items() if _matches(path, pats)), "whole")

        return jax.tree_util.tree_map_with_path(label, params)

    def decays(params):
        return jax.tree_util.tree_map_with_path(lambda path, _: not _matches(path, no_decay), params)

    labels, decays = _masks.ShapeLabels(labels), _masks.ShapeLabels(decays)  # by key path: slices too

    sizes = (num_embeds * num_embeds // num_heads, groups, num_heads // groups + 2)
    rules = {k: _adam_mini_rule(fn, b1, b2, eps, k, *sizes) for k in BLOCKINGS}
    return torch_weight_decay(partition(rules, labels), learning_rate, weight_decay, mask=decays)


__all__ = ["ScaleByAdamMiniState", "adam_mini", "scale_by_adam_mini"]

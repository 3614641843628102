"""NorMuon: Muon's orthogonalised momentum normalised row by row by a second moment (`normuon`), and what
pytorch-optimizer's Muon family shares: its momentum, its routing of leaves to Muon or AdamW, its AdamW."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from gradtx._algorithms.adam import scale_by_bias_corrected_adam
from gradtx._algorithms.newton_schulz import coefficient_schedule, rows_work, shape_ratio
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._masking import partition
from gradtx.combinators._weight_decay import torch_weight_decay

UPDATE_SCALES = ("preserve_norm", "match_rms")
"""How NorMuon rescales its row-normalised update (pytorch-optimizer's `update_scale`)."""


def check_ns(fn: str, ns_coeffs: Any, ns_steps: int) -> tuple[tuple[float, float, float], ...]:
    """`ns_steps` and `ns_coeffs` checked; the coefficients of each iteration (pytorch-optimizer's rule: a
    schedule shorter than `ns_steps` repeats its last triple)."""
    _checks.check_int(fn, "ns_steps", ns_steps, minimum=1)
    return coefficient_schedule(fn, ns_coeffs, ns_steps, extend=True)


def momentum_direction(m, g, beta, nesterov: bool):
    """pytorch-optimizer's Muon momentum: `(direction, m)`, `m <- beta m + (1 - beta) g` (a `lerp`), the
    direction `m` or Nesterov's `beta m + (1 - beta) g`; no bias correction."""
    m = _formulas.optax_moment(m, g, beta)
    return (_formulas.optax_moment(m, g, beta) if nesterov else m), m


def row_statistic(p: Any) -> jax.Array:
    """A slot with one entry per row `p[i]` (zeros), placed like `p`'s first axis."""
    return _placement.reduced(p, (0,))


def _labels(use_muon: Any) -> Any:
    """`"muon"` / `"adamw"` labels from `use_muon` (None: the leaves of rank >= 2 are Muon's)."""

    def labels(params):
        flags = use_muon(params) if callable(use_muon) else use_muon
        if flags is None:
            return jax.tree.map(lambda p: "muon" if jnp.ndim(p) >= 2 else "adamw", params)
        return jax.tree.map(lambda f: "muon" if f else "adamw", flags)

    return labels


def check_routing(fn: str, use_muon: Any) -> None:
    """`use_muon` is None, a function of the params or a tree of bools."""
    if use_muon is None or callable(use_muon):
        return
    for leaf in jax.tree.leaves(use_muon):
        _checks.check_bool(fn, "use_muon", leaf)


def check_adamw(fn: str, lr: Any, b1: Any, b2: Any, eps: Any, weight_decay: Any) -> None:
    """The AdamW part's arguments, under their names in `fn`."""
    _checks.check_finite(fn, "adam_learning_rate", lr)
    _checks.check_nonnegative(fn, "adam_learning_rate", lr)
    _checks.check_in_range(fn, "adam_b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "adam_b2", b2, 0.0, 1.0, high_open=True)
    if eps is not None:  # AdaMuon's AdamW takes its `eps`
        _checks.check_finite(fn, "adam_eps", eps)
        _checks.check_nonnegative(fn, "adam_eps", eps)
    _checks.check_finite(fn, "adam_weight_decay", weight_decay)
    _checks.check_nonnegative(fn, "adam_weight_decay", weight_decay)


def muon_family(
    fn: str,
    matrices: _protocol.GradientTransformation,
    learning_rate: Any,
    weight_decay: Any,
    adam: tuple[Any, Any, Any, Any, Any],
    *,
    weight_decouple: bool,
    use_muon: Any,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """pytorch-optimizer's Muon family around the direction `matrices`: `partition` of the Muon leaves
    (`use_muon`) and the AdamW leaves, each with its rate and pytorch-optimizer's weight decay;
    `adam = (learning_rate, b1, b2, eps, weight_decay)` of the AdamW part (already checked)."""
    _checks.check_finite(fn, "weight_decay", weight_decay)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_bool(fn, "weight_decouple", weight_decouple)
    check_routing(fn, use_muon)
    adam_lr, b1, b2, eps, adam_wd = adam
    adamw = torch_weight_decay(
        scale_by_bias_corrected_adam(b1, b2, eps, nu_dtype=nu_dtype),
        adam_lr,
        adam_wd,
        decouple=weight_decouple,
    )
    muon = torch_weight_decay(matrices, learning_rate, weight_decay, decouple=weight_decouple)
    return partition({"muon": muon, "adamw": adamw}, _labels(use_muon))


class ScaleByNorMuonState(NamedTuple):
    """State of NorMuon's direction."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # the gradients' moving average (starts at 0)
    v: _protocol.Updates  # per row of each matrix: the moving average of its squared entries (starts at 0)


setattr(ScaleByNorMuonState, "slots_shaped_like_params", ("momentum",))  # noqa: B010  (not a field: v is per row)


def _normuon_leaf(g, m, v, h, *, coeffs, nesterov, update_scale, use_adjusted_lr):
    """One matrix leaf: `(update, momentum, v)`."""
    if g.size == 0:
        return g, m, v
    u, m = momentum_direction(m, g, h.beta, nesterov)
    o = (yield rows_work(u, coeffs))[0]
    norm = jnp.linalg.norm(o)
    v, v_placed = _formulas.optax_moment(_placement.whole(v), jnp.mean(o * o, axis=-1), h.b2), v
    o = o / (jnp.sqrt(v)[:, None] + h.eps)
    if update_scale == "preserve_norm":
        o = o * (norm / (jnp.linalg.norm(o) + h.eps)) * shape_ratio(g.shape, use_adjusted_lr)
    else:
        o = o * (0.2 * math.sqrt(o.size) / (jnp.linalg.norm(o) + h.eps))
    return _placement.placed_like(o.reshape(g.shape), g), m, _placement.placed_like(v, v_placed)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.NorMuon",
        {
            "lr": "learning_rate",
            "momentum": "beta",
            "beta2": "b2",
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "nesterov": "nesterov",
            "ns_steps": "ns_steps",
            "ns_coeffs": "ns_coeffs",
            "update_scale": "update_scale",
            "use_adjusted_lr": "use_adjusted_lr",
            "adamw_lr": "adam_learning_rate",
            "adamw_betas": ("adam_b1", "adam_b2"),
            "adamw_wd": "adam_weight_decay",
            "adamw_eps": "adam_eps",
            "eps": "eps",
            "use_muon": "use_muon",  # its parameter groups' flag, given per leaf (gradtx's argument)
        },
        defaults={"lr": 2e-2, "adamw_betas": (0.9, 0.95)},
        fixed={"maximize": False},
    )
)
def normuon(
    learning_rate: _protocol.ScalarOrSchedule,
    beta: _protocol.ScalarOrSchedule = 0.95,
    b2: _protocol.ScalarOrSchedule = 0.95,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    ns_steps: int = 5,
    ns_coeffs: str | Sequence[float] | Sequence[Sequence[float]] = "original",
    eps: _protocol.ScalarOrSchedule = 1e-10,
    adam_learning_rate: _protocol.ScalarOrSchedule = 3e-4,
    adam_b1: _protocol.ScalarOrSchedule = 0.9,
    adam_b2: _protocol.ScalarOrSchedule = 0.95,
    adam_eps: _protocol.ScalarOrSchedule = 1e-10,
    adam_weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    nesterov: bool = True,
    weight_decouple: bool = True,
    update_scale: str = "preserve_norm",
    use_adjusted_lr: bool = False,
    use_muon: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""NorMuon: Muon's orthogonalised momentum with each row normalised by a second moment; AdamW elsewhere.

    A Muon leaf :math:`W` (seen as a matrix of `shape[0]` rows, the other axes flattened)
    with gradient :math:`g_t`:

    .. math::
        m_t = \beta m_{t-1} + (1-\beta) g_t, \quad
        u_t = \beta m_t + (1-\beta) g_t \ (\text{Nesterov; else } m_t), \quad
        O_t = \operatorname{NS}(u_t), \\
        v_{t,i} = \beta_2 v_{t-1,i} + (1-\beta_2)\,\tfrac1n \textstyle\sum_j O_{t,ij}^2, \quad
        \hat O_{t,ij} = \frac{O_{t,ij}}{\sqrt{v_{t,i}} + \epsilon}, \\
        W \leftarrow W - \eta\,\rho\,\frac{\lVert O_t\rVert_F}{\lVert \hat O_t\rVert_F + \epsilon}\,\hat O_t
        \ \ (\text{'preserve\_norm'}), \qquad
        W \leftarrow W - \eta\,\frac{0.2\sqrt{mn}}{\lVert \hat O_t\rVert_F + \epsilon}\,\hat O_t
        \ \ (\text{'match\_rms'})

    with :math:`\operatorname{NS}` the Newton-Schulz iteration from
    :math:`u / \max(\lVert u\rVert_F, 10^{-7})` (coefficients `ns_coeffs`) and :math:`\rho`
    the shape factor :math:`\sqrt{\max(1, m/n)}` (or Moonlight's :math:`0.2\sqrt{\max(m, n)}`
    with `use_adjusted_lr`). These are the numbers of pytorch-optimizer's `NorMuon`
    (`gradtx.get("NorMuon", ...)` takes its arguments): 'preserve_norm', its default, is the
    authors' code; 'match_rms' is the paper's Algorithm 1 (update RMS 0.2). The momentum has no
    bias correction. The leaves of rank >= 2 are Muon's and the others AdamW's (`use_muon`
    overrides: the reference's parameter groups), with pytorch-optimizer's weight decay: decoupled
    (:math:`W \leftarrow W (1 - \eta\lambda)`) or, with `weight_decouple=False`, added to the
    gradient, in both parts. The reference iterates in bfloat16; gradtx in the parameters' dtype
    (its tests compare with the reference's iteration in float32). A row-sparse gradient is
    densified.

    Args:
      learning_rate: :math:`\eta`, the Muon leaves' rate (number, scalar array or schedule).
      beta: the momentum's decay :math:`\beta`, in [0, 1).
      b2: the row second moment's decay :math:`\beta_2`, in [0, 1).
      weight_decay: :math:`\lambda` of the Muon leaves, >= 0.
      ns_steps: the number of Newton-Schulz iterations, an int >= 1.
      ns_coeffs: the iteration's coefficients: a schedule's name ('original', 'quintic',
        'polar_express', 'polar_express_safer'), one triple :math:`(a, b, c)` or one per
        iteration (the last repeated if fewer than `ns_steps`).
      eps: :math:`\epsilon` of the row normalisation and of the rescaling, >= 0.
      adam_learning_rate: the AdamW leaves' rate.
      adam_b1: the AdamW part's first-moment decay, in [0, 1).
      adam_b2: the AdamW part's second-moment decay, in [0, 1).
      adam_eps: the AdamW part's epsilon, >= 0.
      adam_weight_decay: the AdamW leaves' decay, >= 0.
      nesterov: Nesterov's form of the momentum.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      update_scale: 'preserve_norm' or 'match_rms', as above.
      use_adjusted_lr: Moonlight's shape factor in 'preserve_norm' (unused in 'match_rms').
      use_muon: which leaves are Muon's: a tree of bools shaped like the params (or a prefix),
        a function of the params giving one, or None (the leaves of rank >= 2).
      mu_dtype: dtype of the momentum (default: each param's dtype).

    Returns:
      A `LeafWise` partition ``{"muon": ..., "adamw": ...}``; its slots are `momentum` and `v`
      (per row) of the Muon leaves, `mu` and `nu` of the others.

    Raises:
      ValueError: for a decay outside [0, 1), a negative rate, decay or epsilon, `ns_steps` < 1,
        malformed `ns_coeffs` or an unknown `update_scale`.
      TypeError: for non-bool flags or a `use_muon` tree with other leaves.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.normuon(0.1)
        >>> params = {"w": jnp.zeros((2, 2)), "b": jnp.zeros(2)}
        >>> grads = {"w": jnp.array([[2.0, 0.0], [0.0, 0.5]]), "b": jnp.array([1.0, -2.0])}
        >>> u, _ = tx.update(grads, tx.init(params), params)
        >>> [[round(float(x), 3) for x in row] for row in u["w"]]  # rows of equal norm; the quintic's ~0.74
        [[-0.074, -0.0], [-0.0, -0.074]]

    References:
      Li et al., *NorMuon: making Muon more efficient and scalable*, 2025 (arXiv:2510.05491);
      pytorch-optimizer's `NorMuon` (the reference of the tests).
    """
    fn = "normuon"
    coeffs = check_ns(fn, ns_coeffs, ns_steps)
    _checks.check_in_range(fn, "beta", beta, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_finite(fn, "learning_rate", learning_rate)
    _checks.check_bool(fn, "nesterov", nesterov)
    _checks.check_bool(fn, "use_adjusted_lr", use_adjusted_lr)
    _checks.check_one_of(fn, "update_scale", update_scale, UPDATE_SCALES)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    check_adamw(fn, adam_learning_rate, adam_b1, adam_b2, adam_eps, adam_weight_decay)
    leaf = functools.partial(
        _normuon_leaf,
        coeffs=coeffs,
        nesterov=nesterov,
        update_scale=update_scale,
        use_adjusted_lr=use_adjusted_lr,
    )
    matrices = update_rule(
        fn,
        ScaleByNorMuonState,
        leaf,
        hyper={"beta": beta, "b2": b2, "eps": eps},
        slots={"momentum": Slot(0.0, mu_dtype), "v": row_statistic},
        kind=_protocol.LeafWise,  # matrices are orthogonalised whole
        real_only="its Newton-Schulz iteration orthogonalizes real matrices",
    )
    return muon_family(
        fn,
        matrices,
        learning_rate,
        weight_decay,
        (adam_learning_rate, adam_b1, adam_b2, adam_eps, adam_weight_decay),
        weight_decouple=weight_decouple,
        use_muon=use_muon,
    )


__all__ = ["normuon"]

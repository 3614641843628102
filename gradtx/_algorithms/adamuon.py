"""AdaMuon: Muon's orthogonalised momentum divided element-wise by a second moment of itself (`adamuon`)."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, Sequence

import jax.numpy as jnp

from gradtx._algorithms.newton_schulz import rows_work, shape_ratio
from gradtx._algorithms.normuon import check_adamw, check_ns, muon_family
from gradtx._core import checks as _checks
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.formulas import corrections
from gradtx._core.rule import Slot, update_rule


class ScaleByAdaMuonState(NamedTuple):
    """State of AdaMuon's direction."""

    count: _protocol.Count  # int32: completed updates
    momentum: _protocol.Updates  # the gradients' moving average (starts at 0)
    v: _protocol.Updates  # the moving average of the squared orthogonalised momentum (starts at 0)


def _adamuon_leaf(g, m, v, h, *, coeffs, use_adjusted_lr):
    """One matrix leaf: `(update, momentum, v)`."""
    if g.size == 0:
        return g, m, v
    m = _formulas.optax_moment(m, g, h.b1)
    o = (yield rows_work(m, coeffs))[0]
    v, v_placed = _formulas.optax_moment(_placement.whole(v).reshape(o.shape), o * o, h.b2), v
    o = o / (jnp.sqrt(v / h.bc2) + h.eps)
    rows = g.shape[0]
    o = o * (math.sqrt(min(rows, g.size // rows)) / (jnp.linalg.norm(o) + h.eps))
    o = o * shape_ratio(g.shape, use_adjusted_lr)
    return (
        _placement.placed_like(o.reshape(g.shape), g),
        m,
        _placement.placed_like(v.reshape(g.shape), v_placed),
    )


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.AdaMuon",
        {
            "lr": "learning_rate",
            "betas": ("b1", "b2"),
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "ns_steps": "ns_steps",
            "ns_coeffs": "ns_coeffs",
            "use_adjusted_lr": "use_adjusted_lr",
            "adamw_lr": "adam_learning_rate",
            "adamw_betas": ("adam_b1", "adam_b2"),
            "adamw_wd": "adam_weight_decay",
            "eps": "eps",
            "use_muon": "use_muon",  # its parameter groups' flag, given per leaf (gradtx's argument)
        },
        defaults={"lr": 2e-2, "betas": (0.9, 0.95), "adamw_betas": (0.9, 0.999)},
        fixed={"maximize": False},
    )
)
def adamuon(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.95,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    ns_steps: int = 5,
    ns_coeffs: str | Sequence[float] | Sequence[Sequence[float]] = "original",
    eps: _protocol.ScalarOrSchedule = 1e-10,
    adam_learning_rate: _protocol.ScalarOrSchedule = 3e-4,
    adam_b1: _protocol.ScalarOrSchedule = 0.9,
    adam_b2: _protocol.ScalarOrSchedule = 0.999,
    adam_weight_decay: _protocol.ScalarOrSchedule = 0.0,
    *,
    weight_decouple: bool = True,
    use_adjusted_lr: bool = True,
    use_muon: Any = None,
    mu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""AdaMuon: Muon's orthogonalised momentum divided element by element by its own second moment.

    A Muon leaf :math:`W` (seen as a matrix of :math:`m` = `shape[0]` rows and :math:`n`
    columns, the other axes flattened) with gradient :math:`g_t`:

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad O_t = \operatorname{NS}(m_t), \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) O_t^2, \\
        \hat O_t = \frac{O_t}{\sqrt{v_t / (1-\beta_2^t)} + \epsilon}, \qquad
        W \leftarrow W - \eta\,\rho\,\frac{\sqrt{\min(m, n)}}{\lVert \hat O_t\rVert_F + \epsilon}\,\hat O_t

    with :math:`\operatorname{NS}` the Newton-Schulz iteration from
    :math:`m_t / \max(\lVert m_t\rVert_F, 10^{-7})` (coefficients `ns_coeffs`) and :math:`\rho`
    Moonlight's shape factor :math:`0.2\sqrt{\max(m, n)}` (or :math:`\sqrt{\max(1, m/n)}`
    without `use_adjusted_lr`): the update's RMS is 0.2 before the rate, AdamW's. These are the
    numbers of pytorch-optimizer's `AdaMuon` (`gradtx.get("AdaMuon", ...)` takes its
    arguments), which differ from the paper's Algorithm in two places, followed here: the
    momentum is not Nesterov's, and the second moment is of the orthogonalised momentum rather
    than of its sign. The leaves of rank >= 2 are Muon's and the others AdamW's (with `adam_*`
    and the same `eps`; `use_muon` overrides: the reference's parameter groups), with
    pytorch-optimizer's weight decay: decoupled (:math:`W \leftarrow W (1 - \eta\lambda)`) or,
    with `weight_decouple=False`, added to the gradient, in both parts. The reference iterates
    in bfloat16; gradtx in the parameters' dtype (its tests compare with the reference's
    iteration in float32). A row-sparse gradient is densified.

    Args:
      learning_rate: :math:`\eta`, the Muon leaves' rate (number, scalar array or schedule).
      b1: the momentum's decay :math:`\beta_1`, in [0, 1).
      b2: the second moment's decay :math:`\beta_2`, in [0, 1).
      weight_decay: :math:`\lambda` of the Muon leaves, >= 0.
      ns_steps: the number of Newton-Schulz iterations, an int >= 1.
      ns_coeffs: the iteration's coefficients: a schedule's name ('original', 'quintic',
        'polar_express', 'polar_express_safer'), one triple :math:`(a, b, c)` or one per
        iteration (the last repeated if fewer than `ns_steps`).
      eps: :math:`\epsilon` of the division, of the rescaling and of the AdamW part, >= 0.
      adam_learning_rate: the AdamW leaves' rate.
      adam_b1: the AdamW part's first-moment decay, in [0, 1).
      adam_b2: the AdamW part's second-moment decay, in [0, 1).
      adam_weight_decay: the AdamW leaves' decay, >= 0.
      weight_decouple: decay the weights directly (True) or through the gradient (False).
      use_adjusted_lr: Moonlight's shape factor (True) or Keller Jordan's (False).
      use_muon: which leaves are Muon's: a tree of bools shaped like the params (or a prefix),
        a function of the params giving one, or None (the leaves of rank >= 2).
      mu_dtype: dtype of the momentum (default: each param's dtype).

    Returns:
      A `LeafWise` partition ``{"muon": ..., "adamw": ...}``; its slots are `momentum` and `v`
      of the Muon leaves, `mu` and `nu` of the others.

    Raises:
      ValueError: for a decay outside [0, 1), a negative rate, decay or epsilon, `ns_steps` < 1
        or malformed `ns_coeffs`.
      TypeError: for non-bool flags or a `use_muon` tree with other leaves.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adamuon(0.1)
        >>> params = {"w": jnp.zeros((2, 2)), "b": jnp.zeros(2)}
        >>> grads = {"w": jnp.array([[2.0, 0.0], [0.0, 0.5]]), "b": jnp.array([1.0, -2.0])}
        >>> u, _ = tx.update(grads, tx.init(params), params)
        >>> [[round(float(x), 3) for x in row] for row in u["w"]]  # the first step: lr 0.2 sqrt(2) sign
        [[-0.028, -0.0], [-0.0, -0.028]]

    References:
      Si et al., *AdaMuon: adaptive Muon optimizer*, 2025 (arXiv:2507.11005); pytorch-optimizer's
      `AdaMuon` (the reference of the tests).
    """
    fn = "adamuon"
    coeffs = check_ns(fn, ns_coeffs, ns_steps)
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_finite(fn, "eps", eps)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_finite(fn, "learning_rate", learning_rate)
    _checks.check_bool(fn, "use_adjusted_lr", use_adjusted_lr)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    check_adamw(fn, adam_learning_rate, adam_b1, adam_b2, None, adam_weight_decay)
    matrices = update_rule(
        fn,
        ScaleByAdaMuonState,
        functools.partial(_adamuon_leaf, coeffs=coeffs, use_adjusted_lr=use_adjusted_lr),
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"momentum": Slot(0.0, mu_dtype), "v": 0.0},
        prepare=functools.partial(corrections, b1=None, b2="b2"),
        kind=_protocol.LeafWise,  # matrices are orthogonalised whole
        real_only="its Newton-Schulz iteration orthogonalizes real matrices",
    )
    return muon_family(
        fn,
        matrices,
        learning_rate,
        weight_decay,
        (adam_learning_rate, adam_b1, adam_b2, eps, adam_weight_decay),
        weight_decouple=weight_decouple,
        use_muon=use_muon,
    )


__all__ = ["adamuon"]

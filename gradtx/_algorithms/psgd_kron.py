"""PSGD Kron (Xi-Lin Li's Kronecker-factored preconditioned SGD): `scale_by_psgd_kron`, `psgd_kron`.

A leaf's factors, the step's random numbers and a leaf's matrix work are in `psgd_kron_leaf.py`, the
factors' math in `kron_factors.py`.
"""

from __future__ import annotations

import collections
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradtx._algorithms.psgd_kron_leaf import _draws, _factors, _leaf_step
from gradtx._core import checks as _checks
from gradtx._core import docs as _docs
from gradtx._core import formulas as _formulas
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.matrix_work import MatrixWork
from gradtx._core.rule import Slot, update_rule
from gradtx.combinators._weight_decay import torch_weight_decay

MEMORY_SAVE_MODES = (None, "one_diag", "smart_one_diag", "all_diag")
"""`memory_save_mode`: every factor triangular where allowed; the largest dimension's diagonal (`one_diag`;
`smart_one_diag` only where it is strictly the largest); every factor diagonal."""
PSGD_JAX_DAMPING = float(np.sqrt(np.finfo(np.float32).eps))
"""psgd-jax's `damping`: :math:`\\sqrt{\\epsilon_{f32}}`, times the mean magnitude of the input."""


class ScaleByPsgdKronState(NamedTuple):
    """State of `scale_by_psgd_kron`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the momentum (dtype `mu_dtype`)
    preconditioners: _protocol.Updates  # per leaf: a tuple of factors Q_i, [d, d] upper triangular or [d]
    update_counter: _protocol.Count  # steps since the preconditioners were last updated


def _precond_update_prob_schedule(max_prob=1.0, min_prob=0.03, decay=0.001, flat_start=500):
    """The default probability of a preconditioner update: `max_prob` for `flat_start` steps, then an
    exponential decay to `min_prob` (psgd-jax's and pytorch-optimizer's schedule)."""

    def schedule(count):
        return jnp.clip(
            max_prob * jnp.exp(-decay * (jnp.asarray(count, jnp.float32) - flat_start)), min_prob, max_prob
        )

    return schedule


def _kron_tree(gs, mus, qss, h, *, config):
    """One step over the leaves with a gradient: `(updates, momenta, factors, {"update_counter": ...})`.

    A generator: each leaf's factor update (on the steps that draw one) and preconditioning are its matrix
    work, yielded as one list (`gradtx.parallel.split_matrix_work` splits it across the devices)."""
    mus = [_formulas.optax_moment(m, g.astype(m.dtype), h.b1) for g, m in zip(gs, mus, strict=True)]
    dts = [qs[0].dtype for qs in qss]
    momenta = [(m / (1 - h.b1**h.t)).astype(dt) for m, dt in zip(mus, dts, strict=True)]
    prob = h.precond_update_probability
    counter = h.update_counter + 1
    threshold = (
        1 / prob if isinstance(prob, (int, float)) and prob > 0 else 1 / jnp.asarray(prob, jnp.float32)
    )
    do_update = (jnp.asarray(prob) > 0) & (counter >= threshold)
    live = [i for i, g in enumerate(gs) if g.size]  # empty leaves draw nothing, keep their factors
    u, keys = _draws(config.seed, h.count, len(live))

    def parts(i, position):
        # the leaf's key is read from the step's keys inside its work, by its position among the live
        # leaves: a slice of the keys per leaf would be a kernel of its own per leaf to compile
        own_input = () if config.momentum_into else (gs[i].astype(dts[i])[None],)
        return (*(q[None] for q in qss[i]), np.full((1,), position, np.int32), momenta[i][None], *own_input)

    results = yield [
        MatrixWork(  # each leaf whole (gathered under Explicit axes), with its factors
            functools.partial(_leaf_step, config=config, dtype=gs[i].dtype),
            parts(i, position),
            ("psgd_kron", config.damping, config.clip_eps, config.momentum_into, jnp.dtype(gs[i].dtype).name),
            args=(h.precond_lr, u < h.balance_prob, do_update, keys),
        )
        for position, i in enumerate(live)
    ]
    qss, updates = list(qss), [jnp.zeros_like(g) for g in gs]
    for i, (qs, direction) in zip(live, results, strict=True):
        qss[i] = tuple(q[0] for q in qs)
        updates[i] = _placement.placed_like(direction[0], gs[i])
    return updates, mus, qss, {"update_counter": jnp.where(do_update, 0, counter)}


_ARGS = r"""precond_update_probability: the probability of a preconditioner update (number or schedule of
        the count), in [0, 1]; None: 1 for 500 steps, then :math:`e^{-0.001 (count - 500)}`, at least 0.03.
      max_size_triangular: a dimension larger than this gets a diagonal factor.
      min_ndim_triangular: a leaf of fewer dimensions gets diagonal factors only.
      memory_save_mode: None, "one_diag", "smart_one_diag" or "all_diag".
      momentum_into_precond_update: update the preconditioner from the momentum, not the gradient.
      precond_lr: the preconditioner's learning rate :math:`\eta_Q`, > 0.
      precond_init_scale: the scale of the initial preconditioner, > 0.
      balance_prob: the probability of balancing the factors at an update, in [0, 1].
      damping: :math:`\delta`, >= 0.
      clip_eps: :math:`\epsilon_c`, >= 0.
      seed: the seed of the random numbers, an int >= 0.
      mu_dtype: the momentum's dtype (None: the parameter's).
      precond_dtype: the factors' dtype, in which the preconditioning computes (None: float32, float64
        for float64 parameters)."""

_RAISES = """TypeError: for a non-integer size or seed, a non-bool flag or a non-float dtype.
      ValueError: for a value out of its range or an unknown `memory_save_mode`."""

_doc = _docs.sections(ARGS=_ARGS, RAISES=_RAISES)
"""The docstring parts the two factories share: {ARGS}, {RAISES}."""


_Options = collections.namedtuple(  # noqa: PYI024  (`scale_by_psgd_kron`'s arguments, in its order)
    "_Options",
    "b1 precond_update_probability max_size_triangular min_ndim_triangular memory_save_mode momentum_into "
    "precond_lr precond_init_scale balance_prob damping clip_eps seed mu_dtype precond_dtype",
)


def _options(fn, *args) -> _Options:
    """`scale_by_psgd_kron`'s arguments (in its order), checked at construction in `fn`."""
    o = _Options(*args)
    _checks.check_in_range(fn, "b1", o.b1, 0.0, 1.0, high_open=True)
    if o.precond_update_probability is not None:
        _checks.check_in_range(fn, "precond_update_probability", o.precond_update_probability, 0.0, 1.0)
    _checks.check_int(fn, "max_size_triangular", o.max_size_triangular, minimum=0)
    _checks.check_int(fn, "min_ndim_triangular", o.min_ndim_triangular, minimum=0)
    _checks.check_one_of(fn, "memory_save_mode", o.memory_save_mode, MEMORY_SAVE_MODES)
    _checks.check_bool(fn, "momentum_into_precond_update", o.momentum_into)
    _checks.check_positive(fn, "precond_lr", o.precond_lr)
    _checks.check_in_range(fn, "balance_prob", o.balance_prob, 0.0, 1.0)
    for k in ("precond_init_scale", "damping", "clip_eps"):  # numbers, fixed at construction
        _checks.check_number(fn, k, getattr(o, k))
        _checks.check_finite(fn, k, getattr(o, k))
        (_checks.check_positive if k == "precond_init_scale" else _checks.check_nonnegative)(
            fn, k, getattr(o, k)
        )
    _checks.check_int(fn, "seed", o.seed, minimum=0)
    _checks.check_float_dtype(fn, "mu_dtype", o.mu_dtype)
    _checks.check_float_dtype(fn, "precond_dtype", o.precond_dtype)
    return o


def _rule(o: _Options) -> _protocol.GradientTransformation:
    """`scale_by_psgd_kron` of checked arguments."""
    prob = (
        _precond_update_prob_schedule()
        if o.precond_update_probability is None
        else o.precond_update_probability
    )
    factors = functools.partial(
        _factors, scale=o.precond_init_scale, max_size=o.max_size_triangular, min_ndim=o.min_ndim_triangular,
        memory_save_mode=o.memory_save_mode, dtype=o.precond_dtype,
    )  # fmt: skip
    return update_rule(
        "scale_by_psgd_kron",
        ScaleByPsgdKronState,
        functools.partial(
            _kron_tree, config=o._replace(damping=float(o.damping), clip_eps=float(o.clip_eps))
        ),
        hyper={
            "b1": o.b1,
            "precond_update_probability": prob,
            "precond_lr": o.precond_lr,
            "balance_prob": o.balance_prob,
        },
        slots={"mu": Slot(0.0, o.mu_dtype), "preconditioners": factors},
        scalars={"update_counter": lambda h: 0},
        over="tree",  # one key split across the leaves, one decision to update or balance
        kind=_protocol.LeafWise,
        real_only="pytorch-optimizer's Kron refuses complex parameters",
    )


@_registry.transform()
@_doc
def scale_by_psgd_kron(
    b1: _protocol.ScalarOrSchedule = 0.9,
    precond_update_probability: _protocol.ScalarOrSchedule | None = None,
    max_size_triangular: int = 8192,
    min_ndim_triangular: int = 2,
    *,
    memory_save_mode: str | None = None,
    momentum_into_precond_update: bool = True,
    precond_lr: _protocol.ScalarOrSchedule = 0.1,
    precond_init_scale: float = 1.0,
    balance_prob: _protocol.ScalarOrSchedule = 0.01,
    damping: float = 0.0,
    clip_eps: float = 1e-6,
    seed: int = 5318008,
    mu_dtype: Any = None,
    precond_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""PSGD Kron's direction: the bias-corrected momentum preconditioned by Kronecker factors :math:`Q_i`.

    A leaf of :math:`n` dimensions keeps a factor per dimension, upper triangular (:math:`d \times
    d`) or diagonal (a vector: where :math:`d = 1`, :math:`d >` `max_size_triangular`, :math:`n <`
    `min_ndim_triangular`, or as `memory_save_mode` says); :math:`Q = \bigotimes_i Q_i` starts at
    `precond_init_scale` :math:`\cdot I`. With :math:`x_t` the input of the preconditioner's update
    (:math:`\hat m_t`, or :math:`g_t` without `momentum_into_precond_update`) and
    :math:`v \sim \mathcal N(0, I)`, a step that updates the preconditioner moves each factor along
    Li's Lie-group gradient (:math:`X_{(i)}`: the unfolding along dimension :math:`i`):

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad \hat m_t = \frac{m_t}{1 - \beta_1^t}, \quad
        A = Q x_t, \quad B = Q^{-T} v, \quad T_1 = A_{(i)} A_{(i)}^T, \quad T_2 = B_{(i)} B_{(i)}^T

        Q_i \leftarrow Q_i - \frac{\eta_Q}{\lVert T_1 + T_2 \rVert} \operatorname{triu}(T_1 - T_2)\, Q_i

        p_t = Q^T Q \hat m_t, \quad u_t = \min\big(1, 1.1 / (\operatorname{rms}(p_t) + \epsilon_c)\big)\, p_t

    A diagonal factor takes the diagonals of :math:`T_1, T_2` and the max norm, a triangular one a
    lower bound of the spectral norm. The preconditioner is updated when the steps since its last
    update reach :math:`1/p` (:math:`p` the probability at the step's count: deterministic, as in
    both references); at an update, with probability `balance_prob`, each leaf's factors are first
    rescaled to equal largest magnitudes. `damping` adds :math:`\delta \operatorname{mean}|x_t|\, v`
    to :math:`x_t`. The references differ, and both are reproduced: pytorch-optimizer has no damping
    and clips with :math:`\epsilon_c = 10^{-6}` (the defaults); psgd-jax damps with
    :math:`\delta = \sqrt{\epsilon_{f32}} \approx 3.4527 \cdot 10^{-4}`, clips with :math:`\epsilon_c = 0` and
    reads its schedule one count later. The random numbers are psgd-jax's: keys
    `fold_in(PRNGKey(seed), count)`, split as `psgd_jax.kron` splits them, one per leaf in the tree's
    order (the reason the rule runs over the whole tree). Row-sparse gradients are densified;
    complex parameters are refused. Li's papers update the preconditioner at every step and do not
    clip; the probability schedule, the balancing and the clip at RMS 1.1 are psgd-jax's (which
    pytorch-optimizer ports), and gradtx follows them.

    Args:
      b1: the momentum's decay, in [0, 1).
      {ARGS}

    Returns:
      A `LeafWise` transform with state `ScaleByPsgdKronState(count, mu, preconditioners, update_counter)`.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_psgd_kron(memory_save_mode="one_diag")
        >>> params = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}
        >>> state = tx.init(params)
        >>> [q.shape for q in state.preconditioners["w"]]  # the larger dimension diagonal
        [(3,), (2, 2)]
        >>> u, state = tx.update({"w": jnp.ones((3, 2)), "b": jnp.ones(2)}, state)
        >>> u["w"].shape, int(state.count)
        ((3, 2), 1)

    References:
      Li, *Preconditioned stochastic gradient descent*, IEEE TNNLS 2018, arXiv:1512.04202; Li, *Black
      box Lie group preconditioners for SGD*, arXiv:2211.04422, 2022; psgd-jax's `kron`
      (github.com/evanatyourservice/psgd_jax) and pytorch-optimizer's `Kron`.
    """
    fn = "scale_by_psgd_kron"
    return _rule(_options(fn, b1, precond_update_probability, max_size_triangular, min_ndim_triangular,
                          memory_save_mode, momentum_into_precond_update, precond_lr, precond_init_scale,
                          balance_prob, damping, clip_eps, seed, mu_dtype, precond_dtype))  # fmt: skip


def _torch_dtype(name):
    """pytorch-optimizer's dtype argument (a `torch.dtype` or its name) as gradtx's."""
    return lambda v: {name: None if v is None else str(v).removeprefix("torch.")}


def _matrices(params):
    """pytorch-optimizer's Kron decays the leaves of two or more dimensions only."""
    return jax.tree.map(lambda p: jnp.ndim(p) >= 2, params)


@_registry.optimizer(
    reference=_registry.Reference(
        "pytorch_optimizer.Kron",
        {
            "lr": "learning_rate",
            "momentum": "b1",
            "weight_decay": "weight_decay",
            "weight_decouple": "weight_decouple",
            "pre_conditioner_update_probability": "precond_update_probability",
            "max_size_triangular": "max_size_triangular",
            "min_ndim_triangular": "min_ndim_triangular",
            "memory_save_mode": "memory_save_mode",
            "momentum_into_precondition_update": "momentum_into_precond_update",
            "mu_dtype": _torch_dtype("mu_dtype"),
            "precondition_dtype": _torch_dtype("precond_dtype"),
            "balance_prob": "balance_prob",
        },
        defaults={"lr": 1e-3, "mu_dtype": None, "precondition_dtype": "torch.float32"},
        fixed={"maximize": False},
    )
)
@_doc
def psgd_kron(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.9,
    weight_decay: _protocol.ScalarOrSchedule = 0.0,
    precond_update_probability: _protocol.ScalarOrSchedule | None = None,
    max_size_triangular: int = 8192,
    min_ndim_triangular: int = 2,
    *,
    memory_save_mode: str | None = None,
    momentum_into_precond_update: bool = True,
    precond_lr: _protocol.ScalarOrSchedule = 0.1,
    precond_init_scale: float = 1.0,
    balance_prob: _protocol.ScalarOrSchedule = 0.01,
    damping: float = 0.0,
    clip_eps: float = 1e-6,
    seed: int = 5318008,
    mu_dtype: Any = None,
    precond_dtype: Any = None,
    weight_decouple: bool = True,
    mask: Any = None,
) -> _protocol.GradientTransformation:
    r"""PSGD Kron: SGD on the momentum, preconditioned by Kronecker factors fitted to the gradients.

    `scale_by_psgd_kron` (the math) and the learning rate, with pytorch-optimizer's weight decay: the
    numbers of its `Kron` (`gradtx.get("Kron", lr=..., momentum=...)` takes its arguments and
    defaults). The decay is decoupled, :math:`w \leftarrow w - \eta (u + \lambda w)`, or with
    `weight_decouple=False` added to the gradient first (`torch_weight_decay`), on the leaves of two
    or more dimensions (`mask` chooses others). psgd-jax's `kron(learning_rate, b1, weight_decay)`
    is `psgd_kron(learning_rate, b1, weight_decay, damping=3.4526698e-4, clip_eps=0.0, mask=...)`
    with a mask of every leaf (its schedule read one count later).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: the momentum's decay, in [0, 1).
      weight_decay: the weight decay :math:`\lambda`, >= 0.
      {ARGS}
      weight_decouple: decouple the decay from the gradient.
      mask: the leaves to decay (a tree of bools or a function of the params); None: those of 2+ dimensions.

    Returns:
      The optimizer.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.psgd_kron(0.1)
        >>> params = {"w": jnp.ones((2, 2))}
        >>> u, _ = tx.update({"w": jnp.ones((2, 2))}, tx.init(params), params)
        >>> bool(jnp.all(u["w"] < 0))
        True

    References:
      Li, *Preconditioned stochastic gradient descent*, IEEE TNNLS 2018, arXiv:1512.04202;
      pytorch-optimizer's `Kron`; psgd-jax's `kron`.
    """
    fn = "psgd_kron"
    options = _options(fn, b1, precond_update_probability, max_size_triangular, min_ndim_triangular,
                       memory_save_mode, momentum_into_precond_update, precond_lr, precond_init_scale,
                       balance_prob, damping, clip_eps, seed, mu_dtype, precond_dtype)  # fmt: skip
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_nonnegative(fn, "weight_decay", weight_decay)
    _checks.check_bool(fn, "weight_decouple", weight_decouple)
    rule = _rule(options)
    return torch_weight_decay(
        rule,
        learning_rate,
        weight_decay,
        decouple=weight_decouple,
        mask=_matrices if mask is None else mask,
    )


__all__ = [
    "ScaleByPsgdKronState",
    "psgd_kron",
    "scale_by_psgd_kron",
]

"""Adam: TF1's (`scale_by_adam`, epsilon-hat, `adam`), optax's (`scale_by_bias_corrected_adam`) and torch's
rule, and the pieces of Adam's formula its family shares."""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import docs as _docs
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import scalars as _scalars
from gradtx._core.chain import chain
from gradtx._core.formulas import corrections
from gradtx._core.rule import SQUARES, Slot, update_rule
from gradtx.combinators._scale import scale_by_learning_rate


class ScaleByAdamState(NamedTuple):
    """State of the Adam building blocks (TF's slots and non-slot variables)."""

    count: _protocol.Count  # int32: completed updates
    m: _protocol.Updates  # TF slot "m": first moment (starts at 0)
    v: _protocol.Updates  # TF slot "v": second moment (starts at 0)
    beta1_power: jax.Array  # TF's non-slot "beta1_power": b1**(count+1), float32 (float64 for f64 params)
    beta2_power: jax.Array  # TF's non-slot "beta2_power": b2**(count+1), likewise


def _adam_step(num, v, h):
    """The epsilon-hat step: `num * c / (sqrt(v) + eps)`, with `num` the first moment (or Nesterov's)."""
    if num.dtype == v.dtype == getattr(h.c, "dtype", None) == getattr(h.eps, "dtype", None):
        return lax.div(lax.mul(num, h.c), lax.add(lax.sqrt(v), h.eps))  # as below, without jnp's wrappers
    return (num * h.c) / (jnp.sqrt(v) + h.eps)


def _stored(m: jax.Array, dtype: Any) -> jax.Array:
    """`m` rounded to the slot's `dtype` (`mu_dtype`) but kept in its own: the step uses what it stores."""
    return m if m.dtype == dtype else m.astype(dtype).astype(m.dtype)


def _decayed_moments(g, m, v, h):
    """TF1's sparse moments: every row decays, the deduplicated gradient is added to its rows."""
    g = g.deduplicated()
    m = sparse.decay_and_add(g, m, h.b1, g.values * (1 - h.b1))
    return m, sparse.decay_and_add(g, v, h.b2, (g.values * g.values) * (1 - h.b2))


def _tf1_leaf(g, m, v, h):
    """TF1's ApplyAdam: `m += (g - m)(1 - b1)`, `v += (g^2 - v)(1 - b2)`, then the epsilon-hat step."""
    m = _stored(_formulas.moment_increment(m, g, h.b1), m.dtype)
    v = _formulas.moment_increment(v, squared_as(g, v), h.b2)
    return _adam_step(m, v, h), m, v


def _tf1_rows(g, m, v, h):
    """TF1 Adam on a row-sparse gradient: the moments decay on all rows, every row of the variable moves."""
    m, v = _decayed_moments(g, m, v, h)
    return _adam_step(m, v, h), m, v


def _powers_from_state(h, state, extra_args):
    """TF1's running products `beta_power`, kept in the state: the bias correction, and the next products."""
    del extra_args
    b1p, b2p = state.beta1_power, state.beta2_power
    return {"c": jnp.sqrt(1 - b2p) / (1 - b1p), "beta1_power": b1p * h.b1, "beta2_power": b2p * h.b2}


def _adam_family(
    fn: str,
    b1: Any,
    b2: Any,
    eps: Any,
    mu_dtype: Any,
    leaf: Callable[..., tuple[Any, Any, Any]],
    rows: Callable[..., tuple[Any, Any, Any]],
    powers: Callable[..., dict],
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    """An Adam building block from its dense and row-sparse formulas and the source of its beta powers."""
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_float_dtype(fn, "nu_dtype", nu_dtype)
    return update_rule(
        fn,
        ScaleByAdamState,
        leaf,
        hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"m": Slot(0.0, mu_dtype), "v": Slot(0.0, nu_dtype, True)},
        scalars={"beta1_power": lambda h: h.b1, "beta2_power": lambda h: h.b2},
        prepare=powers,
        sparse=rows,
        tf_scalars=True,  # TF's scalars: float32 beta powers for float32 params, with or without x64
    )


_ARGS = """b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: epsilon-hat, >= 0.
      mu_dtype: dtype of `m` (default: each param's dtype).
      nu_dtype: dtype of `v` (default: each param's dtype; its squares are computed in it when wider)."""


_RAISES = """ValueError: if a beta is outside [0, 1) or `eps` is negative.
      TypeError: if `mu_dtype` or `nu_dtype` is neither a floating-point nor a complex dtype."""


_ADAM_ARGS = """learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: epsilon-hat, >= 0."""


_MU_DTYPE = """mu_dtype: dtype of the first moment `m` (default: each param's dtype; see `scale_by_adam`).
      nu_dtype: dtype of the second moment `v` (default: each param's dtype)."""


_doc = _docs.sections(ARGS=_ARGS, RAISES=_RAISES, ADAM_ARGS=_ADAM_ARGS, MU_DTYPE=_MU_DTYPE)
"""The Adam family's shared docstring parts: {ARGS}, {RAISES}, {ADAM_ARGS}, {MU_DTYPE}."""


@_registry.transform()
@_doc
def scale_by_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam's scaling in TF1's epsilon-hat form, not `optax.scale_by_adam` (`optax_compat.scale_by_adam`).

    .. math::
        m_t = m_{t-1} + (g_t - m_{t-1})(1-\beta_1), \quad
        v_t = v_{t-1} + (g_t^2 - v_{t-1})(1-\beta_2),

        u_t = \frac{m_t \sqrt{1-\beta_2^t}/(1-\beta_1^t)}{\sqrt{v_t} + \hat\epsilon}

    Followed by `scale_by_learning_rate(lr)` this is `tf.compat.v1.train.AdamOptimizer`
    (`epsilon` is the paper's epsilon-hat, added after the bias correction).
    `beta1_power` / `beta2_power` are kept as TF keeps them: running products in the
    variables' float dtype (float32 for float32 params, with or without x64), multiplied by
    the betas after each step. A row-sparse gradient follows TF1 Adam: `m` and `v` decay on
    all rows, the gradient is added to the touched rows, and every row of the variable
    moves (a dense update; `scale_by_lazy_adam` changes the touched rows only).

    `mu_dtype` (not in TF; e.g. `jnp.bfloat16`) stores `m` in a lower precision: each step
    computes in the gradient's dtype, rounds the new `m` to `mu_dtype` and steps with the
    rounded moment it stores (so XLA updates the slot in place). That saves a seventh of
    Adam's memory traffic and a third of its state.

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState(count, m, v, beta1_power, beta2_power)`.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_adam()
        >>> u, state = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))
        >>> [round(float(x), 4) for x in u]  # the first step has magnitude ~1 per element
        [1.0, -1.0]

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (the formula
      before section 2.1).
    """
    return _adam_family(
        "scale_by_adam", b1, b2, eps, mu_dtype, _tf1_leaf, _tf1_rows, _powers_from_state, nu_dtype
    )


@_registry.optimizer("Adam")
def adam(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam: TF's `AdamOptimizer` (`ApplyAdam`, epsilon-hat), not `optax.adam`: that is `optax_compat.adam`.

    `var -= lr * sqrt(1 - b2**t) / (1 - b1**t) * m / (sqrt(v) + eps)`, with TF's float32
    `beta_power` accumulators. This is
    `chain(scale_by_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))`. Row-sparse
    gradients behave as TF1's Adam: the moments decay on all rows and every row moves
    (see `lazy_adam` for touched rows only).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: epsilon-hat, >= 0.
      mu_dtype: dtype of the first moment `m` (default: each param's dtype); e.g.
        `jnp.bfloat16` halves that slot (not in TF: the numbers then differ from TF's).
      nu_dtype: dtype of the second moment `v` (default: each param's dtype).

    Returns:
      A `GradientTransformation`; its slots, read with `gradtx.get_slot(state, name)`, are `m` and `v`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.
      TypeError: if `mu_dtype` or `nu_dtype` is neither a floating-point nor a complex dtype.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.adam(learning_rate=0.1)
        >>> [round(float(u), 4) for u in tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]]
        [-0.1, 0.1]
    """
    return chain(
        scale_by_adam(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


class ScaleByBiasCorrectedAdamState(NamedTuple):
    """State of `scale_by_bias_corrected_adam`."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # first moment (starts at 0)
    nu: _protocol.Updates  # second moment (starts at 0)


def squared_as(g, v):
    """`|g|**2` computed in the dtype of the second moment `v` when it is wider (`nu_dtype`): a float32
    `nu` of bf16 gradients gets float32 squares, not bf16 ones widened."""
    wide = jnp.promote_types(g.dtype, v.dtype)
    return _formulas.abs_sq(g if g.dtype == wide else g.astype(wide))


def first_moment_estimate(m, g, b1, h, nesterov: bool):
    """The corrected first moment `m / (1 - b1^t)`, or Nesterov's `b1 m / (1 - b1^(t+1)) + (1 - b1) g /
    (1 - b1^t)` (Adam's and Muon's); `h` holds the corrections of `corrections`."""
    if nesterov:
        return b1 * (m / h.bc1_next) + (1 - b1) * (g / h.bc1)
    return m / h.bc1


def corrected_step(m_hat, v, h):
    """`m_hat / (sqrt(v_hat + eps_root) + eps)` with `v_hat = v / (1 - b2^t)`."""
    return m_hat / (jnp.sqrt(v / h.bc2 + h.eps_root) + h.eps)


def _adam_leaf(g, m, v, h, *, nesterov: bool):
    m = _formulas.optax_moment(m, g, h.b1)
    v = _formulas.optax_moment(v, squared_as(g, v), h.b2)
    return corrected_step(first_moment_estimate(m, g, h.b1, h, nesterov), v, h), m, v


@_registry.transform()
def scale_by_bias_corrected_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    eps_root: _protocol.ScalarOrSchedule = 0.0,
    *,
    nesterov: bool = False,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""Adam's scaling with bias-corrected moments and epsilon outside the root (the paper's Algorithm 1).

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \quad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \\
        \hat m_t = \frac{m_t}{1-\beta_1^t}, \quad \hat v_t = \frac{v_t}{1-\beta_2^t}, \quad
        u_t = \frac{\hat m_t}{\sqrt{\hat v_t + \epsilon_{root}} + \epsilon}

    With `nesterov`, :math:`\hat m_t = \beta_1 m_t / (1-\beta_1^{t+1}) + (1-\beta_1) g_t /
    (1-\beta_1^t)` (Dozat's NAdam, optax's form). These are the numbers of
    `optax.scale_by_adam`; gradtx's `scale_by_adam` is TF1's epsilon-hat form instead. A
    row-sparse gradient is densified first (both moments decay on every row).

    Args:
      b1: decay of the first moment, in [0, 1).
      b2: decay of the second moment, in [0, 1).
      eps: added to the root of the corrected second moment, >= 0.
      eps_root: added to the corrected second moment under the root, >= 0.
      nesterov: use Nesterov's form of the first moment.
      mu_dtype: dtype of `mu` (default: each param's dtype).
      nu_dtype: dtype of `nu` (default: each param's dtype; `jnp.float32` keeps the second moment
        of bf16 params in float32, its squares computed there).

    Returns:
      An `ElementWise` transform with state `ScaleByBiasCorrectedAdamState(count, mu, nu)`.

    Raises:
      ValueError: if a beta is outside [0, 1) or `eps` / `eps_root` is negative.
      TypeError: for a non-bool `nesterov` or a `mu_dtype` / `nu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_bias_corrected_adam(eps=0.0)
        >>> u = tx.update(jnp.array([2.0, -0.5]), tx.init(jnp.zeros(2)))[0]
        >>> u  # the first step: sign(g), with optax's roundings (1 - b in double, 1 - b**t in float32)
        Array([ 0.9999934, -0.9999934], dtype=float32)

    References:
      Kingma, Ba, *Adam: a method for stochastic optimization*, ICLR 2015 (Algorithm 1);
      Dozat, *Incorporating Nesterov momentum into Adam*, ICLR 2016 workshop.
    """
    fn = "scale_by_bias_corrected_adam"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _check_common(fn, eps, eps_root)
    _checks.check_bool(fn, "nesterov", nesterov)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_float_dtype(fn, "nu_dtype", nu_dtype)

    return update_rule(
        fn,
        ScaleByBiasCorrectedAdamState,
        functools.partial(_adam_leaf, nesterov=nesterov),
        hyper={"b1": b1, "b2": b2, "eps": eps, "eps_root": eps_root},
        slots={"mu": Slot(0.0, mu_dtype), "nu": Slot(0.0, nu_dtype, True)},
        prepare=functools.partial(corrections, nesterov=nesterov),
    )


class TorchAdamState(NamedTuple):
    """State of torch's Adam / AdamW rule."""

    count: _protocol.Count  # int32: completed updates (torch's "step")
    exp_avg: _protocol.Updates  # first moment (starts at 0)
    exp_avg_sq: _protocol.Updates  # second moment (starts at 0)
    max_exp_avg_sq: _protocol.Updates  # running maximum of exp_avg_sq (amsgrad), else None


def _moments(g: Any, exp_avg: Any, exp_avg_sq: Any, h: Any) -> tuple[Any, Any]:
    """Adam's moments as torch updates them: `exp_avg.lerp_(g, 1 - b1)`, `exp_avg_sq = b2 v + (1-b2) g^2`."""
    return _formulas.moment_increment(exp_avg, g, h.b1), _formulas.moment_blend(exp_avg_sq, g * g, h.b2)


def _torch_adam_leaf(g, exp_avg, exp_avg_sq, max_exp_avg_sq, h):
    """`_single_tensor_adam`: `(m / bc1) / (sqrt(v) / sqrt(bc2) + eps)`; amsgrad: the max of the raw `v`."""
    exp_avg, exp_avg_sq = _moments(g, exp_avg, exp_avg_sq, h)
    dtype = _dtype(g)
    v = exp_avg_sq
    if max_exp_avg_sq is not None:
        max_exp_avg_sq = jnp.maximum(max_exp_avg_sq, exp_avg_sq)
        v = max_exp_avg_sq
    denom = jnp.sqrt(v) / jnp.sqrt(_formulas.torch_debias(h.b2, h.t, dtype)) + h.eps
    return (exp_avg / _formulas.torch_debias(h.b1, h.t, dtype)) / denom, exp_avg, exp_avg_sq, max_exp_avg_sq


def adam_rule(b1: float, b2: float, eps: float, *, amsgrad: bool) -> _protocol.GradientTransformation:
    """torch's Adam direction (the step before `-lr`), with amsgrad's maximum of the raw second moment."""
    return update_rule(
        "torch_adam", TorchAdamState, _torch_adam_leaf, hyper={"b1": b1, "b2": b2, "eps": eps},
        slots={"exp_avg": 0.0, "exp_avg_sq": SQUARES, "max_exp_avg_sq": SQUARES if amsgrad else None},
        real_only=_REAL_ONLY, compute_dtype=_scalars.at_least_float32,
    )  # fmt: skip


_REAL_ONLY = "torch's optimizers treat a complex parameter as pairs of reals (view_as_real)"


def _dtype(g: Any) -> Any:
    """The dtype the step's scalars are formed in: float32 at least (float64 for float64 leaves)."""
    return _scalars.at_least_float32(g.dtype)


def _check_common(fn: str, eps: Any, eps_root: Any) -> None:
    for name, value in (("eps", eps), ("eps_root", eps_root)):
        _checks.check_finite(fn, name, value)
        _checks.check_nonnegative(fn, name, value)


__all__ = [
    "ScaleByAdamState",
    "ScaleByBiasCorrectedAdamState",
    "adam",
    "scale_by_adam",
    "scale_by_bias_corrected_adam",
]

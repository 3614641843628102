"""RMSProp: `scale_by_rmsprop`, TF's `ApplyRMSProp` / `ApplyCenteredRMSProp` kernels."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from gradtx import _base, _checks, _protocol, _tree, sparse


class ScaleByRmspropState(NamedTuple):
    """State of `scale_by_rmsprop`."""

    count: _protocol.Count  # int32: completed updates
    rms: _protocol.Updates  # TF slot "rms": mean square (starts at ONES, as TF1's RMSPropOptimizer)
    momentum: _protocol.Updates  # TF slot "momentum": the last step (starts at 0)
    mg: _protocol.Updates  # TF slot "mg": mean gradient when centered (starts at 0), else None


@_base.api
def scale_by_rmsprop(
    learning_rate: _protocol.ScalarOrSchedule,
    decay: _protocol.ScalarOrSchedule = 0.9,
    momentum: _protocol.ScalarOrSchedule = 0.0,
    eps: _protocol.ScalarOrSchedule = 1e-10,
    *,
    centered: bool = False,
) -> _protocol.GradientTransformation:
    r"""RMSProp as TF1 computes it (rate and momentum inside the kernel); outputs the descent step.

    .. math::
        s_t = s_{t-1} + (g_t^2 - s_{t-1})(1-\rho), \quad
        \mu_t = m\,\mu_{t-1} + \frac{\eta\, g_t}{\sqrt{s_t + \epsilon}}, \quad w \mathrel{-}= \mu_t

    Centered: :math:`\bar g_t = \bar g_{t-1} + (g_t - \bar g_{t-1})(1-\rho)` and the
    denominator is :math:`\sqrt{(s_t - \bar g_t^2) + \epsilon}`. The `rms` slot starts at
    ones (TF1's `RMSPropOptimizer`), `momentum` and `mg` at zeros. The learning rate sits
    inside the momentum accumulator, so it is an argument here and an alias follows this
    block with `scale_by_learning_rate(1.0)`. Row-sparse gradients change the touched
    rows only (`SparseApply[Centered]RMSProp`).

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      decay: the discount of the mean square, :math:`\rho \in [0, 1]`.
      momentum: the momentum :math:`m \in [0, 1]`.
      eps: added to the mean square inside the root, >= 0.
      centered: divide by the centered (variance) estimate.

    Returns:
      A `GradientTransformation` with state `ScaleByRmspropState(count, rms, momentum, mg)`
      (`mg` is None unless centered).

    Raises:
      ValueError: for a decay or momentum outside [0, 1], a negative rate or epsilon.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_rmsprop(learning_rate=0.1, decay=0.5, eps=0.0)
        >>> u, state = tx.update(jnp.array([3.0]), tx.init(jnp.zeros(1)))
        >>> float(state.rms[0]), round(float(u[0]), 6)  # rms: 1 + (9 - 1) / 2; step: 0.1 * 3 / sqrt(5)
        (5.0, 0.134164)

    References:
      Tieleman, Hinton, *Lecture 6.5 - RMSProp*, COURSERA: Neural Networks for Machine
      Learning, 2012; Graves, *Generating sequences with recurrent neural networks*, 2013
      (centered).
    """
    fn = "scale_by_rmsprop"
    _checks.check_learning_rate(fn, learning_rate)
    _checks.check_in_range(fn, "decay", decay, 0.0, 1.0)
    _checks.check_in_range(fn, "momentum", momentum, 0.0, 1.0)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_bool(fn, "centered", centered)

    def init_fn(params):
        return ScaleByRmspropState(
            count=_tree.zero_count(),
            rms=_tree.full_like(params, 1.0),
            momentum=_tree.zeros_like(params),
            mg=_tree.zeros_like(params) if centered else None,
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        lr_, rho_, mom_, eps_ = (_tree.resolve(h, state.count) for h in (learning_rate, decay, momentum, eps))

        def rule(g, ms, mom, *mg):
            lr, rho, m, e = (_tree.like(x, g) for x in (lr_, rho_, mom_, eps_))
            ms = _tree.moment_increment(ms, _tree.abs_sq(g), rho)
            if centered:
                mg = _tree.moment_increment(mg[0], g, rho)
                denom = (ms - _tree.abs_sq(mg)) + e
            else:
                denom = ms + e
            mom = mom * m + (g * lr) / jnp.sqrt(denom)
            return (mom, ms, mom, mg) if centered else (mom, ms, mom)

        slots = (state.rms, state.momentum) + ((state.mg,) if centered else ())
        names = ("updates", "state.rms", "state.momentum") + (("state.mg",) if centered else ())
        out = _tree.split_map(fn, sparse.lift(rule), 4 if centered else 3, updates, *slots, names=names)
        return out[0], ScaleByRmspropState(
            count=_tree.increment(state.count), rms=out[1], momentum=out[2], mg=out[3] if centered else None
        )

    return _protocol.ElementWise(init_fn, update_fn)

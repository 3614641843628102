"""Sophia: a clipped Newton step on a diagonal-Hessian estimate (Hutchinson's)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import sparse
from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import factory as _factory
from gradtx._core import formulas as _formulas
from gradtx._core import hyper as _hyper
from gradtx._core import placement as _placement
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core import rule_parts as _rule_parts
from gradtx._core import walk as _walk
from gradtx._core.chain import chain
from gradtx.combinators._scale import scale_by_learning_rate
from gradtx.combinators._weight_decay import add_decayed_weights


class HutchinsonState(NamedTuple):
    """State of `hutchinson_estimator_diag_hessian` (optax's `HutchinsonState`)."""

    key: jax.Array  # the PRNG key of the next draw


class SophiaState(NamedTuple):
    """State of `scale_by_sophia` (optax's `SophiaState`, field for field)."""

    count: _protocol.Count  # int32: completed updates
    mu: _protocol.Updates  # the moving average of the gradients (starts at 0)
    nu: _protocol.Updates  # the moving average of the Hessian-diagonal estimates (starts at 0)
    hessian_fn_state: Any  # the estimator's state


def _refuse_integers(fn: str, updates: Any, params: Any) -> None:
    """Refuse integer gradients or params (at trace time): every fractional update would round away."""
    leaves, treedef = jax.tree.flatten(updates, is_leaf=_walk.is_update_leaf)
    _rule_parts.refuse_integers(fn, updates, leaves, treedef, params, None)


_REAL = "its Hessian-diagonal estimate and clipping are of real numbers"


@_registry.transform()
def hutchinson_estimator_diag_hessian(
    random_seed: jax.Array | None = None,
) -> _protocol.GradientTransformation:
    r"""Replace the updates by Hutchinson's estimate of the Hessian's diagonal at the params.

    .. math:: \hat h = z \odot (\nabla^2 f(w)\, z), \qquad z \sim \text{Rademacher}

    an unbiased estimate of :math:`\operatorname{diag}\nabla^2 f(w)` from one Hessian-vector
    product (forward-over-reverse). `update` needs the extra argument `obj_fn(params) ->
    scalar`, the loss at this step's batch, and the params; the incoming updates are not
    read. Each step draws from a fresh split of the key (`jax.random.split`, one key per leaf
    as `optax.tree.random_like`): the numbers of `optax.contrib.hutchinson_estimator_diag_hessian`.

    Args:
      random_seed: the initial PRNG key (raw, `jax.random.PRNGKey(seed)`); None: `PRNGKey(0)`.

    Returns:
      A `GradientTransformation` with state `HutchinsonState(key)`.

    Raises:
      TypeError: for a `random_seed` that is not a key array; `MissingExtraArgError` (when
        traced) without `obj_fn`.
      ValueError: at update time, if `params` is missing.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.hutchinson_estimator_diag_hessian()
        >>> params = jnp.array([1.0, 2.0])
        >>> def obj_fn(w):  # Hessian diag(2, 6): z * H z = diag(H) whatever the signs
        ...     return jnp.sum(jnp.array([1.0, 3.0]) * w**2)
        >>> tx.update(params, tx.init(params), params, obj_fn=obj_fn)[0]
        Array([2., 6.], dtype=float32)

    References:
      Hutchinson, *A stochastic estimator of the trace of the influence matrix for Laplacian
      smoothing splines*, 1989; Bekas, Kokiopoulou, Saad, *An estimator for the diagonal of a
      matrix*, 2007.
    """
    fn = "hutchinson_estimator_diag_hessian"
    if random_seed is not None and not hasattr(random_seed, "dtype"):
        raise TypeError(
            f"`{_checks.api_name(fn)}`: `random_seed` must be a PRNG key (`jax.random.PRNGKey(0)`) or None, "
            f"got {random_seed!r}."
        )

    def init_fn(params):
        del params
        return HutchinsonState(jax.random.PRNGKey(0) if random_seed is None else random_seed)

    def update_fn(updates, state, params=None, *, obj_fn=None, **extra_args):
        del updates, extra_args
        if params is None:
            raise _protocol.missing_params(fn)
        if obj_fn is None:
            raise _protocol.missing_extra_arg(fn, "obj_fn", "lambda params: loss(params, batch)")
        _refuse_integers(fn, params, params)
        _factory.refuse_complex(fn, None, params, why=_REAL)
        key, subkey = jax.random.split(state.key)
        leaves, treedef = jax.tree.flatten(params)
        keys = jax.random.split(subkey, len(leaves))
        signs = treedef.unflatten(
            [
                jax.random.rademacher(k, jnp.shape(p), jnp.float32).astype(p.dtype)
                for k, p in zip(keys, leaves, strict=True)
            ]
        )
        hvp = jax.jvp(jax.grad(obj_fn), (params,), (signs,))[1]
        return jax.tree.map(lambda h, z: h * z, hvp, signs), HutchinsonState(key)

    return _protocol.GradientTransformation(init_fn, update_fn)  # `api` gives it per-leaf views (packing)


@_registry.transform()
def scale_by_sophia(
    b1: _protocol.ScalarOrSchedule = 0.965,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    gamma: _protocol.ScalarOrSchedule = 0.01,
    clip_threshold: _protocol.ScalarOrSchedule | None = 1.0,
    update_interval: int = 10,
    hessian_diagonal_fn: Any = None,
    *,
    mu_dtype: Any = None,
    verbose: bool = False,
    print_win_rate_every_n_steps: int = 0,
) -> _protocol.GradientTransformation:
    r"""Sophia's scaling: the bias-corrected momentum over a diagonal-Hessian estimate, clipped element-wise.

    With :math:`\hat h_t` the estimate `hessian_diagonal_fn` gives (Hutchinson's by default),
    refreshed every `update_interval` steps (the first at step 1):

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad
        u_t = \operatorname{clip}\Big(\frac{m_t / (1-\beta_1^t)}{\max(\gamma\, h_{t-1}, \epsilon)},
              \pm\rho\Big), \\
        h_t = \beta_2 h_{t-1} + (1-\beta_2)\, \hat h_t \text{ on a refresh step, else } h_{t-1}

    The step reads the estimate of the *previous* refresh (:math:`h_{t-1}`, 0 at step 1, so
    the first steps are clipped to :math:`\pm\rho`). `update` passes its extra arguments on to
    the estimator: Hutchinson's needs `obj_fn(params) -> loss`. Follow with the learning rate
    (`sophia`). The numbers of `optax.contrib.scale_by_sophia`; with `verbose`, the share of
    unclipped elements (the "win rate", best between 0.1 and 0.5) is printed every
    `print_win_rate_every_n_steps` steps. A row-sparse gradient is densified first; a `None`
    gradient leaves its parameter's `mu` and `nu` as they are (and gives it no update), so the
    state keeps its structure.

    Args:
      b1: decay of the momentum, in [0, 1).
      b2: decay of the Hessian-diagonal average (per refresh), in [0, 1).
      eps: the smallest denominator, >= 0.
      gamma: :math:`\gamma`, the scale of the Hessian estimate, >= 0.
      clip_threshold: :math:`\rho`, the bound of each element of the step, > 0; None: no clipping.
      update_interval: refresh the Hessian estimate every this many steps, an int >= 1.
      hessian_diagonal_fn: the estimator, a transform whose `update` returns the diagonal
        estimate; None: `hutchinson_estimator_diag_hessian()`.
      mu_dtype: dtype of the momentum (default: each param's dtype).
      verbose: print the win rate.
      print_win_rate_every_n_steps: the period of that print, an int (>= 1 with `verbose`).

    Returns:
      A `GradientTransformation` with state `SophiaState(count, mu, nu, hessian_fn_state)`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or `gamma`, a non-positive
        `clip_threshold`, `update_interval` < 1, or a print period < 1 with `verbose`; at update
        time, if `params` is missing.
      TypeError: for a non-int interval, a non-transform estimator, non-bool flags or a
        `mu_dtype` that is neither float nor complex.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.scale_by_sophia()
        >>> params = jnp.array([1.0, -2.0])
        >>> u, state = tx.update(params, tx.init(params), params, obj_fn=lambda w: jnp.sum(w**2) / 2)
        >>> u, state.nu  # step 1: clipped (no estimate yet); the estimate 1 averaged in
        (Array([ 1., -1.], dtype=float32), Array([0.01, 0.01], dtype=float32))

    References:
      Liu, Li, Hall, Liang, Ma, *Sophia: a scalable stochastic second-order optimizer for
      language model pre-training*, ICLR 2024 (arXiv:2305.14342).
    """
    fn = "scale_by_sophia"
    _checks.check_in_range(fn, "b1", b1, 0.0, 1.0, high_open=True)
    _checks.check_in_range(fn, "b2", b2, 0.0, 1.0, high_open=True)
    _checks.check_nonnegative(fn, "eps", eps)
    _checks.check_nonnegative(fn, "gamma", gamma)
    if clip_threshold is not None:
        _checks.check_positive(fn, "clip_threshold", clip_threshold)
    _checks.check_int(fn, "update_interval", update_interval, minimum=1)
    _checks.check_float_dtype(fn, "mu_dtype", mu_dtype)
    _checks.check_bool(fn, "verbose", verbose)
    _checks.check_int(fn, "print_win_rate_every_n_steps", print_win_rate_every_n_steps, minimum=int(verbose))
    if hessian_diagonal_fn is None:
        hessian_diagonal_fn = hutchinson_estimator_diag_hessian()
    _checks.check_transform(fn, "hessian_diagonal_fn", hessian_diagonal_fn)
    estimator = _factory.member(hessian_diagonal_fn)

    def init_fn(params):
        return SophiaState(
            _hyper.zero_count(),
            _walk.map_updates(fn, lambda p: _placement.filled(p, 0.0, mu_dtype or p.dtype), params),
            _walk.map_updates(fn, lambda p: _placement.filled(p, 0.0, p.dtype), params),
            estimator.init(params),
        )

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        _refuse_integers(fn, updates, params)
        _factory.refuse_complex(fn, updates, params, why=_REAL)
        grads = sparse.densify(updates)
        count, t = state.count, _hyper.increment(state.count)
        h = {k: _hyper.resolve(v, count) for k, v in dict(b1=b1, b2=b2, eps=eps, gamma=gamma).items()}
        rho = _hyper.resolve(clip_threshold, count)
        bc1 = 1 - jnp.asarray(h["b1"], jnp.float32) ** t
        # a leaf without a gradient (None) keeps its slots and gets no update: the state keeps its structure
        mu = _walk.map_updates(
            fn,
            lambda m, g: m if g is None else _formulas.optax_moment(m, g, h["b1"]),
            state.mu,
            grads,
            names=("state.mu", "updates"),
        )
        out = _walk.map_updates(
            fn,
            lambda _, m, v: (m / bc1.astype(m.dtype)) / jnp.maximum(h["gamma"] * v, h["eps"]),
            grads,
            mu,
            state.nu,
            names=("updates", "state.mu", "state.nu"),
        )
        if rho is not None:
            if verbose:
                unclipped = sum(jnp.sum(jnp.abs(u) < rho) for u in jax.tree.leaves(out))
                win_rate = unclipped / sum(jnp.size(u) for u in jax.tree.leaves(out))
                jax.lax.cond(
                    t % print_win_rate_every_n_steps == 0,
                    lambda: jax.debug.print("Sophia optimizer win rate: {}", win_rate),
                    lambda: None,
                )
            out = _walk.map_updates(fn, lambda u: jnp.clip(u, -rho, rho), out)

        def refresh(estimator_state, nu):
            diag, estimator_state = estimator.update(grads, estimator_state, params, **extra_args)
            return estimator_state, _walk.map_updates(
                fn,
                lambda v, d, g: v if g is None else _formulas.optax_moment(v, d, h["b2"]),
                nu,
                diag,
                grads,
                names=("state.nu", "the Hessian-diagonal estimate", "updates"),
            )

        estimator_state, nu = _control.cond(
            count % update_interval == 0, refresh, lambda s, v: (s, v), state.hessian_fn_state, state.nu
        )
        mu = _walk.map_updates(fn, lambda m, old: m.astype(old.dtype), mu, state.mu)
        return out, SophiaState(t, mu, nu, estimator_state)

    return _factory.composite(init_fn, update_fn, estimator)


@_registry.optimizer("Sophia")
def sophia(
    learning_rate: _protocol.ScalarOrSchedule,
    b1: _protocol.ScalarOrSchedule = 0.965,
    b2: _protocol.ScalarOrSchedule = 0.99,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    weight_decay: _protocol.ScalarOrSchedule = 1e-4,
    gamma: _protocol.ScalarOrSchedule = 0.01,
    clip_threshold: _protocol.ScalarOrSchedule | None = 1.0,
    update_interval: int = 10,
    hessian_diagonal_fn: Any = None,
    *,
    mask: Any = None,
    mu_dtype: Any = None,
    verbose: bool = False,
    print_win_rate_every_n_steps: int = 0,
) -> _protocol.GradientTransformation:
    r"""Sophia: a clipped Newton step on a diagonal-Hessian estimate, with decoupled weight decay.

    `chain(scale_by_sophia(b1, b2, eps, gamma, clip_threshold, update_interval,
    hessian_diagonal_fn, ...), add_decayed_weights(weight_decay, mask=mask),
    scale_by_learning_rate(learning_rate))`: the chain and numbers of `optax.contrib.sophia`.
    The default estimator (Hutchinson's) needs the extra argument `obj_fn(params) -> loss`:
    `tx.update(grads, state, params, obj_fn=lambda p: loss(p, batch))`. A row-sparse gradient
    is densified.

    Args:
      learning_rate: the learning rate (number, scalar array or schedule).
      b1: decay of the momentum, in [0, 1).
      b2: decay of the Hessian-diagonal average (per refresh), in [0, 1).
      eps: the smallest denominator, >= 0.
      weight_decay: the decay added to the step (scaled by the rate), >= 0.
      gamma: the scale of the Hessian estimate, >= 0.
      clip_threshold: the bound of each element of the step before the rate, > 0; None: none.
      update_interval: refresh the Hessian estimate every this many steps, an int >= 1.
      hessian_diagonal_fn: the estimator; None: `hutchinson_estimator_diag_hessian()`.
      mask: which parameters decay: a tree of bools (or a prefix), a function of the params, or None.
      mu_dtype: dtype of the momentum (default: each param's dtype).
      verbose: print the share of unclipped elements every `print_win_rate_every_n_steps` steps.
      print_win_rate_every_n_steps: the period of that print.

    Returns:
      A chain; its slots are `mu` and `nu`.

    Raises:
      ValueError: as `scale_by_sophia`, or for a negative rate or weight decay.
      TypeError: as `scale_by_sophia`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.sophia(0.1, weight_decay=0.0)
        >>> params = jnp.array([1.0, -2.0])
        >>> u, _ = tx.update(params, tx.init(params), params, obj_fn=lambda w: jnp.sum(w**2) / 2)
        >>> u  # step 1 is clipped: -lr * sign(m)
        Array([-0.1,  0.1], dtype=float32)

    References:
      Liu, Li, Hall, Liang, Ma, *Sophia: a scalable stochastic second-order optimizer for
      language model pre-training*, ICLR 2024 (arXiv:2305.14342).
    """
    return chain(
        scale_by_sophia(
            b1,
            b2,
            eps,
            gamma,
            clip_threshold,
            update_interval,
            hessian_diagonal_fn,
            mu_dtype=mu_dtype,
            verbose=verbose,
            print_win_rate_every_n_steps=print_win_rate_every_n_steps,
        ),
        add_decayed_weights(weight_decay, mask=mask),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["HutchinsonState", "SophiaState", "hutchinson_estimator_diag_hessian", "scale_by_sophia", "sophia"]

"""Hutchinson's estimate of a Hessian's diagonal, and its refresh every k steps inside a rule (AdaHessian,
Sophia-H): the estimate is taken from an objective `obj_fn` at the params, or given as `hessian`."""

from __future__ import annotations

import zlib
from typing import Any, Callable

import jax
import jax.numpy as jnp

from gradtx._core import checks as _checks
from gradtx._core import control as _control
from gradtx._core import factory as _factory
from gradtx._core import masks as _masks
from gradtx._core import packed as _packed
from gradtx._core import protocol as _protocol
from gradtx._core import rule_parts as _rule_parts
from gradtx._core import walk as _walk

DISTRIBUTIONS = ("rademacher", "gaussian")
"""The probes' distributions: random signs, or standard normal numbers."""

REAL = "its Hessian-diagonal estimate is of real numbers"
"""Why the rules that refresh a Hutchinson estimate refuse complex numbers."""


def _leaf_key(key: jax.Array, path: Any) -> jax.Array:
    """A leaf's key: `key` folded with its key path's CRC, so that its draws depend on no other leaf."""
    return jax.random.fold_in(key, zlib.crc32(_masks.path_str(path).encode()) & 0x7FFFFFFF)


def _probe(key: jax.Array, x: jax.Array, distribution: str) -> jax.Array:
    if distribution == "rademacher":
        return jax.random.rademacher(key, jnp.shape(x), jnp.float32).astype(x.dtype)
    return jax.random.normal(key, jnp.shape(x), jnp.float32).astype(x.dtype)


def hutchinson_diag_hessian(
    obj_fn: Callable[[Any], jax.Array],
    params: Any,
    key: jax.Array | None = None,
    *,
    num_samples: int = 1,
    distribution: str = "rademacher",
    probes: list[Any] | None = None,
) -> Any:
    r"""Hutchinson's estimate of the diagonal of `obj_fn`'s Hessian at `params`, a tree like `params`.

    .. math:: \hat h = \frac{1}{n} \sum_{i=1}^{n} z_i \odot (\nabla^2 f(w)\, z_i)

    an unbiased estimate of :math:`\operatorname{diag}\nabla^2 f(w)` from `num_samples` Hessian-vector
    products (forward-over-reverse, `jax.jvp` of `jax.grad(obj_fn)`). The probes :math:`z_i` are drawn
    from `key` (`jax.random.split` into one key per sample, folded with each leaf's key path, as
    `add_noise` draws: a leaf's probes depend on no other leaf): random signs
    (`"rademacher"`) or standard normal numbers (`"gaussian"`); or they are given as `probes`, a list of
    trees like `params` (to replay another library's draws).

    Args:
      obj_fn: the objective, `obj_fn(params) -> scalar` (the loss at this step's batch).
      params: the point, a tree of float arrays.
      key: the PRNG key of the draws (needed unless `probes` is given).
      num_samples: the number of probes to average, an int >= 1.
      distribution: `"rademacher"` or `"gaussian"`.
      probes: the probes themselves, a list of trees like `params`; None: draw them from `key`.

    Returns:
      The estimate, a tree like `params`.

    Raises:
      ValueError: for a bad `num_samples` or `distribution`, or neither `key` nor `probes`.

    Example:
        >>> import jax, jax.numpy as jnp, gradtx
        >>> def obj_fn(w):  # Hessian diag(2, 6): with random signs, z * H z = diag(H) exactly
        ...     return jnp.sum(jnp.array([1.0, 3.0]) * w**2)
        >>> gradtx.hutchinson_diag_hessian(obj_fn, jnp.array([1.0, 2.0]), jax.random.PRNGKey(0))
        Array([2., 6.], dtype=float32)

    References:
      Hutchinson, *A stochastic estimator of the trace of the influence matrix for Laplacian
      smoothing splines*, 1989; Bekas, Kokiopoulou, Saad, *An estimator for the diagonal of a
      matrix*, 2007.
    """
    fn = "hutchinson_diag_hessian"
    if probes is None:
        _checks.check_int(fn, "num_samples", num_samples, minimum=1)
        _checks.check_one_of(fn, "distribution", distribution, DISTRIBUTIONS)
        if key is None:
            raise ValueError(f"`{fn}`: give the PRNG `key` of the draws, or the `probes` themselves.")
        probes = [
            jax.tree_util.tree_map_with_path(
                lambda path, x, k=sample_key: _probe(_leaf_key(k, path), x, distribution), params
            )
            for sample_key in jax.random.split(key, num_samples)
        ]
    total = None
    for z in probes:
        hz = jax.jvp(jax.grad(obj_fn), (params,), (z,))[1]
        term = jax.tree.map(lambda a, b: a * b, hz, z)
        total = term if total is None else jax.tree.map(jnp.add, total, term)
    return jax.tree.map(lambda x: x / len(probes), total)


def with_hutchinson(
    fn: str,
    rule: _protocol.GradientTransformation,
    *,
    update_period: int,
    num_samples: int,
    distribution: str,
    seed: int,
    transform: Callable[[jax.Array], jax.Array] | None = None,
) -> _protocol.GradientTransformation:
    """`rule` (an `update_rule` whose state has the slot `hessian`) with that slot refreshed every
    `update_period` steps (the first at step 1) by a Hutchinson estimate at the params.

    `update(grads, state, params, obj_fn=..., [key=...])` estimates from `obj_fn` with `key` (default:
    `seed` folded with the count); `update(..., hessian=...)` takes a given estimate instead (read on a
    refresh step only). `transform` maps each leaf's estimate before it is stored (AdaHessian's spatial
    averaging). Off a refresh step the slot keeps its value and nothing is computed (`lax.cond`); the
    rule knows a refresh step by its count. `fn` names the factory in errors; the arguments are checked
    by it.
    """
    member = _factory.member(rule)

    def init_fn(params):
        return member.init(params)

    def update_fn(updates, state, params=None, *, obj_fn=None, hessian=None, key=None, **extra_args):
        if params is None:
            raise _protocol.missing_params(fn)
        if hessian is None and obj_fn is None:
            raise _protocol.missing_extra_arg(fn, "obj_fn", "lambda params: loss(params, batch)")
        leaves, treedef = jax.tree.flatten(updates, is_leaf=_walk.is_update_leaf)
        _rule_parts.refuse_integers(fn, updates, leaves, treedef, params, None)
        _factory.refuse_complex(fn, updates, params, why=REAL)

        def estimate():
            if hessian is not None:
                new = hessian
            else:
                k = jax.random.fold_in(jax.random.PRNGKey(seed), state.count) if key is None else key
                new = hutchinson_diag_hessian(
                    obj_fn, params, k, num_samples=num_samples, distribution=distribution
                )
            new = _walk.map_updates(fn, lambda d, old: d.astype(old.dtype), new, state.hessian)
            return new if transform is None else _walk.map_updates(fn, transform, new)

        refreshed = _control.cond(state.count % update_period == 0, estimate, lambda: state.hessian)
        return member.update(updates, state._replace(hessian=refreshed), params, **extra_args)

    # leaf-wise: `obj_fn` and the probes see the params' own leaves, never packed buffers
    return _packed.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))


def is_refresh(h: Any, update_period: int) -> dict[str, Any]:
    """Whether this step refreshes the estimate (a `prepare` part): `count % update_period == 0`."""
    return {"refresh": h.count % update_period == 0}


__all__ = ["hutchinson_diag_hessian"]

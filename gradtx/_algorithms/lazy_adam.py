"""Lazy Adam (tf.contrib's `LazyAdamOptimizer`): only the rows a sparse gradient touches move."""

from __future__ import annotations

from typing import Any

from gradtx import sparse
from gradtx._algorithms.adam import (
    _adam_family,
    _adam_step,
    _doc,
    _powers_from_state,
    _stored,
    _tf1_leaf,
    squared_as,
)
from gradtx._core import formulas as _formulas
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry
from gradtx._core.chain import chain
from gradtx.combinators._scale import scale_by_learning_rate


def _lazy_rows(g, m, v, h):
    """LazyAdam on the touched rows (contrib's form): `m = b1 m + (1 - b1) g` there."""
    m = _stored(_formulas.moment_blend(m, g, h.b1), m.dtype)
    v = _formulas.moment_blend(v, squared_as(g, v), h.b2)
    return _adam_step(m, v, h), m, v


def _lazy_sparse(g, m, v, h):
    """contrib's LazyAdam on a row-sparse gradient: the touched rows of `m`, `v` and the variable only."""
    return sparse.apply_rows(lambda gr, mr, vr: _lazy_rows(gr, mr, vr, h), g, m, v)


@_registry.transform()
@_doc
def scale_by_lazy_adam(
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""`scale_by_adam` whose row-sparse gradients change their rows only (contrib's LazyAdam).

    .. math::
        m_r = \beta_1 m_r + (1-\beta_1) g_r, \quad v_r = \beta_2 v_r + (1-\beta_2) g_r^2, \quad
        u_r = \frac{m_r \sqrt{1-\beta_2^t}/(1-\beta_1^t)}{\sqrt{v_r} + \hat\epsilon}

    on the touched rows :math:`r` of a (deduplicated) row-sparse gradient; the other rows of
    `m`, `v` and the variable do not change, so a step costs O(touched rows). Dense
    gradients give exactly `scale_by_adam`.

    Args:
      {ARGS}

    Returns:
      An `ElementWise` transform with state `ScaleByAdamState`.

    Raises:
      {RAISES}

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> from gradtx.sparse import RowSparse
        >>> tx = gradtx.scale_by_lazy_adam()
        >>> g = RowSparse(jnp.array([1]), jnp.ones((1, 1)), (3, 1))
        >>> u, state = tx.update(g, tx.init(jnp.zeros((3, 1))))
        >>> [round(float(x), 4) for x in u.todense()[:, 0]], [round(float(x), 4) for x in state.m[:, 0]]
        ([0.0, 1.0, 0.0], [0.0, 0.1, 0.0])

    References:
      TensorFlow, `tf.contrib.opt.LazyAdamOptimizer` (lazy_adam_optimizer.py).
    """
    return _adam_family(
        "scale_by_lazy_adam", b1, b2, eps, mu_dtype, _tf1_leaf, _lazy_sparse, _powers_from_state, nu_dtype
    )


@_registry.optimizer("LazyAdam")
@_doc
def lazy_adam(
    learning_rate: _protocol.ScalarOrSchedule = 0.001,
    b1: _protocol.ScalarOrSchedule = 0.9,
    b2: _protocol.ScalarOrSchedule = 0.999,
    eps: _protocol.ScalarOrSchedule = 1e-8,
    *,
    mu_dtype: Any = None,
    nu_dtype: Any = None,
) -> _protocol.GradientTransformation:
    r"""LazyAdam: `tf.contrib.opt.LazyAdamOptimizer`: Adam, but a row-sparse gradient changes its rows only.

    Dense gradients give exactly `adam`. With a row-sparse gradient (an embedding lookup)
    only the touched rows of `m`, `v` and the variable change, so a step costs O(touched
    rows). This is `chain(scale_by_lazy_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))`.

    Args:
      {ADAM_ARGS}
      {MU_DTYPE}

    Returns:
      A `GradientTransformation`.

    Raises:
      ValueError: for a beta outside [0, 1), a negative `eps` or rate.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> from gradtx.sparse import RowSparse
        >>> tx = gradtx.lazy_adam(0.1)
        >>> u, _ = tx.update(RowSparse(jnp.array([1]), jnp.ones((1, 2)), (3, 2)), tx.init(jnp.zeros((3, 2))))
        >>> [round(float(x), 4) for x in gradtx.apply_updates(jnp.zeros((3, 2)), u)[:, 0]]
        [0.0, -0.1, 0.0]
    """
    return chain(
        scale_by_lazy_adam(b1, b2, eps, mu_dtype=mu_dtype, nu_dtype=nu_dtype),
        scale_by_learning_rate(learning_rate),
    )


__all__ = ["lazy_adam", "scale_by_lazy_adam"]

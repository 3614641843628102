r"""Moving averages of the updates over whole trees, as `optax.tree` keeps them.

The moving average is written as optax writes it, `(1 - decay) * x + decay * m`
(`_formulas.optax_moment`, not `_formulas.moment_blend`, the same sum in the other order): under
`jit`, XLA on CPU fuses one of the two products into an FMA, which one depends on the operand
order, so only optax's order gives optax's bits. Where the updates have `None`, so do the new
moments.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from gradtx._core import formulas as _formulas


def _is_none(x: Any) -> bool:
    return x is None


def update_moment(updates: Any, moments: Any, decay: Any, order: Any) -> Any:
    r"""The exponential moving average of the `order`-th power of the updates.

    .. math::
        m_t = \beta\, m_{t-1} + (1 - \beta)\, g_t^{k}

    Args:
      updates: the updates `g` (a pytree; `None` leaves give `None`).
      moments: the previous moments `m` (the structure of `updates`).
      decay: the decay rate `beta`.
      order: the power `k` (1 for Adam's first moment, 2 for a real second moment).

    Returns:
      The new moments, with the structure of `updates`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.update_moment({"w": jnp.array([2.0])}, {"w": jnp.array([1.0])}, 0.5, 2)
        {'w': Array([2.5], dtype=float32)}
    """
    return jax.tree.map(
        lambda g, m: None if g is None else _formulas.optax_moment(m, g**order, decay),
        updates,
        moments,
        is_leaf=_is_none,
    )


def update_infinity_moment(updates: Any, moments: Any, decay: Any, eps: Any) -> Any:
    r"""AdaMax's decayed infinity norm of the updates.

    .. math::
        u_t = \max(|g_t| + \epsilon,\ \beta\, u_{t-1})

    Args:
      updates: the updates `g` (a pytree; `None` leaves give `None`).
      moments: the previous norms `u` (the structure of `updates`).
      decay: the decay rate `beta`.
      eps: the term `epsilon` added to `|g|`.

    Returns:
      The new norms, with the structure of `updates`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.update_infinity_moment({"w": jnp.array([-2.0])}, {"w": jnp.array([8.0])}, 0.5, 0.0)
        {'w': Array([4.], dtype=float32)}
    """
    return jax.tree.map(
        lambda g, u: None if g is None else jnp.maximum(jnp.abs(g) + eps, decay * u),
        updates,
        moments,
        is_leaf=_is_none,
    )


def _abs_power(g: Any, order: Any) -> Any:
    """`|g|**order` of a complex leaf, `g**order` of a real one.

    `|g|**order` is `(|g|**2) ** (order / 2)` with `|g|**2 = re(conj(g) * g)` (optax's form; `re**2 + im**2`
    rounds differently), the exponent a Python int where it is integral (jax traces `x ** 2` and
    `x ** 2.0` to different ops).
    """
    if jnp.isrealobj(g):
        return g**order
    half = order / 2
    return (jnp.conj(g) * g).real ** (int(half) if half.is_integer() else half)


def update_moment_per_elem_norm(updates: Any, moments: Any, decay: Any, order: Any) -> Any:
    r"""The exponential moving average of the `order`-th power of each element's modulus.

    .. math::
        m_t = \beta\, m_{t-1} + (1 - \beta)\, |g_t|^{k}

    For a real leaf `|g|^k` is `g^k` (so an odd `k` keeps the sign); for a complex leaf it
    is `(re^2 + im^2)^(k/2)`, real, so the second moment of a complex gradient does not
    rotate.

    Args:
      updates: the updates `g` (a pytree; `None` leaves give `None`).
      moments: the previous moments `m` (the structure of `updates`).
      decay: the decay rate `beta`.
      order: the power `k`.

    Returns:
      The new moments, with the structure of `updates`.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.update_moment_per_elem_norm({"z": jnp.array([3 + 4j])}, {"z": jnp.zeros(1)}, 0.5, 2)
        {'z': Array([12.5], dtype=float32)}
    """
    return jax.tree.map(
        lambda g, m: None if g is None else _formulas.optax_moment(m, _abs_power(g, order), decay),
        updates,
        moments,
        is_leaf=_is_none,
    )


@functools.partial(jax.jit, inline=True)
def _bias_corrected(moment: Any, decay: Any, count: Any) -> Any:
    # `decay ** count` in the scalars' precision (in bf16 it would round to 1 and divide by 0),
    # then each leaf divided in its own dtype, so a bf16 moment stays bf16.
    correction = 1 - decay**count
    return jax.tree.map(lambda m: m / correction.astype(m.dtype), moment)


def bias_correction(moment: Any, decay: Any, count: Any) -> Any:
    r"""A moment divided by `1 - decay**count`: the average of the updates so far, not biased towards 0.

    .. math::
        \hat m_t = \frac{m_t}{1 - \beta^t}

    The correction fades as `count` grows.

    Args:
      moment: the moments `m` (a pytree).
      decay: the decay rate `beta` they were kept with.
      count: the number of updates averaged into them (`t`, at least 1).

    Returns:
      The corrected moments, each leaf in its dtype.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> gradtx.tree.bias_correction({"w": jnp.array([0.5])}, 0.5, jnp.asarray(1))
        {'w': Array([1.], dtype=float32)}
    """
    return _bias_corrected(moment, decay, count)

"""Complex parameters as pairs of real ones: `split_real_and_imaginary` runs a transform on the two parts."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gradtx import packing, sparse
from gradtx._core import checks as _checks
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx._core import registry as _registry


class SplitRealAndImaginaryArrays(NamedTuple):
    """The real and imaginary parts of one complex array, as two real arrays (optax's pair)."""

    real: Any
    imaginary: Any


class SplitRealAndImaginaryState(NamedTuple):
    """State of `split_real_and_imaginary` (optax's `SplitRealAndImaginaryState`, field for field)."""

    inner_state: Any  # the inner transform's state, over the split (real) tree


def _split(x: Any) -> Any:
    """A complex array as its `(real, imaginary)` pair; anything else as it is."""
    if x is not None and jnp.iscomplexobj(x):
        return SplitRealAndImaginaryArrays(jnp.real(x), jnp.imag(x))
    return x


def _merge(x: Any) -> Any:
    """A `(real, imaginary)` pair as the complex array `real + i imaginary`; anything else as it is."""
    if isinstance(x, SplitRealAndImaginaryArrays):
        return x.real + x.imaginary * 1j
    return x


def _is_pair(x: Any) -> bool:
    return isinstance(x, SplitRealAndImaginaryArrays)


@_registry.wrapper()
def split_real_and_imaginary(inner: Any) -> _protocol.GradientTransformation:
    r"""Run `inner` on the real and imaginary parts of complex parameters as two real parameters.

    .. math::
        w = a + i b \;\mapsto\; (a, b), \qquad (u_a, u_b) = \text{inner}(g_a, g_b), \qquad
        u = u_a + i\, u_b

    Each complex leaf of the updates and params becomes a `SplitRealAndImaginaryArrays(real,
    imaginary)` pair of real leaves before `inner` sees them (its state is over that split
    tree), and each pair `inner` returns becomes one complex update; real leaves pass as they
    are. The optimizer then treats a complex parameter as two independent real ones (Adam's
    second moment per part, not of :math:`|g|^2`), as `optax.contrib.split_real_and_imaginary`
    does. JAX's gradient of a real loss with respect to a complex parameter is the conjugate
    of the steepest-ascent direction: conjugate it before this transform. A row-sparse
    gradient is densified first.

    Args:
      inner: the transform to run on the real pairs.

    Returns:
      A `LeafWise` transform with state `SplitRealAndImaginaryState(inner_state)`.

    Raises:
      TypeError: if `inner` is not a transform.

    Example:
        >>> import jax.numpy as jnp, gradtx
        >>> tx = gradtx.split_real_and_imaginary(gradtx.sign_sgd(0.5))
        >>> params = jnp.array([1.0 + 1.0j])
        >>> tx.update(jnp.array([3.0 - 0.1j]), tx.init(params), params)[0]  # -0.5 sign of each part
        Array([-0.5+0.5j], dtype=complex64)

    References:
      optax issue 196, *Complex-valued optimization* (github.com/deepmind/optax/issues/196).
    """
    fn = "split_real_and_imaginary"
    _checks.check_transform(fn, "inner", inner)
    member = _factory.member(inner)

    def init_fn(params):
        return SplitRealAndImaginaryState(member.init(jax.tree.map(_split, params)))

    def update_fn(updates, state, params=None, **extra_args):
        split = jax.tree.map(_split, sparse.densify(updates))
        out, inner_state = member.update(split, state.inner_state, jax.tree.map(_split, params), **extra_args)
        return jax.tree.map(_merge, out, is_leaf=_is_pair), SplitRealAndImaginaryState(inner_state)

    return packing.leaf_wise(_protocol.GradientTransformation(init_fn, update_fn))

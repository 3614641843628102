"""Label smoothing against optax's own."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from gradtx import losses
from tests.losses._shared import assert_same, case, integers, mask

optax = pytest.importorskip("optax")


def test_smooth_labels():
    one_hot = jnp.eye(4)[integers(0, (2, 3), 4)]
    assert_same(
        losses.smooth_labels,
        optax.losses.smooth_labels,
        case(one_hot, 0.1),
        case(one_hot, jnp.array(0.3)),
        case(one_hot, 0.2, axis=0),
        case(one_hot, 0.2, where=mask(1, (2, 3, 4))),
        case(one_hot.astype(jnp.bfloat16), 0.1),
    )


def test_refusals():
    with pytest.raises(TypeError, match="`smooth_labels`: `labels` must have a floating"):
        losses.smooth_labels(jnp.eye(3, dtype=jnp.int32), 0.1)
    with pytest.raises(TypeError):
        optax.losses.smooth_labels(jnp.eye(3, dtype=jnp.int32), 0.1)

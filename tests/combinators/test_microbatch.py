"""microbatch, micro_vmap, micro_grad (gradtx/combinators/_microbatch.py, _micro_grad.py) against
optax.microbatching on the same functions and batches, all in one jitted program; and
incremental_update / periodic_update (gradtx/_tree_updates.py) against optax's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as compat

AT, OAT = gradtx.AccumulationType, optax.microbatching.AccumulationType
RNG = np.random.default_rng(0)
X = jnp.asarray(RNG.standard_normal((12, 3)), jnp.float32)
Y = jnp.asarray(RNG.standard_normal(12), jnp.float32)
W = jnp.asarray(RNG.standard_normal(3), jnp.float32)


def _f(w, x, y):
    return {"loss": jnp.sum((x @ w - y) ** 2), "pred": x @ w}


def _g(x, *, y):
    return x @ y  # batch on axis 1 of x, axis 0 of y


def _loss(w, x, y):
    return 0.5 * jnp.mean((x @ w - y) ** 2)


def _theirs(acc):
    return jax.tree.map(lambda a: getattr(OAT, a.name), acc, is_leaf=lambda a: isinstance(a, AT))


ACCUMULATORS = {
    "sum": AT.SUM,
    "mean": AT.MEAN,
    "running_mean": AT.RUNNING_MEAN,
    "prefix": {"loss": AT.MEAN, "pred": AT.CONCAT},
}


def _cases(lib, acc_of):
    """name -> a function of no arguments evaluating one microbatched call (built from `lib`)."""
    cases = {
        f"microbatch-{name}": lambda a=acc: lib.microbatch(_f, (1, 2), 3, acc_of(a))(W, X, Y)
        for name, acc in ACCUMULATORS.items()
    }
    cases["microbatch-argnames-in_axes"] = lambda: lib.microbatch(
        _g, 0, 4, acc_of(AT.SUM), argnames="y", in_axes=(1, 0)
    )(X.T, y=Y)
    cases["microbatch-num_real"] = lambda: lib.microbatch(
        _f, (1, 2), 3, acc_of(AT.RUNNING_MEAN), num_real_microbatches=2
    )(W, X, Y)
    mv = lib.microbatching.micro_vmap if lib is optax else lib.micro_vmap
    mg = lib.microbatching.micro_grad if lib is optax else lib.micro_grad
    cases["micro_vmap"] = lambda: mv(lambda x, w: jnp.tanh(x @ w), in_axes=(0, None), microbatch_size=4)(X, W)
    cases["micro_vmap-mean"] = lambda: mv(lambda x: x**2, microbatch_size=6, accumulator=acc_of(AT.MEAN))(X)
    cases["micro_grad"] = lambda: mg(
        _loss,
        batch_argnums=(1, 2),
        microbatch_size=3,
        accumulator=acc_of(AT.MEAN),
        transform_fn=lambda g: (g, g**2),
        metrics_fn=jnp.linalg.norm,
    )(W, X, Y)
    cases["micro_grad-no_batch_dim"] = lambda: mg(
        lambda w, x, y: 0.5 * (x @ w - y) ** 2, batch_argnums=(1, 2), keep_batch_dim=False, microbatch_size=4
    )(W, X, Y)
    return cases


def test_every_microbatched_call_equals_optax():
    ours, theirs = _cases(gradtx, lambda a: a), _cases(optax, _theirs)
    got, want = jax.jit(lambda: ({k: f() for k, f in ours.items()}, {k: f() for k, f in theirs.items()}))()
    for name in ours:
        a, e = jax.tree.leaves(got[name]), jax.tree.leaves(want[name])
        assert len(a) == len(e), name
        for x, y in zip(a, e, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6, err_msg=name)


def test_microbatch_equals_the_whole_batch_and_compat_is_gradtxs():
    whole = _f(W, X, Y)
    out = gradtx.microbatch(_f, (1, 2), 4, {"loss": AT.SUM, "pred": AT.CONCAT})(W, X, Y)
    np.testing.assert_allclose(out["loss"], whole["loss"], rtol=1e-5)
    np.testing.assert_allclose(out["pred"], whole["pred"], rtol=1e-6)
    assert compat.microbatch is gradtx.microbatch
    with_optaxs = compat.microbatch(_f, (1, 2), 4, {"loss": OAT.SUM, "pred": OAT.CONCAT})(W, X, Y)
    jax.tree.map(np.testing.assert_array_equal, with_optaxs, out)
    assert gradtx.microbatch(_f, 1, None) is _f


@pytest.mark.parametrize("library", [gradtx, optax.microbatching])
def test_a_custom_accumulator_of_either_library(library):
    running_max = library.Accumulator(
        init=lambda x: jnp.full(x.shape, -jnp.inf, x.dtype),
        update=lambda carry, x, i: jnp.maximum(carry, x),
        finalize=lambda carry: carry,
        aggregate=lambda x: jnp.max(x, axis=0),
    )
    out = gradtx.microbatch(lambda x: jnp.max(x**2, axis=0), 0, 3, running_max)(X)
    np.testing.assert_allclose(out, jnp.max(X**2, axis=0), rtol=1e-6)


def test_reshape_batch_axis_is_column_major_as_optax():
    x = jnp.arange(24).reshape(2, 12)
    np.testing.assert_array_equal(
        gradtx.reshape_batch_axis(x, 4, axis=1), optax.microbatching.reshape_batch_axis(x, 4, axis=1)
    )


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: gradtx.microbatch(_f, 1, 0), ValueError,
         r"`microbatch`: `microbatch_size` must be >= 1, got 0\."),
        (lambda: gradtx.microbatch(3, 1, 2), TypeError, r"`microbatch`: `fun` must be callable, got 3"),
        (lambda: gradtx.microbatch(_f, 1.0, 2), TypeError,
         r"`microbatch`: `argnums` must be an int or a sequence of them, got 1.0\."),
        (lambda: gradtx.microbatch(_f, (1, 2), 2, in_axes=(0,)), ValueError,
         r"`microbatch`: `in_axes` \(0,\) must give one axis for each of `argnums` and `argnames` \(2\)\."),
        (lambda: gradtx.microbatch(_f, (1, 2), 5)(W, X, Y), ValueError,
         r"`microbatch`: `microbatch_size` 5 must divide the batch size 12\."),
        (lambda: gradtx.microbatch(_f, (1, 2), 2)(W, X, Y[:6]), ValueError,
         r"`microbatch`: the batch arguments must have one batch size, got \[6, 12\]\."),
        (lambda: gradtx.microbatch(_f, (1, 2), 2, "sum")(W, X, Y), TypeError,
         r"`microbatch`: each accumulator must be an `Accumulator` or an `AccumulationType`, got 'sum'\."),
        (lambda: gradtx.microbatch(lambda x: x, 0, 2, AT.MEAN)(jnp.arange(4)), ValueError,
         r"`microbatch`: a MEAN or RUNNING_MEAN output must be floating-point, got int32\."),
        (lambda: gradtx.micro_vmap(jnp.sin, out_axes=1), NotImplementedError,
         r"`micro_vmap`: `out_axes` must be 0"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --------------------------------------------------------------------------- target networks


def test_incremental_and_periodic_updates_equal_optaxs_over_twenty_steps():
    online = {"w": jnp.asarray(RNG.standard_normal((3, 2)), jnp.float32), "b": None}
    target_avg = target_copy = ref_avg = ref_copy = {"w": jnp.zeros((3, 2)), "b": None}

    @jax.jit
    def step(t, online, avg, copy, r_avg, r_copy):
        online = {"w": online["w"] * 0.9 + 0.1, "b": None}
        return (
            online,
            compat.incremental_update(online, avg, 0.3),
            compat.periodic_update(online, copy, t, 4),
            optax.incremental_update(online, r_avg, 0.3),
            optax.periodic_update(online, r_copy, t, 4),
        )

    copies = 0
    for t in range(1, 21):
        online, target_avg, target_copy, ref_avg, ref_copy = step(
            t, online, target_avg, target_copy, ref_avg, ref_copy
        )
        np.testing.assert_allclose(target_avg["w"], ref_avg["w"], rtol=1e-6, err_msg=f"step {t}")
        np.testing.assert_array_equal(target_copy["w"], ref_copy["w"])
        assert target_avg["b"] is None and target_copy["b"] is None
        copies += bool(np.array_equal(target_copy["w"], online["w"]))
    assert copies == 5  # steps 4, 8, ..., 20


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: gradtx.incremental_update({"w": 1.0}, {"w": 0.0}, 1.5), ValueError,
         r"`incremental_update`: `step_size` must be in \[0.0, 1.0\], got 1.5\."),
        (lambda: gradtx.incremental_update({"w": 1.0}, {"v": 0.0}, 0.5), ValueError,
         r"`incremental_update`: new_tensors and old_tensors must have the same tree structure"),
        (lambda: gradtx.periodic_update({"w": 1.0}, {"w": 0.0}, 3, 0), ValueError,
         r"`periodic_update`: `update_period` must be >= 1, got 0\."),
        (lambda: gradtx.periodic_update({"w": 1.0}, {"w": 0.0}, 3, 2.5), TypeError,
         r"`periodic_update`: `update_period` must be an integer, got 2.5"),
    ],
)  # fmt: skip
def test_target_updates_refuse_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()

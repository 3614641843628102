"""snapshot, monitor and measure_with_ema (gradtx/combinators/_monitor.py) against optax's, 20 steps of
optax's own examples; and the optax_compat layouts (gradtx/optax_compat/_transforms_more.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
import gradtx.optax_compat as compat

CLIP = 1.0


def _loss(x):
    return jnp.sum(x**2)


def _solver(lib):
    """optax's `monitor` example: momentum SGD, a norm and a moving average of a flag, then a clip (the
    monitors from `lib`, the rest optax's or optax_compat's)."""
    opt = optax if lib is optax else compat
    return opt.chain(
        opt.sgd(learning_rate=0.1, momentum=0.9),
        lib.monitor(
            {
                "norm_before_clip": lib.tree.norm,
                "is_clipped_ema": lib.measure_with_ema(lambda x: lib.tree.norm(x) > CLIP, decay=0.9),
                "max_ema": lib.measure_with_ema(lambda x: jnp.max(jnp.abs(x)), 0.5, debias=False),
            }
        ),
        lib.snapshot("norm_after_momentum", lib.tree.norm),
        opt.clip_by_global_norm(CLIP),
    )


def _run(tx, steps=20):
    """`steps` jitted steps (a jitted step per state structure: optax's monitor state changes at step 1)."""
    params = jnp.array([1.0, 2.0, 3.0])
    state = tx.init(params)

    @jax.jit
    def step(params, state):
        updates, state = tx.update(jax.grad(_loss)(params), state)
        return optax.apply_updates(params, updates), state

    out = []
    for _ in range(steps):
        params, state = step(params, state)
        names = ("norm_before_clip", "is_clipped_ema", "max_ema", "norm_after_momentum")
        out.append((params, [optax.tree.get(state, n) for n in names]))
    return out


@pytest.mark.parametrize("lib", [compat, gradtx], ids=["optax_compat", "gradtx"])
def test_twenty_steps_of_optaxs_example_equal_optax(lib):
    actual, expected = _run(_solver(lib)), _run(_solver(optax))
    for t, ((p, m), (p_e, m_e)) in enumerate(zip(actual, expected, strict=True)):
        np.testing.assert_allclose(p, p_e, rtol=1e-6, atol=1e-6, err_msg=f"params, step {t + 1}")
        np.testing.assert_allclose(m, m_e, rtol=1e-6, atol=1e-6, err_msg=f"measurements, step {t + 1}")
    assert 0.0 < float(actual[-1][1][1]) < 1.0  # the flag was sometimes set, sometimes not


def test_gradtx_monitor_keeps_one_state_structure_optax_compat_does_as_optax():
    measures = {"norm": gradtx.tree.norm, "ema": gradtx.measure_with_ema(gradtx.tree.norm, 0.9)}
    params = {"w": jnp.ones((2, 3)), "b": jnp.ones(3)}
    ours = gradtx.monitor(measures)
    state = ours.init(params)
    assert jax.tree.map(float, state.measurements) == {"norm": 0.0, "ema": 0.0}
    _, new = ours.update(params, state)
    assert jax.tree.structure(new) == jax.tree.structure(state)
    assert type(state.measure_states[1][1]).__name__ == "MeasureEmaState"
    assert gradtx.slot_names(state) == []  # the measurement's average is not a per-parameter slot

    theirs = compat.monitor({"norm": compat.tree.norm, "ema": compat.measure_with_ema(compat.tree.norm, 0.9)})
    reference = optax.monitor({"norm": optax.tree.norm, "ema": optax.measure_with_ema(optax.tree.norm, 0.9)})
    s, r = theirs.init(params), reference.init(params)
    assert s.measurements == r.measurements == {}
    assert type(s.measure_states[1][1]).__name__ == type(r.measure_states[1][1]).__name__ == "EmaState"
    (_, s), (_, r) = theirs.update(params, s), reference.update(params, r)
    np.testing.assert_allclose(list(s.measurements.values()), list(r.measurements.values()), rtol=1e-6)


def test_monitor_passes_extra_args_to_stateful_measures_and_measures_row_sparse_updates_densified():
    seen = {}

    def measure_update(updates, state, params=None, **extra_args):
        if "scale" not in extra_args:
            raise gradtx.MissingExtraArgError("needs `scale`")
        seen["scale"] = extra_args["scale"]
        return extra_args["scale"] * gradtx.tree.norm(updates), state

    measure = gradtx.GradientTransformation(lambda p: gradtx.EmptyState(), measure_update)
    tx = gradtx.monitor({"scaled": measure, "norm": gradtx.tree.norm})
    table = jnp.zeros((4, 3))
    rows = gradtx.sparse.RowSparse(jnp.array([1, 1]), jnp.array([[3.0, 0.0, 0.0], [0.0, 4.0, 0.0]]), (4, 3))
    state = tx.init(table)
    assert list(state.measurements) == ["norm"]  # the measure needing `scale` is measured from step 1 on
    out, state = tx.update(rows, state, table, scale=2.0)
    assert out is rows and seen["scale"] == 2.0
    np.testing.assert_allclose(state.measurements["scaled"], 10.0, rtol=1e-6)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: gradtx.monitor([gradtx.tree.norm]), TypeError, r"`monitor`: `measures` must be a dict"),
        (lambda: gradtx.monitor({1: gradtx.tree.norm}), TypeError,
         r"`monitor`: a measure's name must be a string, got 1 of type int\."),
        (lambda: gradtx.monitor({"a": 3}), TypeError,
         r"`monitor`: `measures\['a'\]` must be a gradient transformation \(with `init` and `update`\)"),
        (lambda: gradtx.snapshot(None, gradtx.tree.norm), TypeError,
         r"`snapshot`: a measure's name must be a string, got None"),
        (lambda: gradtx.snapshot("a", 3), TypeError, r"`snapshot`: `measure` must be callable, got 3"),
        (lambda: gradtx.measure_with_ema(gradtx.tree.norm, 1.5), ValueError,
         r"`measure_with_ema`: `decay` must be in \[0.0, 1.0\], got 1.5\."),
        (lambda: gradtx.measure_with_ema(gradtx.tree.norm, 0.9, debias=1), TypeError,
         r"`measure_with_ema`: `debias` must be True or False, got 1"),
        (lambda: compat.measure_with_ema("norm", 0.9), TypeError,
         r"`measure_with_ema`: `measure` must be callable, got 'norm'"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()

"""Low-bit slots: torchao's blockwise quantization bit for bit; rules keep such slots in their format.

tests/lowbit/torchao.npz holds torchao's own codes, scales and values on the same inputs
(tools/record_lowbit.py records them; `make references` re-runs torchao and compares).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
import gradtx.optax_compat
from gradtx import checkpoint
from gradtx._core import code_maps, lowbit
from gradtx._core.code_maps import dynamic_map, linear_unsigned_map
from gradtx._core.lowbit import Format, Quantized
from tests import catalog, helpers

FIXTURE = Path(__file__).parent / "lowbit" / "torchao.npz"
FORMATS = {
    "8bit_signed": Format(8, 256, True),
    "8bit_unsigned": Format(8, 256, False),
    "4bit_signed": Format(4, 128, True),
    "4bit_unsigned": Format(4, 128, False),
}
CASES = ["normal", "wide", "ties", "zero_block"]


@pytest.fixture(scope="module")
def torchao():
    with np.load(FIXTURE) as f:
        return dict(f)


def test_the_maps_are_torchaos(torchao):
    maps = {
        "8bit_signed": dynamic_map(True),
        "8bit_unsigned": dynamic_map(False),
        "4bit_signed": dynamic_map(True, 3, 4),
        "4bit_unsigned": linear_unsigned_map(4),
    }
    for name, fmt in FORMATS.items():
        np.testing.assert_array_equal(fmt.code_map, torchao[f"{name}/map"], err_msg=name)
        np.testing.assert_array_equal(maps[name], torchao[f"{name}/map"], err_msg=name)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", list(FORMATS))
def test_codes_scales_and_values_equal_torchaos_bit_for_bit(torchao, name, case):
    key = f"{name}/{case}"
    x = torchao[f"{key}/input"]
    q = jax.jit(FORMATS[name].quantize)(x)
    np.testing.assert_array_equal(np.asarray(q.codes), torchao[f"{key}/codes"])
    np.testing.assert_array_equal(np.asarray(q.scales), torchao[f"{key}/scales"])
    np.testing.assert_array_equal(np.asarray(q.dequantize()), torchao[f"{key}/values"])


def test_blocks_run_along_the_fewest_trailing_axes_that_hold_one():
    """Rows of a matrix are blocked on their own (a short last block); codes are shaped like the matrix,
    4-bit codes with the last axis halved (rounded up); a scalar is one block. A conv kernel's small
    trailing axes are blocked together: where they hold whole blocks, as torchao blocks the flattened
    array."""
    quantize = jax.jit(lambda fmt, x: fmt.quantize(x), static_argnums=0)  # one program per shape, not per op
    dequantize = jax.jit(Quantized.dequantize)
    x = jax.random.normal(jax.random.key(0), (3, 300))
    for fmt, codes_shape, scales_shape in [
        (Format(8, 256, True), (3, 300), (3, 2)),
        (Format(4, 128, True), (3, 150), (3, 3)),
    ]:
        q = quantize(fmt, x)
        assert q.codes.shape == codes_shape and q.codes.dtype == jnp.uint8 and q.scales.shape == scales_shape
        assert q.shape == x.shape and dequantize(q).shape == x.shape
        for row in range(3):  # each row alone quantizes to the same codes
            np.testing.assert_array_equal(quantize(fmt, x[row]).codes, q.codes[row])
    kernel = jax.random.normal(jax.random.key(2), (4, 4, 16, 16))
    for fmt in (Format(8, 256, True), Format(4, 128, False)):
        q, flat = quantize(fmt, jnp.abs(kernel)), quantize(fmt, jnp.abs(kernel).ravel())
        assert q.codes.shape[:2] == (4, 4) and q.scales.shape[:2] == (4, 4)
        np.testing.assert_array_equal(q.codes.ravel(), flat.codes)
        np.testing.assert_array_equal(q.scales.ravel(), flat.scales)
        np.testing.assert_array_equal(dequantize(q).ravel(), dequantize(flat))
    fmt = Format(8, 256, True)
    one = quantize(fmt, jnp.float32(-0.5))  # its own scale: -1, the map's lowest entry (-0.99297) times 0.5
    assert dequantize(one).shape == () and float(dequantize(one)) == fmt.code_map[0] * np.float32(0.5)


def test_the_error_is_at_most_half_a_gap_of_the_map_times_the_scale():
    """Each value lands on the nearest entry: at most half the widest gap (or the distance from -1 to the
    lowest entry) times its block's scale away."""
    x = jax.random.normal(jax.random.key(1), (8, 256))
    for fmt in (Format(8, 256, True), Format(4, 128, True)):
        q = fmt.quantize(x)
        code_map = fmt.code_map.astype(np.float64)
        worst = max(np.diff(code_map).max() / 2, 1 + code_map[0])
        scale = np.repeat(np.asarray(q.scales), fmt.block_size, axis=-1)
        error = np.abs(np.asarray(q.dequantize(), np.float64) - np.asarray(x, np.float64))
        assert np.all(error <= worst * scale * (1 + 1e-5)), (fmt, float((error / scale).max()), worst)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("shape", [(64, 512), (7, 33), (3, 4, 129), (4097,)])
def test_a_new_slot_of_one_number_is_stored_as_quantizing_it_would(bits, shape):
    """`store(x, fill=v)` writes each block's scale |v| and the code of +-1 without the quantizing (which
    XLA folded as a constant when `init` was jitted: seconds per million elements), the same arrays bit
    for bit; 0 is torchao's new slot (codes and scales 0), and a number under the least scale quantizes."""
    for signed, fills in ((True, (0.1, -0.5, 3.0)), (False, (0.1, 1.0, 3e-20))):
        fmt = Format(bits, 256 if bits == 8 else 128, signed)
        for fill in fills:
            for dtype in (jnp.float32, jnp.bfloat16):
                x = jnp.full(shape, fill, dtype)
                want, got = fmt.quantize(x), fmt.store(x, fill=fill)
                for a, b in ((want.codes, got.codes), (want.scales, got.scales)):
                    np.testing.assert_array_equal(
                        np.asarray(b), np.asarray(a), err_msg=str((fmt, fill, dtype))
                    )
    zero = Format(bits, 128, False).store(jnp.zeros(shape), fill=0.0)
    assert not np.any(np.asarray(zero.codes)) and not np.any(np.asarray(zero.scales))
    assert not np.any(np.asarray(zero.dequantize()))


@pytest.mark.parametrize(
    "fmt, shape",
    [
        ("8bit", (1024, 1024)),
        ("4bit", (1024, 1024)),
        ("8bit", (4096, 256)),
        ("4bit", (8192, 128)),
        ("8bit", (1024, 1000)),
        ("4bit", (1024, 1000)),
        ("8bit", (10000, 100)),
        ("4bit", (10000, 100)),
    ],
)
def test_the_jitted_step_keeps_one_float32_temporary_per_stored_moment(fmt, shape):
    """XLA:CPU's plan of an AdamW step with low-bit moments on a leaf of about 2^20 elements: each new
    moment is its one float32 temporary (8 MiB for the two), read by the blocks' scales, the codes and the
    update. With one reduction over each block it also kept the old values dequantized (16 MiB), and so it
    did for rows of one block while it saw them as `[rows, 1, block]`, for rows that end in a short block
    while it padded them, and for blocks across rows (the last two) while it scaled the flattened values."""
    params = {"w": jnp.zeros(shape, jnp.float32)}
    tx = gradtx.low_bit_state(gradtx.optax_compat.adamw(1e-3, weight_decay=1e-4), fmt)

    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return gradtx.apply_updates(p, u), s

    state = jax.eval_shape(tx.init, params)
    plan = jax.jit(step, donate_argnums=(0, 1)).lower(params, state, params).compile().memory_analysis()
    if plan is None:
        pytest.skip("this backend gives no memory plan")
    assert plan.temp_size_in_bytes <= 2 * 4 * 2**20 + 2**18, plan.temp_size_in_bytes / 2**20


def _low_bit_adam(bits):
    size = 256 if bits == 8 else 128
    return gradtx.scale_by_bias_corrected_adam(
        mu_dtype=Format(bits, size, True), nu_dtype=Format(bits, size, False)
    )


def _params():
    rng = np.random.default_rng(0)
    return {"w": jnp.asarray(rng.standard_normal((4, 256)), jnp.float32), "b": jnp.zeros(7, jnp.float32)}


def test_a_rule_keeps_its_low_bit_slots_and_steps_close_to_float32():
    """The formula sees the dequantized moments and the new ones are stored in the format again; the
    state is a tree of uint8 codes and float32 scales (a quarter of the bytes, and a little more)."""
    params = _params()
    tx, plain = _low_bit_adam(8), gradtx.scale_by_bias_corrected_adam()
    state, ref = tx.init(params), plain.init(params)
    assert all(
        isinstance(s, Quantized)
        for s in jax.tree.leaves(state.mu, is_leaf=lambda x: isinstance(x, Quantized))
    )
    step = jax.jit(tx.update)
    for t in range(10):
        grads = jax.tree.map(lambda p, t=t: jnp.cos(p * (t + 1)), params)
        u, state = step(grads, state)
        r, ref = plain.update(grads, ref)
        helpers.assert_trees_close(u, r, rtol=0.05, atol=0.02)
    assert jax.tree.structure(state) == jax.tree.structure(tx.init(params))
    nu = gradtx.get_slot(state, "nu")  # dequantized: shaped like the params
    assert nu["w"].shape == (4, 256) and nu["w"].dtype == jnp.float32
    helpers.assert_trees_close(nu, gradtx.get_slot(ref, "nu"), rtol=0.05, atol=1e-6)  # 10 roundings
    n_bytes = sum(x.nbytes for x in jax.tree.leaves(state.mu))
    assert n_bytes <= (4 * 256 + 7) * 1.05 + 4 * 4  # a byte per element, a float32 scale per block


def test_low_bit_slots_of_bf16_params_and_in_four_bits():
    params = jax.tree.map(lambda p: p.astype(jnp.bfloat16), _params())
    tx = _low_bit_adam(4)
    grads = jax.tree.map(jnp.ones_like, params)
    u, state = jax.jit(tx.update)(grads, tx.init(params))
    assert jax.tree.map(lambda x: x.dtype, u) == jax.tree.map(lambda x: x.dtype, params)
    assert gradtx.get_slot(state, "mu")["w"].dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(u["w"], np.float32), 1.0, rtol=0.02)  # m / sqrt(v) of a constant


def test_a_low_bit_state_round_trips_through_npz(tmp_path):
    params = _params()
    tx = _low_bit_adam(8)
    _, state = tx.update(jax.tree.map(jnp.ones_like, params), tx.init(params))
    checkpoint.save_npz(tmp_path / "state.npz", state)
    restored = checkpoint.load_npz(tmp_path / "state.npz", tx.init(params))
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)


def test_a_low_bit_format_is_a_valid_slot_dtype_and_others_are_refused():
    with pytest.raises(TypeError, match="`mu_dtype` must be None or a floating-point"):
        gradtx.scale_by_bias_corrected_adam(mu_dtype=jnp.int8)
    tx = gradtx.scale_by_bias_corrected_adam(mu_dtype=Format(8, 256, True))
    with pytest.raises(TypeError, match="a slot in 8 bits holds real floats; got a slot of dtype complex64"):
        tx.init({"w": jnp.zeros(4, jnp.complex64)})  # its imaginary parts would be dropped


@pytest.mark.parametrize("bits", [8, 4])
def test_low_bit_state_stores_every_rules_slots_by_their_declared_sign(bits):
    """One wrapper for a whole optimizer: the first moment in the signed map, the second (declared
    non-negative) in the unsigned one, a leaf under 4,096 elements as it was; the steps keep the format
    and stay close to float32's."""
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.standard_normal((64, 256)), jnp.float32), "b": jnp.zeros(64)}
    plain = gradtx.optax_compat.adamw(1e-2, weight_decay=0.01)
    tx = gradtx.low_bit_state(plain, f"{bits}bit")
    state, ref = tx.init(params), plain.init(params)
    mu, nu = state[0].mu, state[0].nu
    assert isinstance(mu["w"], Quantized) and mu["w"].format == Format(bits, 256 if bits == 8 else 128, True)
    assert isinstance(nu["w"], Quantized) and not nu["w"].format.signed
    assert not isinstance(mu["b"], Quantized) and mu["b"].dtype == jnp.float32
    step = jax.jit(tx.update)
    for t in range(5):
        grads = jax.tree.map(lambda p, t=t: jnp.sin(p + t) + 0.1, params)
        u, state = step(grads, state, params)
        r, ref = plain.update(grads, ref, params)
    assert jax.tree.structure(state) == jax.tree.structure(tx.init(params))
    # the updates are about 3e-3 in size: 8 bits stay within a tenth of that, 4 bits within about one
    helpers.assert_trees_close(u, r, rtol=0, atol=3e-4 if bits == 8 else 4e-3)
    moments = sum(x.nbytes for x in jax.tree.leaves((state[0].mu["w"], state[0].nu["w"])))
    assert moments / params["w"].size <= (2.1 if bits == 8 else 1.1)  # bytes per parameter: the targets
    helpers.assert_trees_close(u["b"], r["b"], rtol=1e-6, atol=0)  # float32 state: float32's numbers


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "int8"}, "`format` must be one of '8bit', '4bit', 'bf16\\+sr', 'bf16\\+8'; got 'int8'"),
        ({"format": "8bit", "block_size": 7}, "`block_size` must be an even int >= 2, got 7"),
        (
            {"format": "bf16+sr", "block_size": 64},
            "`block_size` is for the 8- and 4-bit formats; 'bf16\\+sr'",
        ),
        ({"format": "4bit", "min_size": -1}, "`min_size` must be"),
        ({"format": "bf16+8", "seed": 0.5}, "`seed` must be"),
    ],
)
def test_low_bit_state_refuses_bad_arguments(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=f"`low_bit_state`: {message}"):
        gradtx.low_bit_state(gradtx.adam(), **kwargs)


def _element_wise_rules():
    """The registry's element-wise optimizers that keep slots shaped like their parameters."""
    params = {"w": jnp.zeros((16, 32))}
    names = []
    for entry in catalog.entries("optimizer"):
        if entry.example.get("axis_name"):
            continue
        tx = entry.build()
        if isinstance(tx, gradtx.ElementWise):
            state = jax.eval_shape(gradtx.low_bit_state(tx, "8bit", min_size=0).init, params)
            if any(isinstance(x, Quantized) for x in jax.tree.leaves(state, is_leaf=_is_quantized)):
                names.append(entry.name)
    return names


def _is_quantized(x):
    return isinstance(x, Quantized)


@pytest.mark.parametrize("name", _element_wise_rules())
def test_every_element_wise_rule_takes_8_bit_slots_and_declares_their_sign_truly(name):
    """Every one by one argument: its jitted steps stay close to float32's, and every slot a rule
    declares non-negative (the unsigned map) is non-negative in the float32 run."""
    entry = catalog.entry(name)
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.standard_normal((16, 32)), jnp.float32)}
    plain = entry.build()
    low = gradtx.low_bit_state(plain, "8bit", min_size=0)
    ref, state = plain.init(params), low.init(params)
    step = jax.jit(lambda g, s, p, t: low.update(g, s, p, **entry.extra(t)), static_argnums=3)
    for t in range(3):
        grads = {"w": jnp.cos(params["w"] * (t + 1))}
        u, state = step(grads, state, params, t)
        r, ref = plain.update(grads, ref, params, **entry.extra(t))
        # within 15% of float32's update in norm (an update at float32's noise, 1e-7, within 1e-6 per element)
        gap, size = jnp.linalg.norm(u["w"] - r["w"]), jnp.linalg.norm(r["w"])
        assert gap <= 0.15 * size + 1e-6 * np.sqrt(u["w"].size), (t, float(gap), float(size))

        def signed_truly(stored, value):
            return not isinstance(stored, Quantized) or stored.format.signed or bool(jnp.all(value >= 0))

        assert all(jax.tree.leaves(jax.tree.map(signed_truly, state, ref, is_leaf=_is_quantized)))
    assert jax.tree.structure(state) == jax.tree.structure(low.init(params))


@pytest.mark.parametrize("bits", [8, 4])
def test_adamw_in_low_bits_follows_torchaos_adamw_trajectory(torchao, bits):
    """torchao's `AdamW8bit` / `AdamW4bit`, 20 steps, the recorded gradients replayed: the params agree to
    float32 rounding (the same formulas, associated differently: a few ulps of params of size ~1), where
    float32 AdamW is 0.02 (8 bits) and 0.16 (4 bits) away -- the comparison sees the quantization. A
    rounding difference that moved a moment across the midpoint of two codes would show as 1e-4."""
    names = ("conv", "matrix", "vector")
    adamw = gradtx.optax_compat.adamw(1e-2, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-2)
    tx = gradtx.low_bit_state(adamw, f"{bits}bit")
    params = {k: jnp.asarray(torchao[f"adamw/init/{k}"]) for k in names}
    state, step = tx.init(params), jax.jit(tx.update)
    for t in range(20):
        grads = {k: jnp.asarray(torchao[f"adamw{bits}/grads/{k}"][t]) for k in names}
        updates, state = step(grads, state, params)
        params = gradtx.apply_updates(params, updates)
        expected = {k: torchao[f"adamw{bits}/params/{k}"][t] for k in names}
        helpers.assert_trees_close(params, expected, rtol=0, atol=2e-6)
    assert isinstance(state[0].nu["matrix"], Quantized) and not isinstance(state[0].nu["vector"], Quantized)


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_lookup_tables_round_as_the_binary_search(name):
    """Two table reads by a value's top 16 bits give `nearest_reference`'s code: checked at every step of the
    tables, one and two float32 ulps either side, every map entry and midpoint, and random values (and
    once, off the suite, at every float32 in [-1, 1]: no value differs)."""
    fmt = FORMATS[name]
    _, threshold = code_maps.lookup(fmt.bits, fmt.signed)
    steps = threshold[np.isfinite(threshold)]
    table = fmt.code_map
    mids = ((table[:-1] + table[1:]) / np.float32(2)).astype(np.float32)
    x = np.concatenate(
        [steps, table, mids, np.random.default_rng(0).uniform(-1, 1, 100_000).astype(np.float32)]
    )
    for _ in range(2):
        x = np.concatenate([x, np.nextafter(x, np.float32(2)), np.nextafter(x, np.float32(-2))])
    x = np.clip(np.abs(x) if not fmt.signed else x, -1, 1).astype(np.float32)
    got = np.asarray(jax.jit(lambda v: lowbit._nearest(v, fmt))(x))
    np.testing.assert_array_equal(got, code_maps.nearest_reference(x, table))

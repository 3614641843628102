"""Checkpoints: optimizer state and TrainState through .npz and orbax-checkpoint; resuming is
bit-identical; saving is atomic (a killed writer leaves the old file); loading refuses another tree,
another optimizer's state, and corrupt or foreign files before reading an array. TF1 names without
TensorFlow (the TF1 round trips are in tests/parity/test_checkpoint_tf1.py)."""

import io
import json
import os
import signal
import subprocess
import sys
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import checkpoint
from tests import helpers

X = jnp.asarray(np.random.default_rng(0).standard_normal((8, 3)), jnp.float32)
Y = jnp.sum(X, axis=1)


def _loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)


def _trainer():
    return gradtx.optimize_loss(
        _loss, "Adam", learning_rate=0.05, clip_gradients=1.0, gradient_noise_scale=0.01, summaries=["loss"]
    )


def _steps(trainer, state, n):
    step = jax.jit(trainer.step)
    for _ in range(n):
        state, _ = step(state, X, Y)
    return state


def test_train_state_round_trips_through_npz_and_resumes_bit_identically(tmp_path):
    trainer = _trainer()
    state = _steps(trainer, trainer.init({"w": jnp.zeros(3), "b": jnp.zeros(())}), 3)
    checkpoint.save_npz(tmp_path / "ckpt.npz", state)
    straight = _steps(trainer, state, 4)
    target = jax.eval_shape(trainer.init, {"w": jnp.zeros(3), "b": jnp.zeros(())})
    restored = checkpoint.load_npz(tmp_path / "ckpt.npz", target)
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    resumed = _steps(trainer, restored, 4)
    helpers.assert_trees_close(resumed, straight, rtol=0, atol=0)


def test_npz_errors_say_what_differs(tmp_path):
    tx = gradtx.adam(0.1)
    checkpoint.save_npz(tmp_path / "s.npz", tx.init({"w": jnp.zeros(3)}))
    with pytest.raises(ValueError, match=r"`load_npz`: .* does not match the target: missing \[.*'b'"):
        checkpoint.load_npz(tmp_path / "s.npz", tx.init({"w": jnp.zeros(3), "b": jnp.zeros(1)}))
    with pytest.raises(ValueError, match=r"is float32\[3\] in .*, but the target wants float32\[4\]"):
        checkpoint.load_npz(tmp_path / "s.npz", tx.init({"w": jnp.zeros(4)}))
    with pytest.raises(TypeError, match=r"is a typed PRNG key"):
        checkpoint.save_npz(tmp_path / "k.npz", {"key": jax.random.key(0)})


def test_train_state_round_trips_through_orbax(tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    trainer = _trainer()
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    state = _steps(trainer, trainer.init(params), 2)
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(tmp_path / "orbax", state)
        ckptr.wait_until_finished()
        restored = ckptr.restore(tmp_path / "orbax", jax.eval_shape(trainer.init, params))
    assert type(restored.opt_state) is gradtx.OptimizeLossState
    helpers.assert_trees_close(_steps(trainer, restored, 3), _steps(trainer, state, 3), rtol=0, atol=0)
    assert gradtx.slot_names(restored.opt_state) == ["m", "v"]


# --------------------------------------------------------------------------- save_npz is atomic

_SLOW_WRITER = """
import sys, time
import numpy as np
from gradtx import checkpoint

write_array = np.lib.format.write_array

def slow(*args, **kwargs):  # the first array written, then stuck: the parent kills us here
    write_array(*args, **kwargs)
    print("writing", flush=True)
    time.sleep(120)

np.lib.format.write_array = slow
checkpoint.save_npz(sys.argv[1], {"a": np.full(1000, 2.0, np.float32), "b": np.full(3, 2.0, np.float32)})
"""


def _old(path):
    tree = {"a": jnp.ones(1000), "b": jnp.ones(3)}
    checkpoint.save_npz(path, tree)
    return tree


def test_a_writer_killed_mid_overwrite_leaves_the_old_checkpoint(tmp_path):
    path = tmp_path / "ckpt.npz"
    old = _old(path)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    command = [sys.executable, "-c", _SLOW_WRITER, str(path)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as writer:
        try:
            assert writer.stdout.readline().strip() == "writing"  # mid-overwrite
        finally:
            writer.send_signal(signal.SIGKILL)
    assert writer.returncode == -signal.SIGKILL
    helpers.assert_trees_close(checkpoint.load_npz(path, old), old, rtol=0, atol=0)
    assert len(list(tmp_path.iterdir())) == 2  # the old file, and the dead writer's temporary one


def test_a_save_that_fails_part_way_leaves_the_old_checkpoint_and_no_litter(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    old = _old(path)
    write_array, calls = np.lib.format.write_array, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return write_array(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save_npz(path, {"a": jnp.zeros(1000), "b": jnp.zeros(3)})
    helpers.assert_trees_close(checkpoint.load_npz(path, old), old, rtol=0, atol=0)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]


# --------------------------------------------------------------------------- load_npz refuses the wrong tree

_PARAMS = {"dense": {"kernel": jnp.arange(12.0).reshape(4, 3), "bias": jnp.zeros(3)}}


@pytest.mark.parametrize(
    "target, error",
    [
        (
            {"dense": {"kernel": jnp.zeros((3, 4)), "bias": jnp.zeros(3)}},
            r"\['dense'\]\['kernel'\] is float32\[4, 3\]",
        ),
        (
            {"layer": _PARAMS["dense"]},
            r"missing \[.*\['layer'\]\['bias'\].*unexpected \[.*\['dense'\]\['bias'\]",
        ),
        (
            {"dense": {"kernel": jnp.zeros((4, 3), jnp.bfloat16), "bias": jnp.zeros(3)}},
            r"target wants bfloat16",
        ),
    ],
    ids=["transposed-kernel", "renamed-params", "other-dtype"],
)
def test_load_npz_refuses_another_tree_naming_the_leaf(tmp_path, target, error):
    tx = gradtx.adam(0.1)
    checkpoint.save_npz(tmp_path / "s.npz", tx.init(_PARAMS))
    with pytest.raises(checkpoint.CheckpointError, match=error):
        checkpoint.load_npz(tmp_path / "s.npz", tx.init(target))


def test_load_npz_refuses_swapped_shapes_and_another_optimizers_state(tmp_path):
    checkpoint.save_npz(tmp_path / "ab.npz", {"a": jnp.zeros(6), "b": jnp.zeros(4)})
    with pytest.raises(ValueError, match=r"\['a'\] is float32\[6\] in .*, but the target wants float32\[4\]"):
        checkpoint.load_npz(tmp_path / "ab.npz", {"a": jnp.zeros(4), "b": jnp.zeros(6)})
    params = {"w": jnp.zeros(3)}
    checkpoint.save_npz(tmp_path / "addsign.npz", gradtx.addsign(0.1).init(params))  # fields (count, m) ...
    with pytest.raises(
        checkpoint.CheckpointError, match=r"at \[0\] .* holds a ScaleByAddSignState, but the targ"
    ):
        checkpoint.load_npz(tmp_path / "addsign.npz", gradtx.powersign(0.1).init(params))  # ... the same


def _with_member(src, dst, name, data, header=None):
    """A copy of the zip `src` with one more member (and, optionally, another header)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            body = header if header is not None and info.filename == "__gradtx__.json" else zin.read(info)
            zout.writestr(info.filename, body)
        zout.writestr(name, data)


def _npy_header(shape, dtype="<f4"):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_a_huge_extra_array_is_refused_before_any_array_is_read(tmp_path, monkeypatch):
    state = gradtx.adam(0.1).init(_PARAMS)
    checkpoint.save_npz(tmp_path / "s.npz", state)
    huge = _npy_header((10**5, 10**4)) + bytes(64)  # claims 4 GB
    _with_member(tmp_path / "s.npz", tmp_path / "unlisted.npz", "huge.npy", huge)
    with zipfile.ZipFile(tmp_path / "s.npz") as zf:
        header = json.loads(zf.read("__gradtx__.json"))
    header["leaves"].append({"key": "huge", "shape": [10**5, 10**4], "dtype": "float32"})
    _with_member(tmp_path / "s.npz", tmp_path / "listed.npz", "huge.npy", huge, json.dumps(header))
    monkeypatch.setattr(np.lib.format, "read_array", lambda *a, **k: pytest.fail("an array was read"))
    target = jax.eval_shape(gradtx.adam(0.1).init, _PARAMS)
    with pytest.raises(
        checkpoint.CheckpointError, match=r"does not match the target: missing \[\], unexpected \['huge'\]"
    ):
        checkpoint.load_npz(tmp_path / "listed.npz", target)
    with pytest.raises(
        checkpoint.CheckpointError, match=r"holds members its header does not list: \['huge.npy'\]"
    ):
        checkpoint.load_npz(tmp_path / "unlisted.npz", target)


def test_corrupt_truncated_and_foreign_files_get_a_gradtx_error(tmp_path):
    target = {"a": jnp.zeros(1000), "b": jnp.zeros(3)}
    checkpoint.save_npz(tmp_path / "good.npz", target)
    data = (tmp_path / "good.npz").read_bytes()
    cases = {
        "truncated": (data[: len(data) // 2], r"not a readable zip archive"),
        "empty": (b"", r"not a readable zip archive"),
        "flipped": (
            data.replace(np.zeros(4, np.float32).tobytes() * 8, b"\x01" * 128, 1),
            r"corrupt or truncated",
        ),
    }
    for name, (content, error) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(checkpoint.CheckpointError, match=error):
            checkpoint.load_npz(tmp_path / name, target)
    np.savez(tmp_path / "plain.npz", a=np.zeros(1000, np.float32), b=np.zeros(3, np.float32))
    with pytest.raises(
        checkpoint.CheckpointError, match=r"not a gradtx checkpoint: it has no __gradtx__.json"
    ):
        checkpoint.load_npz(tmp_path / "plain.npz", target)
    with zipfile.ZipFile(tmp_path / "pickle.npz", "w") as zf:  # the header is right, the array holds objects
        with zipfile.ZipFile(tmp_path / "good.npz") as good:
            zf.writestr("__gradtx__.json", good.read("__gradtx__.json"))
            zf.writestr("['b'].npy", good.read("['b'].npy"))
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.array([None] * 1000, dtype=object), allow_pickle=True)
        zf.writestr("['a'].npy", buf.getvalue())
    with pytest.raises(checkpoint.CheckpointError, match=r"\['a'\] in .* holds Python objects; refused"):
        checkpoint.load_npz(tmp_path / "pickle.npz", target)


def test_files_of_the_first_format_still_load(tmp_path):
    state = gradtx.adam(0.1, mu_dtype=jnp.bfloat16).init(_PARAMS)
    entries = jax.tree_util.tree_flatten_with_path(state)[0]
    arrays = {jax.tree_util.keystr(p): np.asarray(x) for p, x in entries}
    dtypes = {k: v.dtype.name for k, v in arrays.items()}
    arrays = {k: v.view(np.uint16) if v.dtype == jnp.bfloat16 else v for k, v in arrays.items()}
    np.savez(tmp_path / "v1.npz", __gradtx_dtypes__=np.asarray(json.dumps(dtypes)), **arrays)  # as gradtx 0.1
    restored = checkpoint.load_npz(tmp_path / "v1.npz", jax.eval_shape(lambda: state))
    assert gradtx.get_slot(restored, "m", "dense/kernel").dtype == jnp.bfloat16
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)


# --------------------------------------------------------------------------- TF1 checkpoints without TF


def test_tf1_names_refuses_states_it_has_no_tf_names_for():
    with pytest.raises(
        ValueError, match=r"`tf1_names`: the ScaleByGGTState at state\[0\] keeps the slot `moment1`"
    ):
        checkpoint.tf1_names(gradtx.ggt(0.1), {"w": jnp.zeros(3)})


def test_without_tensorflow_from_tf1_and_to_tf1_say_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # `import tensorflow` raises ImportError
    tx, params = gradtx.adam(0.1), {"w": jnp.zeros(3)}
    with pytest.raises(ImportError, match=r"`from_tf1` .* TensorFlow, which is not installed.*gradtx\[tf\]"):
        checkpoint.from_tf1(tmp_path / "model.ckpt", tx, params)
    with pytest.raises(ImportError, match=r"`to_tf1` .*pip install gradtx\[tf\]"):
        checkpoint.to_tf1(tmp_path / "model.ckpt", tx, params, tx.init(params))


def test_tf1_names_follow_name_map_and_optimizer_name():
    params = {"layer": {"w": jnp.zeros(2)}}
    names = checkpoint.tf1_names(gradtx.adamw(0.1, weight_decay=0.01), params, lambda p: "model/" + p)
    assert names["model/layer/w/AdamW_1"] == "state.inner_state[0].v['layer']['w']"
    assert "global_step" in names and "beta1_power" in names  # a function renames the parameters only
    renamed = {"layer/w": "w", "global_step": "step", "beta1_power": "b1p"}
    names = checkpoint.tf1_names(gradtx.adam(0.1), params, renamed, optimizer_name="Opt")
    assert {"w", "w/Opt", "w/Opt_1", "step", "b1p", "beta2_power"} == set(names)
    with pytest.raises(ValueError, match=r"the parameters 'a' and 'b' both map to the TF variable 'w'"):
        checkpoint.tf1_names(gradtx.sgd(0.1), {"a": jnp.zeros(1), "b": jnp.zeros(1)}, {"a": "w", "b": "w"})

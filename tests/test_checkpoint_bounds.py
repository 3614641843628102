"""`load_npz` reads within bounds and refuses what `save_npz` did not write: a FIFO, a device, a directory
or a /proc file before it opens or reads it, a zip that holds a member twice or far more members than the
target has leaves, a malformed header (naming the file and the entry, never quoting its bytes); a
`sharded_state` state saved on 8 devices and restored on 4 says how to move it; GaLore's and Sophia's
states go through orbax."""

import io
import json
import os
import threading
import warnings
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
from gradtx import checkpoint
from gradtx.parallel import shard_state, unshard_state
from tests import helpers

TREE = {"a": jnp.arange(3.0), "b": jnp.ones(2)}


def _in_thread(fn, seconds=10.0, unblock=None):
    """`fn()` in a thread: its result or its error, or a test failure if it still runs after `seconds`
    (`unblock()` then lets it end)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as err:  # given back to the test
            out["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if unblock is not None:
            unblock()
            thread.join(seconds)
        pytest.fail(f"`load_npz` was still reading after {seconds} s")
    if "error" in out:
        raise out["error"]
    return out["value"]


# --------------------------------------------------------------------------- not a regular file


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "ckpt.npz"
    os.mkfifo(fifo)

    def unblock():  # a reader blocked in open() gets the end of the file
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    with pytest.raises(
        checkpoint.CheckpointError, match=r"`load_npz`: .*ckpt.npz is a FIFO \(a named pipe\); a"
    ):
        _in_thread(lambda: checkpoint.load_npz(fifo, TREE), unblock=unblock)


def test_devices_and_directories_are_refused_naming_what_they_are(tmp_path):
    zero = tmp_path / "zero.npz"
    zero.symlink_to("/dev/zero")  # read, it never ends
    with pytest.raises(
        checkpoint.CheckpointError,
        match=r"zero.npz \(a link to /dev/zero\) is a character device; a checkpoint is a regular file",
    ):
        _in_thread(lambda: checkpoint.load_npz(zero, TREE))
    with pytest.raises(checkpoint.CheckpointError, match=r"`load_npz`: .* is a directory; a checkpoint is"):
        checkpoint.load_npz(tmp_path, TREE)
    with pytest.raises(FileNotFoundError):
        checkpoint.load_npz(tmp_path / "missing.npz", TREE)
    with pytest.raises(TypeError, match=r"`load_npz`: `path` must be a file path .*, got BytesIO"):
        checkpoint.load_npz(io.BytesIO(), TREE)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc")
def test_files_of_proc_are_refused(tmp_path):
    link = tmp_path / "status.npz"
    link.symlink_to("/proc/self/status")  # a regular file of size 0 that reads as text
    for path in ("/proc/self/status", link):
        with pytest.raises(
            checkpoint.CheckpointError, match=r"is a file of /proc, which the kernel makes up as it is read"
        ):
            checkpoint.load_npz(path, TREE)


# --------------------------------------------------------------------------- not save_npz's zip


def test_a_zip_holding_a_member_twice_is_refused(tmp_path):
    checkpoint.save_npz(tmp_path / "s.npz", TREE)
    other = io.BytesIO()
    np.lib.format.write_array(other, np.full(3, 7.0, np.float32))
    with zipfile.ZipFile(tmp_path / "s.npz") as zin, zipfile.ZipFile(tmp_path / "dup.npz", "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # zipfile: "Duplicate name"
            zout.writestr("['a'].npy", other.getvalue())  # a second copy, which zipfile would give
    with pytest.raises(
        checkpoint.CheckpointError, match=r"dup.npz holds the member \"\['a'\]\.npy\" 2 times; a zip whose"
    ):
        checkpoint.load_npz(tmp_path / "dup.npz", TREE)


def test_far_more_members_than_the_target_has_leaves_are_refused_before_zipfile_reads_them(tmp_path):
    with zipfile.ZipFile(tmp_path / "many.npz", "w") as zf:
        for i in range(2000):
            zf.writestr(f"{i:040d}.npy", b"")
    with pytest.raises(
        checkpoint.CheckpointError, match=r"many.npz lists far more members than the target has leaves"
    ):
        checkpoint.load_npz(tmp_path / "many.npz", TREE)


def _rewritten(src, dst, edit=None, member=None, body=None):
    """A copy of the checkpoint `src` with its header edited by `edit`, or `member` replaced by `body`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "__gradtx__.json" and edit is not None:
                header = json.loads(data)
                edit(header)
                data = json.dumps(header).encode()
            zout.writestr(info.filename, body if info.filename == member else data)


def _set(path, value):
    def edit(header):
        *parents, last = path
        node = header
        for p in parents:
            node = node[p]
        if last == "append":
            node.append(value)
        else:
            node[last] = value

    return edit


SECRET = "SECRET-" * 40  # never quoted whole in a message
MALFORMED = {
    "types-a-list": (
        _set(["types"], [SECRET]),
        r"the entry `types` must map key paths to class names, got a list",
    ),
    "types-a-number": (
        _set(["types", "[0]"], 3),
        r"`types` must map key paths to class names, got a value that",
    ),
    "leaf-a-string": (
        _set(["leaves", 0], SECRET),
        r"the entry `leaves\[0\]` is a str, not an object with `key`",
    ),
    "key-a-number": (
        _set(["leaves", 1, "key"], 5),
        r"the entry `leaves\[1\].key` must be a key path, got a int",
    ),
    "shape-strings": (_set(["leaves", 0, "shape"], [SECRET]), r"`leaves\[0\].shape` must be a list of sizes"),
    "shape-negative": (_set(["leaves", 0, "shape"], [-3]), r"`leaves\[0\].shape` must be a list of sizes"),
    "dtype-null": (
        _set(["leaves", 0, "dtype"], None),
        r"`leaves\[0\].dtype` must be a dtype's name, got null",
    ),
    "dtype-unknown": (
        _set(["leaves", 0, "dtype"], SECRET),
        r"gives \['a'\] the unknown dtype 'SECRET-SECR.*\.\.\.",
    ),
    "leaf-twice": (
        lambda h: h["leaves"].append(dict(h["leaves"][0])),
        r"the entry `leaves\[2\]` lists the leaf \"\['a'\]\" a second time",
    ),
    "version-a-string": (
        _set(["version"], SECRET),
        r"has format version 'SECRET-.*\.\.\.; this gradtx reads",
    ),
}


@pytest.mark.parametrize("edit, error", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_header_names_the_file_and_the_entry(tmp_path, edit, error):
    checkpoint.save_npz(tmp_path / "s.npz", TREE)
    _rewritten(tmp_path / "s.npz", tmp_path / "bad.npz", edit)
    with pytest.raises(checkpoint.CheckpointError, match=r"`load_npz`: .*bad.npz") as info:
        checkpoint.load_npz(tmp_path / "bad.npz", TREE)
    assert info.match(error)
    assert SECRET not in str(info.value)


def test_a_malformed_first_format_file_or_npy_header_is_refused(tmp_path):
    arrays = {"['a']": np.zeros(3, np.float32), "['b']": np.ones(2, np.float32)}
    np.savez(tmp_path / "v1.npz", __gradtx_dtypes__=np.asarray(json.dumps([SECRET])), **arrays)
    with pytest.raises(
        checkpoint.CheckpointError, match=r"the entry `__gradtx_dtypes__.npy` holds a list, not a map of key"
    ):
        checkpoint.load_npz(tmp_path / "v1.npz", TREE)
    checkpoint.save_npz(tmp_path / "s.npz", TREE)  # a .npy header claiming 2 GiB: refused before it is read
    huge = b"\x93NUMPY\x02\x00" + (2**31).to_bytes(4, "little") + SECRET.encode()
    _rewritten(tmp_path / "s.npz", tmp_path / "huge.npz", member="['a'].npy", body=huge)
    with pytest.raises(
        checkpoint.CheckpointError, match=r"has a .npy header of 2147483648 bytes, more than any"
    ):
        checkpoint.load_npz(tmp_path / "huge.npz", TREE)


# --------------------------------------------------------------------------- sharded states


def test_a_sharded_state_saved_on_8_devices_and_restored_on_4_says_how(tmp_path):
    inner = gradtx.adam(0.1)
    params = {"w": jnp.arange(5.0), "b": jnp.ones(3)}
    _, state = inner.update(params, inner.init(params), params)
    checkpoint.save_npz(tmp_path / "s.npz", shard_state(state, 8), transform=inner)
    with pytest.raises(
        checkpoint.CheckpointError,
        match=r"\.inner\[0\]\.count is int32\[8\] in .*, but the target wants int32\[4\]\. It is a leaf of a "
        r"`sharded_state` state, one row per replica: saved on 8 replicas, restored on 4\. Load the file in "
        r"the layout it was saved in, `target=gradtx.parallel.shard_state\(inner.init\(params\), 8\)`.* then "
        r"lay it out for 4: `gradtx.parallel.shard_state\(gradtx.parallel.unshard_state\(restored, inner.ini",
    ):
        checkpoint.load_npz(tmp_path / "s.npz", shard_state(inner.init(params), 4), transform=inner)
    # as it says
    restored = checkpoint.load_npz(tmp_path / "s.npz", shard_state(inner.init(params), 8), transform=inner)
    moved = shard_state(unshard_state(restored, inner.init(params)), 4)
    helpers.assert_trees_close(moved, shard_state(state, 4), rtol=0, atol=0)


# --------------------------------------------------------------------------- orbax


def _orbax_round_trip(path, item, target):
    ocp = pytest.importorskip("orbax.checkpoint")
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, item)
        checkpointer.wait_until_finished()
        return checkpointer.restore(path, target)


def test_sophia_keeps_its_state_on_a_none_gradient_and_goes_through_orbax(tmp_path):
    tx = gradtx.sophia(0.1, update_interval=1)
    params = {"w": jnp.arange(3.0), "b": jnp.ones(2)}

    def obj_fn(p):
        return jnp.sum(p["w"] ** 2) + jnp.sum(p["b"] ** 4)

    fresh = tx.init(params)
    _, state = tx.update(params, fresh, params, obj_fn=obj_fn)
    updates, state = tx.update({"w": params["w"], "b": None}, state, params, obj_fn=obj_fn)  # b: no gradient
    assert updates["b"] is None
    assert jax.tree.structure(state) == jax.tree.structure(fresh)
    first = tx.update(params, fresh, params, obj_fn=obj_fn)[1]
    helpers.assert_trees_close(state[0].mu["b"], first[0].mu["b"], rtol=0, atol=0)  # b's slots kept
    helpers.assert_trees_close(state[0].nu["b"], first[0].nu["b"], rtol=0, atol=0)
    item = {"params": params, "opt_state": state}
    restored = _orbax_round_trip(
        tmp_path / "orbax", item, jax.eval_shape(lambda: {**item, "opt_state": fresh})
    )
    helpers.assert_trees_close(restored, item, rtol=0, atol=0)
    step = lambda s: tx.update(params, s, params, obj_fn=obj_fn)  # noqa: E731
    helpers.assert_trees_close(step(restored["opt_state"]), step(state), rtol=0, atol=0)


def test_galore_goes_through_orbax(tmp_path):
    """orbax refuses arrays of size 0: a parameter GaLore does not project has no projector (`None`), not
    optax's empty `(0, 0)` array; `optax_compat.contrib.galore` keeps optax's, and steps from either."""
    tx = gradtx.galore(0.1, rank=1)
    params = {"w": jnp.arange(6.0).reshape(3, 2), "b": jnp.ones(2)}
    _, state = tx.update(params, tx.init(params), params)
    assert state[0].projector["b"] is None and state[0].projector["w"].shape == (3, 1)
    item = {"params": params, "opt_state": state}
    restored = _orbax_round_trip(tmp_path / "orbax", item, jax.eval_shape(lambda: item))
    assert jax.tree.structure(restored) == jax.tree.structure(item)
    helpers.assert_trees_close(restored, item, rtol=0, atol=0)
    step = lambda s: tx.update(params, s, params)  # noqa: E731
    helpers.assert_trees_close(step(restored["opt_state"]), step(state), rtol=0, atol=0)
    compat = gradtx.optax_compat.contrib.galore(0.1, rank=1)
    compat_state = compat.update(params, compat.init(params), params)[1]
    assert compat_state[0].projector["b"].shape == (0, 0)  # optax's placeholder
    helpers.assert_trees_close(compat.update(params, compat_state, params)[0], step(state)[0], rtol=0, atol=0)

"""Checkpoints name the transform that wrote them: `load_npz` refuses a file of another optimizer whose
state has the same layout (adam's into nadam or lazy_adam, adagrad's into reg_adagrad), or a named file
loaded without a transform to check it against, unless asked to load it anyway; a changed hyperparameter
is the same transform; files without a name still load."""

import json
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradtx
from gradtx import checkpoint, parallel
from gradtx import optax_compat as oc
from tests import catalog, helpers

PARAMS = {"w": jnp.arange(3.0), "b": jnp.ones(())}


def _trained(tx, steps=2):
    state = tx.init(PARAMS)
    for _ in range(steps):
        _, state = tx.update(jax.tree.map(jnp.ones_like, PARAMS), state, PARAMS)
    return state


@pytest.mark.parametrize(
    ("saved", "loaded"),
    [(gradtx.adam, gradtx.nadam), (gradtx.adam, gradtx.lazy_adam), (gradtx.adagrad, gradtx.reg_adagrad)],
    ids=["adam->nadam", "adam->lazy_adam", "adagrad->reg_adagrad"],
)
def test_a_checkpoint_of_another_optimizer_with_the_same_state_class_is_refused(tmp_path, saved, loaded):
    writer, reader = saved(0.1), loaded(0.1)
    state = _trained(writer)
    assert jax.tree.structure(state) == jax.tree.structure(reader.init(PARAMS))  # the classes agree
    checkpoint.save_npz(tmp_path / "s.npz", state, transform=writer)
    error = (
        rf"`load_npz`: .*s.npz holds the state of `{saved.__name__}`, but `transform` is "
        rf"`{loaded.__name__}`: another optimizer.* Pass the transform that wrote it \(`{saved.__name__}`\), "
        r"or `allow_other_transform=True` to load it anyway"
    )
    with pytest.raises(checkpoint.CheckpointError, match=error):
        checkpoint.load_npz(tmp_path / "s.npz", reader.init(PARAMS), transform=reader)
    restored = checkpoint.load_npz(  # asked for: loads
        tmp_path / "s.npz", reader.init(PARAMS), transform=reader, allow_other_transform=True
    )
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)


def test_the_same_transform_with_other_hyperparameters_loads(tmp_path):
    state = _trained(gradtx.adam(0.1))
    checkpoint.save_npz(tmp_path / "s.npz", state, transform=gradtx.adam(0.1))
    resumed = gradtx.adam(0.01, b2=0.99)  # a resumed run may lower its learning rate
    restored = checkpoint.load_npz(tmp_path / "s.npz", resumed.init(PARAMS), transform=resumed)
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)
    via_registry = gradtx.get("AdamOptimizer", learning_rate=0.2)  # TF's name for the same factory
    checkpoint.load_npz(tmp_path / "s.npz", resumed.init(PARAMS), transform=via_registry)


def test_files_without_a_transform_name_load_and_say_nothing(tmp_path):
    tx = gradtx.adam(0.1)
    state = _trained(tx)
    checkpoint.save_npz(tmp_path / "plain.npz", state)  # no transform given: none recorded
    with zipfile.ZipFile(tmp_path / "plain.npz") as zf:
        assert "transform" not in json.loads(zf.read("__gradtx__.json"))
    restored = checkpoint.load_npz(tmp_path / "plain.npz", tx.init(PARAMS), transform=gradtx.nadam(0.1))
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)
    # the first format (gradtx 0.1: no header)
    arrays = {
        jax.tree_util.keystr(p): np.asarray(x) for p, x in jax.tree_util.tree_flatten_with_path(state)[0]
    }
    dtypes = json.dumps({k: v.dtype.name for k, v in arrays.items()})
    np.savez(tmp_path / "v1.npz", __gradtx_dtypes__=np.asarray(dtypes), **arrays)
    restored = checkpoint.load_npz(tmp_path / "v1.npz", tx.init(PARAMS), transform=gradtx.nadam(0.1))
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)
    restored = checkpoint.load_npz(tmp_path / "v1.npz", tx.init(PARAMS))  # nor without one
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)


def test_a_named_file_loaded_without_a_transform_is_refused_unless_asked(tmp_path):
    adam, nadam = gradtx.adam(0.1), gradtx.nadam(0.1)
    state = _trained(adam)
    checkpoint.save_npz(tmp_path / "s.npz", state, transform=adam)
    with zipfile.ZipFile(tmp_path / "s.npz") as zf:
        assert json.loads(zf.read("__gradtx__.json"))["transform"] == "adam"
    error = (
        r"`load_npz`: .*s.npz holds the state of `adam`, but no `transform` was given to check that "
        r"`target` is the state of `adam`: .* Pass `transform=` the transform whose state `target` is, or "
        r"`allow_other_transform=True` to load it unchecked."
    )
    with pytest.raises(checkpoint.CheckpointError, match=error):  # the case: nadam's target
        checkpoint.load_npz(tmp_path / "s.npz", nadam.init(PARAMS))
    with pytest.raises(checkpoint.CheckpointError, match=error):  # adam's own, but not said so
        checkpoint.load_npz(tmp_path / "s.npz", adam.init(PARAMS))
    with pytest.raises(
        checkpoint.CheckpointError, match=r"holds the state of `adam`, but `transform` is `nad"
    ):
        checkpoint.load_npz(tmp_path / "s.npz", nadam.init(PARAMS), transform=nadam)
    for kwargs in ({"transform": gradtx.adam(0.3)}, {"allow_other_transform": True}):
        restored = checkpoint.load_npz(tmp_path / "s.npz", nadam.init(PARAMS), **kwargs)
        helpers.assert_trees_close(restored, state, rtol=0, atol=0)


def test_transform_names_nest_and_leave_out_hyperparameters_and_state_keeping_wrappers():
    name = checkpoint.transform_name
    assert name(gradtx.adam(0.1)) == name(gradtx.adam(0.2, b1=0.5)) == "adam"
    assert name(gradtx.gradient_descent(0.1)) == "sgd"  # the same function
    assert name(gradtx.chain(gradtx.scale_by_adam(), gradtx.scale_by_learning_rate(0.1))) == (
        "chain(scale_by_adam, scale_by_learning_rate)"
    )
    assert name(gradtx.partition({"b": gradtx.sgd(0.1), "a": gradtx.nadam(0.1)}, {"w": "a"})) == (
        "partition({a: nadam, b: sgd})"
    )
    assert name(gradtx.inject_hyperparams(gradtx.adam)(0.1)) == "inject_hyperparams(adam)"
    assert name(oc.nadam(0.1)) == "optax_compat.nadam"  # an alias calling another: the outer one
    assert name(parallel.cross_shard(gradtx.adam(0.1), "data")) == "adam"  # keeps adam's state as it is
    tx = gradtx.nadam(0.1)
    assert name(gradtx.GradientTransformation(jax.jit(tx.init), jax.jit(tx.update))) == "nadam"  # kept by jit
    assert name(gradtx.chain(optax.adam(0.1), gradtx.identity())) == "chain(optax.chain, identity)"
    rule = gradtx.update_rule("heavy_ball", gradtx.EmptyState, lambda g, h: (g,), count="if_scheduled")
    assert name(rule) == "heavy_ball"
    with pytest.raises(TypeError, match=r"`transform_name`: `transform` must be the transform that made"):
        name(gradtx.adam)  # the factory, not a transform


def test_every_registered_factory_has_a_name_of_its_own():
    names: dict[str, set] = {}
    for entry in catalog.entries():
        tx = entry.factory(**entry.example)
        names.setdefault(checkpoint.transform_name(tx), set()).add(entry.factory)
    shared = {n: fs for n, fs in names.items() if len(fs) > 1}
    assert set(shared) == {"sgd"}  # cross_shard(sgd) and tower_reduce(sgd) keep sgd's state as it is
    assert not [n for n in names if "<" in n or n.startswith("_")]


def test_a_train_state_names_its_optimizer(tmp_path):
    def loss(p, x):
        return jnp.sum((p["w"] * x) ** 2)

    adam = gradtx.optimize_loss(loss, "Adam", learning_rate=0.1)
    lazy = gradtx.optimize_loss(loss, lambda lr: gradtx.lazy_adam(lr), learning_rate=0.1)
    state = adam.init({"w": jnp.ones(2)})
    checkpoint.save_npz(tmp_path / "t.npz", state, transform=adam)
    assert checkpoint.transform_name(adam) == "optimize_loss(adam)"
    with pytest.raises(
        checkpoint.CheckpointError, match=r"`optimize_loss\(adam\)`, but `transform` is `optimize_l"
    ):
        checkpoint.load_npz(tmp_path / "t.npz", lazy.init({"w": jnp.ones(2)}), transform=lazy)
    checkpoint.load_npz(tmp_path / "t.npz", state, transform=adam)


def test_bad_transform_arguments_are_refused(tmp_path):
    state = gradtx.sgd(0.1).init(PARAMS)
    with pytest.raises(TypeError, match=r"`save_npz`: `transform` must be the transform that made the state"):
        checkpoint.save_npz(tmp_path / "s.npz", state, transform="sgd")
    checkpoint.save_npz(tmp_path / "s.npz", state, transform=gradtx.sgd(0.1))
    with pytest.raises(TypeError, match=r"`load_npz`: `allow_other_transform` must be True or False, got 1"):
        checkpoint.load_npz(tmp_path / "s.npz", state, allow_other_transform=1)
    with zipfile.ZipFile(tmp_path / "s.npz") as zin, zipfile.ZipFile(tmp_path / "bad.npz", "w") as zout:
        for info in zin.infolist():
            body = zin.read(info)
            if info.filename == "__gradtx__.json":
                body = json.dumps({**json.loads(body), "transform": ["sgd"]}).encode()
            zout.writestr(info.filename, body)
    with pytest.raises(
        checkpoint.CheckpointError,
        match=r"of .*bad.npz is malformed: the entry `transform` must be a transform's name, got a list",
    ):
        checkpoint.load_npz(tmp_path / "bad.npz", state, transform=gradtx.sgd(0.1))

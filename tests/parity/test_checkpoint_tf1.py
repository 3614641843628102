"""TF1 checkpoints with their slots, both ways, for every tf.train / contrib optimizer TF 2.21 can run.

For each optimizer, one TF1 graph (variables `dense/kernel` and `dense/bias`, fed gradients,
a `Saver`): TF trains K steps, saves, trains K more; `from_tf1` must give exactly TF's
params and slots at step K, and gradtx's next K steps must follow TF's. The other way,
gradtx trains K steps and `to_tf1` writes them; TF restores exactly gradtx's values (and
global step) and its next K steps must follow gradtx's. TF's own slot names
(`opt.get_slot_names()`) are read back with `gradtx.get_slot`, and the graph's variable
names must be what `tf1_names` says.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import gradtx
from gradtx import checkpoint, packing
from tests import helpers
from tests.parity import tf1_contrib as contrib
from tests.parity.tf_oracle import v1

K = 3
_RNG = np.random.default_rng(7)
_SHAPES = {"kernel": (4, 3), "bias": (3,)}
INIT = {"dense": {n: _RNG.standard_normal(s).astype(np.float32) for n, s in _SHAPES.items()}}
GRADS = [
    {"dense": {n: _RNG.standard_normal(s).astype(np.float32) for n, s in _SHAPES.items()}}
    for _ in range(2 * K)
]


@dataclasses.dataclass
class Case:
    id: str
    tf: Callable[[Any], Any]  # global_step -> a TF1 optimizer
    tx: gradtx.GradientTransformation
    names: dict = dataclasses.field(default_factory=dict)  # optimizer_name / slot_op_names
    to_tf1: dict = dataclasses.field(default_factory=dict)  # more arguments of to_tf1
    tf_only: tuple = ()  # graph variables gradtx neither reads nor writes
    atol: float = 1e-6


L1_L2 = {"l1_regularization_strength": 0.01, "l2_regularization_strength": 0.02}


def _ema(make, decay):
    return lambda gs: contrib.MovingAverageOptimizer(make(gs), decay, gs)


CASES = [
    Case("sgd", lambda gs: v1.train.GradientDescentOptimizer(0.1), gradtx.sgd(0.1), to_tf1={"global_step": K},
         tf_only=("global_step",)),
    Case("momentum", lambda gs: v1.train.MomentumOptimizer(0.1, 0.9), gradtx.momentum(0.1, 0.9)),
    Case("momentum-nesterov", lambda gs: v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
         gradtx.momentum(0.1, 0.9, nesterov=True)),
    Case("adagrad", lambda gs: v1.train.AdagradOptimizer(0.1), gradtx.adagrad(0.1)),
    Case("adagrad_da", lambda gs: v1.train.AdagradDAOptimizer(0.1, gs, **L1_L2),
         gradtx.adagrad_da(0.1, l1=0.01, l2=0.02)),
    Case("adadelta", lambda gs: v1.train.AdadeltaOptimizer(0.5), gradtx.adadelta(0.5)),
    Case("adam", lambda gs: v1.train.AdamOptimizer(0.01), gradtx.adam(0.01), atol=5e-6),
    Case("ftrl", lambda gs: v1.train.FtrlOptimizer(0.1, **L1_L2), gradtx.ftrl(0.1, l1=0.01, l2=0.02)),
    Case("ftrl-v2-accum_name", lambda gs: v1.train.FtrlOptimizer(0.1, accum_name="acc", linear_name="lin",
         l2_shrinkage_regularization_strength=0.1), gradtx.ftrl(0.1, l2_shrinkage=0.1),
         names={"slot_op_names": {"accum": "acc", "linear": "lin"}}),
    Case("proximal_adagrad", lambda gs: v1.train.ProximalAdagradOptimizer(0.1, **L1_L2),
         gradtx.proximal_adagrad(0.1, l1=0.01, l2=0.02)),
    Case("proximal_sgd", lambda gs: v1.train.ProximalGradientDescentOptimizer(0.1, **L1_L2),
         gradtx.proximal_sgd(0.1, l1=0.01, l2=0.02)),
    Case("rmsprop", lambda gs: v1.train.RMSPropOptimizer(0.01), gradtx.rmsprop(0.01)),
    Case("rmsprop-centered-momentum", lambda gs: v1.train.RMSPropOptimizer(0.01, momentum=0.5, centered=True),
         gradtx.rmsprop(0.01, momentum=0.5, centered=True)),
    # contrib, on the kernels TF still ships (tests/parity/tf1_contrib.py)
    Case("adamax", lambda gs: contrib.AdaMaxOptimizer(0.01), gradtx.adamax(0.01), atol=5e-6,
         to_tf1={"extra": {"beta2_power": np.float32(0.999) ** (K + 1)}}, tf_only=("beta2_power",)),
    Case("nadam", lambda gs: contrib.NadamOptimizer(0.01), gradtx.nadam(0.01), atol=5e-6),
    Case("lazy_adam", lambda gs: v1.train.AdamOptimizer(0.01), gradtx.lazy_adam(0.01), atol=5e-6),
    Case("addsign", lambda gs: contrib.AddSignOptimizer(0.1), gradtx.addsign(0.1)),
    Case("powersign", lambda gs: contrib.PowerSignOptimizer(0.1), gradtx.powersign(0.1)),
    Case("adamw", lambda gs: contrib.DecoupledWeightDecay(v1.train.AdamOptimizer(0.01, name="AdamW"), 0.05),
         gradtx.adamw(0.01, weight_decay=0.05), atol=5e-6),
    Case("momentumw", lambda gs: contrib.DecoupledWeightDecay(v1.train.MomentumOptimizer(0.1, 0.9,
         name="MomentumW"), 0.05), gradtx.momentumw(0.1, 0.9, 0.05)),
    Case("lars", lambda gs: contrib.LARSOptimizer(0.1), gradtx.lars(0.1)),
    Case("reg_adagrad", lambda gs: v1.train.AdagradOptimizer(0.1, name="RegAdagrad"), gradtx.reg_adagrad(0.1),
         names={"optimizer_name": "RegAdagrad"}),
    Case("moving_average", _ema(lambda gs: v1.train.MomentumOptimizer(0.1, 0.9), 0.9),
         gradtx.moving_average(gradtx.momentum(0.1, 0.9), 0.9, num_updates=True)),
]  # fmt: skip


class _Graph:
    """One TF1 graph for a case, built once: its variables, fed gradients, the train op and a Saver."""

    def __init__(self, case: Case):
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.global_step = v1.train.get_or_create_global_step()
            with v1.variable_scope("dense"):
                self.vars = {n: v1.get_variable(n, initializer=INIT["dense"][n]) for n in _SHAPES}
            self.feeds = {n: v1.placeholder(tf.float32, s) for n, s in _SHAPES.items()}
            self.opt = case.tf(self.global_step)
            pairs = [(self.feeds[n], self.vars[n]) for n in _SHAPES]
            self.train = self.opt.apply_gradients(pairs, global_step=self.global_step)
            self.slots = {
                s: {n: self.opt.get_slot(v, s) for n, v in self.vars.items()}
                for s in self.opt.get_slot_names()
            }
            self.names = {v.op.name for v in v1.global_variables()}
            self.saver = v1.train.Saver()
            self.init = v1.global_variables_initializer()

    def run(self, sess, grads):
        for g in grads:
            sess.run(self.train, {self.feeds[n]: g["dense"][n] for n in _SHAPES})

    def values(self, sess):
        """`(params, {TF slot name: tree})`, shaped like gradtx's."""
        params, slots = sess.run(({"dense": self.vars}, {s: {"dense": t} for s, t in self.slots.items()}))
        return params, slots


def _assert_matches(params, state, tf_values, rtol, atol, msg):
    tf_params, tf_slots = tf_values
    helpers.assert_trees_close(params, tf_params, rtol=rtol, atol=atol, msg=f"{msg}: params")
    for name, tree in tf_slots.items():
        got = gradtx.averaged_params(state) if name == "average" else gradtx.get_slot(state, name)
        helpers.assert_trees_close(got, tree, rtol=rtol, atol=atol, msg=f"{msg}: TF slot {name!r}")


def _counts(state):
    return {
        int(x)
        for p, x in jax.tree_util.tree_flatten_with_path(state)[0]
        if jax.tree_util.keystr(p).endswith("count")
    }


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_tf1_run_resumes_in_gradtx_and_a_gradtx_run_resumes_in_tf1(case, tmp_path):
    g = _Graph(case)
    init = jax.tree.map(jnp.asarray, INIT)
    assert set(checkpoint.tf1_names(case.tx, init, **case.names)) == g.names - set(case.tf_only)

    @jax.jit
    def step(params, state, grads):
        updates, state = case.tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    def steps(params, state, grads_seq):
        for grads in grads_seq:
            params, state = step(params, state, grads)
        return params, state

    tol = {"rtol": 1e-5, "atol": case.atol}
    with v1.Session(graph=g.graph) as sess:  # TF: K steps, save, K more
        sess.run(g.init)
        g.run(sess, GRADS[:K])
        at_k = g.values(sess)
        path = g.saver.save(sess, str(tmp_path / "model.ckpt"), global_step=g.global_step)
        g.run(sess, GRADS[K:])
        tf_end = g.values(sess)
    params, state = checkpoint.from_tf1(path, case.tx, init, **case.names)
    _assert_matches(params, state, at_k, 0, 0, "imported at step K")
    assert _counts(state) <= {K}
    _assert_matches(*steps(params, state, GRADS[K:]), tf_end, msg="TF's run continued in gradtx", **tol)

    params, state = steps(init, case.tx.init(init), GRADS[:K])  # gradtx: K steps, export, both go on
    back = str(tmp_path / "from_gradtx" / f"model.ckpt-{K}")
    checkpoint.to_tf1(back, case.tx, params, state, **case.names, **case.to_tf1)
    assert tf.train.latest_checkpoint(str(tmp_path / "from_gradtx")) == back
    with v1.Session(graph=g.graph) as sess:
        g.saver.restore(sess, back)
        _assert_matches(params, state, g.values(sess), 0, 0, "restored by TF")
        assert sess.run(g.global_step) == K
        g.run(sess, GRADS[K:])
        tf_end = g.values(sess)
    _assert_matches(*steps(params, state, GRADS[K:]), tf_end, msg="gradtx's run continued in TF", **tol)


@pytest.mark.parametrize("split", ["partitioner", "part-variables"])
def test_partitioned_variables_are_read_whole(split, tmp_path):
    table = _RNG.standard_normal((6, 2)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        global_step = v1.train.get_or_create_global_step()
        if split == "partitioner":  # a Saver stores one tensor `emb/table` with two slices
            with v1.variable_scope("emb"):
                var = v1.get_variable("table", [6, 2], partitioner=v1.fixed_size_partitioner(2))
            parts, whole = list(var), var.as_tensor()
        else:  # parts as variables of their own: `emb/table/part_0`, `emb/table/part_0/Adam`, ...
            parts = [
                v1.Variable(table[:3], name="emb/table/part_0"),
                v1.Variable(table[3:], name="emb/table/part_1"),
            ]
            whole = tf.concat(parts, 0)
        loss = tf.reduce_sum(tf.sin(whole) * table)
        opt = v1.train.AdamOptimizer(0.1)
        train = opt.minimize(loss, global_step=global_step, var_list=parts)
        saver = v1.train.Saver()
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            for _ in range(K):
                sess.run(train)
            path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=global_step)
            expected = sess.run({"table": whole, "m": tf.concat([opt.get_slot(p, "m") for p in parts], 0)})
    names = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    assert ("emb/table/part_1/Adam" in names) == (split == "part-variables")
    tx = gradtx.adam(0.1)
    params, state = checkpoint.from_tf1(path, tx, {"emb": {"table": jnp.zeros((6, 2))}})
    np.testing.assert_array_equal(params["emb"]["table"], expected["table"])
    np.testing.assert_array_equal(gradtx.get_slot(state, "m", "emb/table"), expected["m"])
    assert int(state[0].count) == K


def _written(tmp_path, tx, params=None, steps=0, **kwargs):
    """A TF1 checkpoint of `tx` after `steps` gradtx steps, written by `to_tf1`."""
    params = jax.tree.map(jnp.asarray, INIT) if params is None else params
    state = tx.init(params)
    for grads in GRADS[:steps]:
        updates, state = tx.update(grads, state, params)
        params = gradtx.apply_updates(params, updates)
    path = str(tmp_path / f"model.ckpt-{steps}")
    checkpoint.to_tf1(path, tx, params, state, **kwargs)
    return path, params, state


def test_a_missing_or_extra_slot_is_an_error_that_names_it(tmp_path):
    path, params, _ = _written(tmp_path, gradtx.momentum(0.1, 0.9))
    with pytest.raises(
        checkpoint.CheckpointError, match=r"has no variable 'dense/bias/Adam' \(the slot `m` of"
    ):
        checkpoint.from_tf1(path, gradtx.adam(0.1), params)
    with pytest.raises(
        checkpoint.CheckpointError, match=r"no place for: \['dense/bias/Momentum', 'dense/kernel/Mom"
    ):
        checkpoint.from_tf1(path, gradtx.sgd(0.1), params)
    checkpoint.from_tf1(path, gradtx.sgd(0.1), params, ignore=["*/Momentum"])  # left out on purpose
    with pytest.raises(
        checkpoint.CheckpointError, match=r"has no variable 'dense/bias/Ftrl' \(the slot `linear`"
    ):  # linear_name
        checkpoint.from_tf1(path, gradtx.ftrl(0.1), params, slot_op_names={"accum": "Momentum"})

    ema, _, _ = _written(tmp_path / "ema", gradtx.moving_average(gradtx.adam(0.1), 0.9), steps=2)
    with pytest.raises(
        checkpoint.CheckpointError, match=r"\['dense/bias/ExponentialMovingAverage', 'dense/kern"
    ):
        checkpoint.from_tf1(ema, gradtx.adam(0.1), params)


def test_shapes_names_and_dtypes_are_checked(tmp_path):
    path, params, state = _written(tmp_path, gradtx.adam(0.1), steps=2)
    transposed = {"dense": {"kernel": jnp.zeros((3, 4)), "bias": jnp.zeros(3)}}
    with pytest.raises(
        checkpoint.CheckpointError,
        match=r"'dense/kernel' is float32\[4, 3\] in .*, but the parameter 'dense/kernel' is float32\[3, 4\]",
    ):
        checkpoint.from_tf1(path, gradtx.adam(0.1), transposed)
    renamed = {"layer": params["dense"]}
    with pytest.raises(
        checkpoint.CheckpointError, match=r"has no variable 'layer/bias' \(the parameter 'layer/bias'\)"
    ):
        checkpoint.from_tf1(path, gradtx.adam(0.1), renamed)
    name_map = {"layer/kernel": "dense/kernel", "layer/bias": "dense/bias"}
    got, got_state = checkpoint.from_tf1(path, gradtx.adam(0.1), renamed, name_map)
    helpers.assert_trees_close(got["layer"], params["dense"], rtol=0, atol=0)
    helpers.assert_trees_close(
        gradtx.get_slot(got_state, "v", "layer/kernel"),
        gradtx.get_slot(state, "v", "dense/kernel"),
        rtol=0,
        atol=0,
    )
    with pytest.raises(ValueError, match=r"`name_map` names \['dense/kernal'\], which are no parameters"):
        checkpoint.from_tf1(path, gradtx.adam(0.1), params, {"dense/kernal": "w"})
    in_bf16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params)  # TF's float32 read into bfloat16 params
    got, _ = checkpoint.from_tf1(path, gradtx.adam(0.1), in_bf16)
    assert got["dense"]["kernel"].dtype == jnp.bfloat16
    as_ints = jax.tree.map(lambda x: x.astype(jnp.int32), params)
    with pytest.raises(checkpoint.CheckpointError, match=r"'dense/bias' is float32 in .*, which cannot hold"):
        checkpoint.from_tf1(path, gradtx.sgd(0.1), as_ints, ignore=["*"])


def test_bfloat16_params_and_slots_round_trip(tmp_path):
    tx = gradtx.adam(0.1, mu_dtype=jnp.bfloat16)
    params = jax.tree.map(lambda x: jnp.asarray(x, jnp.bfloat16), INIT)
    path, params, state = _written(tmp_path, tx, params, steps=2)
    assert tf.train.load_checkpoint(path).get_variable_to_dtype_map()["dense/kernel/Adam_1"] == tf.bfloat16
    got, got_state = checkpoint.from_tf1(path, tx, params)
    helpers.assert_trees_close((got, got_state), (params, state), rtol=0, atol=0)


def test_swapped_averages_are_moving_average_optimizers_swapping_saver(tmp_path):
    tx = gradtx.moving_average(gradtx.momentum(0.1, 0.9), 0.5)
    path, params, state = _written(tmp_path, tx, steps=2, swapped_averages=True)
    reader = tf.train.load_checkpoint(path)
    averages = gradtx.averaged_params(state)
    np.testing.assert_array_equal(reader.get_tensor("dense/kernel"), averages["dense"]["kernel"])
    np.testing.assert_array_equal(
        reader.get_tensor("dense/kernel/ExponentialMovingAverage"), params["dense"]["kernel"]
    )
    got, got_state = checkpoint.from_tf1(path, tx, params, swapped_averages=True)
    helpers.assert_trees_close((got, got_state), (params, state), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"`swapped_averages=True`, but `tx` keeps no moving averages"):
        checkpoint.from_tf1(path, gradtx.momentum(0.1, 0.9), params, swapped_averages=True)


def test_to_tf1_refuses_a_foreign_state_and_works_inside_a_tf1_graph(tmp_path):
    params = jax.tree.map(jnp.asarray, INIT)
    with pytest.raises(
        gradtx.TreeMismatchError, match=r"`to_tf1`: `state` is not the state of `tx` for `params`"
    ):
        checkpoint.to_tf1(
            str(tmp_path / "x"), gradtx.adam(0.1), params, gradtx.momentum(0.1, 0.9).init(params)
        )
    with tf.Graph().as_default():  # TF1 code calls it while building its graph
        path, _, state = _written(tmp_path, gradtx.adagrad(0.1), steps=1)
    assert tf.train.load_checkpoint(path).get_tensor("global_step") == 1
    with pytest.raises(checkpoint.CheckpointError, match=r"is not a readable TF checkpoint"):
        checkpoint.from_tf1(str(tmp_path / "nothing-here"), gradtx.adagrad(0.1), params)
    (tmp_path / "junk.index").write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match=r"is not a readable TF checkpoint"):
        checkpoint.from_tf1(str(tmp_path / "junk"), gradtx.adagrad(0.1), params)


def test_packed_params_and_slots_are_read_and_written_by_leaf_name(tmp_path):
    tx = gradtx.adam(0.1)
    path, params, state = _written(tmp_path, tx, steps=2)
    packed = packing.pack(jax.tree.map(jnp.asarray, INIT))
    got, got_state = checkpoint.from_tf1(path, tx, packed)
    assert packing.is_packed(got) and packing.is_packed(got_state[0].v)
    helpers.assert_trees_close(packing.unpack(got), params, rtol=0, atol=0)
    helpers.assert_trees_close(gradtx.get_slot(got_state, "v"), gradtx.get_slot(state, "v"), rtol=0, atol=0)
    checkpoint.to_tf1(str(tmp_path / "packed.ckpt"), tx, got, got_state)
    names = tf.train.load_checkpoint(str(tmp_path / "packed.ckpt")).get_variable_to_shape_map()
    assert names == tf.train.load_checkpoint(path).get_variable_to_shape_map()

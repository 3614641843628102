"""`sharded_state` (ZeRO-1) inside shard_map / pmap with rules that reduce over all the gradients: a
global-norm clip, `apply_if_finite`, `zero_nans` and gradient noise run on the replicas' slices with the
unsharded chain's numbers, each global reduction one all-reduce of its slices' partial results; so do
LAMB's and LARS's per-tensor norms and masks by key path, and Adafactor's, SM3's and CAME's row and column
statistics; rules that need whole tensors are refused, naming the member."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import gradtx
import gradtx.optax_compat as ox
from benchmarks.sharding import count
from gradtx.parallel import sharded_state
from tests.parallel import _util

N, T = _util.N, 20
SHAPES = {"w": (7, 3), "b": (5,), "s": ()}  # 21, 5 and 1 elements: every slice is zero-padded


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    grads = {k: rng.standard_normal((T, N, *s)).astype(np.float32) for k, s in SHAPES.items()}
    grads["w"][3, 2, 1, 1] = np.nan  # zero_nans cleans it; its flag is set for `w` only
    grads["b"][7, 5, 2] = np.inf  # the global norm is inf: apply_if_finite skips the step
    return params, grads


def _guarded():
    """The large-model recipe, guarded: NaNs zeroed, non-finite steps skipped, clip, noise, AdamW."""
    inner = gradtx.chain(
        gradtx.clip_by_global_norm(0.5), gradtx.add_noise(0.01, seed=3), gradtx.adamw(0.1, weight_decay=0.01)
    )
    return gradtx.chain(gradtx.zero_nans(), gradtx.apply_if_finite(inner, 3))


def _observe(state):  # the NaN flags, the skipped steps and the norm before clipping
    found, guard = state[0].found_nan, state[1]
    return found, guard.total_notfinite, guard.inner_state[0].global_norm


def _stack(*xs):
    return np.stack(xs)


def _loss(p, offset):
    """A loss `value` for MoMo: the params' half squared norm, plus the replica's batch's own `offset`."""
    return 0.5 * sum(jnp.sum(x * x) for x in jax.tree.leaves(p)) + offset


def _unsharded(tx, params, grads, observe=_observe, offsets=None):
    """One device: the plain chain on the replicas' mean gradient of every step (and, with `offsets` [T, N],
    their mean loss as `value`)."""
    state, p, ps, obs = tx.init(params), jax.tree.map(jnp.asarray, params), [], []
    if offsets is None:
        step = jax.jit(lambda g, s, p, o: tx.update(g, s, p))
    else:
        step = jax.jit(lambda g, s, p, o: tx.update(g, s, p, value=_loss(p, o)))
    for t in range(T):
        o = None if offsets is None else np.mean(offsets[t])
        u, state = step(jax.tree.map(lambda g, t=t: np.mean(g[t], axis=0), grads), state, p, o)
        p = gradtx.apply_updates(p, u)
        ps.append(p)
        obs.append(observe(state))
    return jax.tree.map(_stack, *ps), jax.tree.map(_stack, *obs)


def _sharded(tx, params, grads, mode, observe=_observe, offsets=None):
    """N replicas, the T steps in one `lax.scan` (one compilation; the state is its carry); with `offsets`
    [T, N], each replica's loss, averaged over the replicas (`parallel.mean_over`), is passed as `value`."""
    data = grads if offsets is None else (grads, offsets)

    def body(p, d):  # d: this replica's gradients (and loss offsets), [T, ...]
        def step(carry, g):
            p, state = carry
            if offsets is None:
                u, state = tx.update(g, state, p)
            else:
                g, o = g
                value = gradtx.parallel.mean_over(_loss(p, o), _util.AXIS)
                u, state = tx.update(g, state, p, value=value)
            p = gradtx.apply_updates(p, u)
            return (p, state), (p, observe(state.inner))

        return jax.lax.scan(step, (p, tx.init(p)), d)[1]

    if mode == "pmap":
        out = jax.pmap(body, axis_name=_util.AXIS, in_axes=(None, 1))(params, data)
    else:
        m, spec = _util.mesh(), P(None, _util.AXIS)
        f = jax.shard_map(
            lambda p, d: jax.tree.map(lambda x: x[None], body(p, jax.tree.map(lambda x: x[:, 0], d))),
            mesh=m,
            in_specs=(P(), spec),
            out_specs=P(_util.AXIS),
            check_vma=mode == "vma",
        )
        out = jax.jit(f)(_util.put(params, m, P()), _util.put(data, m, spec))
    return jax.tree.map(np.asarray, out)


def _assert_all_replicas(got, ref):
    for k in ref:
        np.testing.assert_allclose(
            got[k], np.broadcast_to(ref[k], got[k].shape), rtol=1e-6, atol=1e-6, err_msg=k
        )


@pytest.mark.parametrize("mode", _util.MODES)
def test_global_reductions_equal_the_unsharded_chain(mode):
    """20 steps with a NaN and an inf: the parameters, the NaN flags, the skip count and the global norm
    are the unsharded chain's on every replica -- the noise included (each replica cuts its slice from
    the whole leaf's noise)."""
    params, grads = _problem()
    got, (found, skipped, norm) = _sharded(sharded_state(_guarded(), _util.AXIS), params, grads, mode)
    ref, (ref_found, ref_skipped, ref_norm) = _unsharded(_guarded(), params, grads)
    _assert_all_replicas(got, ref)
    assert {k: v[:, :, 0].tolist() for k, v in found.items()} == {
        k: np.broadcast_to(v, (N, T)).tolist() for k, v in ref_found.items()
    }
    assert found["w"][0, 3, 0] and skipped[0, 6, 0] == 0 and skipped[0, 7, 0] == 1
    np.testing.assert_array_equal(skipped[:, :, 0], np.broadcast_to(ref_skipped, (N, T)))
    np.testing.assert_allclose(norm[:, :, 0], np.broadcast_to(ref_norm, (N, T)), rtol=1e-6)


def _multi_steps():  # optax.MultiSteps' skipping of non-finite gradients: a count over all elements
    return gradtx.accumulate_gradients(gradtx.adam(0.1), 2, should_skip_update_fn=gradtx.skip_not_finite)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ox.chain(ox.clip_by_global_norm(0.5), ox.adamw(0.1, weight_decay=0.01)),
        lambda: gradtx.chain(gradtx.clip_by_norm(0.3), gradtx.adam(0.1)),
        _multi_steps,
    ],
    ids=["optax_compat_clip_adamw", "clip_by_norm_per_tensor", "accumulate_skip_not_finite"],
)
def test_optax_names_per_tensor_norms_and_skipped_steps(make):
    """optax's names (`gradtx.optax_compat`) take the same one-reduction clip; `clip_by_norm`'s norm of
    each tensor is its slices' sums of squares added over the replicas; `skip_not_finite` counts the
    non-finite elements of all slices (the NaN and the inf are skipped)."""
    params, grads = _problem(1)
    if make is not _multi_steps:
        grads = {k: np.nan_to_num(g, posinf=0.0) for k, g in grads.items()}
    got, _ = _sharded(sharded_state(make(), _util.AXIS), params, grads, "novma", observe=lambda s: ())
    ref = _unsharded(make(), params, grads, observe=lambda s: ())[0]
    assert all(np.isfinite(v).all() for v in ref.values())
    _assert_all_replicas(got, ref)


def _step(tx, m, check_vma):
    def step(params, state, x):
        grads = jax.grad(lambda p: jnp.mean(jnp.tanh(x @ p["w"] + p["b"]) ** 2))(
            gradtx.parallel.per_replica(params, _util.AXIS)
        )
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state

    specs = dict(in_specs=(P(), P(_util.AXIS), P(_util.AXIS)), out_specs=(P(), P(_util.AXIS)))
    return jax.jit(jax.shard_map(step, mesh=m, check_vma=check_vma, **specs))


def _collectives(tx, check_vma=True, results=None):
    """The compiled step's collectives (`count`) and how many of its all-reduces are of scalars; the
    all-reduces' result types (`f32[]`, `(s32[], s32[])`, `f32[1]`, ...) appended to `results`."""
    m = _util.mesh()
    params = {"w": jnp.ones((16, 60)), "b": jnp.zeros(60)}  # 960 and 60 elements: b is padded to 64
    state = jax.eval_shape(jax.shard_map(tx.init, mesh=m, in_specs=P(), out_specs=P(_util.AXIS)), params)
    x = jax.ShapeDtypeStruct((64, 16), jnp.float32, sharding=jax.NamedSharding(m, P(_util.AXIS)))
    hlo = _step(tx, m, check_vma).lower(params, state, x).compile().as_text()
    found = re.findall(r"= (\S+(?:, \S+)*) all-reduce(?:-start)?\(", hlo)
    if results is not None:
        results.extend(found)
    scalars = [r for r in found if re.fullmatch(r"\(?(?:(?:f32|s32|pred)\[1?\](?:\{0\})?(?:, )?)+\)?", r)]
    return count(hlo), len(scalars)


@pytest.mark.parametrize("check_vma", [True, False], ids=["vma", "novma"])
def test_clip_and_adamw_add_one_scalar_all_reduce(check_vma):
    """ZeRO-1 with a global-norm clip: the reduce-scatter of the gradients, one all-reduce of a scalar
    (the slices' sums of squares) and the all-gather of the updates -- nothing more."""
    plain, _ = _collectives(sharded_state(gradtx.adamw(0.1, weight_decay=0.01), _util.AXIS), check_vma)
    tx = sharded_state(
        gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.adamw(0.1, weight_decay=0.01)), _util.AXIS
    )
    got, scalars = _collectives(tx, check_vma)
    assert plain["all-reduce"] == 0, plain
    assert got == {**plain, "all-reduce": 1} and scalars == 1, (got, plain)


@pytest.mark.parametrize(
    "inner, most, keys",
    [
        (_guarded, 5, 1),
        (lambda: gradtx.chain(gradtx.clip_by_norm(1.0), gradtx.adamw(0.1, weight_decay=0.01)), 2, 0),
    ],
    ids=["guarded", "clip_by_norm"],
)
def test_other_reductions_add_only_scalar_all_reduces(inner, most, keys):
    """Besides ZeRO's reduce-scatter and all-gather, only all-reduces of scalars: at most one per declared
    reduction -- zero_nans (the flags of all leaves together), apply_if_finite (the gradients, the update,
    and the state in the branch taken when the update is not finite), the clip -- or one per leaf for
    `clip_by_norm`'s norms (XLA may combine them: 4 and 1 on XLA:CPU); and one all-gather of the noise's
    PRNG key, a leaf of the rule's own that is stored cut like the slots (so that `shard_state` lays out
    every leaf alike) and gathered for the step."""
    plain, _ = _collectives(sharded_state(gradtx.adamw(0.1, weight_decay=0.01), _util.AXIS))
    got, scalars = _collectives(sharded_state(inner(), _util.AXIS))
    assert {k: v for k, v in got.items() if k != "all-reduce"} == {
        **{k: v for k, v in plain.items() if k != "all-reduce"},
        "all-gather": plain["all-gather"] + keys,
    }
    assert 1 <= got["all-reduce"] == scalars <= most, got


def _all(params):
    return jax.tree.map(lambda _: True, params)


def _routed():
    """Routing by key paths and by a tree of labels: a replica's slices keep the tree, so they are routed as
    the whole leaves are."""
    return gradtx.chain(
        gradtx.masked(gradtx.clip_by_norm(0.3), ["w"]),
        gradtx.partition(
            {"adam": gradtx.adam(0.1), "sgd": gradtx.sgd(0.1)}, {"w": "adam", "b": "sgd", "s": "adam"}
        ),
        gradtx.freeze(["s"]),
    )


@pytest.mark.parametrize("mode", _util.MODES)
@pytest.mark.parametrize(
    "make",
    [
        lambda: gradtx.lamb(0.1, weight_decay=0.01, mask=["w"]),
        lambda: gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.lars(0.1, skip=["b"])),
        lambda: ox.lamb(0.1, weight_decay=0.01, mask={"w": True, "b": False, "s": False}),
        _routed,
    ],
    ids=["lamb", "lars", "optax_compat_lamb", "masks_by_key_path"],
)
def test_per_tensor_norms_and_key_path_masks_equal_the_unsharded_run(make, mode):
    """LAMB's and LARS's trust ratios take each tensor's norms from its slices' sums of squares added over
    the replicas (`formulas.leaf_norm`); masks and labels given as trees or key-path patterns route the
    slices as the leaves."""
    params, grads = _problem(2)
    grads = {k: np.nan_to_num(g, posinf=0.0) for k, g in grads.items()}
    got, _ = _sharded(sharded_state(make(), _util.AXIS), params, grads, mode, observe=lambda s: ())
    ref = _unsharded(make(), params, grads, observe=lambda s: ())[0]
    assert all(np.isfinite(v).all() for v in ref.values())
    assert not np.allclose(ref["w"][-1], params["w"])  # it trained
    _assert_all_replicas(got, ref)


@pytest.mark.parametrize(
    "make",
    [
        lambda: gradtx.normalized_sgd(0.1),
        lambda: gradtx.novograd(0.1, weight_decay=0.01),
        lambda: gradtx.chain(gradtx.scale_by_param_block_norm(), gradtx.sgd(0.1)),
        lambda: gradtx.chain(
            gradtx.scale_by_param_block_rms(), gradtx.clip_by_block_rms(0.05), gradtx.sgd(1.0)
        ),
        lambda: gradtx.dog(0.5, init_step=("heuristic", 1e-3)),
        lambda: gradtx.sam(gradtx.sgd(0.1), gradtx.chain(gradtx.normalize(), gradtx.sgd(0.05))),
        lambda: gradtx.stable_adamw(0.1, weight_decay=0.01),
        lambda: gradtx.fadam(0.1, clip=0.5),
        lambda: gradtx.stable_spam(0.1, weight_decay=0.01),
        lambda: gradtx.mars(0.1, weight_decay=0.01, cautious=True),
        lambda: gradtx.laprop(0.1, cautious=True),
        lambda: gradtx.chain(gradtx.cautious(gradtx.scale_by_lion()), gradtx.sgd(0.1)),
    ],
    ids=[
        "normalized_sgd",
        "novograd",
        "param_block_norm",
        "block_rms",
        "dog_heuristic",
        "sam",
        "stable_adamw",
        "fadam",
        "stable_spam",
        "mars_cautious",
        "laprop_cautious",
        "cautious",
    ],
)
def test_per_tensor_and_global_norms_of_other_rules_equal_the_unsharded_run(make):
    """Per-tensor norms (NormalizedSGD, NovoGrad's second moment, the parameter's block norm and RMS, the
    update's block RMS, StableAdamW's and FAdam's RMS, whose means divide by the whole leaf's size,
    StableSPAM's largest entry and norm, MARS's corrected gradient's norm), the cautious mask's count of
    agreeing signs, and global ones (SAM's `normalize`, DoG's, and the parameter norm DoG's heuristic
    start reads in `init`) are their slices' partial results combined over the replicas; MARS routes the
    slices by their whole leaves' number of axes."""
    params, grads = _problem(3)
    grads = {k: np.nan_to_num(g, nan=0.5, posinf=0.0) for k, g in grads.items()}
    got, _ = _sharded(sharded_state(make(), _util.AXIS), params, grads, "novma", observe=lambda s: ())
    ref = _unsharded(make(), params, grads, observe=lambda s: ())[0]
    assert all(np.isfinite(v).all() for v in ref.values())
    assert not np.allclose(ref["w"][-1], params["w"])  # it trained
    _assert_all_replicas(got, ref)


@pytest.mark.parametrize("mode", ["vma", "pmap"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: gradtx.momo(0.5, weight_decay=0.01, adapt_lower_bound=True),
        lambda: gradtx.momo_adam(0.1, weight_decay=0.01),
        lambda: ox.contrib.momo(0.5),
    ],
    ids=["momo", "momo_adam", "optax_compat_momo"],
)
def test_momo_inner_products_are_the_whole_trees_on_slices(make, mode):
    """MoMo's and MoMo-Adam's step size reads inner products over the whole tree (<g, w>, <d, w>, |d|^2):
    on ZeRO's slices each is the replicas' partial sums added, and with the replicas' mean loss as `value`
    (each replica's batch has its own) the run is the unsharded one on the mean gradient and mean loss."""
    params, grads = _problem(4)
    grads = {k: np.nan_to_num(g, nan=0.5, posinf=0.0) for k, g in grads.items()}
    offsets = np.random.default_rng(4).uniform(0.0, 0.5, (T, N)).astype(np.float32)
    got, _ = _sharded(sharded_state(make(), _util.AXIS), params, grads, mode, lambda s: (), offsets)
    ref = _unsharded(make(), params, grads, lambda s: (), offsets)[0]
    assert all(np.isfinite(v).all() for v in ref.values())
    assert not np.allclose(ref["w"][-1], params["w"])  # it trained
    _assert_all_replicas(got, ref)


FACTORED = {"w": (7, 3), "t": (2, 5, 3), "b": (5,), "s": ()}  # slices of 3 end mid-row and mid-matrix


def _factored_rules():
    return {
        "adafactor": lambda: gradtx.adafactor(0.1, min_dim_size_to_factor=2, momentum=0.9, weight_decay=0.01),
        "optax_compat_adafactor": lambda: ox.adafactor(0.1, min_dim_size_to_factor=3),
        "sm3": lambda: gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.sm3(0.1)),
        "optax_compat_sm3": lambda: ox.sm3(0.1),
        "came": lambda: gradtx.came(0.1, weight_decay=0.01),
        "came_ams_bound": lambda: gradtx.came(0.1, ams_bound=True),
    }


@pytest.mark.parametrize(
    "name, mode",
    [*(("adafactor", m) for m in _util.MODES), *((n, "vma") for n in list(_factored_rules())[1:])],
)
def test_factored_statistics_equal_the_unsharded_run(name, mode):
    """Adafactor's, SM3's and CAME's statistics per row and per column (of 2- and 3-D leaves whose slices
    end mid-row) are the whole leaves': each replica places its slice in its leaf, reduces it over the
    axes, and the partial sums (or maxima) are combined over the replicas (`_sliced.leaf_means`,
    `leaf_maxima`); CAME's update RMS is the whole leaf's too. No `gather_state` is needed."""
    make = _factored_rules()[name]
    rng = np.random.default_rng(4)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in FACTORED.items()}
    grads = {k: rng.standard_normal((T, N, *s)).astype(np.float32) for k, s in FACTORED.items()}
    got, _ = _sharded(sharded_state(make(), _util.AXIS), params, grads, mode, observe=lambda s: ())
    ref = _unsharded(make(), params, grads, observe=lambda s: ())[0]
    assert not np.allclose(ref["t"][-1], params["t"])  # it trained
    _assert_all_replicas(got, ref)


@pytest.mark.parametrize("name", ["adafactor", "sm3", "came"])
def test_factored_statistics_add_small_all_reduces_and_one_gather(name):
    """Besides ZeRO's reduce-scatter and all-gather: all-reduces of the row and column statistics (16 + 60
    numbers for a 16 x 60 matrix) and of a few scalars (the RMS of each leaf), and one all-gather of the
    statistics, which are kept cut like the slots between steps -- not the gradients' all-reduce and the
    whole state's gather of `gather_state`."""
    plain, _ = _collectives(sharded_state(gradtx.adam(0.1), _util.AXIS))
    results: list[str] = []
    got, _ = _collectives(sharded_state(_factored_rules()[name](), _util.AXIS), results=results)
    assert plain["all-reduce"] == 0, plain
    assert {**got, "all-reduce": 0} == {**plain, "all-gather": plain["all-gather"] + 1}, (got, plain)
    assert 1 <= got["all-reduce"] <= 3, got
    sizes = [
        int(np.prod([int(d) for d in dims.split(",") if d]))
        for dims in re.findall(r"f32\[([\d,]*)\]", " ".join(results))
    ]
    assert 16 + 60 <= sum(sizes) <= 2 * (16 + 60) + 8, results


@pytest.mark.parametrize(
    "inner, member",
    [
        (
            lambda: gradtx.chain(gradtx.clip_by_norm(1.0), gradtx.masked(gradtx.adam(0.1), _all)),
            r"masked\(adam\)",
        ),
        (lambda: gradtx.lamb(0.1, weight_decay=0.01, mask=_all), "add_decayed_weights"),
        (lambda: gradtx.chain(gradtx.clip_by_global_norm(1.0), gradtx.shampoo(0.1)), "scale_by_shampoo"),
        (lambda: gradtx.galore(0.1), "scale_by_galore"),
    ],
    ids=["mask_function", "lamb_mask_function", "shampoo", "galore"],
)
def test_per_tensor_members_are_refused_by_name(inner, member):
    """A mask that is a function of the params may read their shapes; a matrix root or a projection needs a
    whole matrix: refused inside `shard_map`, naming the member."""
    with pytest.raises(
        ValueError, match=rf"`sharded_state`: `{member}`.* is leaf-wise: it needs whole tensors.*mesh=mesh"
    ):
        sharded_state(inner(), "data")


@pytest.mark.parametrize(
    "inner, match",
    [
        (
            lambda: gradtx.ElementWise(*optax.clip_by_global_norm(1.0)),
            r"`reduce_sum`.*not combined",
        ),
        (lambda: gradtx.ggt(0.1), r"`[a-z_]+`.*shape"),
    ],
    ids=["optax_clip_declared_element_wise", "ggt"],
)
def test_undeclared_reductions_are_refused_when_traced(inner, match):
    """optax's own clip (declared element-wise) reduces without `_sliced.total`: on a slice it would clip by
    the slice's norm, so it is refused with the reduction it makes."""
    params, grads = _problem()
    with pytest.raises(
        ValueError, match=r"`sharded_state`: `tx` is not element by element: its update uses " + match
    ):
        _util.run(
            sharded_state(inner(), _util.AXIS), params, jax.tree.map(lambda g: g[:1], grads), mode="novma"
        )


def test_a_statistic_of_a_leaf_the_slices_do_not_match_is_refused():
    """A rule whose statistics follow the whole leaf's shape (Adafactor's factoring) is given a part that is
    not one of the leaf at its path (a combinator changed the tree): the error, not the part's own shape."""
    from gradtx._core import sliced
    from gradtx.parallel._sharded_layout import Slices

    path = (jax.tree_util.DictKey("w"),)
    with sliced.holding(Slices(N, (_util.AXIS,), {"['w']": (7, 3)})):
        assert sliced.whole_shape(path, jnp.zeros(3)) == (7, 3)  # a slice of 21 elements in 8
        with pytest.raises(ValueError, match=r"reads the shape of the whole parameter at \['w'\].*changed"):
            sliced.whole_shape(path, jnp.zeros(5))


@pytest.mark.parametrize("mode", ["vma", "pmap"])
def test_adam_mini_blocks_are_the_whole_leaves_on_slices(mode):
    """Adam-mini's second moment per block (per head, per query group and projection, per leaf) is the whole
    leaf's block's on ZeRO's slices, which end inside blocks (each replica's share of each block's mean,
    summed over the replicas), and its key-path labels route the slices as the leaves."""
    shapes = {
        "wte": {"weight": (3, 2)},
        "layer": {"q_proj": {"weight": (4, 4)}, "attn": {"qkv": {"weight": (6, 2)}}, "mlp": (5, 3)},
        "norm": (5,),
    }
    rng = np.random.default_rng(5)
    params = jax.tree.map(lambda s: rng.standard_normal(s).astype(np.float32), shapes, is_leaf=_is_shape)
    grads = jax.tree.map(
        lambda s: rng.standard_normal((T, N, *s)).astype(np.float32), shapes, is_leaf=_is_shape
    )

    def make():
        return gradtx.adam_mini(0.1, num_embeds=4, num_heads=2, num_query_groups=1, weight_decay=0.01)

    got, _ = _sharded(sharded_state(make(), _util.AXIS), params, grads, mode, observe=lambda s: ())
    ref = _unsharded(make(), params, grads, observe=lambda s: ())[0]
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        np.testing.assert_allclose(g, np.broadcast_to(r, g.shape), rtol=1e-6, atol=1e-6)


def _is_shape(x):
    return isinstance(x, tuple) and all(isinstance(d, int) for d in x)

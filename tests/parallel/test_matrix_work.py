"""gradtx/parallel/_matrix_work.py: `split_matrix_work` gives the single-device numbers in every mode (jit
with Auto axes, with Explicit axes, shard_map in both vma modes, pmap), each device computes 1/N of the
matrices (FLOPs from XLA's cost analysis), two collectives per group of stacked matrices; the rule
constructor's protocol (a formula that yields its matrix work) and the errors."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from benchmarks.collectives import count
from gradtx._core.matrix_work import MatrixWork
from gradtx.parallel import split_matrix_work
from tests import helpers

N = 8


def _problem(n=3, dtype=jnp.float32):
    """`n` matrices of each of two shapes, a bias; gradients that are not orthogonal already."""
    rng = np.random.default_rng(0)
    params = {"bias": jnp.asarray(rng.standard_normal(16), dtype)}
    for i in range(n):
        params[f"up{i}"] = jnp.asarray(rng.standard_normal((16, 24)), dtype)
        params[f"down{i}"] = jnp.asarray(rng.standard_normal((24, 16)), dtype)
    grads = jax.tree.map(lambda p: jnp.sin(3.0 * p) + 0.1, params)
    return params, grads


def _steps(tx, params, grads, update=None, steps=3):
    """Three steps of `tx` (the second sees a momentum, the third a delayed root renewed); the updates of
    the last."""
    update = update or jax.jit(tx.update)
    state = tx.init(params)
    for _ in range(steps):
        u, state = update(grads, state, params)
    return u


def _close(u, want, tolerance=helpers.MUON_TOLERANCE):
    """Muon's tolerance: the suite's fast-compile options round a gathered shard's products otherwise."""
    for k in want:
        np.testing.assert_allclose(np.asarray(u[k]), np.asarray(want[k]), err_msg=k, **tolerance)


def _mesh(kind, shape=(4, 2)):
    return jax.make_mesh(shape, ("data", "model")[: len(shape)], axis_types=(kind,) * len(shape))


def _placed(tree, mesh):
    return jax.tree.map(lambda t: jax.device_put(t, NamedSharding(mesh, P("data"))), tree)


OPTIMIZERS = {
    "muon": lambda: gradtx.muon(0.02),
    "muon_adaptive_polar_express": lambda: gradtx.muon(0.02, ns_coeffs="polar_express", adaptive=True),
    "normuon": lambda: gradtx.normuon(0.02),
    # AdaMuon divides each entry of the orthogonalised momentum by its own RMS, so an entry near zero
    # carries its round-off into the update: a larger eps keeps the comparison about the matrix work
    "adamuon": lambda: gradtx.adamuon(0.02, eps=1e-3),
    "muon_clip": lambda: gradtx.muon_clip(0.02),
    "scion": lambda: gradtx.scion(0.02),
    "shampoo": lambda: gradtx.shampoo(0.1),  # two rounds: the roots of each dimension's statistic
    # roots renewed every other step (the skipped step's `lax.cond`), by Newton's iteration
    "shampoo_delayed_iterative": lambda: gradtx.shampoo(0.1, svd_interval=2, use_iterative_root=True),
    # the eigenbasis at the first step, a QR refresh at the third, the basis kept at the second. Each leaf's
    # whole step is its work, its statistics included: a statistic rounds as the stack it is computed in,
    # and the eigenbasis of a rank-deficient one (24 x 24 of a 16 x 24 leaf) is the eigensolver's choice
    # within the null space, so only the dimensions of 16 are preconditioned (full rank)
    "soap": lambda: gradtx.soap(0.01, precondition_frequency=3, max_precondition_dim=16),
    # two rounds over the whole tree: the factors' update (balanced; skipped on every other step), then
    # the preconditioning of each leaf
    "psgd_kron": lambda: gradtx.psgd_kron(0.01, precond_update_probability=0.5, balance_prob=1.0),
}


# Polar Express's first coefficients (8.2, -23.2, 16.7) and the adaptive scale (an inner product over a
# sharded leaf: partial sums, then an all-reduce) amplify float32 round-off ten times more than the quintic
# SOAP's statistics round as the stack they are computed in, and its eigenbases carry that round-off into the
# update divided by the eigenvalues' gaps: after 3 steps up to 2e-4 of a leaf's norm here (the updates are
# about 0.025; a misrouted leaf or moment is off by that much)
TOLERANCE = {
    "muon_adaptive_polar_express": {"rtol": 2e-4, "atol": 2e-5},
    "soap": {"rtol": 1e-3, "atol": 5e-5},
}
JIT_MODES = ("auto_mesh_argument", "auto_set_mesh", "explicit")
MAPPED_MODES = ("shard_map_vma", "shard_map_novma", "pmap", "two_axes")


@pytest.mark.parametrize(
    ("name", "mode"),
    [("muon", m) for m in JIT_MODES]
    + [(n, m) for n in OPTIMIZERS if n != "muon" for m in ("auto_set_mesh", "explicit")],
)
def test_under_jit_every_mode_gives_the_single_device_numbers(name, mode):
    params, grads = _problem()
    want = _steps(OPTIMIZERS[name](), params, grads)
    if mode == "auto_mesh_argument":
        mesh = _mesh(AxisType.Auto)
        tx = split_matrix_work(OPTIMIZERS[name](), mesh=mesh)
        u = _steps(tx, _placed(params, mesh), _placed(grads, mesh))
    else:
        mesh = _mesh(AxisType.Auto if mode == "auto_set_mesh" else AxisType.Explicit)
        with jax.set_mesh(mesh):
            tx = split_matrix_work(OPTIMIZERS[name]())
            u = _steps(tx, _placed(params, mesh), _placed(grads, mesh))
        if mode == "explicit":  # each update placed like its parameter
            assert all(tuple(u[k].sharding.spec)[:1] == ("data",) for k in u)
    _close(u, want, TOLERANCE.get(name, helpers.MUON_TOLERANCE))


@pytest.mark.parametrize(
    ("name", "mode"),
    [("muon", m) for m in MAPPED_MODES]
    + [("normuon", "shard_map_vma"), ("scion", "pmap"), ("shampoo_delayed_iterative", "shard_map_vma")]
    + [("soap", "shard_map_novma"), ("psgd_kron", "shard_map_vma"), ("psgd_kron", "pmap")],
)
def test_inside_a_mapped_axis_every_mode_gives_the_single_device_numbers(name, mode):
    params, grads = _problem()
    want = _steps(OPTIMIZERS[name](), params, grads)
    if mode == "pmap":
        tx = split_matrix_work(OPTIMIZERS[name](), "i")
        copies = jax.tree.map(lambda t: jnp.broadcast_to(t, (N, *t.shape)), (params, grads))
        stepped = jax.pmap(lambda p, g: _steps(tx, p, g, tx.update), axis_name="i")(*copies)
        _close(jax.tree.map(lambda t: t[5], stepped), want, TOLERANCE.get(name, helpers.MUON_TOLERANCE))
        return
    shape, axes = ((4, 2), ("data", "model")) if mode == "two_axes" else ((N,), "data")
    mesh = _mesh(AxisType.Explicit, shape)
    tx = split_matrix_work(OPTIMIZERS[name](), axes)
    step = jax.jit(
        jax.shard_map(tx.update, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=mode != "shard_map_novma")
    )
    _close(_steps(tx, params, grads, step), want, TOLERANCE.get(name, helpers.MUON_TOLERANCE))


# collectives per group of stacked matrices and step, in both modes: one all-to-all in (every part of the
# work joined per dtype: Kron's factors and momentum, Shampoo's and SOAP's statistics and bases), and the
# results joined per dtype back to their rows' split by another (the leaves lie split on their rows, and
# `init` made the statistics so: nothing else moves)
COLLECTIVES_PER_GROUP = {"muon": 2, "psgd_kron": 2, "shampoo": 2, "soap": 2}
MAKE = {
    "muon": lambda: gradtx.muon(0.02),
    "psgd_kron": lambda: gradtx.psgd_kron(0.01),
    "shampoo": lambda: gradtx.shampoo(0.1),
    "soap": lambda: gradtx.soap(0.01),
}


@pytest.mark.parametrize("name", list(COLLECTIVES_PER_GROUP))
def test_each_device_computes_one_eighth_with_few_collectives_per_group(name):
    # the workload, smaller: 8 layers of (64, 256) and (256, 64) matrices sharded over "data"
    params = {f"l{i}": {"up": jnp.ones((64, 256)), "down": jnp.ones((256, 64))} for i in range(N)}
    grads = jax.tree.map(lambda p: 0.5 * p + jnp.eye(*p.shape), params)
    opt = MAKE[name]()  # Kron: a factor update on this step; SOAP: its first, the eigenbases

    def cost(tx, *args):
        compiled = jax.jit(tx.update).lower(*args).compile()
        analysis = compiled.cost_analysis()
        analysis = analysis[0] if isinstance(analysis, list) else analysis
        return analysis["flops"], count(compiled.as_text())

    single, _ = cost(opt, grads, opt.init(params), params)
    for kind in (AxisType.Auto, AxisType.Explicit):
        mesh = jax.make_mesh((N,), ("data",), axis_types=(kind,))
        with jax.set_mesh(mesh):
            ps, gs = _placed(params, mesh), _placed(grads, mesh)
            tx = split_matrix_work(opt)
            flops, collectives = cost(tx, gs, tx.init(ps), ps)
            # what it replaces (Muon's, shown once: the others' plain steps compile for seconds more)
            plain_flops, _ = cost(opt, gs, opt.init(ps), ps) if name == "muon" else (None, None)
        assert flops <= 1.2 * single / N, (kind, flops / (single / N))
        # two groups, (64, 256) and (256, 64)
        assert {k: v for k, v in collectives.items() if v} == {"all-to-all": 4}, (kind, collectives)
        assert sum(collectives.values()) == COLLECTIVES_PER_GROUP[name] * 2
        # what it replaces: Explicit axes compute every matrix everywhere; Auto axes more than a 1/N share
        # (GSPMD partitions each matmul of the stacked work, and repeats what it cannot)
        if plain_flops is None:
            continue
        if kind == AxisType.Explicit:
            assert plain_flops > 0.9 * single
        else:
            assert plain_flops > 1.3 * single / N, plain_flops / (single / N)


@pytest.mark.parametrize("kind", [AxisType.Auto, AxisType.Explicit])
def test_init_creates_the_statistics_split_where_the_step_holds_them(kind):
    # Shampoo's statistics and kept roots (64 x 64; the 256 dimensions' diagonal statistics): split along
    # their rows by `init`, eager or jitted (each device makes its 1/N, nothing whole), in a restore target,
    # and kept there by the step, whose collectives are its two groups' two all-to-alls each
    params = {"up": jnp.ones((64, 256)), "down": jnp.ones((256, 64)), "odd": jnp.ones((12, 6))}
    grads = jax.tree.map(lambda p: 0.5 * p + jnp.eye(*p.shape), params)
    mesh = jax.make_mesh((N,), ("data",), axis_types=(kind,))
    with jax.set_mesh(mesh):
        ps = {
            k: jax.device_put(v, NamedSharding(mesh, P("data") if k != "odd" else P()))
            for k, v in params.items()
        }
        gs = {k: jax.device_put(v, ps[k].sharding) for k, v in grads.items()}
        tx = split_matrix_work(gradtx.shampoo(0.1, svd_interval=2, max_matrix_size=128))
        eager = tx.init(ps)
        jitted = jax.jit(tx.init)
        memory = jitted.lower(ps).compile().memory_analysis()
        collectives = count(jax.jit(tx.update).lower(gs, eager, ps).compile().as_text())
        states = {
            "eager": eager,
            "jit": jitted(ps),
            "restore target": gradtx.parallel.restore_target(tx, ps, mesh)["opt_state"],
            "a step": jax.jit(tx.update)(gs, eager, ps)[1],
        }
    for label, (state, _) in states.items():
        for key in ("up", "down", "odd"):
            for s in (*state.mat_gbar[key], *(r for r in state.mat_h[key] if r is not None)):
                # the (12, 12) and (6, 6) of the odd leaf: split by no axis, whole
                want = P() if key == "odd" else P("data", *(None,) * (s.ndim - 1))
                assert s.sharding.is_equivalent_to(NamedSharding(mesh, want), s.ndim), (
                    label,
                    key,
                    s.sharding,
                )
    # and the odd leaf's results, split by no axis: gathered whole
    assert {k: v for k, v in collectives.items() if v} == {"all-to-all": 4, "all-gather": 1}, collectives
    whole = sum(x.nbytes for x in jax.tree.leaves(eager))
    assert memory.output_size_in_bytes + memory.temp_size_in_bytes < whole / 4, (memory, whole)


@pytest.mark.parametrize("kind", [AxisType.Auto, AxisType.Explicit])
def test_groups_by_shape_and_dtype_and_pads_a_short_stack(kind):
    params, grads = _problem(n=3)  # 3 matrices of a shape on 8 devices: padded to 8
    params["half"] = jnp.ones((16, 24), jnp.bfloat16)
    grads["half"] = jnp.full((16, 24), 0.25, jnp.bfloat16) + jnp.eye(16, 24, dtype=jnp.bfloat16)
    # neither axis a multiple of 8: under Auto axes gathered whole (each device takes its matrices)
    params["odd"] = jnp.asarray(np.random.default_rng(1).standard_normal((12, 6)), jnp.float32)
    grads["odd"] = jnp.sin(params["odd"])
    want = _steps(gradtx.muon(0.02), params, grads)
    mesh = _mesh(kind)
    with jax.set_mesh(mesh):
        tx = split_matrix_work(gradtx.muon(0.02))
        ps, gs = _placed(params, mesh), _placed(grads, mesh)
        u = _steps(tx, ps, gs)
        text = jax.jit(tx.update).lower(gs, tx.init(ps), ps).compile().as_text()
    _close(u, want)
    assert u["half"].dtype == jnp.bfloat16
    # four groups: (16, 24) f32, (24, 16) f32, (16, 24) bf16 moved in by an all-to-all each; the (12, 6) f32
    # leaf, split by no axis, is gathered whole. The results: back by an all-to-all each (Auto axes; the
    # (12, 6) one gathered), or gathered whole (Explicit axes)
    want = {"all-to-all": 6, "all-gather": 2} if kind == AxisType.Auto else {"all-to-all": 3, "all-gather": 5}
    assert {k: v for k, v in count(text).items() if v} == want


class _TwoRoundsState(NamedTuple):
    count: gradtx.OptState


def _two_rounds(g, h):
    """A formula with two rounds of matrix work: `g g^T g`, then its transpose's square."""
    first = yield MatrixWork(lambda x: x @ x.T @ x, g[None], "cube")
    second = yield MatrixWork(lambda x: x.T @ x, first, "gram")
    return second[0], None


def test_a_formula_may_yield_several_rounds_and_returns_without_work_for_other_leaves():
    def formula(g, h):
        if g.ndim != 2:
            return (2.0 * g,)
        out = yield from _two_rounds(g, h)
        return (out[0],)

    tx = gradtx.update_rule("two_rounds", _TwoRoundsState, formula)
    params = {"w": jnp.arange(6.0).reshape(2, 3) / 7, "v": jnp.eye(2) + 0.1, "b": jnp.ones(3)}
    cube = {k: params[k] @ params[k].T @ params[k] for k in ("w", "v")}
    want = {"w": cube["w"].T @ cube["w"], "v": cube["v"].T @ cube["v"], "b": 2.0 * params["b"]}
    u, _ = tx.update(params, tx.init(params))
    _close(u, want)
    mesh = _mesh(AxisType.Explicit)
    with jax.set_mesh(mesh):
        split = split_matrix_work(tx)
        placed = {k: jax.device_put(v, NamedSharding(mesh, P())) for k, v in params.items()}
        u, _ = jax.jit(split.update)(placed, split.init(placed))
    _close(u, want)


def test_a_formula_that_yields_something_else_is_refused():
    def formula(g, h):
        yield g
        return (g,)

    tx = gradtx.update_rule("bad_yield", _TwoRoundsState, formula)
    with pytest.raises(TypeError, match="MatrixWork"):
        tx.update(jnp.ones((2, 2)), tx.init(jnp.ones((2, 2))))


def test_the_errors():
    muon = gradtx.muon(0.02)
    with pytest.raises(TypeError, match="tx"):
        split_matrix_work("muon")
    with pytest.raises(ValueError, match="mesh"):
        split_matrix_work(muon, "data", mesh=_mesh(AxisType.Auto))
    with pytest.raises(TypeError, match="Mesh"):
        split_matrix_work(muon, mesh="data")
    with pytest.raises(ValueError, match="mesh_axes"):
        split_matrix_work(muon, mesh=_mesh(AxisType.Auto), mesh_axes=("rows",))
    params, grads = _problem(n=1)
    with pytest.raises(ValueError, match="no mesh"):  # under jit, no mesh known
        jax.jit(split_matrix_work(muon).update)(grads, muon.init(params), params)
    with pytest.raises(ValueError, match="data"):  # outside the mapped axis
        split_matrix_work(muon, "data").update(grads, muon.init(params), params)
    mesh = _mesh(AxisType.Explicit, (N,))
    tx = split_matrix_work(muon, "data")
    per_replica = jax.shard_map(  # each replica its own gradients: local steps
        lambda g, s, p: tx.update(g, s, p), mesh=mesh, in_specs=(P("data"), P(), P()), out_specs=P("data")
    )
    matrices = {k: v for k, v in params.items() if v.ndim == 2}
    rows = NamedSharding(mesh, P("data"))
    own = {k: jax.device_put(jnp.tile(v, (N, 1)), rows) for k, v in matrices.items()}
    with jax.set_mesh(mesh), pytest.raises(ValueError, match="varies over"):
        jax.jit(per_replica)(own, muon.init(matrices), matrices)

"""Sharding in types (`jax.jit` under `jax.set_mesh` with Explicit axes) is first-class.

On a 4 x 2 mesh of Explicit axes, with a kernel sharded `P("data", "model")`, a bias sharded
`P("model")` and a replicated vector, every registered factory (not the parallel wrappers that
need a mapped axis) traces, places its slots and its updates like the params (the same spec),
and steps with the numbers of the plain, unsharded run; so do packed parameters (`pack`,
`packed(tx)`) and ZeRO under jit (`sharded_state(tx, "data", mesh=mesh)`). The matrix rules
choose where their matrices live (`gradtx._core.placement`: `whole`, `placed_like`,
`whole_sharding`), and what that costs is pinned: Muon, Shampoo and SOAP gather a sharded leaf
once (one all-gather per sharded mesh axis) and slice the update back, GGT all-reduces its Gram
matrix and its projection, and nothing else communicates.

Cheap on purpose: abstract evaluation per entry, one compilation for every entry's numbers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import gradtx
from benchmarks.sharding import count
from gradtx import packing
from gradtx._core import lowbit
from gradtx.parallel import sharded_state
from tests import catalog, helpers
from tests.test_placement import _checked, _mesh
from tests.test_sharding_matrix import _optax_equivalent

SHAPES = {"kernel": (8, 4), "bias": (4,), "ln": (8,)}
SPECS = {"kernel": P("data", "model"), "bias": P("model"), "ln": P()}
ENTRIES = [e for e in catalog.entries() if "axis_name" not in e.example]
MESH = _mesh(explicit=True)


def _tree(seed, mesh=None, shapes=SHAPES, specs=SPECS):
    """`{"layer": {name: array}}`, placed by `specs` on `mesh` (plain arrays without one)."""
    rng = np.random.default_rng(seed)
    arrays = {k: jnp.asarray(rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    if mesh is not None:
        arrays = {k: jax.device_put(v, NamedSharding(mesh, specs[k])) for k, v in arrays.items()}
    return {"layer": arrays}


def _full(spec, ndim):
    return tuple(spec) + (None,) * (ndim - len(spec))


def _spec_of(x):
    """The spec of an array's or a `ShapeDtypeStruct`'s sharding, padded to its rank (a constant's abstract
    value has none: jit places it replicated)."""
    return _full(() if x.sharding is None else x.sharding.spec, len(x.shape))


def _specs(tree):
    """The specs of a tree's leaves: a state's types, which a step must give back as it took them."""
    return [_spec_of(x) for x in jax.tree.leaves(tree)]


def _assert_placed_like(updates, params, what):
    for u, p in zip(jax.tree.leaves(updates), jax.tree.leaves(params), strict=True):
        assert _spec_of(u) == _spec_of(p), (
            f"{what}: a {p.shape} param's update {_spec_of(u)}, not {_spec_of(p)}"
        )


def _step(entry, tx):
    """init and one update in one function: `(updates, state)`."""

    def step(params, grads):
        return tx.update(grads, tx.init(params), params, **entry.extra(0))

    return step


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_every_entry_traces_with_slots_and_updates_placed_like_params(entry):
    """Abstractly (nothing compiled): types carry the shardings under Explicit axes."""
    tx = entry.build()
    with jax.set_mesh(MESH):
        params, grads = _tree(0, MESH), _tree(1, MESH)
        state = jax.eval_shape(tx.init, params)
        updates, new_state = jax.eval_shape(
            lambda g, s, p: tx.update(g, s, p, **entry.extra(0)), grads, state, params
        )
    _assert_placed_like(updates, params, entry.name)
    assert _checked(state, params, entry.name) or not gradtx.slot_names(state), f"{entry.name}: no slot"
    assert _specs(new_state) == _specs(state)  # as init made it: a `lax.scan` carry, no retrace next step


MATRIX_RULES = {"muon", "shampoo", "ggt", "scale_by_muon", "scale_by_shampoo", "scale_by_ggt"}
MATRIX_RULES |= {"galore", "scale_by_galore"}  # an SVD of each whole matrix (optax's does not trace here)
WHOLE_MATRICES = dict.fromkeys(
    ("normuon", "adamuon", "muon_clip", "apollo", "scale_by_apollo"), {"all-gather"}
)
"""Frontier rules whose per-matrix work needs each whole matrix (Newton-Schulz, a random projection of the
whole gradient): the kinds of collective their steps may have; optax has none of them."""
WHOLE_MATRICES |= dict.fromkeys(("scion", "scion_light"), {"all-gather", "all-reduce"})  # and a norm's sum
WHOLE_MATRICES |= dict.fromkeys(("psgd_kron", "scale_by_psgd_kron"), {"all-gather", "all-reduce"})  # factors
# a preconditioned leaf's step is its matrix work: the gradient and moments gathered whole (as one array)
WHOLE_MATRICES |= dict.fromkeys(("soap", "scale_by_soap"), {"all-gather", "all-reduce"})
REDUCES_MORE_THAN_OPTAX = {
    "apply_if_finite": "checks the inner update as well as the gradient (so every replica of `cross_shard` "
    "skips the same step): one more all-reduced flag per leaf than optax.apply_if_finite",
    "loss_scaled": "TF's dynamic loss scale skips a step whose gradients are not all finite (the test of "
    "apply_if_finite: one all-reduced flag per leaf for the gradient and the inner update); optax has none",
}
_LR_FREE = (
    "sums over all elements (an inner product with x0 - x, an L1 or L2 norm): all-reduces of partial sums; "
    "optax's own does not trace under Explicit axes (its tree vdot contracts sharded dimensions)"
)
REDUCES_MORE_THAN_OPTAX |= dict.fromkeys(
    ("prodigy", "dadapt_adamw", "mechanize", "scale_by_prodigy", "scale_by_dadapt_adamw"), _LR_FREE
)
REDUCES_MORE_THAN_OPTAX |= dict.fromkeys(
    ("polyak_sgd", "scale_by_polyak"),
    "the squared norm of the whole gradient: all-reduces; optax's needs the loss `value`, not passed here",
)
"""Element-wise wrappers with global checks whose all-reduces exceed optax's equivalent's, and why."""


def _limit(entry, tx, optax_counts):
    """The collectives `{kind: arrays}` an entry's step may have (None: any number): optax's equivalent's
    where it traces under Explicit axes; else none for an element-wise rule and all-reduces only for a
    per-tensor or tree-wide one; the matrix rules' kinds of collective (their counts are pinned below)."""
    if entry.name in optax_counts:
        return optax_counts[entry.name]
    if entry.name in MATRIX_RULES or entry.name in WHOLE_MATRICES:
        cost = WHOLE_MATRICES.get(entry.name) or FORMERLY_FAILING[entry.name.removeprefix("scale_by_")]
        return {kind: None if kind in cost else 0 for kind in helpers.COLLECTIVES}
    if isinstance(tx, gradtx.ElementWise) and entry.name not in REDUCES_MORE_THAN_OPTAX:
        return dict.fromkeys(helpers.COLLECTIVES, 0)
    return {kind: 0 if kind != "all-reduce" else None for kind in helpers.COLLECTIVES}


CHUNK = 24
"""Entries per compiled program: XLA's compile time grows faster than a program (eight programs of an
eighth of the entries each compile in about two thirds of the time of one of all)."""


def _chunk_steps(built):
    """`(the unsharded steps, the sharded ones, their collectives by named scope, optax's traced entries)`
    of the entries `built`, compiled as one program each."""
    optaxes = {e.name: tx for e, _ in built if (tx := _optax_equivalent(e.name)) is not None}

    def steps(params, grads):
        out = []
        for e, tx in built:
            with jax.named_scope(f"gradtx__{e.name}"):
                out.append(_step(e, tx)(params, grads))
        return out

    def with_optax(params, grads):
        traced = {}
        for name, tx in optaxes.items():
            try:
                with jax.named_scope(f"optax__{name}"):
                    traced[name] = tx.update(grads, tx.init(params), params)  # state too: not dead code
            except Exception:  # noqa: BLE001 -- optax's rule does not trace under Explicit axes (Muon)
                continue
        return steps(params, grads), traced

    expected = jax.jit(steps)(_tree(0), _tree(1))
    with jax.set_mesh(MESH):
        params, grads = _tree(0, MESH), _tree(1, MESH)
        compiled = jax.jit(with_optax).lower(params, grads).compile()
        got, traced = compiled(params, grads)
    return expected, got, helpers.collectives_by_scope(compiled.as_text()), traced


def test_every_entry_steps_with_the_numbers_of_the_plain_run():
    """init + one step of every entry, compiled in a few programs (sharded) and as many unsharded; each
    entry's collectives (by its named scope) no more than optax's equivalent's in the same program."""
    built = [(e, e.build()) for e in ENTRIES]
    expected, got, moved, traced = [], [], {}, []
    for i in range(0, len(built), CHUNK):
        chunk_expected, chunk_got, chunk_moved, chunk_traced = _chunk_steps(built[i : i + CHUNK])
        expected += chunk_expected
        got += chunk_got
        moved |= {k: moved.get(k, 0) + n for k, n in chunk_moved.items()}
        traced += list(chunk_traced)
    params = _tree(0, MESH)
    assert not [k for k in moved if k[0] is None], f"collectives of no entry: {moved}"
    by = lambda scope: {kind: moved.get((scope, kind), 0) for kind in helpers.COLLECTIVES}  # noqa: E731
    optax_counts = {name: by(f"optax__{name}") for name in traced}
    failures = []
    for (entry, tx), (updates, state), (want_updates, want_state) in zip(built, got, expected, strict=True):
        ours, limit = by(f"gradtx__{entry.name}"), _limit(entry, tx, optax_counts)
        if any(limit[k] is not None and ours[k] > limit[k] for k in helpers.COLLECTIVES):
            failures.append(f"{entry.name}: collectives {ours}, more than {limit}")
        try:
            _assert_placed_like(updates, params, entry.name)
            tol = helpers.tolerance(entry.name)
            helpers.assert_trees_close(updates, want_updates, msg=f"{entry.name}: updates", **tol)
            helpers.assert_trees_close(state, want_state, msg=f"{entry.name}: state", **tol)
        except AssertionError as e:
            failures.append(str(e).splitlines()[0][:300])
    assert not failures, "\n".join(failures)


# the four that failed under Explicit axes (and GaLore, which gathers as they do), and what their placement
# costs per step
FORMERLY_FAILING = {
    "muon": {"all-gather": 2},  # the kernel's momentum gathered whole (one per sharded axis), sliced back
    "shampoo": {"all-gather": 3},  # each sharded gradient gathered whole (kernel: 2 axes, bias: 1)
    "ggt": {"all-reduce": 2},  # the W x W Gram matrix and M^T m: partial sums, then all-reduced
    "accumulate_gradients": {},  # both branches of its `lax.cond` typed alike: nothing moves
    "galore": {"all-gather": 2},  # the kernel's gradient gathered whole for its SVD (one per sharded axis)
}


@pytest.mark.parametrize("name", FORMERLY_FAILING)
def test_the_matrix_rules_and_accumulation_step_twice_at_their_cost(name):
    """`jax.jit(tx.init)`, then two steps of a jitted update (accumulate_gradients applies at the second),
    compiled once; numbers of the plain run; the compiled step's collectives are exactly the placement's."""
    entry = catalog.entry(name)
    tx = entry.build()
    grads = [_tree(1), _tree(2)]
    expected, _ = helpers.run(tx, _tree(0), grads, jit=True)
    with jax.set_mesh(MESH):
        params = _tree(0, MESH)
        state = jax.jit(tx.init)(params)

        def step(params, state, grads):
            updates, state = tx.update(grads, state, params)
            return gradtx.apply_updates(params, updates), state

        compiled = jax.jit(step).lower(params, state, _tree(1, MESH)).compile()
        for t in range(2):
            new_params, new_state = compiled(params, state, _tree(t + 1, MESH))
            assert _specs(new_state) == _specs(state)
            params, state = new_params, new_state
            _assert_placed_like(params, _tree(0, MESH), name)
            tol = helpers.tolerance(name)
            helpers.assert_trees_close(params, expected[t], msg=f"{name}: step {t + 1}", **tol)
    assert {k: v for k, v in count(compiled.as_text()).items() if v} == FORMERLY_FAILING[name]


PACKED = ["adam", "muon", "shampoo", "ggt", "accumulate_gradients"]  # on buffers, on views, over the tree
PACKED_SHAPES = {**SHAPES, "scale": (3, 2)}
PACKED_SPECS = {**SPECS, "scale": P()}


@pytest.mark.parametrize("how", ["pack", "packed(tx)"])
def test_packed_params_step_with_the_numbers_of_the_plain_run(how):
    """Sharded leaves stay their own buffers (their types fix every reshape's sharding), replicated ones are
    packed; traced params (`jax.jit(tx.init)`) are laid out as concrete ones."""
    built = [(catalog.entry(n), catalog.entry(n).build()) for n in PACKED]
    params, grads = _tree(0, shapes=PACKED_SHAPES), _tree(1, shapes=PACKED_SHAPES)
    expected = jax.jit(lambda p, g: [_step(e, tx)(p, g)[0] for e, tx in built])(params, grads)

    def steps(params, grads):
        if how == "pack":
            return [packing.unpack(_step(e, tx)(params, grads)[0]) for e, tx in built]
        return [_step(e, packing.packed(tx))(params, grads)[0] for e, tx in built]

    with jax.set_mesh(MESH):
        params = _tree(0, MESH, PACKED_SHAPES, PACKED_SPECS)
        grads = _tree(1, MESH, PACKED_SHAPES, PACKED_SPECS)
        if how == "pack":
            params = packing.pack(params)
            grads = packing.pack(grads, layout=params.layout)
            assert len(params.buffers) == 3  # ln and scale packed; kernel and bias as they are
        got = jax.jit(steps)(params, grads)
    placed = _tree(0, MESH, PACKED_SHAPES, PACKED_SPECS)
    for name, updates, want in zip(PACKED, got, expected, strict=True):
        _assert_placed_like(updates, placed, f"{name} ({how})")
        helpers.assert_trees_close(updates, want, msg=f"{name} ({how})", **helpers.tolerance(name))


ZERO = ["adam", "muon", "shampoo", "ggt", "accumulate_gradients"]


def test_zero_under_jit_splits_the_state_over_the_replicas():
    """`sharded_state(tx, "data", mesh=mesh)` with `jax.jit(init)`: params replicated over "data" (a kernel
    sharded over "model"); slots split over "data", updates placed like the params, plain numbers."""
    specs = {"kernel": P(None, "model"), "bias": P("model"), "ln": P()}
    built = [(catalog.entry(n), sharded_state(catalog.entry(n).build(), "data", mesh=MESH)) for n in ZERO]
    expected = jax.jit(lambda p, g: [_step(e, e.build())(p, g)[0] for e, _ in built])(_tree(0), _tree(1))
    with jax.set_mesh(MESH):
        params, grads = _tree(0, MESH, specs=specs), _tree(1, MESH, specs=specs)
        states = jax.jit(lambda p: [tx.init(p) for _, tx in built])(params)
        got = jax.jit(
            lambda p, s, g: [tx.update(g, st, p, **e.extra(0)) for (e, tx), st in zip(built, s, strict=True)]
        )(params, states, grads)
    for name, state, (updates, new_state), want in zip(ZERO, states, got, expected, strict=True):
        kernel_slots = [x for x in jax.tree.leaves(state) if x.shape == SHAPES["kernel"]]
        assert kernel_slots and all(_spec_of(x) == ("data", "model") for x in kernel_slots), name
        assert _specs(new_state) == _specs(state), name
        _assert_placed_like(updates, params, f"{name} (ZeRO)")
        helpers.assert_trees_close(updates, want, msg=f"{name} (ZeRO)", **helpers.tolerance(name))


def test_a_mesh_of_explicit_and_auto_axes():
    """A mesh of "data" Explicit and "model" Auto: the matrix rules and accumulation keep the plain numbers
    (`jax.eval_shape` drops the sharding types on such a mesh; `accumulate_gradients` keeps them)."""
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Auto))
    specs = {"kernel": P("data", None), "bias": P(), "ln": P("data")}
    built = [(catalog.entry(n), catalog.entry(n).build()) for n in FORMERLY_FAILING]

    def steps(params, grads):
        return [_step(e, tx)(params, grads)[0] for e, tx in built]

    expected = jax.jit(steps)(_tree(0), _tree(1))
    with jax.set_mesh(mesh):
        params = _tree(0, mesh, specs=specs)
        got = jax.jit(steps)(params, _tree(1, mesh, specs=specs))
    for name, updates, want in zip(FORMERLY_FAILING, got, expected, strict=True):
        _assert_placed_like(updates, params, f"{name} (mixed axes)")
        helpers.assert_trees_close(updates, want, msg=f"{name} (mixed axes)", **helpers.tolerance(name))


SPARSE = ["adagrad", "lazy_adam", "momentum", "ftrl", "rmsprop"]  # TF's SparseApply*: the touched rows only


def test_row_sparse_steps_on_row_sharded_tables():
    """An embedding sharded by rows takes row-sparse gradients: its touched rows gathered whole and stored
    back in place, in float32 and in the stored formats (a table of rows of 16, sixteen to an 8-bit block of
    256, and one of rows of 256), from `gradtx.sparse.value_and_grad` too."""
    shapes, specs = (
        {"narrow": (512, 16), "wide": (32, 256)},
        {"narrow": P("data", None), "wide": P("data", "model")},
    )
    rng = np.random.default_rng(3)
    params = {k: jnp.asarray(rng.standard_normal(v), jnp.float32) for k, v in shapes.items()}
    ids = jnp.asarray([[3, 200], [31, 3]])
    txs = [catalog.entry(n).build() for n in SPARSE]
    txs += [gradtx.low_bit_state(gradtx.adagrad(0.1), f, min_size=1) for f in ("8bit", "4bit", "bf16+8")]

    def loss(p, narrow_ids, wide_ids):
        return jnp.sum(p["narrow"][narrow_ids] ** 2) + jnp.sum(jnp.sin(p["wide"][wide_ids]))

    def steps(p):
        _, grads = gradtx.sparse.value_and_grad(loss, {"narrow": 1, "wide": 2})(p, ids, ids % 32)
        out = []
        for tx in txs:
            state = tx.init(p)
            for _ in range(2):
                updates, state = tx.update(grads, state, p)
            out.append((gradtx.apply_updates(p, updates), state))
        return out

    expected = jax.jit(steps)(params)
    with jax.set_mesh(MESH):
        placed = {k: jax.device_put(v, NamedSharding(MESH, specs[k])) for k, v in params.items()}
        got = jax.jit(steps)(placed)
    names = [*SPARSE, "8bit", "4bit", "bf16+8"]
    for name, (new, state), (want, want_state) in zip(names, got, expected, strict=True):
        _assert_placed_like(new, placed, f"{name} (row-sparse)")
        helpers.assert_trees_close(new, want, msg=name, rtol=1e-6, atol=1e-6)
        helpers.assert_trees_close(
            lowbit.dequantized(state), lowbit.dequantized(want_state), rtol=1e-6, atol=1e-6
        )
        slots = [x for x in jax.tree.leaves(state) if x.ndim == 2]  # codes, values: rows on "data"
        assert slots and all(_spec_of(x)[0] == "data" for x in slots), name

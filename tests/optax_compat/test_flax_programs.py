"""Two Flax programs as users write them, run once with optax and once with `gradtx.optax_compat`.

Each program is a file written for optax (tests/optax_compat/programs/`*_optax.py`) and its twin
with exactly one line changed, `import optax` -> `import gradtx.optax_compat as optax`
(`*_gradtx.py`); the first test checks that, the others run both and compare:

- `lm`: an NNX character-level transformer LM (embeddings, a causal attention block, LayerNorm)
  trained with `clip_by_global_norm` + `adamw` on a warmup-cosine schedule, weight decay masked off
  biases and norms, gradients accumulated by `MultiSteps(every_k_schedule=2)`, optax's integer-label
  cross-entropy, saved with orbax mid-run and restored into a fresh model and optimizer.
- `cnn`: a linen CNN on sklearn's 8x8 digits with `TrainState`, `inject_hyperparams(adam)` inside
  `apply_if_finite`, optax's cross-entropy, a NaN batch once, and the learning rate changed mid-run.
"""

from __future__ import annotations

import difflib
import pathlib
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest

optax = pytest.importorskip("optax")
nnx = pytest.importorskip("flax.nnx")
pytest.importorskip("flax.training.train_state")
pytest.importorskip("orbax.checkpoint")
pytest.importorskip("sklearn.datasets")

from tests.optax_compat.programs import cnn_gradtx, cnn_optax, lm_gradtx, lm_optax  # noqa: E402

PROGRAMS = pathlib.Path(__file__).parent / "programs"


@pytest.mark.parametrize("program", ["lm", "cnn"])
def test_each_program_differs_from_its_optax_twin_by_the_import_only(program):
    theirs = (PROGRAMS / f"{program}_optax.py").read_text().splitlines()
    ours = (PROGRAMS / f"{program}_gradtx.py").read_text().splitlines()
    changed = [line for line in difflib.unified_diff(theirs, ours, lineterm="", n=0) if line[:1] in "+-"]
    assert changed == ["--- ", "+++ ", "-import optax", "+import gradtx.optax_compat as optax"]


def _layout(tree):
    """Every node of a state tree as `path: kind`: NamedTuple class names, dict keys, leaf shapes."""
    out = []

    def walk(path, node):
        if hasattr(node, "_fields"):  # a NamedTuple: optax's state classes, EmptyState, MaskedNode
            out.append(f"{path}: {type(node).__name__}{node._fields}")
            for name in node._fields:
                walk(f"{path}.{name}", getattr(node, name))
        elif isinstance(node, Mapping):  # dicts, and flax's nnx.State
            out.append(f"{path}: {type(node).__name__}{sorted(node, key=str)}")
            for key in sorted(node, key=str):
                walk(f"{path}[{key!r}]", node[key])
        elif isinstance(node, (tuple, list)):
            out.append(f"{path}: {type(node).__name__}[{len(node)}]")
            for i, child in enumerate(node):
                walk(f"{path}[{i}]", child)
        elif node is None:
            out.append(f"{path}: None")
        else:
            x = jnp.asarray(node)
            out.append(f"{path}: {x.dtype}{list(x.shape)}")

    walk("state", tree)
    return out


def _assert_same_layout(ours, theirs):
    """`_layout(ours) == _layout(theirs)`: the same classes, fields, keys and shapes, node by node."""
    assert _layout(ours) == _layout(theirs)


def _assert_close(ours, theirs, rtol=1e-5, atol=1e-6):
    """Leaf by leaf, at the same key paths (the classes of the nodes are `_assert_same_layout`'s)."""
    ours, theirs = jax.tree_util.tree_leaves_with_path(ours), jax.tree_util.tree_leaves_with_path(theirs)
    assert [jax.tree_util.keystr(p) for p, _ in ours] == [jax.tree_util.keystr(p) for p, _ in theirs]
    for (path, a), (_, b) in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=jax.tree_util.keystr(path)
        )


def test_nnx_transformer_lm_equals_optax_s(tmp_path):
    losses_ours, model_ours, opt_ours, saved_ours = lm_gradtx.train(tmp_path / "ours")
    losses_theirs, model_theirs, opt_theirs, saved_theirs = lm_optax.train(tmp_path / "theirs")
    assert np.all(np.isfinite(losses_theirs)) and losses_theirs[-1] < losses_theirs[0]
    np.testing.assert_allclose(losses_ours, losses_theirs, rtol=1e-5)
    _assert_close(nnx.state(model_ours, nnx.Param), nnx.state(model_theirs, nnx.Param))
    _assert_close(saved_ours["optimizer"], saved_theirs["optimizer"])  # the state orbax saved mid-run
    assert int(opt_ours.step[...]) == int(opt_theirs.step[...]) == 30
    state_ours, state_theirs = nnx.as_pure(opt_ours.opt_state), nnx.as_pure(opt_theirs.opt_state)
    assert int(state_ours.gradient_step) == int(state_theirs.gradient_step) == 15
    _assert_same_layout(state_ours, state_theirs)
    _assert_close(state_ours.inner_opt_state, state_theirs.inner_opt_state)
    _assert_close(state_ours.acc_grads, state_theirs.acc_grads)
    assert int(state_ours.mini_step) == int(state_theirs.mini_step) == 0


def test_linen_cnn_train_state_equals_optax_s():
    losses_theirs, state_theirs = cnn_optax.train()
    losses_ours, state_ours = cnn_gradtx.train()
    assert losses_theirs[-1] < losses_theirs[0]
    np.testing.assert_allclose(losses_ours, losses_theirs, rtol=1e-5)
    _assert_close(state_ours.params, state_theirs.params)
    assert int(state_ours.opt_state.total_notfinite) == int(state_theirs.opt_state.total_notfinite) == 1
    assert float(optax.tree.get(state_ours.opt_state, "learning_rate")) == pytest.approx(3e-4)
    ours, theirs = state_ours.opt_state, state_theirs.opt_state
    _assert_same_layout(ours, theirs)
    _assert_close(ours, theirs)
    assert int(ours.inner_state.count) == int(theirs.inner_state.count) == 29  # the NaN step is not counted

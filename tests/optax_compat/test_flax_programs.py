"""Two Flax programs as users write them, run once with optax and once with `gradtx.optax_compat`.

Each program is one function taking the optax module as a parameter, so the only change between
the two runs is `import optax` against `import gradtx.optax_compat as optax` (issue 23):

- `train_lm`: an NNX character-level transformer LM (embeddings, a causal attention block,
  LayerNorm) trained with `clip_by_global_norm` + `adamw` on a warmup-cosine schedule, weight
  decay masked off biases and norms, gradients accumulated by `MultiSteps(every_k_schedule=2)`,
  saved with orbax mid-run and restored into a fresh model and optimizer that finish the run.
- `train_cnn`: a linen CNN on sklearn's 8x8 digits with `TrainState`, `inject_hyperparams(adam)`
  inside `apply_if_finite`, a NaN batch once, and the learning rate changed mid-run.

`gradtx.optax_compat` has no losses (optax's losses are out of its scope), so both programs write
their cross-entropy with `jax.nn.log_softmax`: the same code in both runs.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx.optax_compat as compat

optax = pytest.importorskip("optax")
nnx = pytest.importorskip("flax.nnx")
linen = pytest.importorskip("flax.linen")
train_state = pytest.importorskip("flax.training.train_state")
ocp = pytest.importorskip("orbax.checkpoint")
datasets = pytest.importorskip("sklearn.datasets")

TEXT = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be on "
    "his first entering a neighbourhood, this truth is so well fixed in the minds of the surrounding "
    "families, that he is considered the rightful property of some one or other of their daughters."
)
VOCAB = sorted(set(TEXT))
SEQ, BATCH = 16, 8


def _cross_entropy(logits, labels):
    """Mean softmax cross-entropy over integer labels (written here: optax_compat has no losses)."""
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


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


# --------------------------------------------------------------------------- (A) NNX char-level LM


class Block(nnx.Module):
    def __init__(self, dim: int, heads: int, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(
            num_heads=heads, in_features=dim, use_bias=False, decode=False, rngs=rngs
        )
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.up = nnx.Linear(dim, 4 * dim, rngs=rngs)
        self.down = nnx.Linear(4 * dim, dim, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.down(jax.nn.gelu(self.up(self.ln2(x))))


class CharLM(nnx.Module):
    def __init__(self, vocab: int, dim: int = 32, heads: int = 2, layers: int = 1, *, rngs: nnx.Rngs):
        self.tok = nnx.Embed(vocab, dim, rngs=rngs)
        self.pos = nnx.Param(0.02 * jax.random.normal(rngs.params(), (SEQ, dim)))
        self.blocks = nnx.List([Block(dim, heads, rngs=rngs) for _ in range(layers)])
        self.ln_f = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, vocab, rngs=rngs)

    def __call__(self, tokens):
        x = self.tok(tokens) + self.pos[: tokens.shape[-1]]
        mask = nnx.make_causal_mask(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))


def _lm_batches(steps):
    ids = np.array([VOCAB.index(c) for c in TEXT], np.int32)
    starts = np.random.default_rng(0).integers(0, len(ids) - SEQ - 1, size=(steps, BATCH))
    for row in starts:
        window = np.stack([ids[s : s + SEQ + 1] for s in row])
        yield jnp.asarray(window[:, :-1]), jnp.asarray(window[:, 1:])


def train_lm(optax, ckpt_dir, steps=30, save_at=15):
    """An optax program: returns the per-step losses and the final model and optimizer."""
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=3e-3, warmup_steps=3, decay_steps=steps // 2, end_value=3e-4
    )

    def decay_mask(params):  # no weight decay on biases and LayerNorm scales
        return jax.tree.map(lambda p: p.ndim > 1, params)

    tx = optax.MultiSteps(
        optax.chain(
            optax.clip_by_global_norm(1.0),
            optax.adamw(schedule, b1=0.9, b2=0.98, weight_decay=0.1, mask=decay_mask),
        ),
        every_k_schedule=2,
    )

    def make(seed):
        model = CharLM(len(VOCAB), rngs=nnx.Rngs(seed))
        return model, nnx.Optimizer(model, tx, wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(lambda m: _cross_entropy(m(x), y))(model)
        optimizer.update(model, grads)
        return loss

    model, optimizer = make(0)
    losses = []
    for step, (x, y) in enumerate(_lm_batches(steps)):
        if step == save_at:  # save mid-run (between two accumulated gradients), resume in a fresh model
            saved = {"model": nnx.state(model), "optimizer": nnx.state(optimizer)}
            with ocp.StandardCheckpointer() as checkpointer:
                checkpointer.save(ckpt_dir / "lm", saved)
                checkpointer.wait_until_finished()
                model, optimizer = make(1)
                target = {"model": nnx.state(model), "optimizer": nnx.state(optimizer)}
                restored = checkpointer.restore(ckpt_dir / "lm", target)
            nnx.update(model, restored["model"])
            nnx.update(optimizer, restored["optimizer"])
            _assert_close(nnx.state(optimizer), saved["optimizer"], rtol=0, atol=0)
        losses.append(float(train_step(model, optimizer, x, y)))
    return np.array(losses), model, optimizer


def test_nnx_transformer_lm_with_optax_compat_equals_optax(tmp_path):
    losses_ours, model_ours, opt_ours = train_lm(compat, tmp_path / "ours")
    losses_theirs, model_theirs, opt_theirs = train_lm(optax, tmp_path / "theirs")
    assert np.all(np.isfinite(losses_theirs)) and losses_theirs[-1] < losses_theirs[0]
    np.testing.assert_allclose(losses_ours, losses_theirs, rtol=1e-5)
    _assert_close(nnx.state(model_ours, nnx.Param), nnx.state(model_theirs, nnx.Param))
    assert int(opt_ours.step[...]) == int(opt_theirs.step[...]) == 30
    state_ours, state_theirs = nnx.as_pure(opt_ours.opt_state), nnx.as_pure(opt_theirs.opt_state)
    assert int(state_ours.gradient_step) == int(state_theirs.gradient_step) == 15
    _assert_same_layout(state_ours, state_theirs)
    _assert_close(state_ours.inner_opt_state, state_theirs.inner_opt_state)
    _assert_close(state_ours.acc_grads, state_theirs.acc_grads)
    assert int(state_ours.mini_step) == int(state_theirs.mini_step) == 0


# --------------------------------------------------------------------------- (B) linen CNN on digits


class CNN(linen.Module):
    @linen.compact
    def __call__(self, x):
        x = linen.relu(linen.Conv(8, (3, 3))(x))
        x = linen.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = linen.relu(linen.Dense(32)(x))
        return linen.Dense(10)(x)


def _digits():
    digits = datasets.load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    return jnp.asarray(images), jnp.asarray(digits.target.astype(np.int32))


def train_cnn(optax, images, labels, steps=30, batch=64, nan_at=8, set_lr_at=(14, 22)):
    """An optax program: returns the per-step losses and the final TrainState."""
    model = CNN()
    params = model.init(jax.random.key(0), images[:1])["params"]
    tx = optax.apply_if_finite(
        optax.inject_hyperparams(optax.adam)(learning_rate=3e-3), max_consecutive_errors=3
    )
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)

    @jax.jit
    def train_step(state, x, y):
        def loss_fn(params):
            return _cross_entropy(state.apply_fn({"params": params}, x), y)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss

    order = np.random.default_rng(0).permutation(len(labels))
    losses = []
    for step in range(steps):
        idx = order[(step * batch) % len(order) :][:batch]
        x, y = images[idx], labels[idx]
        if step == nan_at:  # a corrupt batch: apply_if_finite leaves params and inner state as they were
            x = x.at[0].set(jnp.nan)  # (jitted on CPU, relu(NaN) is 0: the loss stays finite, grads do not)
        if step == set_lr_at[0]:  # lower the rate through the hyperparams dict, as optax's docs show
            state.opt_state.inner_state.hyperparams["learning_rate"] = 1e-3
        if step == set_lr_at[1]:  # and again through optax.tree.set
            state = state.replace(opt_state=optax.tree.set(state.opt_state, learning_rate=3e-4))
        state, loss = train_step(state, x, y)
        losses.append(float(loss))
    return np.array(losses), state


def test_optax_compat_has_optax_s_tree_helpers():
    assert callable(compat.tree.set) and callable(compat.tree.get)


def test_linen_cnn_train_state_with_optax_compat_equals_optax():
    images, labels = _digits()
    losses_theirs, state_theirs = train_cnn(optax, images, labels)
    losses_ours, state_ours = train_cnn(compat, images, labels)
    assert losses_theirs[-1] < losses_theirs[0]
    np.testing.assert_allclose(losses_ours, losses_theirs, rtol=1e-5)
    _assert_close(state_ours.params, state_theirs.params)
    assert int(state_ours.opt_state.total_notfinite) == int(state_theirs.opt_state.total_notfinite) == 1
    assert float(optax.tree.get(state_ours.opt_state, "learning_rate")) == pytest.approx(3e-4)
    ours, theirs = state_ours.opt_state, state_theirs.opt_state
    _assert_same_layout(ours, theirs)
    _assert_close(ours, theirs)
    assert int(ours.inner_state.count) == int(theirs.inner_state.count) == 29  # the NaN step is not counted

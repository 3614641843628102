"""An NNX character-level transformer LM trained with optax, as users write it.

`clip_by_global_norm` + `adamw` on a warmup-cosine schedule, weight decay masked off biases and
LayerNorm scales, gradients accumulated over two steps by `MultiSteps`, optax's integer-label
cross-entropy, and an orbax checkpoint saved mid-run and restored into a fresh model and optimizer
that finish the run.
"""

import jax
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx

TEXT = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be on "
    "his first entering a neighbourhood, this truth is so well fixed in the minds of the surrounding "
    "families, that he is considered the rightful property of some one or other of their daughters."
)
VOCAB = sorted(set(TEXT))
SEQ, BATCH = 16, 8


class Block(nnx.Module):
    def __init__(self, dim, heads, *, rngs):
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
    def __init__(self, vocab, dim=32, heads=2, layers=1, *, rngs):
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


def batches(steps):
    ids = np.array([VOCAB.index(c) for c in TEXT], np.int32)
    starts = np.random.default_rng(0).integers(0, len(ids) - SEQ - 1, size=(steps, BATCH))
    for row in starts:
        window = np.stack([ids[s : s + SEQ + 1] for s in row])
        yield window[:, :-1], window[:, 1:]


def train(ckpt_dir, steps=30, save_at=15):
    """The per-step losses, the final model and optimizer, and the optimizer state saved at `save_at`."""
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

    def loss_fn(model, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

    @nnx.jit
    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return loss

    model, optimizer = make(0)
    losses, saved = [], None
    for step, (x, y) in enumerate(batches(steps)):
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
        losses.append(float(train_step(model, optimizer, x, y)))
    return np.array(losses), model, optimizer, saved

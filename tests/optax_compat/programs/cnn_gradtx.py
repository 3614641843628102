"""A linen CNN on sklearn's 8x8 digits trained with optax and flax's `TrainState`, as users write it.

`inject_hyperparams(adam)` inside `apply_if_finite`, optax's integer-label cross-entropy, a NaN batch
once, and the learning rate changed mid-run through the hyperparams dict and through `optax.tree.set`.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import gradtx.optax_compat as optax
from flax.training import train_state
from sklearn import datasets


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(32)(x))
        return nn.Dense(10)(x)


def digits():
    data = datasets.load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., None]
    return jnp.asarray(images), jnp.asarray(data.target.astype(np.int32))


def make_state(images):
    model = CNN()
    params = model.init(jax.random.key(0), images[:1])["params"]
    tx = optax.apply_if_finite(
        optax.inject_hyperparams(optax.adam)(learning_rate=3e-3), max_consecutive_errors=3
    )
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


@jax.jit
def train_step(state, x, y):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss


def train(steps=30, batch=64, nan_at=8, set_lr_at=(14, 22)):
    """The per-step losses and the final TrainState."""
    images, labels = digits()
    state = make_state(images)
    order = np.random.default_rng(0).permutation(len(labels))
    losses = []
    for step in range(steps):
        idx = order[(step * batch) % len(order) :][:batch]
        x, y = images[idx], labels[idx]
        if step == nan_at:  # a corrupt batch: apply_if_finite leaves params and inner state as they were
            x = x.at[0].set(jnp.nan)
        if step == set_lr_at[0]:  # lower the rate through the hyperparams dict, as optax's docs show
            state.opt_state.inner_state.hyperparams["learning_rate"] = 1e-3
        if step == set_lr_at[1]:  # and again through optax.tree.set
            state = state.replace(opt_state=optax.tree.set(state.opt_state, learning_rate=3e-4))
        state, loss = train_step(state, x, y)
        losses.append(float(loss))
    return np.array(losses), state

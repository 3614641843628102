"""Train an MLP on scikit-learn's 8x8 digits with several gradtx optimizers, side by side.

Run with `make demo` (or `python examples/digits_mlp.py --help`). The dataset ships inside
scikit-learn, so nothing is downloaded. Prints a table (optimizer, final loss, test
accuracy, steps/s) and writes a PNG of the loss curves.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import gradtx  # noqa: E402

# label -> a zero-argument function building the optimizer (TF's defaults where TF has them).
RUNS = {
    "sgd (lr 0.1)": lambda: gradtx.sgd(0.1),
    "nesterov (0.05, 0.9)": lambda: gradtx.momentum(0.05, 0.9, nesterov=True),
    "momentum, lr decayed": lambda: gradtx.momentum(lambda count: 0.1 * 0.5 ** (count / 300.0), 0.9),
    "adam (1e-3)": lambda: gradtx.adam(1e-3),
    "rmsprop (1e-3)": lambda: gradtx.rmsprop(1e-3),
    "adagrad (0.1)": lambda: gradtx.adagrad(0.1),
    "ftrl (0.1)": lambda: gradtx.ftrl(0.1),
    "lion (1e-4)": lambda: gradtx.lion(1e-4),  # beyond TF1: optax's defaults
    "adamw (1e-3, decay 1e-4)": lambda: gradtx.adamw(1e-3, weight_decay=1e-4),
    "schedule-free adamw (3e-3)": lambda: gradtx.schedule_free_adamw(3e-3),
}


def load_digits(seed: int = 0):
    """Digits as float32 features in [0, 1] and int labels, split 80/20 (stratified by class)."""
    from sklearn.datasets import load_digits as sk_load_digits
    from sklearn.model_selection import train_test_split

    x, y = sk_load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    return train_test_split(x, y.astype(np.int32), test_size=0.2, random_state=seed, stratify=y)


def init_mlp(key: jax.Array, sizes=(64, 128, 64, 10)):
    """He-initialised dense layers."""
    params = []
    for k, (n_in, n_out) in zip(
        jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:], strict=True), strict=True
    ):
        params.append({"w": jax.random.normal(k, (n_in, n_out)) * np.sqrt(2.0 / n_in), "b": jnp.zeros(n_out)})
    return params


def logits_fn(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    logits = logits_fn(params, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def train(
    tx: gradtx.GradientTransformation,
    data,
    *,
    steps: int,
    batch_size: int,
    seed: int,
    progress,
    schedule_free: bool = False,
):
    """Minibatch training with a jitted, donated step; returns losses, test accuracy, steps/s."""
    x_train, x_test, y_train, y_test = data
    params = init_mlp(jax.random.key(seed))
    state = tx.init(params)

    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = tx.update(grads, state, params)
        return gradtx.apply_updates(params, updates), state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    rng = np.random.default_rng(seed)
    order = np.concatenate(
        [rng.permutation(len(x_train)) for _ in range(steps * batch_size // len(x_train) + 1)]
    )
    losses = np.empty(steps, np.float32)
    t_start = None
    for i in progress(range(steps)):
        idx = order[i * batch_size : (i + 1) * batch_size]
        params, state, loss = step(params, state, x_train[idx], y_train[idx])
        losses[i] = loss  # waits for the step, so the timing below is honest
        if i == 0:
            t_start = time.perf_counter()  # exclude compilation
    steps_per_s = (steps - 1) / max(time.perf_counter() - t_start, 1e-9)
    if schedule_free:  # training moves y; the model to evaluate is the average x
        params = gradtx.schedule_free_eval_params(state, params)
    accuracy = float(jnp.mean(jnp.argmax(logits_fn(params, x_test), -1) == y_test))
    return losses, accuracy, steps_per_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="artifacts/digits_loss_curves.png")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args(argv)

    from tqdm import tqdm

    data = load_digits(args.seed)
    print(
        f"digits: {len(data[0])} train / {len(data[1])} test images, 8x8, 10 classes; "
        f"MLP 64-128-64-10; {args.steps} steps of batch {args.batch_size}; jax {jax.__version__} on "
        f"{jax.devices()[0].platform}"
    )
    results = {}
    for label, make in RUNS.items():

        def progress(it, label=label):
            return tqdm(it, desc=f"{label:<24}", disable=args.no_progress, leave=True, mininterval=0.2)

        results[label] = train(
            make(),
            data,
            steps=args.steps,
            batch_size=args.batch_size,
            seed=args.seed,
            progress=progress,
            schedule_free=label.startswith("schedule-free"),
        )

    width = max(map(len, results)) + 2
    print(f"\n{'optimizer':<{width}}{'final loss':>12}{'test acc':>10}{'steps/s':>10}")
    for label, (losses, acc, sps) in results.items():
        final = float(np.mean(losses[-50:]))
        print(f"{label:<{width}}{final:>12.4f}{acc:>10.3f}{sps:>10.0f}")

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(results, out)
    print(f"\nloss curves: {out.resolve()}")
    best = max(acc for _, acc, _ in results.values())
    print(f"best test accuracy: {best:.3f}")
    return 0 if best >= 0.95 else 1


def plot(results, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5))  # wide enough for the legend beside the axes
    for label, (losses, acc, _) in results.items():
        window = 25
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window - 1, len(losses)), smooth, label=f"{label} (test acc {acc:.3f})")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (moving average of 25 steps)")
    ax.set_title("gradtx on digits: MLP 64-128-64-10")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1))  # beside the axes, off the curves
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())

"""Float64 NumPy references of the tf.contrib.opt and RETURNN rules (spec/TF_SEMANTICS.md, RETURNN's
updater.py).

Same `Reference(init, step, sparse)` convention as tests/reference.py. RETURNN's custom
optimizers take a sparse gradient entry by entry, without deduplication: their `sparse`
functions get the raw `(indices, values)`.
"""

from __future__ import annotations

import numpy as np

from tests.reference import Reference, _zeros, adam, dedup, momentum


def adamax(lr, b1=0.9, b2=0.999, eps=1e-8) -> Reference:
    """ApplyAdaMax; sparse: touched rows with the blend form of m."""

    def step(var, g, s, t):
        m = s["m"] + (g - s["m"]) * (1 - b1)
        v = np.maximum(b2 * s["v"], np.abs(g))
        return var - lr / (1 - b1**t) * (m / (v + eps)), {"m": m, "v": v}

    def sparse(var, indices, values, s, t):
        rows, g = dedup(indices, values)
        m, v, var = s["m"].copy(), s["v"].copy(), var.copy()
        m[rows] = m[rows] * b1 + g * (1 - b1)
        v[rows] = np.maximum(v[rows] * b2, np.abs(g))
        var[rows] -= lr / (1 - b1**t) * (m[rows] / (v[rows] + eps))
        return var, {"m": m, "v": v}

    return Reference(_zeros("m", "v"), step, sparse)


def decoupled(base: Reference, weight_decay: float, lr_scale: float = 1.0) -> Reference:
    """DecoupledWeightDecayExtension: var -= wd * var (touched rows when sparse), then the base step."""

    def step(var, g, s, t):
        return base.step(var - lr_scale * weight_decay * var, g, s, t)

    def sparse(var, indices, values, s, t):
        rows, _ = dedup(indices, values)
        var = var.copy()
        var[rows] -= lr_scale * weight_decay * var[rows]
        if base.sparse == "rows":
            from tests.reference import _sparse_rows

            return _sparse_rows(base, var, indices, values, s, t)
        return base.sparse(var, indices, values, s, t)

    return Reference(base.init, step, sparse)


def adamw(lr, weight_decay, b1=0.9, b2=0.999, eps=1e-8, scaled=False) -> Reference:
    return decoupled(adam(lr, b1, b2, eps), weight_decay, lr if scaled else 1.0)


def momentumw(lr, mu, weight_decay, nesterov=False) -> Reference:
    return decoupled(momentum(lr, mu, nesterov), weight_decay)


def lars(lr, mu=0.9, weight_decay=1e-4, eeta=0.001, eps=0.0, nesterov=False, skip=False) -> Reference:
    """contrib LARS: ApplyMomentum(lr * trust); sparse: SparseApplyMomentum with the plain lr."""

    def step(var, g, s, t):
        w, gn = np.linalg.norm(var), np.linalg.norm(g)
        trust = 1.0 if skip or not (w > 0 and gn > 0) else eeta * w / (gn + weight_decay * w + eps)
        return momentum(lr * trust, mu, nesterov).step(var, g, s, t)

    def sparse(var, indices, values, s, t):
        from tests.reference import _sparse_rows

        return _sparse_rows(momentum(lr, mu, nesterov), var, indices, values, s, t)

    return Reference(_zeros("momentum"), step, sparse)


def adam_gs(lr, b1=0.9, b2=0.999, eps=1e-8, lazy=False) -> Reference:
    """AdamGS: TF1 Adam with beta_power = pow(beta, global_step + 1) = beta**t (the same numbers in
    float64)."""
    return adam(lr, b1, b2, eps, lazy=lazy)


def amsgrad(lr, b1=0.9, b2=0.99, eps=0.0, decay=False) -> Reference:
    """RETURNN's AMSGradOptimizer (no bias correction)."""

    def step(var, g, s, t):
        m = b1 * s["m"] + (1 - b1) * g
        v = b2 * s["v"] + (1 - b2) * g * g
        v_hat = np.maximum(s["v_hat"], v)
        rate = lr / np.sqrt(t) if decay else lr
        return var - rate * m / (eps + np.sqrt(v_hat)), {"m": m, "v": v, "v_hat": v_hat}

    def sparse(var, indices, values, s, t):  # TF densifies the IndexedSlices in RETURNN's dense math
        dense = np.zeros_like(var)
        np.add.at(dense, np.asarray(indices), np.asarray(values, np.float64))
        return step(var, dense, s, t)

    return Reference(_zeros("m", "v", "v_hat"), step, sparse)


def _entrywise(update_fn, slot_names):
    """RETURNN's sparse path: slots decay on all rows, entries add to their rows, each entry reads its row."""

    def sparse(var, indices, values, s, t):
        idx = np.asarray(indices)
        return update_fn(var, np.asarray(values, np.float64), s, idx)

    return sparse


def neural_optimizer1(lr, b1=0.9, decrease_factor=0.1) -> Reference:
    def update(var, g, s, idx=None):
        m = s["m"] * b1
        if idx is None:
            m = m + g * (1 - b1)
            read = m
        else:
            np.add.at(m, idx, g * (1 - b1))
            read = m[idx]
        step = lr * g * np.where(np.sign(read) == np.sign(g), 1.0, decrease_factor)
        var = var.copy()
        if idx is None:
            var = var - step
        else:
            np.subtract.at(var, idx, step)
        return var, {"m": m}

    return Reference(_zeros("m"), lambda var, g, s, t: update(var, g, s), _entrywise(update, ["m"]))


def grad_variance_scaled(lr, b1=0.9, b2=0.999, eps=1e-8) -> Reference:
    def update(var, g, s, idx=None):
        m, v = s["m"] * b1, s["v"] * b2
        if idx is None:
            m = m + g * (1 - b1)
            variance = (g - m) ** 2
            v = v + variance * (1 - b2)
            v_read = v
        else:
            np.add.at(m, idx, g * (1 - b1))
            variance = (g - m[idx]) ** 2
            np.add.at(v, idx, variance * (1 - b2))
            v_read = v[idx]
        step = lr * g * np.minimum(v_read / (variance + eps), 1.0)
        var = var.copy()
        if idx is None:
            var = var - step
        else:
            np.subtract.at(var, idx, step)
        return var, {"m": m, "v": v}

    return Reference(_zeros("m", "v"), lambda var, g, s, t: update(var, g, s), _entrywise(update, ["m", "v"]))


def normalized_sgd(lr) -> Reference:
    def step(var, g, s, t):
        return var - lr * g / np.sqrt(max(np.sum(g * g), 1e-12)), s

    def sparse(var, indices, values, s, t):
        values = np.asarray(values, np.float64)
        var = var.copy()
        np.subtract.at(var, np.asarray(indices), lr * values / np.sqrt(max(np.sum(values * values), 1e-12)))
        return var, s

    return Reference(_zeros(), step, sparse)


def custom_adam(lr, b1=0.9, b2=0.999, eps=1e-8) -> Reference:
    """RETURNN's CustomAdamOptimizer (blend-form moments, beta powers b**t); sparse densified by per_leaf."""

    def step(var, g, s, t):
        rate = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        m = b1 * s["m"] + (1 - b1) * g
        v = b2 * s["v"] + (1 - b2) * g * g
        return var - rate * (m / (np.sqrt(v) + eps)), {"m": m, "v": v}

    return Reference(_zeros("m", "v"), step)

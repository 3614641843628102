"""Float64 NumPy references of TF's update rules, written from spec/TF_SEMANTICS.md (not from gradtx).

A reference is `Reference(init, step, sparse)`: `init(var) -> slots` (a dict of arrays),
`step(var, grad, slots, t) -> (var, slots)` for one array at 1-indexed step `t`, and how a
row-sparse gradient is applied: "rows" (the dense rule on the deduplicated touched rows
only) or a custom function `sparse(var, indices, values, slots, t) -> (var, slots)`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np


class Reference(NamedTuple):
    init: Callable[[np.ndarray], dict]
    step: Callable[[np.ndarray, np.ndarray, dict, int], tuple[np.ndarray, dict]]
    sparse: object = "rows"


def dedup(indices, values):
    """TF's `_apply_sparse_duplicate_indices`: unique rows, duplicate values summed."""
    uniq, inverse = np.unique(np.asarray(indices), return_inverse=True)
    summed = np.zeros((len(uniq), *np.shape(values)[1:]))
    np.add.at(summed, inverse.reshape(-1), np.asarray(values, np.float64))
    return uniq, summed


def _sparse_rows(ref, var, indices, values, slots, t):
    rows, g = dedup(indices, values)
    new_var, new_slots = ref.step(var[rows], g, {k: s[rows] for k, s in slots.items()}, t)
    var = var.copy()
    var[rows] = new_var
    slots = {k: s.copy() for k, s in slots.items()}
    for k in slots:
        slots[k][rows] = new_slots[k]
    return var, slots


def run(ref: Reference, params: Sequence[np.ndarray], grads_seq: Sequence[Sequence]):
    """Trajectory (params after each step) and final slots, in float64; sparse grads are `(indices,
    values)`."""
    params = [np.asarray(p, np.float64) for p in params]
    slots = [ref.init(p) for p in params]
    out = []
    for t, grads in enumerate(grads_seq, start=1):
        for i, g in enumerate(grads):
            if isinstance(g, tuple):
                sparse = _sparse_rows if ref.sparse == "rows" else (lambda r, *a: r.sparse(*a))
                params[i], slots[i] = sparse(ref, params[i], g[0], g[1], slots[i], t)
            else:
                params[i], slots[i] = ref.step(params[i], np.asarray(g, np.float64), slots[i], t)
        out.append([p.copy() for p in params])
    return out, slots


run_dense = run  # the name used by the first tests


def _zeros(*names, ones=(), **fill):
    def init(var):
        out = {n: np.zeros_like(var) for n in names}
        out.update({n: np.ones_like(var) for n in ones})
        out.update({n: np.full_like(var, v) for n, v in fill.items()})
        return out

    return init


def gradient_descent(lr: float) -> Reference:
    """ApplyGradientDescent: var -= grad * lr."""
    return Reference(_zeros(), lambda var, g, s, t: (var - g * lr, s))


def momentum(lr: float, momentum: float, nesterov: bool = False) -> Reference:
    """ApplyMomentum: accum = accum*momentum + grad; var -= accum*lr (nesterov: grad*lr +
    accum*momentum*lr)."""

    def step(var, g, s, t):
        accum = s["momentum"] * momentum + g
        return var - (g * lr + accum * momentum * lr if nesterov else accum * lr), {"momentum": accum}

    return Reference(_zeros("momentum"), step)


def adagrad(lr: float, init: float = 0.1) -> Reference:
    """ApplyAdagrad: accum += g^2; var -= g * lr / sqrt(accum)."""

    def step(var, g, s, t):
        accum = s["accumulator"] + g * g
        return var - g * lr / np.sqrt(accum), {"accumulator": accum}

    return Reference(_zeros(accumulator=init), step)


def adagrad_da(lr: float, init: float = 0.1, l1: float = 0.0, l2: float = 0.0) -> Reference:
    """ApplyAdagradDA with T = t (global_step + 1 read before its increment)."""

    def step(var, g, s, t):
        ga, gga = s["gradient_accumulator"] + g, s["gradient_squared_accumulator"] + g * g
        denom = l2 * t * lr + np.sqrt(gga)
        if l1 > 0:
            new = -lr * np.sign(ga) * np.maximum(np.abs(ga) - t * l1, 0) / denom
        else:
            new = -lr * ga / denom
        return new, {"gradient_accumulator": ga, "gradient_squared_accumulator": gga}

    return Reference(_zeros("gradient_accumulator", gradient_squared_accumulator=init), step)


def adadelta(lr: float, rho: float, eps: float) -> Reference:
    """ApplyAdadelta."""

    def step(var, g, s, t):
        accum = s["accum"] * rho + g * g * (1 - rho)
        update = np.sqrt(s["accum_update"] + eps) / np.sqrt(accum + eps) * g
        accum_update = s["accum_update"] * rho + update * update * (1 - rho)
        return var - update * lr, {"accum": accum, "accum_update": accum_update}

    return Reference(_zeros("accum", "accum_update"), step)


def _alpha(lr, b1, b2, t):
    return lr * np.sqrt(1 - b2**t) / (1 - b1**t)


def adam(
    lr: float, b1: float, b2: float, eps: float, nesterov: bool = False, lazy: bool = False
) -> Reference:
    """ApplyAdam (epsilon-hat); sparse: TF1 Adam (all rows), contrib Nadam (nesterov) or LazyAdam (lazy)."""

    def step(var, g, s, t):
        m = s["m"] + (g - s["m"]) * (1 - b1)
        v = s["v"] + (g * g - s["v"]) * (1 - b2)
        num = g * (1 - b1) + b1 * m if nesterov else m
        return var - _alpha(lr, b1, b2, t) * num / (np.sqrt(v) + eps), {"m": m, "v": v}

    def sparse(var, indices, values, s, t):
        rows, g = dedup(indices, values)
        m, v = s["m"] * b1, s["v"] * b2
        m[rows] += g * (1 - b1)
        v[rows] += g * g * (1 - b2)
        var = var.copy()
        if nesterov:
            m_bar = g * (1 - b1) + b1 * m[rows]
            var[rows] -= _alpha(lr, b1, b2, t) * m_bar / (np.sqrt(v[rows]) + eps)
        else:
            var -= _alpha(lr, b1, b2, t) * m / (np.sqrt(v) + eps)
        return var, {"m": m, "v": v}

    return Reference(_zeros("m", "v"), step, "rows" if lazy else sparse)


def ftrl(lr, power=-0.5, init=0.1, l1=0.0, l2=0.0, shrinkage=0.0, beta=0.0) -> Reference:
    """ApplyFtrlV2 (= ApplyFtrl without shrinkage), with beta folded into l2."""
    l2_adj = l2 + beta / (2 * max(lr, 1e-36))

    def step(var, g, s, t):
        accum, linear = s["accum"], s["linear"]
        new_accum = accum + g * g
        linear = linear + (g + 2 * shrinkage * var) - (new_accum**-power - accum**-power) / lr * var
        quadratic = new_accum**-power / lr + 2 * l2_adj
        new = np.where(np.abs(linear) > l1, (l1 * np.sign(linear) - linear) / quadratic, 0.0)
        return new, {"accum": new_accum, "linear": linear}

    return Reference(_zeros("linear", accum=init), step)


def _fobos(prox, rate, l1, l2):
    if l1 > 0:
        return np.sign(prox) * np.maximum(np.abs(prox) - rate * l1, 0) / (1 + l2 * rate)
    return prox / (1 + l2 * rate)


def proximal_sgd(lr, l1=0.0, l2=0.0) -> Reference:
    """ApplyProximalGradientDescent (FOBOS)."""
    return Reference(_zeros(), lambda var, g, s, t: (_fobos(var - g * lr, lr, l1, l2), s))


def proximal_adagrad(lr, init=0.1, l1=0.0, l2=0.0) -> Reference:
    """ApplyProximalAdagrad."""

    def step(var, g, s, t):
        accum = s["accumulator"] + g * g
        rate = lr / np.sqrt(accum)
        return _fobos(var - g * rate, rate, l1, l2), {"accumulator": accum}

    return Reference(_zeros(accumulator=init), step)


def rmsprop(lr, decay=0.9, momentum=0.0, eps=1e-10, centered=False) -> Reference:
    """ApplyRMSProp / ApplyCenteredRMSProp; `rms` starts at ones."""

    def step(var, g, s, t):
        ms = s["rms"] + (g * g - s["rms"]) * (1 - decay)
        out = {"rms": ms}
        denom = ms + eps
        if centered:
            out["mg"] = s["mg"] + (g - s["mg"]) * (1 - decay)
            denom = ms - out["mg"] ** 2 + eps
        out["momentum"] = s["momentum"] * momentum + g * lr / np.sqrt(denom)
        return var - out["momentum"], out

    return Reference(_zeros("momentum", *(["mg"] if centered else []), ones=("rms",)), step)

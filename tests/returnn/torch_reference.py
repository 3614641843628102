"""float64 NumPy references of torch.optim's algorithms (torch 2.9's `_single_tensor_*` bodies) for tests.

Written from torch's documented algorithms and its single-tensor code, independently of
`gradtx.returnn._torch_optim`: every scalar in Python double as torch forms it, every tensor
in float64. `run(name, params, grads, lr=..., **options)` returns the parameters after each step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

DEFAULTS: dict[str, dict[str, Any]] = {
    "sgd": {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False, "maximize": False},
    "adam": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False, "maximize": False,
             "decoupled_weight_decay": False},
    "adamw": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2, "amsgrad": False, "maximize": False},
    "radam": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "decoupled_weight_decay": False,
              "maximize": False},
    "nadam": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "momentum_decay": 4e-3,
              "decoupled_weight_decay": False, "maximize": False},
    "adamax": {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "maximize": False},
    "adagrad": {"lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0, "eps": 1e-10,
                "maximize": False},
    "rmsprop": {"alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0, "centered": False,
                "maximize": False},
    "adadelta": {"rho": 0.9, "eps": 1e-6, "weight_decay": 0.0, "maximize": False},
    "lion": {"betas": (0.9, 0.99), "weight_decay": 0.0, "decoupled_weight_decay": False},
}  # fmt: skip


def _sgd(p, g, st, lr, o, step):
    if o["weight_decay"] != 0:
        g = g + o["weight_decay"] * p
    if o["momentum"] != 0:
        if "momentum_buffer" not in st:
            st["momentum_buffer"] = g.copy()
        else:
            st["momentum_buffer"] = o["momentum"] * st["momentum_buffer"] + (1 - o["dampening"]) * g
        buf = st["momentum_buffer"]
        g = g + o["momentum"] * buf if o["nesterov"] else buf
    return p - lr * g


def _decay(p, g, lr, o):
    """torch's weight decay: `param *= 1 - lr wd` when decoupled, else `g += wd param`."""
    wd = o["weight_decay"]
    if wd != 0:
        if o.get("decoupled_weight_decay"):
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
    return p, g


def _moments(g, st, b1, b2):
    st["exp_avg"] = st.get("exp_avg", 0 * g) * b1 + (1 - b1) * g
    st["exp_avg_sq"] = st.get("exp_avg_sq", 0 * g) * b2 + (1 - b2) * g * g
    return st["exp_avg"], st["exp_avg_sq"]


def _adam(p, g, st, lr, o, step):
    b1, b2 = o["betas"]
    p, g = _decay(p, g, lr, o)
    m, v = _moments(g, st, b1, b2)
    bc1, bc2 = 1 - b1**step, 1 - b2**step
    if o["amsgrad"]:
        st["max_exp_avg_sq"] = np.maximum(st.get("max_exp_avg_sq", 0 * g), v)
        v = st["max_exp_avg_sq"]
    denom = np.sqrt(v) / math.sqrt(bc2) + o["eps"]
    return p - (lr / bc1) * m / denom


def _radam(p, g, st, lr, o, step):
    b1, b2 = o["betas"]
    p, g = _decay(p, g, lr, o)
    m, v = _moments(g, st, b1, b2)
    bc1, bc2 = 1 - b1**step, 1 - b2**step
    m_hat = m / bc1
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * step * b2**step / bc2
    if rho_t > 5:
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        adaptive = math.sqrt(bc2) / (np.sqrt(v) + o["eps"])
        return p - m_hat * lr * adaptive * rect
    return p - m_hat * lr


def _nadam(p, g, st, lr, o, step):
    b1, b2 = o["betas"]
    p, g = _decay(p, g, lr, o)
    psi = o["momentum_decay"]
    mu = b1 * (1 - 0.5 * 0.96 ** (step * psi))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((step + 1) * psi))
    st["mu_product"] = st.get("mu_product", 1.0) * mu
    m, v = _moments(g, st, b1, b2)
    denom = np.sqrt(v / (1 - b2**step)) + o["eps"]
    p = p - lr * (1 - mu) / (1 - st["mu_product"]) * g / denom
    return p - lr * mu_next / (1 - st["mu_product"] * mu_next) * m / denom


def _adamax(p, g, st, lr, o, step):
    b1, b2 = o["betas"]
    p, g = _decay(p, g, lr, o)
    st["exp_avg"] = st.get("exp_avg", 0 * g) * b1 + (1 - b1) * g
    st["exp_inf"] = np.maximum(st.get("exp_inf", 0 * g) * b2, np.abs(g) + o["eps"])
    return p - (lr / (1 - b1**step)) * st["exp_avg"] / st["exp_inf"]


def _adagrad(p, g, st, lr, o, step):
    p, g = _decay(p, g, lr, o)
    clr = lr / (1 + (step - 1) * o["lr_decay"])
    st["sum"] = st.get("sum", 0 * g + o["initial_accumulator_value"]) + g * g
    return p - clr * g / (np.sqrt(st["sum"]) + o["eps"])


def _rmsprop(p, g, st, lr, o, step):
    a = o["alpha"]
    p, g = _decay(p, g, lr, o)
    st["square_avg"] = a * st.get("square_avg", 0 * g) + (1 - a) * g * g
    if o["centered"]:
        st["grad_avg"] = a * st.get("grad_avg", 0 * g) + (1 - a) * g
        avg = np.sqrt(st["square_avg"] - st["grad_avg"] ** 2) + o["eps"]
    else:
        avg = np.sqrt(st["square_avg"]) + o["eps"]
    if o["momentum"] > 0:
        st["momentum_buffer"] = o["momentum"] * st.get("momentum_buffer", 0 * g) + g / avg
        return p - lr * st["momentum_buffer"]
    return p - lr * g / avg


def _adadelta(p, g, st, lr, o, step):
    rho, eps = o["rho"], o["eps"]
    p, g = _decay(p, g, lr, o)
    st["square_avg"] = rho * st.get("square_avg", 0 * g) + (1 - rho) * g * g
    delta = np.sqrt(st.get("acc_delta", 0 * g) + eps) / np.sqrt(st["square_avg"] + eps) * g
    st["acc_delta"] = rho * st.get("acc_delta", 0 * g) + (1 - rho) * delta * delta
    return p - lr * delta


def _lion(p, g, st, lr, o, step):
    b1, b2 = o["betas"]
    wd = o["weight_decay"] / o["init_lr"] if o["decoupled_weight_decay"] else o["weight_decay"]
    p = p * (1 - lr * wd)
    m = st.get("exp_avg", 0 * g)
    p = p - lr * np.sign(b1 * m + (1 - b1) * g)
    st["exp_avg"] = b2 * m + (1 - b2) * g
    return p


_STEPS = {
    "sgd": _sgd, "adam": _adam, "adamw": _adam, "radam": _radam, "nadam": _nadam, "adamax": _adamax,
    "adagrad": _adagrad, "rmsprop": _rmsprop, "adadelta": _adadelta, "lion": _lion,
}  # fmt: skip


def run(
    name: str, params: dict[str, Any], grads: list[dict[str, Any]], *, lr: float, **options: Any
) -> list[dict]:
    """torch's `name` optimizer over the gradient sequence `grads`: the parameters after each step (float64).

    `options` are torch's keyword arguments (Lion: also `init_lr`, the constructor's rate).
    """
    o = {**DEFAULTS[name], **options}
    if name == "adamw":
        o["decoupled_weight_decay"] = True
    o.setdefault("init_lr", lr)
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    states: dict[str, dict] = {k: {} for k in p}
    out = []
    for step, grad in enumerate(grads, start=1):
        for k in p:
            g = np.asarray(grad[k], np.float64)
            g = -g if o.get("maximize") else g
            p[k] = _STEPS[name](p[k], g, states[k], lr, o, step)
        out.append({k: v.copy() for k, v in p.items()})
    return out

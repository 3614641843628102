"""References of gradtx/_algorithms/psgd_kron.py: psgd-jax's `kron` and pytorch-optimizer's `Kron`.

PSGD Kron draws random numbers, so `run` records what gradtx needs to replay them:

- psgd-jax (`"psgd_jax.kron.kron"` cases): its own keys, `fold_in(PRNGKey(5318008), count)`, which
  gradtx's `psgd_kron` draws the same way: only the trajectory is recorded (the update jitted, as used).
- pytorch-optimizer: per step, the normal arrays of `torch.randn_like` (one per leaf when the preconditioner
  is updated, zeros otherwise) and the `np.random.random()` that decides the balancing, as the draws
  `<label>/draws/<3 t + leaf>` and `<label>/draws/<3 STEPS>` (the uniforms, one per step).

psgd-jax 0.2.9 imports `chex` and `flax.linen` for their types only (`chex.Array`, `nn.Partitioned`: flax
boxes it unwraps) and `optax._src.clipping`, unused (optax 0.2.8 moved it to `optax.transforms._clipping`);
where .venv-ref lacks them, stand-ins with those names are installed before the import.
"""

from __future__ import annotations

import sys
import types

import numpy as np

from tools.references import QUARTIC, SHAPES, Case

JAX = "psgd_jax.kron.kron"
TORCH = "pytorch_optimizer.Kron"

CASES = [
    Case("default", TORCH, {}),
    Case(
        "one_diag_decay",
        TORCH,
        {
            "lr": 0.003,
            "momentum": 0.5,
            "weight_decay": 0.05,
            "memory_save_mode": "one_diag",
            "balance_prob": 0.3,
        },
    ),
    Case(
        "coupled_half",
        TORCH,
        {
            "lr": 0.002,
            "weight_decay": 0.02,
            "weight_decouple": False,
            "pre_conditioner_update_probability": 0.5,
            "momentum_into_precondition_update": False,
            "max_size_triangular": 4,
        },
    ),
    Case(
        "smart_one_diag", TORCH, {"lr": 0.004, "memory_save_mode": "smart_one_diag", "min_ndim_triangular": 3}
    ),
    Case("jax_default", JAX, {}),
    Case("jax_all_diag", JAX, {"learning_rate": 0.003, "b1": 0.5, "memory_save_mode": "all_diag"}),
    Case(
        "jax_prob",
        JAX,
        {
            "learning_rate": 0.002,
            "preconditioner_update_probability": 0.4,
            "momentum_into_precond_update": False,
            "max_size_triangular": 4,
            "preconditioner_lr": 0.3,
            "preconditioner_init_scale": 0.5,
        },
    ),
    Case("jax_one_diag", JAX, {"learning_rate": 0.004, "b1": 0.0, "memory_save_mode": "one_diag"}),
    Case(
        "jax_decay",
        JAX,
        {"learning_rate": 0.003, "weight_decay": 0.05, "preconditioner_update_probability": 1.0, "b1": 0.8},
    ),
]


def _stand_ins() -> None:
    """`chex.Array`, `flax.linen.Partitioned` and `optax._src.clipping` where .venv-ref lacks them."""
    import jax
    import optax.transforms._clipping

    try:
        from optax._src import clipping  # noqa: F401
    except ImportError:
        sys.modules["optax._src.clipping"] = optax.transforms._clipping

    try:
        import chex  # noqa: F401
    except ImportError:
        sys.modules["chex"] = types.SimpleNamespace(Array=jax.Array)  # type: ignore[assignment]
    try:
        import flax.linen  # noqa: F401
    except ImportError:
        linen = types.SimpleNamespace(Partitioned=type("Partitioned", (), {}))
        sys.modules["flax"] = types.SimpleNamespace(linen=linen)  # type: ignore[assignment]
        sys.modules["flax.linen"] = linen  # type: ignore[assignment]


def _grads(params: dict, curv: dict, noise: dict) -> dict:
    """The problem's gradient, `c p + 4 QUARTIC p^3 + n`, in float32 (as autograd computes it)."""
    return {k: (curv[k] * p + 4 * QUARTIC * p**3 + noise[k]).astype(np.float32) for k, p in params.items()}


def _run_jax(case: Case, prob: dict) -> dict[str, np.ndarray]:
    _stand_ins()
    import jax
    import jax.numpy as jnp
    import optax
    from psgd_jax.kron import kron

    tx = kron(**case.kwargs)
    params = {k: jnp.asarray(prob["init"][k]) for k in SHAPES}
    curv = {k: jnp.asarray(prob["curv"][k]) for k in SHAPES}
    state = tx.init(params)

    @jax.jit
    def step(params, state, noise):
        grads = jax.grad(lambda p: sum(
            jnp.sum(0.5 * curv[k] * x * x + QUARTIC * x**4 + noise[k] * x) for k, x in p.items()
        ))(params)  # fmt: skip
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, grads

    out: dict[str, np.ndarray] = {}
    for t in range(case.steps):
        noise = {k: jnp.asarray(prob["noise"][t][k]) for k in SHAPES}
        params, state, grads = step(params, state, noise)
        for k in SHAPES:
            out[f"{case.label}/grads/{t}/{k}"] = np.asarray(grads[k])
            out[f"{case.label}/params/{t}/{k}"] = np.asarray(params[k])
    return out


def _run_torch(case: Case, prob: dict) -> dict[str, np.ndarray]:
    import torch
    from pytorch_optimizer import Kron
    from pytorch_optimizer.optimizer import psgd

    torch.manual_seed(0)
    np.random.seed(0)
    named = {k: torch.nn.Parameter(torch.tensor(prob["init"][k])) for k in SHAPES}
    curv = {k: torch.tensor(prob["curv"][k]) for k in SHAPES}
    opt = Kron(list(named.values()), **case.kwargs)
    normals: list[np.ndarray] = []
    uniforms: list[float] = []
    randn_like, random = torch.randn_like, np.random.random

    def recorded_randn_like(*args, **kwargs):
        v = randn_like(*args, **kwargs)
        normals.append(v.numpy().copy())
        return v

    def recorded_random(*args, **kwargs):
        u = random(*args, **kwargs)
        uniforms.append(float(u))
        return u

    out: dict[str, np.ndarray] = {}
    psgd.torch.randn_like, psgd.np.random.random = recorded_randn_like, recorded_random
    try:
        for t in range(case.steps):
            opt.zero_grad()
            noise = {k: torch.tensor(prob["noise"][t][k]) for k in SHAPES}
            loss = sum(
                (0.5 * curv[k] * p * p + QUARTIC * p**4 + noise[k] * p).sum() for k, p in named.items()
            )
            loss.backward()
            for k, p in named.items():  # before the step: a coupled decay adds to `p.grad` in place
                out[f"{case.label}/grads/{t}/{k}"] = p.grad.detach().numpy().copy()
            before = len(normals)
            opt.step()
            drawn = normals[before:] or [np.zeros(s, np.float32) for s in SHAPES.values()]
            assert len(drawn) == len(SHAPES) and len(uniforms) == t + 1, (len(drawn), len(uniforms))
            for i, (k, p) in enumerate(named.items()):
                out[f"{case.label}/params/{t}/{k}"] = p.detach().numpy().copy()
                out[f"{case.label}/draws/{len(SHAPES) * t + i}"] = drawn[i]
    finally:
        psgd.torch.randn_like, psgd.np.random.random = randn_like, random
    out[f"{case.label}/draws/{len(SHAPES) * case.steps}"] = np.asarray(uniforms, np.float64)
    return out


def run(case: Case, prob: dict) -> dict[str, np.ndarray]:
    """One case's trajectory (and draws), by the library its path names."""
    return _run_jax(case, prob) if case.path == JAX else _run_torch(case, prob)

"""Reference trajectories: the problem every reference optimizer is run on, and how a case is declared.

Each module of this package names one gradtx algorithm module (`soap.py` for gradtx/_algorithms/soap.py)
and lists its `CASES`: the reference class (`"pytorch_optimizer.SOAP"`), the keyword arguments it is
built with (the defaults, and at least two other settings) and, where the reference needs more than a
list of parameters, how to build it. `tools/record_references.py` runs each case for `STEPS` steps on
`problem()` and writes tests/algorithms/references/<module>.npz: the problem, the gradients the
reference saw at every step, its parameters after every step, the random numbers it drew (`capture`),
its signature and the library versions. The tests replay the recorded gradients through gradtx and
compare the parameters, with no PyTorch installed.

The problem: three leaves, a matrix (8, 5), a vector (7,) and a 4-D leaf (4, 3, 2, 2), named so that
JAX's sorted dict order and the order of the reference's parameter list agree; the loss at step `t` is
`sum(0.5 c p^2 + 0.025 p^4 + n_t p)` with fixed curvatures `c` in [0.5, 2] and noise `n_t`, so that
the gradients depend on the parameters and the Hessian is diagonal (`c + 0.3 p^2`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

SHAPES = {"conv": (4, 3, 2, 2), "matrix": (8, 5), "vector": (7,)}
"""The leaves, in JAX's (sorted) order: the reference's parameter list is in this order too."""

STEPS = 20
"""Steps per case."""

QUARTIC = 0.025
"""The coefficient of `p^4` in the loss."""


def problem(seed: int = 0) -> dict[str, Any]:
    """The initial params, the curvatures and the per-step noise of the loss (float32 NumPy arrays)."""
    rng = np.random.default_rng(seed)
    init = {k: (0.5 * rng.standard_normal(s)).astype(np.float32) for k, s in SHAPES.items()}
    curv = {k: rng.uniform(0.5, 2.0, s).astype(np.float32) for k, s in SHAPES.items()}
    noise = [
        {k: (0.1 * rng.standard_normal(s)).astype(np.float32) for k, s in SHAPES.items()}
        for _ in range(STEPS)
    ]
    return {"init": init, "curv": curv, "noise": noise}


@dataclasses.dataclass(frozen=True)
class Case:
    """One reference run.

    Attributes:
      label: the case's name in the fixture (`"default"`, `"betas"`, ...).
      path: the reference class, `library.ClassName` (`"pytorch_optimizer.SOAP"`).
      kwargs: its keyword arguments (JSON values: numbers, strings, bools, lists, None); the test
        builds gradtx's optimizer as `gradtx.get(ClassName, **kwargs)` from the same dict.
      build: `build(cls, named_params, kwargs) -> optimizer` where the reference needs more than the
        list of parameters (param groups, a model); `named_params` is a dict in `SHAPES` order.
      create_graph: backward with `create_graph=True` (Hessian-vector products: AdaHessian, Sophia-H).
      capture: functions whose results the run records in call order (`"torch.randn_like"`): the
        random numbers the reference draws, replayed by the test; each is patched on `torch` and on
        every loaded module of the reference library that imported it by name.
      steps: steps of this case (default `STEPS`).
    """

    label: str
    path: str
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    build: Callable[..., Any] | None = None
    create_graph: bool = False
    capture: tuple[str, ...] = ()
    steps: int = STEPS

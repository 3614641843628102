"""A gradtx name that optax also has says on its docstring's first line when its numbers are not optax's.

Checked by running both: gradtx's name and `gradtx.optax_compat`'s (optax's numbers, tested against
optax in test_optimizers.py) for 5 steps with the same arguments; where they differ, or gradtx's
signature does not take optax's arguments, the first line must say "not `optax.<name>`" and point at
`optax_compat`. Where they agree it must not claim a difference.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradtx
import gradtx.optax_compat as compat

SHARED = sorted(
    n
    for n in set(gradtx.__all__) & set(compat.__all__)
    if inspect.isfunction(getattr(gradtx, n))
    and getattr(gradtx, n) is not getattr(compat, n)
    and "learning_rate" in inspect.signature(getattr(compat, n)).parameters
    or n.startswith("scale_by_")
    and n in compat.__all__
    and getattr(gradtx, n, None) is not getattr(compat, n)
    or n in ("ema", "trace")
)


PROBES = {"adagrad": {"initial_accumulator_value": 1e-6}}
"""Arguments both sides take that show a convention the defaults hide (Adagrad's epsilon: optax's 1e-7
is below float32's resolution next to an accumulator of 0.1)."""


LINE_SEARCHES = {
    "lbfgs": (0.01,),
    "scale_by_backtracking_linesearch": (10,),
    "scale_by_zoom_linesearch": (10,),
}
"""Names whose `update` evaluates the objective (L-BFGS's default line search): their required arguments;
`_steps` gives them the objective whose gradients it feeds (`value_fn`)."""


def _args(name):
    """optax's required positional arguments (a learning rate, a decay), the learning rate always."""
    if name in LINE_SEARCHES:
        return LINE_SEARCHES[name]
    params = inspect.signature(getattr(compat, name)).parameters
    return tuple(
        0.01 if p.name == "learning_rate" else 0.9
        for p in params.values()
        if p.name == "learning_rate" or p.default is inspect.Parameter.empty
    )


def _steps(tx, scale, objective=False):
    """Five steps' displacement on gradients of size `scale` that shrink, so epsilons and running maxima
    show (with `objective`, `update` also gets the objective they are the gradients of)."""
    start = {"w": jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)}
    params, state = start, tx.init(start)
    for t in range(5):
        g = jax.tree.map(lambda p, t=t: scale * (p - 0.3) / (t + 1.0), params)
        f = lambda p, t=t: scale * jnp.sum((p["w"] - 0.3) ** 2) / (2 * (t + 1.0))  # noqa: E731
        u, state = tx.update(g, state, params, **({"value_fn": f} if objective else {}))
        params = gradtx.apply_updates(params, u)
    return params["w"] - start["w"]  # the displacement: a relative difference in the steps shows


def _same_numbers(name) -> bool:
    kwargs = PROBES.get(name, {})
    try:
        ours = getattr(gradtx, name)(*_args(name), **kwargs)
    except (TypeError, ValueError):
        return False  # gradtx's signature does not take optax's arguments
    theirs = getattr(compat, name)(*_args(name), **kwargs)
    objective = name in LINE_SEARCHES
    return all(
        np.allclose(_steps(ours, scale, objective), _steps(theirs, scale, objective), rtol=1e-6, atol=0.0)
        for scale in (1.0, 1e-3, 1e-5)
    )


@pytest.mark.parametrize("name", SHARED)
def test_the_first_docstring_line_says_where_numbers_differ_from_optax(name):
    first = inspect.getdoc(getattr(gradtx, name)).splitlines()[0]
    says = f"not `optax.{name}`" in first and "optax_compat" in first
    if _same_numbers(name):
        assert not says, f"gradtx.{name} gives optax's numbers, but its first line says otherwise: {first!r}"
    else:
        assert says, f"gradtx.{name} is not optax's {name}; its first line must say so: {first!r}"

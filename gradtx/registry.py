"""Names -> factories: gradtx names, TF class names, optimize_loss strings, TF argument names.

`get("MomentumOptimizer", learning_rate=0.1, momentum=0.9, use_nesterov=True)` builds the
same transform as `gradtx.momentum(0.1, 0.9, nesterov=True)`, so a TF config moves over
verbatim. Lookup ignores case, underscores and a trailing "Optimizer": `"lazy_adam"`,
`"LazyAdam"` and `"LazyAdamOptimizer"` are one name. The optimizers that reproduce a PyTorch
implementation take its configuration as well: `get("SOAP", lr=3e-3, betas=(0.95, 0.95))` is
pytorch-optimizer's `SOAP(params, lr=3e-3, betas=(0.95, 0.95))`, its defaults included.

Every factory of the library is registered where it is defined (`@optimizer("Adam")` above
`def adam`, in its algorithm's module), so the registry is complete once `gradtx` is imported;
an entry is its name, factory, kind and aliases. The contract suite (tests/test_contract.py)
runs over every entry, and the catalogue table of the "From TF1" guide is generated from them.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Mapping

from gradtx._core import protocol as _protocol
from gradtx._core.registry import KINDS, Entry, Reference, entries, entry, names, register, unregister

TF_ARG_NAMES: Mapping[str, str] = {
    "beta1": "b1",
    "beta2": "b2",
    "epsilon": "eps",
    "use_nesterov": "nesterov",
    "l1_regularization_strength": "l1",
    "l2_regularization_strength": "l2",
    "l2_shrinkage_regularization_strength": "l2_shrinkage",
    "decay_var_list": "mask",
    "skip_list": "skip",
    "sign_decay_fn": "sign_decay",
    "opt": "tx",
    "optimizer": "tx",
}
"""TF argument name -> gradtx argument name; applied when the factory takes the gradtx name."""

TF_IGNORED_ARGS = (
    "use_locking",
    "name",
    "accum_name",
    "linear_name",
    "num_worker",
    "is_chief",
    "ea_custom_getter",
    "ma_custom_getter",
    "custom_getter",
    "synchronous",
)
"""TF constructor arguments with no meaning for a pure transform (names, locking): accepted and dropped."""


def translate_kwargs(name: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Rename TF argument names to gradtx's for the factory `name`, dropping `use_locking`/`name`.

    Args:
      name: any name of a registered factory.
      kwargs: the arguments as TF (or gradtx) spells them.

    Returns:
      The arguments under the factory's own names.

    Raises:
      TypeError: for an argument the factory does not take, or one given under both names.

    Example:
        >>> from gradtx import registry
        >>> registry.translate_kwargs("AdamOptimizer", {"beta1": 0.8, "epsilon": 1e-7, "use_locking": False})
        {'b1': 0.8, 'eps': 1e-07}
    """
    e = entry(name)
    if e.reference is not None and name == e.reference.class_name:
        return _reference_kwargs(e, kwargs)
    params = inspect.signature(e.factory).parameters
    takes_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}  # target -> the spelling it was given as
    for k, v in kwargs.items():
        if k in TF_IGNORED_ARGS and k not in params:
            continue
        target = TF_ARG_NAMES.get(k, k) if k not in params else k
        if target not in params and not takes_var_kw:
            own = [p for p in params if params[p].kind is not inspect.Parameter.VAR_POSITIONAL]
            spellings = own + [tf for tf, ours in TF_ARG_NAMES.items() if ours in params]
            close = difflib.get_close_matches(k, spellings, n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""
            raise TypeError(
                f"`gradtx.get({name!r})`: unknown argument `{k}`; `{e.name}` takes {', '.join(own)}.{hint}"
            )
        if target in out:
            raise TypeError(
                f"`gradtx.get({name!r})`: `{target}` is given twice (as `{spelled[target]}` and as `{k}`); "
                "pass one of them."
            )
        out[target] = v
        spelled[target] = k
    return out


def _reference_kwargs(e: Entry, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The factory's arguments for the reference's own (`Reference`): its defaults first, then `kwargs`."""
    ref = e.reference
    assert ref is not None
    where = f"`gradtx.get({ref.class_name!r})` ({ref.path})"
    takes = [*ref.arguments, *ref.fixed]
    out: dict[str, Any] = {}
    for k, v in {**ref.defaults, **kwargs}.items():
        if k in ref.free or k in TF_IGNORED_ARGS:
            continue
        if k in ref.fixed:
            if v != ref.fixed[k]:
                raise ValueError(
                    f"{where}: gradtx reproduces `{ref.class_name}` with `{k}={ref.fixed[k]!r}` only, "
                    f"got {v!r}."
                )
            continue
        if k not in ref.arguments:
            close = difflib.get_close_matches(k, takes, n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""
            raise TypeError(f"{where}: unknown argument `{k}`; it takes {', '.join(takes)}.{hint}")
        target = ref.arguments[k]
        if callable(target):
            out.update(target(v))
        elif isinstance(target, tuple):
            if not isinstance(v, (tuple, list)) or len(v) != len(target):
                raise ValueError(f"{where}: `{k}` must be a tuple of {len(target)} values, got {v!r}.")
            out.update(zip(target, v, strict=True))
        else:
            out[target] = v
    return out


def get(name: str, /, **kwargs: Any) -> _protocol.GradientTransformation:
    """Build a registered optimizer or transform by name, with TF's argument names accepted.

    Args:
      name: a gradtx name (`"momentum"`), a TF class name (`"MomentumOptimizer"`), an
        optimize_loss string (`"Momentum"`, `"SGD"`) or, spelled exactly, the class name of
        the PyTorch implementation an optimizer reproduces (`"SOAP"`, `"Kron"`); otherwise
        case, underscores and a trailing "Optimizer" are ignored.
      **kwargs: the factory's arguments, under gradtx or TF names (`use_nesterov`,
        `beta1`, `epsilon`, `l1_regularization_strength`, ...). TF's `use_locking` and
        `name` are accepted and ignored. Under a PyTorch class name, that class's own
        arguments and defaults (`lr`, `betas`, ...; see `Reference`).

    Returns:
      The `GradientTransformation`.

    Raises:
      UnknownNameError: (a KeyError and a ValueError) for an unknown name; the message
        lists close names.
      TypeError: for an argument the factory does not take, or one it needs that is missing.

    Example:
        >>> import gradtx
        >>> tx = gradtx.get("MomentumOptimizer", learning_rate=0.1, momentum=0.9, use_nesterov=True)
        >>> isinstance(tx, gradtx.GradientTransformation)
        True
    """
    e = entry(name)
    arguments = translate_kwargs(name, kwargs)
    needed = [
        p.name
        for p in inspect.signature(e.factory).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        and p.name not in arguments
    ]
    if needed:
        given = ", ".join(f"`{k}`" for k in kwargs) or "no arguments"
        raise TypeError(
            f"`gradtx.get({name!r})`: `{e.name}` needs {' and '.join(f'`{n}`' for n in needed)} "
            f"(no default), got {given}."
        )
    return e.factory(**arguments)


def from_config(config: Mapping[str, Any]) -> _protocol.GradientTransformation:
    """Build an optimizer from a RETURNN-style config dict: `{"class": name, **arguments}`.

    RETURNN's `optimizer = {"class": "adam", "epsilon": 1e-8}` moves over verbatim: the
    class is any name `get` accepts and the arguments may use TF's names. RETURNN passes
    the learning rate separately; put it in the dict as `learning_rate`. The defaults are the
    factory's (TF's); for a whole RETURNN config, with RETURNN's defaults for its backend
    (`optimizer_epsilon`, PyTorch's optimizers), its gradient processing and its learning-rate
    control, use `gradtx.from_returnn_config`.

    Args:
      config: a dict with the key `"class"` and the factory's arguments.

    Returns:
      The `GradientTransformation`.

    Raises:
      TypeError: if `config` is not a dict with a string `"class"`, or an argument is unknown.
      UnknownNameError: for an unknown class.

    Example:
        >>> import gradtx
        >>> tx = gradtx.from_config({"class": "adam", "learning_rate": 1e-3, "epsilon": 1e-6})
    """
    if not isinstance(config, Mapping) or not isinstance(config.get("class"), str):
        raise TypeError(f'`from_config`: `config` must be a dict with a string "class", got {config!r}.')
    kwargs = {k: v for k, v in config.items() if k != "class"}
    return get(config["class"], **kwargs)


__all__ = [
    "Entry",
    "KINDS",
    "Reference",
    "TF_ARG_NAMES",
    "TF_IGNORED_ARGS",
    "entries",
    "entry",
    "from_config",
    "get",
    "names",
    "register",
    "translate_kwargs",
    "unregister",
]

"""torch.optim's optimizers with torch's numbers, for RETURNN's PyTorch backend (`returnn/torch/updater.py`).

RETURNN builds `torch.optim.<Class>(param_groups, lr=..., **opts)` from the config's
`optimizer = {"class": "adamw", ...}`; `OPTIMIZERS[name](lr=lr, **opts)` is that optimizer as
a gradtx transform whose update is what torch adds to the parameter. Each is a chain:

    [scale(-1) if maximize] [add_decayed_weights(wd) unless decoupled] <torch's rule>
    [add_decayed_weights(wd) if decoupled] scale_by_learning_rate(lr)

which is torch's order: the gradient is negated, then L2-decayed, then the rule runs; a
decoupled decay `param.mul_(1 - lr wd)` adds `-lr wd param` to the step. The rules are in
`_torch_optim_rules`. Keyword names, defaults and value checks are torch's (2.9); the options
without effect on the numbers (`foreach`, `fused`, `capturable`, `differentiable`, Lion's
`use_triton`) are accepted and ignored; any other name is refused.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import jax

from gradtx._algorithms import adadelta as _adadelta
from gradtx._algorithms import adagrad as _adagrad
from gradtx._algorithms import adam as _adam
from gradtx._algorithms import adamax as _adamax
from gradtx._algorithms import lion as _lion
from gradtx._algorithms import momentum as _momentum
from gradtx._algorithms import nadam as _nadam
from gradtx._algorithms import radam as _radam
from gradtx._algorithms import rmsprop as _rmsprop
from gradtx._core import factory as _factory
from gradtx._core import protocol as _protocol
from gradtx.combinators import add_decayed_weights, chain
from gradtx.returnn._common import ReturnnConfigError
from gradtx.transforms import scale, scale_by_learning_rate

_BETAS = (0.9, 0.999)


@dataclasses.dataclass(frozen=True)
class TorchOptimizer:
    """A torch.optim class as a gradtx factory: `opt(lr=..., **torch_kwargs) -> GradientTransformation`.

    Attributes:
      name: the class as torch (or RETURNN) spells it, e.g. `"AdamW"`, `"returnn.torch.optim.lion.Lion"`.
      defaults: the keyword arguments the class takes besides `lr`, with torch's defaults.
      build: `build(lr, opts, init_lr)` with `opts` the defaults updated by the call's arguments.

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.returnn._torch_optim import OPTIMIZERS
        >>> opt = OPTIMIZERS["sgd"](lr=0.5, momentum=0.9)  # torch.optim.SGD(params, lr=0.5, momentum=0.9)
        >>> state = opt.init(jnp.zeros(1))
        >>> for _ in range(2):
        ...     u, state = opt.update(jnp.ones(1), state, jnp.zeros(1))
        >>> u  # -lr * (0.9 * 1 + 1)
        Array([-0.95], dtype=float32)
    """

    name: str
    defaults: Mapping[str, Any]
    build: Callable[[Any, dict[str, Any], Any], _protocol.GradientTransformation]

    @property
    def keys(self) -> frozenset[str]:
        """Every keyword the class takes, `lr` included (RETURNN renames `epsilon` to `eps` if it is one)."""
        return frozenset({"lr", *self.defaults})

    def __call__(
        self, *, lr: Any = None, init_lr: Any = None, **kwargs: Any
    ) -> _protocol.GradientTransformation:
        """The optimizer at rate `lr` (a number or a traced scalar) with torch's keyword arguments.

        `init_lr` (not a torch argument) is the rate the torch optimizer was constructed with
        (RETURNN: the config's `learning_rate`); only Lion reads it, for `decoupled_weight_decay`
        (`wd / init_lr`). Default: `lr` when it is a number.
        """
        unknown = sorted(set(kwargs) - set(self.defaults))
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(key, sorted(self.keys), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else "."
            raise TypeError(
                f"`{self._where}`: unknown option {key!r}; it takes {', '.join(sorted(self.keys))}{hint}"
            )
        if lr is None:
            raise TypeError(
                f"`{self._where}`: `lr` is required (RETURNN sets it from the learning-rate control)."
            )
        value = _concrete(lr)
        if value is not None and not value >= 0:
            raise ValueError(
                f"`{self._where}`: `lr` must be >= 0, got {lr!r} (torch: Invalid learning rate)."
            )
        return self.build(lr, {**self.defaults, **kwargs}, init_lr)

    @property
    def _where(self) -> str:
        return self.name if "." in self.name else f"torch.optim.{self.name}"


# --------------------------------------------------------------------------- torch's value checks


def _concrete(x: Any) -> float | None:
    """`x` as a float when known at construction (not traced), else None."""
    if isinstance(x, jax.core.Tracer) or callable(x):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _number(cls: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{cls}`: `{key}` must be a number, got {value!r} of type {type(value).__name__}.")
    return float(value)


def _at_least_zero(cls: str, o: dict[str, Any], key: str, torch_says: str) -> float:
    v = _number(cls, key, o[key])
    if not v >= 0:
        raise ValueError(f"`{cls}`: `{key}` must be >= 0, got {o[key]!r} (torch: {torch_says}).")
    return v


def _flag(cls: str, o: dict[str, Any], key: str) -> bool:
    if not isinstance(o[key], bool):
        raise TypeError(f"`{cls}`: `{key}` must be True or False, got {o[key]!r}.")
    return o[key]


def _betas(cls: str, o: dict[str, Any], *, closed: bool = False) -> tuple[float, float]:
    betas = o["betas"]
    if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
        raise TypeError(f"`{cls}`: `betas` must be a pair (beta1, beta2), got {betas!r}.")
    out = []
    for i, b in enumerate(betas):
        v = _number(cls, f"betas[{i}]", b)
        if not (0.0 <= v <= 1.0 if closed else 0.0 <= v < 1.0):
            allowed = "[0, 1]" if closed else "[0, 1)"
            raise ValueError(
                f"`{cls}`: `betas[{i}]` must be in {allowed}, got {b!r} "
                f"(torch: Invalid beta parameter at index {i})."
            )
        out.append(v)
    return out[0], out[1]


def _decay(cls: str, o: dict[str, Any]) -> float:
    """torch's check of `weight_decay`."""
    return _at_least_zero(cls, o, "weight_decay", "Invalid weight_decay value")


def _common(cls: str, o: dict[str, Any]) -> tuple[float, float]:
    """torch's checks of `weight_decay` and `eps` (the classes that take both)."""
    return _decay(cls, o), _at_least_zero(cls, o, "eps", "Invalid epsilon value")


def _around(lr: Any, rule: Any, o: dict[str, Any], wd: float, cls: str) -> _protocol.GradientTransformation:
    """torch's chain around `rule`: maximize's negation, the weight decay (L2 or decoupled), the rate."""
    decoupled = _flag(cls, o, "decoupled_weight_decay") if "decoupled_weight_decay" in o else False
    maximize = _flag(cls, o, "maximize") if "maximize" in o else False
    links = [scale(-1.0)] if maximize else []
    if wd != 0 and not decoupled:
        links.append(add_decayed_weights(wd))
    links.append(rule)
    if wd != 0 and decoupled:
        links.append(add_decayed_weights(wd))
    links.append(scale_by_learning_rate(lr))
    return chain(*links)


# --------------------------------------------------------------------------- the classes


@_factory.api
def torch_sgd(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.SGD: `momentum_buffer = m buf + (1 - dampening) g` (the first gradient at step 1)."""
    cls = "torch.optim.SGD"
    momentum = _at_least_zero(cls, o, "momentum", "Invalid momentum value")
    dampening = _number(cls, "dampening", o["dampening"])
    wd = _decay(cls, o)
    nesterov = _flag(cls, o, "nesterov")
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError(
            f"`{cls}`: `nesterov=True` needs `momentum` > 0 and `dampening` 0, got momentum={momentum!r}, "
            f"dampening={dampening!r} (torch: Nesterov momentum requires a momentum and zero dampening)."
        )
    return _around(lr, _momentum.sgd_rule(momentum, dampening, nesterov=nesterov), o, wd, cls)


def _adam_like(cls: str, lr: Any, o: dict[str, Any]) -> _protocol.GradientTransformation:
    b1, b2 = _betas(cls, o)
    wd, eps = _common(cls, o)
    return _around(lr, _adam.adam_rule(b1, b2, eps, amsgrad=_flag(cls, o, "amsgrad")), o, wd, cls)


@_factory.api
def torch_adam(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.Adam: `(m / bc1) / (sqrt(v) / sqrt(bc2) + eps)`; L2 decay, or decoupled (AdamW's)."""
    return _adam_like("torch.optim.Adam", lr, o)


@_factory.api
def torch_adamw(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.AdamW: torch's Adam with the decoupled decay `param *= 1 - lr wd` (default wd 1e-2)."""
    return _adam_like("torch.optim.AdamW", lr, {**o, "decoupled_weight_decay": True})


@_factory.api
def torch_radam(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.RAdam: rectified where rho_t > 5; eps is added to `sqrt(v)`, then `sqrt(bc2)` scales."""
    cls = "torch.optim.RAdam"
    b1, b2 = _betas(cls, o)
    wd, eps = _common(cls, o)
    return _around(lr, _radam.radam_rule(b1, b2, eps), o, wd, cls)


@_factory.api
def torch_nadam(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.NAdam: mu_t = b1 (1 - 0.5 * 0.96 ** (t momentum_decay)) and its running product."""
    cls = "torch.optim.NAdam"
    b1, b2 = _betas(cls, o)
    wd, eps = _common(cls, o)
    psi = _at_least_zero(cls, o, "momentum_decay", "Invalid momentum_decay value")
    return _around(lr, _nadam.nadam_rule(b1, b2, eps, psi), o, wd, cls)


@_factory.api
def torch_adamax(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.Adamax: `(m / bc1) / max(b2 u, |g| + eps)`."""
    cls = "torch.optim.Adamax"
    b1, b2 = _betas(cls, o)
    wd, eps = _common(cls, o)
    return _around(lr, _adamax.adamax_rule(b1, b2, eps), o, wd, cls)


@_factory.api
def torch_adagrad(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.Adagrad: `g / (sqrt(sum) + eps)` at the rate `lr / (1 + (t - 1) lr_decay)`."""
    cls = "torch.optim.Adagrad"
    lr_decay = _at_least_zero(cls, o, "lr_decay", "Invalid lr_decay value")
    init = _at_least_zero(cls, o, "initial_accumulator_value", "Invalid initial_accumulator_value value")
    wd, eps = _common(cls, o)
    return _around(lr, _adagrad.adagrad_rule(lr_decay, init, eps), o, wd, cls)


@_factory.api
def torch_rmsprop(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.RMSprop: `g / (sqrt(square_avg [- grad_avg^2]) + eps)`, squares starting at 0."""
    cls = "torch.optim.RMSprop"
    alpha = _at_least_zero(cls, o, "alpha", "Invalid alpha value")
    momentum = _at_least_zero(cls, o, "momentum", "Invalid momentum value")
    wd, eps = _common(cls, o)
    return _around(
        lr, _rmsprop.rmsprop_rule(alpha, eps, momentum, centered=_flag(cls, o, "centered")), o, wd, cls
    )


@_factory.api
def torch_adadelta(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """torch.optim.Adadelta: `sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g`."""
    cls = "torch.optim.Adadelta"
    rho = _number(cls, "rho", o["rho"])
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"`{cls}`: `rho` must be in [0, 1], got {o['rho']!r} (torch: Invalid rho value).")
    wd, eps = _common(cls, o)
    return _around(lr, _adadelta.adadelta_rule(rho, eps), o, wd, cls)


@_factory.api
def torch_lion(lr: Any, o: dict[str, Any], init_lr: Any = None) -> _protocol.GradientTransformation:
    """RETURNN's Lion: `param *= 1 - lr wd` (wd / init_lr if decoupled), then `-lr sign(b1 m + (1-b1) g)`."""
    cls = "returnn.torch.optim.lion.Lion"
    b1, b2 = _betas(cls, o, closed=True)
    wd = _number(cls, "weight_decay", o["weight_decay"])
    first = _concrete(lr) if init_lr is None else _number(cls, "init_lr", init_lr)
    if first is not None and not first > 0:
        raise ValueError(f"`{cls}`: the constructor's `lr` must be > 0, got {first!r} (Lion: assert lr > 0).")
    if _flag(cls, o, "decoupled_weight_decay") and wd != 0:
        if first is None:
            raise TypeError(
                f"`{cls}`: `decoupled_weight_decay=True` divides `weight_decay` by the rate Lion was "
                f"constructed with; `lr` is traced here, so pass `init_lr=` "
                f"(RETURNN: the config's `learning_rate`)."
            )
        wd = wd / first
    links = [_lion.lion_rule(b1, b2)]
    if wd != 0:  # Lion's step weight decay, `param.mul_(1 - lr wd)`, before its sign step
        links.append(add_decayed_weights(wd))
    return chain(*links, scale_by_learning_rate(lr))


_ADAM = {"betas": _BETAS, "eps": 1e-8, "weight_decay": 0.0}
_FLAGS = {"foreach": None, "maximize": False, "capturable": False, "differentiable": False}

OPTIMIZERS: Mapping[str, TorchOptimizer] = {
    "sgd": TorchOptimizer("SGD", {
        "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False, "maximize": False,
        "foreach": None, "differentiable": False, "fused": None}, torch_sgd),
    "adam": TorchOptimizer("Adam", {
        **_ADAM, "amsgrad": False, **_FLAGS, "fused": None, "decoupled_weight_decay": False}, torch_adam),
    "adamw": TorchOptimizer("AdamW", {
        **_ADAM, "weight_decay": 1e-2, "amsgrad": False, **_FLAGS, "fused": None}, torch_adamw),
    "radam": TorchOptimizer("RAdam", {**_ADAM, "decoupled_weight_decay": False, **_FLAGS}, torch_radam),
    "nadam": TorchOptimizer("NAdam", {
        **_ADAM, "momentum_decay": 4e-3, "decoupled_weight_decay": False, **_FLAGS}, torch_nadam),
    "adamax": TorchOptimizer("Adamax", {**_ADAM, **_FLAGS}, torch_adamax),
    "adagrad": TorchOptimizer("Adagrad", {
        "lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0, "eps": 1e-10, "foreach": None,
        "maximize": False, "differentiable": False, "fused": None}, torch_adagrad),
    "rmsprop": TorchOptimizer("RMSprop", {
        "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0, "centered": False, **_FLAGS},
        torch_rmsprop),
    "adadelta": TorchOptimizer("Adadelta", {"rho": 0.9, "eps": 1e-6, "weight_decay": 0.0, **_FLAGS},
        torch_adadelta),
    "returnn.torch.optim.lion.lion": TorchOptimizer("returnn.torch.optim.lion.Lion", {
        "betas": (0.9, 0.99), "weight_decay": 0.0, "use_triton": None, "decoupled_weight_decay": False},
        torch_lion),
}  # fmt: skip
"""The torch optimizers RETURNN's PyTorch backend can name, keyed by the lowercase class name (RETURNN's own
by their dotted path): each value `opt(lr=..., **torch_kwargs)` returns the optimizer as a transform."""

_NOT_PROVIDED = {  # torch.optim classes without a translation here: gradtx's closest optimizer
    "asgd": ("ASGD", None),
    "lbfgs": ("LBFGS", "gradtx.lbfgs (torch's LBFGS needs a closure that re-evaluates the loss)"),
    "rprop": ("Rprop", "gradtx.rprop"),
    "sparseadam": ("SparseAdam", "gradtx.lazy_adam"),
    "adafactor": ("Adafactor", "gradtx.adafactor"),
    "muon": ("Muon", "gradtx.muon"),
}


def torch_class(name: str) -> TorchOptimizer:
    """The torch optimizer a RETURNN config's `optimizer["class"]` names, as a gradtx factory.

    As RETURNN's `get_optimizer_class`: a torch.optim class name, case-insensitive
    (`"adamw"`, `"AdamW"`), or a dotted path (`"torch.optim.AdamW"`,
    `"returnn.torch.optim.lion.Lion"`).

    Args:
      name: the class name from the config.

    Returns:
      The `TorchOptimizer` (`opt(lr=..., **torch_kwargs) -> GradientTransformation`).

    Raises:
      ReturnnConfigError: for a name that is not a string, an unknown class (with close names), or a
        torch class gradtx does not reproduce (with gradtx's closest optimizer).

    Example:
        >>> import jax.numpy as jnp
        >>> from gradtx.returnn._torch_optim import torch_class
        >>> opt = torch_class("AdamW")(lr=0.1, weight_decay=0.0)
        >>> opt.update(jnp.array([2.0]), opt.init(jnp.zeros(1)), jnp.zeros(1))[0]
        Array([-0.1], dtype=float32)
    """
    if not isinstance(name, str):
        raise ReturnnConfigError(
            f"`optimizer['class']`: gradtx reads the class by its name; got {name!r} of type "
            f"{type(name).__name__}; write the torch class name, e.g. 'adamw'."
        )
    key = name.lower()
    if key.startswith(
        "torch.optim."
    ):  # RETURNN imports the module and takes the class: "torch.optim[.adam].Adam"
        key = key.rsplit(".", 1)[-1]
    if key in OPTIMIZERS:
        return OPTIMIZERS[key]
    if key in _NOT_PROVIDED:
        cls, closest = _NOT_PROVIDED[key]
        instead = (
            f"the closest gradtx optimizer is {closest}, with its own numbers"
            if closest
            else "gradtx has none"
        )
        raise ReturnnConfigError(
            f"`optimizer['class']`: torch.optim.{cls} ({name!r}) is not reproduced with torch's numbers; "
            f"{instead}. "
            f"Choose one of {', '.join(sorted(OPTIMIZERS))}."
        )
    close = difflib.get_close_matches(key, sorted([*OPTIMIZERS, *_NOT_PROVIDED]), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ReturnnConfigError(
        f"`optimizer['class']`: unknown torch optimizer {name!r}; the known ones are "
        f"{', '.join(sorted(OPTIMIZERS))}.{hint}"
    )


__all__ = ["OPTIMIZERS", "TorchOptimizer", "torch_class"]

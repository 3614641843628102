"""The catalogue: one alias per TF / tf.contrib / RETURNN optimizer, each a `chain` of building blocks.

No math lives here: every formula is in a `gradtx.transforms` building block (or a
`gradtx.combinators` wrapper), so an alias reads as the recipe it is. Defaults are TF's
(see `spec/CATALOG.md`). `_tf_train.py` and `_tf_train_proximal.py` hold tf.train's
optimizers, `_contrib_adam.py` and `_contrib.py` tf.contrib.opt's, `_returnn.py` RETURNN's own.
"""

from gradtx.optimizers._contrib import addsign, ggt, lars, momentumw, powersign, reg_adagrad, shampoo
from gradtx.optimizers._contrib_adam import adam_gs, adamax, adamw, lazy_adam, lazy_adam_gs, nadam
from gradtx.optimizers._contrib_optax import sophia
from gradtx.optimizers._galore import galore
from gradtx.optimizers._lbfgs import lbfgs
from gradtx.optimizers._lr_free import cocob, dadapt_adamw, dog, dowg, polyak_sgd, prodigy
from gradtx.optimizers._modern import adabelief, adan, nadamw, radam, yogi
from gradtx.optimizers._modern_adam import (
    acprop,
    adamaxw,
    ademamix,
    adopt,
    optimistic_adam,
    simplified_ademamix,
)
from gradtx.optimizers._modern_more import fromage, madgrad, noisy_sgd, optimistic_gradient_descent
from gradtx.optimizers._modern_per_tensor import adafactor, lamb, muon, novograd, sm3
from gradtx.optimizers._modern_sign import lion, rprop, sign_sgd, signum
from gradtx.optimizers._returnn import amsgrad, grad_variance_scaled, neural_optimizer1, normalized_sgd
from gradtx.optimizers._schedule_free import schedule_free, schedule_free_adamw, schedule_free_sgd
from gradtx.optimizers._tf_train import (
    adadelta,
    adagrad,
    adagrad_da,
    adam,
    gradient_descent,
    momentum,
    rmsprop,
    sgd,
)
from gradtx.optimizers._tf_train_proximal import (
    ftrl,
    proximal_adagrad,
    proximal_gradient_descent,
    proximal_sgd,
)

__all__ = [
    "acprop",
    "adabelief",
    "adadelta",
    "adafactor",
    "adam_gs",
    "adamax",
    "adamaxw",
    "adamw",
    "adan",
    "addsign",
    "ademamix",
    "adopt",
    "amsgrad",
    "cocob",
    "dadapt_adamw",
    "dog",
    "dowg",
    "fromage",
    "galore",
    "ggt",
    "grad_variance_scaled",
    "lamb",
    "lars",
    "lazy_adam",
    "lazy_adam_gs",
    "lbfgs",
    "lion",
    "madgrad",
    "momentumw",
    "muon",
    "nadam",
    "nadamw",
    "neural_optimizer1",
    "noisy_sgd",
    "normalized_sgd",
    "novograd",
    "optimistic_adam",
    "optimistic_gradient_descent",
    "powersign",
    "reg_adagrad",
    "adagrad",
    "adagrad_da",
    "adam",
    "ftrl",
    "gradient_descent",
    "momentum",
    "polyak_sgd",
    "prodigy",
    "proximal_adagrad",
    "proximal_gradient_descent",
    "proximal_sgd",
    "radam",
    "rmsprop",
    "rprop",
    "schedule_free",
    "schedule_free_adamw",
    "schedule_free_sgd",
    "shampoo",
    "sgd",
    "sign_sgd",
    "signum",
    "simplified_ademamix",
    "sm3",
    "sophia",
    "yogi",
]

"""Render the catalogue table of docs/guides/from-tf1.md from what gradtx has and what the tests check.

Usage: `python tools/catalog_table.py` prints the table; `--write` replaces it in
docs/guides/from-tf1.md (between the `catalog:start` / `catalog:end` markers).
tests/test_readme.py fails when the guide's table differs from this output, so each row's
status stays true.

Status of a row:
- "TF parity": the name exists and a test in tests/parity/ calls it (compared with TensorFlow);
- "tested": the name exists and a test outside tests/parity/ calls it;
- "planned (#N)": not there yet; N is the issue that adds it;
- "; not optax's numbers": a name optax also has whose numbers are not optax's (its docstring's first
  line says so); `gradtx.optax_compat` has optax's.
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "guides" / "from-tf1.md"  # the page that holds the table
START, END = "<!-- catalog:start -->", "<!-- catalog:end -->"

# (section, what the row reproduces (a TF1 class, a RETURNN, optax or PyTorch optimizer), gradtx path,
# issue that adds it)
ROWS = [
    ("Optimizers", "GradientDescent", "sgd", 2),
    ("Optimizers", "Momentum", "momentum", 2),
    ("Optimizers", "Adagrad", "adagrad", 3),
    ("Optimizers", "AdagradDA", "adagrad_da", 3),
    ("Optimizers", "Adadelta", "adadelta", 3),
    ("Optimizers", "Adam", "adam", 3),
    ("Optimizers", "Ftrl / FtrlV2", "ftrl", 3),
    ("Optimizers", "ProximalAdagrad", "proximal_adagrad", 3),
    ("Optimizers", "ProximalGradientDescent", "proximal_sgd", 3),
    ("Optimizers", "RMSProp", "rmsprop", 3),
    ("Optimizers", "AdamGS", "adam_gs", 4),
    ("Optimizers", "AdaMax", "adamax", 4),
    ("Optimizers", "AdamW", "adamw", 4),
    ("Optimizers", "AddSign", "addsign", 4),
    ("Optimizers", "AMSGrad (RETURNN)", "amsgrad", 4),
    ("Optimizers", "CustomAdam / CustomGradientDescent (RETURNN)", "per_leaf", 4),
    ("Optimizers", "GGT", "ggt", 4),
    ("Optimizers", "GradVarianceScaled (RETURNN)", "grad_variance_scaled", 4),
    ("Optimizers", "LARS", "lars", 4),
    ("Optimizers", "LazyAdam", "lazy_adam", 4),
    ("Optimizers", "LazyAdamGS", "lazy_adam_gs", 4),
    ("Optimizers", "MomentumW", "momentumw", 4),
    ("Optimizers", "MovingAverage", "moving_average", 4),
    ("Optimizers", "Nadam (contrib)", "nadam", 4),
    ("Optimizers", "NeuralOptimizer1 (RETURNN)", "neural_optimizer1", 4),
    ("Optimizers", "NormalizedSGD (RETURNN)", "normalized_sgd", 4),
    ("Optimizers", "PowerSign", "powersign", 4),
    ("Optimizers", "RegAdagrad", "reg_adagrad", 4),
    ("Optimizers", "Shampoo", "shampoo", 4),
    ("Optimizers", "VariableClipping", "clip_variables", 4),
    ("Beyond TF1", "Adafactor (optax.adafactor)", "adafactor", 15),
    ("Beyond TF1", "LAMB (optax.lamb)", "lamb", 15),
    ("Beyond TF1", "NovoGrad (optax.novograd)", "novograd", 15),
    ("Beyond TF1", "SM3 (optax.sm3)", "sm3", 15),
    ("Beyond TF1", "Muon (optax.contrib.muon)", "muon", 15),
    ("Beyond TF1", "Schedule-free AdamW (optax.contrib.schedule_free_adamw)", "schedule_free_adamw", 15),
    ("Beyond TF1", "Schedule-free SGD (optax.contrib.schedule_free_sgd)", "schedule_free_sgd", 15),
    ("Beyond TF1", "Schedule-free evaluation point x", "schedule_free_eval_params", 15),
    ("Beyond TF1", "Lion (optax.lion)", "lion", 15),
    ("Beyond TF1", "RAdam (optax.radam)", "radam", 15),
    ("Beyond TF1", "AdaBelief (optax.adabelief)", "adabelief", 15),
    ("Beyond TF1", "Yogi (optax.yogi)", "yogi", 15),
    ("Beyond TF1", "Adan (optax.adan)", "adan", 15),
    ("Beyond TF1", "NAdamW (optax.nadamw)", "nadamw", 15),
    ("Beyond TF1", "signSGD (optax.sign_sgd)", "sign_sgd", 15),
    ("Beyond TF1", "Signum (optax.signum)", "signum", 15),
    ("Beyond TF1", "Rprop (optax.rprop)", "rprop", 15),
    ("Beyond TF1", "SAM (optax.contrib.sam)", "sam", 24),
    ("Beyond TF1", "Sophia (optax.contrib.sophia)", "sophia", 24),
    ("Beyond TF1", "MoMo (optax.contrib.momo)", "momo", 24),
    ("Beyond TF1", "MoMo-Adam (optax.contrib.momo_adam)", "momo_adam", 24),
    ("Beyond TF1", "L-BFGS (optax.lbfgs, zoom / backtracking line search)", "lbfgs", 24),
    ("Beyond TF1", "Prodigy (optax.contrib.prodigy)", "prodigy", 24),
    ("Beyond TF1", "D-Adaptation AdamW (optax.contrib.dadapt_adamw)", "dadapt_adamw", 24),
    ("Beyond TF1", "Mechanic (optax.contrib.mechanize)", "mechanize", 24),
    ("Beyond TF1", "COCOB (optax.contrib.cocob)", "cocob", 24),
    ("Beyond TF1", "DoG (optax.contrib.dog)", "dog", 24),
    ("Beyond TF1", "DoWG (optax.contrib.dowg)", "dowg", 24),
    ("Beyond TF1", "Polyak SGD (optax.polyak_sgd)", "polyak_sgd", 24),
    ("Beyond TF1", "AdEMAMix (optax.contrib.ademamix)", "ademamix", 24),
    ("Beyond TF1", "Simplified AdEMAMix (optax.contrib.simplified_ademamix)", "simplified_ademamix", 24),
    ("Beyond TF1", "ADOPT (optax.contrib.adopt)", "adopt", 24),
    ("Beyond TF1", "MADGRAD (optax.contrib.madgrad)", "madgrad", 24),
    ("Beyond TF1", "ACProp (optax.contrib.acprop)", "acprop", 24),
    ("Beyond TF1", "Fromage (optax.fromage)", "fromage", 24),
    (
        "Beyond TF1",
        "Optimistic gradient descent (optax.optimistic_gradient_descent)",
        "optimistic_gradient_descent",
        24,
    ),
    ("Beyond TF1", "Optimistic Adam (optax.optimistic_adam_v2)", "optimistic_adam", 24),
    ("Beyond TF1", "AdaMaxW (optax.adamaxw)", "adamaxw", 24),
    ("Beyond TF1", "Noisy SGD (optax.noisy_sgd)", "noisy_sgd", 24),
    ("Beyond TF1", "GaLore (optax.contrib.galore)", "galore", 24),
    ("Beyond TF1", "Reduce on plateau (optax.contrib.reduce_on_plateau)", "reduce_on_plateau", 24),
    (
        "Beyond TF1",
        "Loss scaling (tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer)",
        "loss_scaled",
        24,
    ),
    ("Beyond optax", "SOAP (pytorch_optimizer.SOAP)", "soap", 37),
    ("Beyond optax", "PSGD Kron (pytorch_optimizer.Kron, psgd-jax)", "psgd_kron", 37),
    ("Beyond optax", "AdaHessian (pytorch_optimizer.AdaHessian)", "adahessian", 37),
    ("Beyond optax", "Sophia-H (pytorch_optimizer.SophiaH)", "sophia_h", 37),
    ("Beyond optax", "Hutchinson's Hessian-diagonal estimate", "hutchinson_diag_hessian", 37),
    ("Beyond optax", "NorMuon (pytorch_optimizer.NorMuon)", "normuon", 37),
    ("Beyond optax", "AdaMuon (pytorch_optimizer.AdaMuon)", "adamuon", 37),
    ("Beyond optax", "MuonClip (pytorch_optimizer.MuonClip)", "muon_clip", 37),
    ("Beyond optax", "QK-clip (MuonClip's)", "qk_clip", 37),
    ("Beyond optax", "SCION (pytorch_optimizer.SCION)", "scion", 37),
    ("Beyond optax", "SCION-light (pytorch_optimizer.SCIONLight)", "scion_light", 37),
    ("Beyond optax", "MARS (pytorch_optimizer.MARS)", "mars", 37),
    ("Beyond optax", "Adam-mini (pytorch_optimizer.AdamMini)", "adam_mini", 37),
    ("Beyond optax", "CAME (pytorch_optimizer.CAME)", "came", 37),
    ("Beyond optax", "APOLLO (pytorch_optimizer.APOLLO)", "apollo", 37),
    (
        "Beyond optax",
        "Cautious updates, C-AdamW / C-Lion (pytorch_optimizer's cautious=True)",
        "cautious",
        37,
    ),
    ("Beyond optax", "StableAdamW (pytorch_optimizer.StableAdamW)", "stable_adamw", 37),
    ("Beyond optax", "LaProp (pytorch_optimizer.LaProp)", "laprop", 37),
    ("Beyond optax", "Grams (pytorch_optimizer.Grams)", "grams", 37),
    ("Beyond optax", "FAdam (pytorch_optimizer.FAdam)", "fadam", 37),
    ("Beyond optax", "Tiger (pytorch_optimizer.Tiger)", "tiger", 37),
    ("Beyond optax", "SPAM (pytorch_optimizer.SPAM)", "spam", 37),
    ("Beyond optax", "StableSPAM (pytorch_optimizer.StableSPAM)", "stable_spam", 37),
    ("Beyond optax", "Schedule-free RAdam (pytorch_optimizer.ScheduleFreeRAdam)", "schedule_free_radam", 37),
    (
        "Beyond optax",
        "Warmup-stable-decay schedule (pytorch_optimizer.get_wsd_schedule)",
        "schedules.warmup_stable_decay_schedule",
        37,
    ),
    ("Distributed", "CrossShardOptimizer", "parallel.cross_shard", 6),
    ("Distributed", "TowerOptimizer", "parallel.tower_reduce", 6),
    ("Distributed", "SyncReplicas", "parallel.sync_replicas", 6),
    ("Distributed", "ModelAverage", "parallel.model_average", 6),
    ("Distributed", "ElasticAverage", "parallel.elastic_average", 6),
    ("Distributed", "AGN", "parallel.agn", 6),
    ("Distributed", "DropStaleGradient", "parallel.drop_stale_gradients", 6),
    ("Distributed", "ZeRO-1 (not in TF1)", "parallel.sharded_state", 6),
    ("Building blocks and combinators", "(composition)", "chain", 2),
    ("Building blocks and combinators", "(composition)", "named_chain", 2),
    ("Building blocks and combinators", "(neutral element)", "identity", 2),
    ("Building blocks and combinators", "(function of the updates)", "stateless", 2),
    ("Building blocks and combinators", "(scaling)", "scale", 2),
    ("Building blocks and combinators", "(learning rate)", "scale_by_learning_rate", 2),
    ("Building blocks and combinators", "(schedule)", "scale_by_schedule", 2),
    ("Building blocks and combinators", "ApplyMomentum kernel", "trace", 2),
    ("Building blocks and combinators", "multi_transform", "partition", 5),
    ("Building blocks and combinators", "(masking)", "masked", 5),
    ("Building blocks and combinators", "(freezing)", "freeze", 5),
    ("Building blocks and combinators", "(hyperparameters as state)", "inject_hyperparams", 5),
    ("Building blocks and combinators", "(gradient accumulation)", "accumulate_gradients", 5),
    ("Building blocks and combinators", "(skip non-finite steps)", "apply_if_finite", 5),
    ("Building blocks and combinators", "tf.clip_by_value", "clip", 5),
    ("Building blocks and combinators", "tf.clip_by_norm", "clip_by_norm", 5),
    ("Building blocks and combinators", "tf.clip_by_global_norm", "clip_by_global_norm", 5),
    ("Building blocks and combinators", "optimize_loss clip_gradients (callable)", "transform_gradients", 5),
    ("Building blocks and combinators", "optimize_loss gradient_noise_scale", "add_noise", 5),
    ("Building blocks and combinators", "optimize_loss gradient_multipliers", "scale_gradients", 5),
    ("Building blocks and combinators", "(weight decay)", "add_decayed_weights", 5),
    ("Building blocks and combinators", "Lookahead (optax.lookahead)", "lookahead", 14),
    ("Building blocks and combinators", "(slow weights of lookahead)", "slow_params", 14),
    ("Building blocks and combinators", "optax.conditionally_transform", "conditionally_transform", 14),
    ("Building blocks and combinators", "optax.conditionally_mask", "conditionally_mask", 14),
    ("Building blocks and combinators", "optax.set_to_zero", "set_to_zero", 14),
    ("Building blocks and combinators", "optax.zero_nans", "zero_nans", 14),
    ("Building blocks and combinators", "optax.keep_params_nonnegative", "keep_params_nonnegative", 14),
    ("Building blocks and combinators", "tf.linalg.global_norm", "global_norm", 14),
    ("Building blocks and combinators", "optax.clip_by_block_rms", "clip_by_block_rms", 14),
    ("Building blocks and combinators", "optax.ema (EMA of the updates)", "ema", 14),
    ("Building blocks and combinators", "AGC (optax.adaptive_grad_clip)", "adaptive_grad_clip", 14),
    (
        "Building blocks and combinators",
        "DP-SGD clipping (optax.per_example_global_norm_clip)",
        "per_example_global_norm_clip",
        14,
    ),
    (
        "Building blocks and combinators",
        "DP-SGD aggregation (optax.contrib.differentially_private_aggregate)",
        "differentially_private_aggregate",
        14,
    ),
    ("Training helpers", "optimize_loss", "optimize_loss", 5),
    ("Training helpers", "Optimizer.minimize", "minimize", 5),
    ("Training helpers", "Optimizer.compute_gradients", "compute_gradients", 5),
    ("Training helpers", "Optimizer.apply_gradients", "apply_gradients", 5),
    ("Training helpers", "Optimizer.get_slot / get_slot_names", "get_slot", 5),
    ("Training helpers", "(registry)", "get", 2),
    ("Training helpers", "RETURNN optimizer config", "from_config", 5),
    (
        "Training helpers",
        "RETURNN training config (TF or PyTorch backend, rate control)",
        "from_returnn_config",
        26,
    ),
    ("Sparse", "IndexedSlices", "sparse.RowSparse", 3),
    ("Schedules", "exponential_decay", "schedules.exponential_decay", 3),
    ("Schedules", "piecewise_constant", "schedules.piecewise_constant", 3),
    ("Schedules", "polynomial_decay", "schedules.polynomial_decay", 3),
    ("Schedules", "inverse_time_decay", "schedules.inverse_time_decay", 3),
    ("Schedules", "natural_exp_decay", "schedules.natural_exp_decay", 3),
    ("Schedules", "cosine_decay", "schedules.cosine_decay", 3),
    ("Schedules", "cosine_decay_restarts", "schedules.cosine_decay_restarts", 3),
    ("Schedules", "linear_cosine_decay", "schedules.linear_cosine_decay", 3),
    ("Schedules", "noisy_linear_cosine_decay", "schedules.noisy_linear_cosine_decay", 3),
    ("Schedules", "(warmup)", "schedules.linear_warmup", 3),
    ("Schedules", "sign_decay: linear", "schedules.linear_sign_decay", 4),
    ("Schedules", "sign_decay: cosine", "schedules.cosine_sign_decay", 4),
    ("Schedules", "sign_decay: restart", "schedules.restart_sign_decay", 4),
    ("Schedules", "optax.join_schedules", "schedules.join_schedules", 14),
    ("Schedules", "optax.piecewise_interpolate_schedule", "schedules.piecewise_interpolate", 14),
    ("Schedules", "optax.warmup_cosine_decay_schedule", "schedules.warmup_cosine_decay", 14),
    ("Schedules", "optax.warmup_exponential_decay_schedule", "schedules.warmup_exponential_decay", 14),
    ("Schedules", "optax.cosine_onecycle_schedule", "schedules.cosine_onecycle", 14),
    ("Schedules", "optax.linear_onecycle_schedule", "schedules.linear_onecycle", 14),
    ("Schedules", "optax.sgdr_schedule", "schedules.sgdr", 14),
]


def _exists(path: str) -> bool:
    import gradtx

    obj = gradtx
    for part in path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _called_in(path: str, files: list[pathlib.Path]) -> bool:
    """A test calls it: `gradtx.name(` for top-level names; for `module.name`, a file that
    mentions the module and names `name` (tests often write `schedules.x(` or pass `S.x` to a table)."""
    if "." not in path:
        pattern = re.compile(r"gradtx\." + re.escape(path) + r"\(")
        return any(pattern.search(f.read_text()) for f in files)
    module, name = path.rsplit(".", 1)
    pattern = re.compile(r"\b" + re.escape(name) + r"\b")
    return any(module in (text := f.read_text()) and pattern.search(text) for f in files)


def status(path: str, issue: int) -> str:
    if not _exists(path):
        return f"planned (#{issue})"
    tests = sorted((ROOT / "tests").rglob("test_*.py"))
    parity = [f for f in tests if "parity" in f.parts]
    if _called_in(path, parity):
        return "TF parity"
    if _called_in(path, [f for f in tests if f not in parity]):
        return "tested"
    return "available, untested"


def optax_note(path: str) -> str:
    """Where a name's numbers are not optax's namesake's, as its docstring's first line says (tested by
    tests/optax_compat/test_tf_names.py): a pointer to `gradtx.optax_compat`'s."""
    import inspect

    import gradtx
    import gradtx.optax_compat

    if "." in path or not _exists(path) or not hasattr(gradtx.optax_compat, path):
        return ""
    first = (inspect.getdoc(getattr(gradtx, path)) or "").splitlines()[0]
    return f"; not optax's numbers: `optax_compat.{path}` has those" if f"not `optax.{path}`" in first else ""


def render() -> str:
    lines = []
    section = None
    for sec, source, path, issue in ROWS:
        if sec != section:
            if section is not None:
                lines.append("")
            lines += [f"**{sec}**", "", "| reproduces | gradtx | status |", "|---|---|---|"]
            section = sec
        lines.append(f"| {source} | `gradtx.{path}` | {status(path, issue)}{optax_note(path)} |")
    return "\n".join(lines)


def with_table(text: str) -> str:
    """`text` with the table between its markers replaced by the current one."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{render()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    if "--write" in argv:
        TARGET.write_text(with_table(TARGET.read_text()))
    else:
        print(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

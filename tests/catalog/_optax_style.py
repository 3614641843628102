"""The wrappers and edits optax users reach for (lookahead, conditional steps, zeroing, AGC): optax's numbers.

`per_example_global_norm_clip` and `differentially_private_aggregate` are not registered: their
gradients carry a leading batch axis, which the contract suite's param-shaped gradients do not.
"""

from __future__ import annotations

from gradtx import combinators, optimizers
from tests.catalog._entries import transform, wrapper


def _even_steps(count):
    """An example condition: the inner transform runs at counts 0, 2, 4, ..."""
    return count % 2 == 0


transform("set_to_zero", combinators.set_to_zero, nonfinite="ignored")
transform(
    "zero_nans",
    combinators.zero_nans,
    nonfinite={"nan": "absorbed", "inf": "propagates", "-inf": "propagates"},
)
# Densified first: duplicate rows are summed before the bound applies. An update of -inf is raised to
# -param (the param lands at 0), one of +inf is not bounded.
transform(
    "keep_params_nonnegative",
    combinators.keep_params_nonnegative,
    sparse="dense",
    nonfinite={"nan": "propagates", "inf": "propagates", "-inf": "absorbed"},
)
transform(
    "adaptive_grad_clip", combinators.adaptive_grad_clip, {"clipping": 0.1, "eps": 1e-3}, sparse="dense"
)
# tx's own sparse rule, then dense updates (a synchronisation moves every row); with sgd that is the dense
# rule (tests/combinators/test_lookahead.py checks a lazy tx).
wrapper(
    "lookahead",
    combinators.lookahead,
    {"tx": optimizers.sgd(0.1), "sync_period": 2, "slow_step_size": 0.5},
    sparse="dense",
)
wrapper(
    "conditionally_transform",
    combinators.conditionally_transform,
    {"inner": optimizers.momentum(0.05, 0.9), "should_transform_fn": _even_steps},
)
wrapper(
    "conditionally_mask",
    combinators.conditionally_mask,
    {"inner": optimizers.momentum(0.05, 0.9), "should_transform_fn": _even_steps},
)

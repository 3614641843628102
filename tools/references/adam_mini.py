"""References of gradtx/_algorithms/adam_mini.py: pytorch-optimizer's `AdamMini`.

`AdamMini` takes a torch model and picks each parameter's blocks by its name; each case builds a
`torch.nn.Module` holding the problem's three leaves under the names of `NAMES[label]`, chosen so that
they fall in different blocks. gradtx picks them by key path: the torch name `a.b.c` is the leaf at
`a/b/c`. `run` records the names (`<label>/names/<leaf>`, UTF-8 bytes) so that the test builds that tree.
"""

from __future__ import annotations

from tools.references import Case

NAMES = {
    # per element, whole leaf (decays), whole leaf (a norm: no decay)
    "default": {"conv": "embed_tokens.weight", "matrix": "mlp.weight", "vector": "ln_f.weight"},
    # per element (the output layer), per head (num_embeds**2 / num_heads = 8), whole
    "lr": {"conv": "embed_tokens.weight", "matrix": "mlp.weight", "vector": "ln_f.weight"},
    "heads": {"conv": "lm_head.weight", "matrix": "layers.0.self_attn.q_proj.weight", "vector": "mlp.bias"},
    # whole, per query group and projection (2 groups x 4), per element
    "qkv": {"conv": "h.0.mlp.c_fc.weight", "matrix": "h.0.attn.qkv.weight", "vector": "wte.weight"},
}


def _model(names):
    def build(cls, named, kwargs):
        import torch

        root = torch.nn.Module()
        for leaf, name in names.items():
            *path, last = name.split(".")
            module = root
            for part in path:
                if not hasattr(module, part):
                    module.add_module(part, torch.nn.Module())
                module = getattr(module, part)
            module.register_parameter(last, named[leaf])
        return cls(root, **kwargs)

    return build


CASES = [
    Case("default", "pytorch_optimizer.AdamMini", {}, build=_model(NAMES["default"])),
    Case("lr", "pytorch_optimizer.AdamMini", {"lr": 0.05}, build=_model(NAMES["default"])),
    Case(
        "heads",
        "pytorch_optimizer.AdamMini",
        {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.05, "num_embeds": 4, "num_heads": 2},
        build=_model(NAMES["heads"]),
    ),
    Case(
        "qkv",
        "pytorch_optimizer.AdamMini",
        {
            "lr": 0.02,
            "num_embeds": 8,
            "num_heads": 4,
            "num_query_groups": 2,
            "eps": 1e-6,
            "weight_decay": 0.0,
        },
        build=_model(NAMES["qkv"]),
    ),
]


def run(case, prob):
    """The default torch run, and the parameters' names."""
    import numpy as np

    from tools.record_references import _run_torch

    out = _run_torch(case, prob)
    for leaf, name in NAMES[case.label].items():
        out[f"{case.label}/names/{leaf}"] = np.frombuffer(name.encode(), np.uint8)  # numeric, for --check
    return out

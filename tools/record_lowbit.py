"""Record torchao's blockwise quantization of optimizer state into tests/lowbit/torchao.npz.

torchao's low-bit optimizers (`torchao.optim.AdamW8bit`, `AdamW4bit`) store each moment as codes and
per-block scales: `scale_tensor` (blocks of the flattened tensor, the block's largest magnitude at least
1e-12), `quantize_8bit_with_qmap` / `quantize_4bit_with_qmap` (the nearest entry of the map; 4-bit codes
packed two to a byte) and `dequant_with_qmap`. This script runs them (PyTorch, CPU) on a few inputs -- random
moments, zeros, exact map entries and the midpoints between them -- and saves the maps, the inputs, the
codes, the scales and the dequantized values; tests/test_lowbit.py compares gradtx's quantization with them
bit for bit, so `make test` needs neither torch nor torchao.

    .venv-ref/bin/python tools/record_lowbit.py          # write the file
    .venv-ref/bin/python tools/record_lowbit.py --check  # re-run, compare with the committed file
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "lowbit" / "torchao.npz"

# (name, bits, signed, block size): torchao's formats of first (signed) and second (unsigned) moments
FORMATS = (
    ("8bit_signed", 8, True, 256),
    ("8bit_unsigned", 8, False, 256),
    ("4bit_signed", 4, True, 128),
    ("4bit_unsigned", 4, False, 128),
)


def _inputs(qmap: np.ndarray, signed: bool, block_size: int) -> dict[str, np.ndarray]:
    """Inputs of 4 x `block_size` elements (several blocks, flattened as torchao does)."""
    rng = np.random.default_rng(0)
    n = 4 * block_size
    normal = rng.standard_normal(n).astype(np.float32) * np.float32(1e-3)
    wide = (rng.standard_normal(n) * np.exp(rng.uniform(-12, 0, n))).astype(np.float32)
    mids = ((qmap[:-1] + qmap[1:]) / np.float32(2)).astype(np.float32)  # ties: halfway between two entries
    ties = np.resize(np.concatenate([qmap, mids, np.nextafter(mids, np.float32(2))]), n).astype(np.float32)
    ties[::block_size] = 1.0  # each block's scale is 1: the values are compared with the map as they are
    zeros = np.zeros(n, np.float32)
    zeros[block_size:] = normal[block_size:]  # the first block all zero
    cases = {"normal": normal, "wide": wide, "ties": ties, "zero_block": zeros}
    if not signed:
        cases = {k: np.abs(v) for k, v in cases.items()}
    return cases


def record() -> dict[str, np.ndarray]:
    import torch
    from torchao.optim import quant_utils, subclass_4bit, subclass_8bit

    maps = {
        "8bit_signed": subclass_8bit.get_qmap_signed(),
        "8bit_unsigned": subclass_8bit.get_qmap_unsigned(),
        "4bit_signed": subclass_4bit.get_qmap_signed(),
        "4bit_unsigned": subclass_4bit.get_qmap_unsigned(),
    }
    maps = {k: np.asarray(v, np.float32) for k, v in maps.items()}
    out: dict[str, np.ndarray] = {}
    for name, bits, signed, block_size in FORMATS:
        qmap = maps[name]
        out[f"{name}/map"] = qmap
        table = torch.tensor(qmap)
        for case, x in _inputs(qmap, signed, block_size).items():
            scaled, scale = quant_utils.scale_tensor(torch.tensor(x), block_size)
            if bits == 8:
                codes = quant_utils.quantize_8bit_with_qmap(scaled, table)
                values = quant_utils.dequant_with_qmap(codes, table, scale)
            else:
                codes = quant_utils.quantize_4bit_with_qmap(scaled, table)
                values = quant_utils.dequant_with_qmap(codes, table, scale)
                codes = (codes[::2] << 4) | codes[1::2]  # torchao's packing (OptimState4bit's copy_)
            key = f"{name}/{case}"
            out[f"{key}/input"] = x
            out[f"{key}/codes"] = codes.numpy()
            out[f"{key}/scales"] = scale.numpy()
            out[f"{key}/values"] = values.numpy()
    out.update(trajectories())
    import torchao

    out["versions"] = np.asarray([f"torch {torch.__version__}", f"torchao {torchao.__version__}"])
    return out


TRAJECTORY_SHAPES = {"conv": (8, 8, 8, 16), "matrix": (64, 256), "vector": (300,)}
"""torchao quantizes a moment of at least 4,096 elements (a multiple of the block): the matrix and the 4-D
leaf; the vector's moments stay float32."""
TRAJECTORY_STEPS = 20
ADAMW = {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2}


def trajectories() -> dict[str, np.ndarray]:
    """torchao's `AdamW8bit` and `AdamW4bit` (`ADAMW`) for `TRAJECTORY_STEPS` steps on the loss
    `sum(0.5 c p^2 + 0.025 p^4 + n_t p)` (gradients that depend on the params): the gradients each step saw
    and the params after it, per optimizer, under `adamw{bits}/...`."""
    import torch
    from torchao.optim import AdamW4bit, AdamW8bit

    rng = np.random.default_rng(0)
    init = {k: (0.5 * rng.standard_normal(s)).astype(np.float32) for k, s in TRAJECTORY_SHAPES.items()}
    curv = {k: rng.uniform(0.5, 2.0, s).astype(np.float32) for k, s in TRAJECTORY_SHAPES.items()}
    noise = [
        {k: (0.1 * rng.standard_normal(s)).astype(np.float32) for k, s in TRAJECTORY_SHAPES.items()}
        for _ in range(TRAJECTORY_STEPS)
    ]
    out: dict[str, np.ndarray] = {f"adamw/init/{k}": v for k, v in init.items()}
    for bits, cls in ((8, AdamW8bit), (4, AdamW4bit)):
        params = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
        opt = cls(list(params.values()), **ADAMW)
        seen: dict[str, list[np.ndarray]] = {k: [] for k in params}
        after: dict[str, list[np.ndarray]] = {k: [] for k in params}
        for t in range(TRAJECTORY_STEPS):
            opt.zero_grad()
            loss = sum(
                (0.5 * torch.tensor(curv[k]) * p**2 + 0.025 * p**4 + torch.tensor(noise[t][k]) * p).sum()
                for k, p in params.items()
            )
            loss.backward()
            for k, p in params.items():
                seen[k].append(p.grad.numpy().copy())
            opt.step()
            for k, p in params.items():
                after[k].append(p.detach().numpy().copy())
        for k in params:
            out[f"adamw{bits}/grads/{k}"] = np.stack(seen[k])
            out[f"adamw{bits}/params/{k}"] = np.stack(after[k])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead")
    args = parser.parse_args(argv)
    got = record()
    if not args.check:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(OUT, **got)
        print(f"wrote {OUT.relative_to(OUT.parents[2])} ({len(got)} arrays)")
        return 0
    with np.load(OUT) as committed:
        differ = [k for k in got if k != "versions" and not np.array_equal(got[k], committed[k])]
    for k in differ:
        print(f"differs: {k}")
    print("torchao's quantization: " + ("differs from the committed file" if differ else "as committed"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

"""How the benchmarks measure: compile time, interleaved step times, peak memory, memory bandwidth."""

from __future__ import annotations

import dataclasses
import math
import re
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass
class Contender:
    """One way of running a workload's step.

    Attributes:
      name: the row label ("gradtx", "optax", "jnp", ...).
      init: `params -> state`.
      step: `(params, state, grads) -> (params, state)`, pure; jitted with params and state donated.
      params: this contender's parameters, when not the workload's (e.g. packed ones).
      grads: this contender's gradients, when not the workload's (e.g. a dense copy of a sparse one).
      bytes: the bytes its math must touch, when not the workload's (e.g. a bfloat16 slot).
      note: what it is, for the table.
      same_math: whether it computes the workload's update (False for cost probes and
        deliberately different variants; the test of this package checks the others agree).
      own_memory: whether it keeps more than params + grads + state by design (a workload
        target judges its peak memory instead of the suite-wide goal).
    """

    name: str
    init: Callable[[Any], Any]
    step: Callable[[Any, Any, Any], tuple[Any, Any]]
    params: Any = None
    grads: Any = None
    bytes: int | None = None
    note: str = ""
    same_math: bool = True
    own_memory: bool = False


def nbytes(tree: Any) -> int:
    """Bytes held by the arrays of `tree` (a typed PRNG key by its key data)."""
    return int(sum(_itemsize(x.dtype) * math.prod(x.shape) for x in jax.tree.leaves(tree)))


def _own_buffer(x: Any) -> Any:
    """`x` copied into a buffer of its own (COCOB's state starts as the params: donated twice otherwise)."""
    if isinstance(x, jax.Array) and not jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jnp.copy(x)
    return x


def _itemsize(dtype: Any) -> int:
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return int(jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct((), dtype)).size) * 4  # uint32s
    return np.dtype(dtype).itemsize


class Runner:
    """A compiled, donated step of one contender, with its own params and state."""

    def __init__(self, contender: Contender, params: Any, grads: Any):
        self.contender = contender
        self.grads = contender.grads if contender.grads is not None else grads
        self.params = jax.tree.map(jnp.copy, contender.params if contender.params is not None else params)
        self.state = jax.tree.map(_own_buffer, contender.init(self.params))  # a state may hold the params
        jax.block_until_ready((self.params, self.state))
        self.live_bytes = nbytes(self.params) + nbytes(self.grads) + nbytes(self.state)
        start = time.perf_counter()
        jitted = jax.jit(contender.step, donate_argnums=(0, 1))
        self.compiled = jitted.lower(self.params, self.state, self.grads).compile()
        self.run(1)
        self.compile_s = time.perf_counter() - start  # first call: trace, lower, compile, run once
        self.kernels = count_kernels(self.compiled.as_text())
        stats = self.compiled.memory_analysis()
        if stats is None:
            self.peak_bytes = self.temp_bytes = None
        else:
            self.temp_bytes = int(stats.temp_size_in_bytes)
            self.peak_bytes = int(
                stats.argument_size_in_bytes
                + stats.output_size_in_bytes
                - stats.alias_size_in_bytes
                + stats.temp_size_in_bytes
            )

    def run(self, steps: int) -> float:
        """Seconds for `steps` steps, dispatched back to back and waited for at the end."""
        params, state, grads = self.params, self.state, self.grads
        start = time.perf_counter()
        for _ in range(steps):
            params, state = self.compiled(params, state, grads)
        jax.block_until_ready((params, state))
        elapsed = time.perf_counter() - start
        self.params, self.state = params, state
        return elapsed


_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def count_kernels(hlo: str) -> int:
    """Instructions of the compiled step's entry computation that run (fusions, copies, sorts...): its
    kernels."""
    entry = hlo[hlo.index("\nENTRY") :]
    entry = entry[: entry.index("\n}")]
    ops = re.findall(r"^\s*(?:ROOT )?%\S+ = (?:\([^=]*?\)|\S+) ([\w-]+)\(", entry, flags=re.M)
    return sum(op not in _FREE for op in ops)


def interleaved(runners: list[Runner], rounds: int, min_round_s: float) -> dict[str, list[float]]:
    """Seconds per step of each runner: `rounds` rounds, each running every runner in turn.

    Each runner runs enough steps per round to last `min_round_s` (so dispatch overlaps
    on asynchronous backends and timer noise stays small); the order rotates every round.
    """
    steps = {}
    for r in runners:
        one = min(r.run(1) for _ in range(3))
        steps[r.contender.name] = max(1, math.ceil(min_round_s / max(one, 1e-6)))
    samples: dict[str, list[float]] = {r.contender.name: [] for r in runners}
    for i in range(rounds):
        for r in runners[i % len(runners) :] + runners[: i % len(runners)]:
            k = steps[r.contender.name]
            samples[r.contender.name].append(r.run(k) / k)
    return samples


def right_after(first: Runner, second: Runner, repeats: int) -> list[float]:
    """Seconds of one step of `second`, each timed right after one step of `first` (waited for)."""
    times = []
    for _ in range(repeats):
        first.run(1)
        times.append(second.run(1))
    return times


def median_ratio(a: list[float], b: list[float]) -> float:
    """The median over rounds of `a`'s time over `b`'s in the same round (drifts of the machine cancel)."""
    return float(np.median(np.asarray(a) / np.asarray(b)))


def memory_bandwidth(n: int, repeats: int = 10) -> dict[str, float]:
    """Measured memory bandwidth (GB/s) of the device: donated in-place kernels on `n`-element float32 arrays.

    `scale` (`a *= s`, 8 bytes per element) and `triad` (`a += s * b`, 12 bytes per
    element) run in place (the input buffer is donated, as in an optimizer step); the
    best of `repeats` runs of each is reported, and `best` is their maximum.
    """
    scale = jax.jit(lambda a: a * np.float32(0.999), donate_argnums=0)
    triad = jax.jit(lambda a, b: a + np.float32(0.5) * b, donate_argnums=0)
    a, b = jnp.zeros(n, jnp.float32), jnp.ones(n, jnp.float32)
    result = {}
    for name, fn, per_elem in [("scale", lambda a: scale(a), 8), ("triad", lambda a: triad(a, b), 12)]:
        a = fn(a).block_until_ready()
        best = math.inf
        for _ in range(repeats):
            start = time.perf_counter()
            a = fn(a).block_until_ready()
            best = min(best, time.perf_counter() - start)
        result[name] = per_elem * n / best / 1e9
    result["best"] = max(result.values())
    return result

"""Benchmarks of gradtx against optax and hand-written jnp: `make bench` (see run.py; results in
RESULTS.md)."""

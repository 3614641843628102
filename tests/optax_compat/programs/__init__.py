"""Two optax programs, each written once for optax (`*_optax.py`) and once with the one changed line
`import gradtx.optax_compat as optax` (`*_gradtx.py`); tests/optax_compat/test_flax_programs.py runs
both and checks that each pair differs by that line only."""

# Every target sets itself up on a fresh machine: it creates .venv when missing and
# installs what it needs (skipping what is already there).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
# uv (installed into .venv by pip) resolves and installs the extras in seconds where pip takes most of a
# minute; pip does it when uv cannot (uv reads no pip.conf: a private index or a proxy's certificate)
UV     := $(VENV)/bin/uv pip install -q --python $(PY)
PYTEST_ARGS ?= -n 2
# Bytecode is kept (in .venv/pycache, out of the tree) even where the environment sets PYTHONDONTWRITEBYTECODE:
# without it every process -- xdist's workers, the notebooks' kernels, the suite's subprocesses -- compiles
# jax, TensorFlow and gradtx from source again, about a minute of `make test`.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/$(VENV)/pycache

.PHONY: test demo bench lint install clean release floor docs references

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install uv

# the docs extra too: tests/test_api_reference.py reads the docstrings with Sphinx (skipped without it)
$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(UV) -e '.[test,demo,docs]' || $(PIP) install -e '.[test,demo,docs]'
	touch $@

$(VENV)/.installed-lint: pyproject.toml | $(PY)
	$(UV) -e '.[lint]' || $(PIP) install -e '.[lint]'
	touch $@

$(VENV)/.installed-demo: pyproject.toml | $(PY)
	$(UV) -e '.[demo]' || $(PIP) install -e '.[demo]'
	touch $@

$(VENV)/.installed-docs: pyproject.toml | $(PY)
	$(UV) -e '.[test,docs]' || $(PIP) install -e '.[test,docs]'
	touch $@

install: $(VENV)/.installed-test

## make test: the whole test suite (TensorFlow parity tests, doctests and the notebooks included).
test: $(VENV)/.installed-test
	GRADTX_REQUIRE_TF=1 $(PY) -m pytest $(PYTEST_ARGS) --nbmake --nbmake-timeout=180

## make lint: ruff (lint and format) over the code, tests, benchmarks, notebooks; mypy over gradtx/.
lint: $(VENV)/.installed-lint
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

## make demo: train an MLP on the digits dataset with several gradtx optimizers.
demo: $(VENV)/.installed-demo
	$(PY) examples/digits_mlp.py

## make bench: gradtx vs optax vs hand-written jnp on this machine; rewrites benchmarks/RESULTS.md.
bench: $(VENV)/.installed-test
	$(PY) -m benchmarks.run

## make docs: the site (guides, API reference, executed notebooks) into docs/_build/html, warnings
## as errors, then its internal links checked. The HTML is rebuilt from scratch (-E, and no stale
## page survives: each build reports every page's warnings and links); notebooks re-execute only
## when their code changed (their cache is docs/_build/.jupyter_cache).
SPHINXOPTS ?= -E
docs: $(VENV)/.installed-docs
	rm -rf docs/_build/html
	$(PY) -m sphinx -W --keep-going $(SPHINXOPTS) -b html docs docs/_build/html
	$(PY) tools/check_links.py docs/_build/html

## make release: build the sdist and wheel, twine-check them, install the wheel (no extras) into a fresh venv
## and step an optimizer there without any optional package (tools/release_check.py).
release: | $(PY)
	$(PIP) install 'build==1.6.1' 'twine==7.0.0'
	$(PY) tools/release_check.py

## make floor: the core suite on the oldest versions pyproject.toml allows, in .venv-floor (tools/floor_check.py).
floor: | $(PY)
	$(PY) tools/floor_check.py

## make references: re-run the reference optimizers (PyTorch's CPU build, pytorch-optimizer, heavyball, psgd-jax)
## in .venv-ref into artifacts/references, compare the cases with the committed fixtures tests/algorithms/references/
## (tools/record_references.py), run the tests that read the fixtures against the trajectories just recorded
## (gradtx equals the references as they run on this CPU), and torchao's low-bit quantization against
## tests/lowbit/torchao.npz (tools/record_lowbit.py).
REFERENCE_TESTS = $(shell grep -rl --include='test_*.py' '_references\.' tests)
references: $(VENV)/.installed-test
	test -x .venv-ref/bin/python || $(PYTHON) -m venv .venv-ref
	.venv-ref/bin/python -m pip --disable-pip-version-check -q install -r tools/references/requirements.txt
	rm -rf artifacts/references
	.venv-ref/bin/python tools/record_references.py --check artifacts/references
	GRADTX_REFERENCE_FIXTURES=$(CURDIR)/artifacts/references $(PY) -m pytest $(PYTEST_ARGS) $(REFERENCE_TESTS)
	.venv-ref/bin/python tools/record_lowbit.py --check

clean:
	rm -rf $(VENV) .venv-floor .venv-ref build *.egg-info artifacts docs/_build docs/notebooks

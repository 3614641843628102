# Every target sets itself up on a fresh machine: it creates .venv when missing and
# installs what it needs (pip skips what is already there).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
PYTEST_ARGS ?= -n 2

.PHONY: test demo bench lint install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PIP) install -e '.[test,demo]'
	touch $@

$(VENV)/.installed-lint: pyproject.toml | $(PY)
	$(PIP) install -e '.[lint]'
	touch $@

$(VENV)/.installed-demo: pyproject.toml | $(PY)
	$(PIP) install -e '.[demo]'
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

clean:
	rm -rf $(VENV) build *.egg-info artifacts

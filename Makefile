# rlft: two commands on a fresh machine: `make setup` (or just `make test`) and `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch that lies on this disk; a bare `torch` requirement would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
ENV ?= frozenlake-q
SET ?=
PYTEST_ARGS ?=
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: setup test test-fast lint demo dataset bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

## setup: create .venv (torch CPU first) and install rlft with its test extras
setup: $(VENV)/.installed

## test: set up, lint, then run the whole test suite (slow end-to-end tests included)
test: setup lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## test-fast: unit tests only
test-fast: setup
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check toolkit tests benchmarks

## demo: the whole loop on FrozenLake (exact-Q data, tiny LM, SFT, evaluation vs baselines), ~3 min on CPU
demo: setup
	$(BIN)/rlft pipeline run pipelines/demo.yaml --out demo --overwrite $(SET)

## dataset: run pipelines/$(ENV).yaml into datasets/$(ENV)/ (SET="--set episodes=10" overrides variables)
dataset: setup
	$(BIN)/rlft pipeline run pipelines/$(ENV).yaml --out datasets/$(ENV) --overwrite $(SET)

## bench: every benchmark under benchmarks/
bench: setup
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf datasets .pytest_cache .ruff_cache

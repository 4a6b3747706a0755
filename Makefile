# make test   - set up .venv and run the test suite
# make train  - set up .venv and train the default model (Multi30k fr->en, small, CPU, <= 60 min)
TORCH_VERSION ?= 2.13.0
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: setup bench-setup test lint train bench results clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==$(TORCH_VERSION)"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

test: setup
	$(BIN)/ruff check transformer scripts tests
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check transformer scripts tests

train: setup
	$(BIN)/transformer-train +experiment=multi30k_cpu_fren $(ARGS)

bench-setup: setup
	$(BIN)/pip install --quiet -e ".[bench]"

bench: bench-setup
	$(BIN)/python scripts/benchmark_decoding.py --size small
	$(BIN)/python scripts/benchmark_training.py --size small

# make results RUNS="outputs/make_train"
results: setup
	$(BIN)/python scripts/results.py $(RUNS) --output results.md

clean:
	rm -rf outputs .pytest_cache

# make test   - set up .venv and run the test suite
# make train  - set up .venv and train the default model (Multi30k fr->en, small, CPU, <= 60 min)
TORCH_VERSION ?= 2.13.0
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: setup test lint train clean

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

clean:
	rm -rf outputs .pytest_cache

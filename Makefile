# make test   - set up .venv (with the serve extra and Debian's chromium), check style and the package's layers
#              (ruff, import-linter's contracts in pyproject.toml) and run the test suite
# make train  - set up .venv and train the default model (Multi30k fr->en, small, CPU, <= 60 min)
# make train-bt / train-st - the back-translation (fr->en) / self-training (en->fr) recipe, resumable
#              (transformer-recipe; ARGS takes its settings, e.g. finals=1 'overrides=["optim.lr=1e-3"]')
TORCH_VERSION ?= 2.13.0
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=
# CPU training runs ~1.5x faster with tcmalloc than with glibc malloc (scripts/benchmark_training.py):
# `make train` installs it where it can (apt) and preloads it. `make train TCMALLOC=` runs without it.
TCMALLOC_LIBS := /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4 \
	/usr/lib64/libtcmalloc_minimal.so.4 /usr/lib/libtcmalloc_minimal.so.4
TCMALLOC = $(shell ls $(TCMALLOC_LIBS) 2>/dev/null | head -n 1)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)

.PHONY: setup test-setup browser tcmalloc bench-setup test lint train train-bt train-st bench results clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==$(TORCH_VERSION)"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

# The optional extras the tests need (serve; export) and the test tools (httpx, Playwright; schemathesis,
# hypothesis): a stamp of its own.
test-setup: $(VENV)/.installed-test

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[dev,serve,export,align,test]"
	touch $@

# Debian's Chromium for the page's browser test (never a browser download); skipped with a note where apt cannot.
browser:
	@ls /usr/bin/chromium >/dev/null 2>&1 || ($(SUDO) apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 \
		|| ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1) \
		|| echo "note: could not install chromium (apt-get); the browser test will be skipped"

# One pytest worker per core (pytest-xdist, a file per worker at a time, one torch thread each), then the tests
# that time themselves alone.
test: test-setup browser
	$(BIN)/ruff check transformer scripts tests
	$(BIN)/lint-imports --no-cache
	OMP_NUM_THREADS=1 $(BIN)/pytest -n logical --dist loadfile -m "not serial" --durations=15
	$(BIN)/pytest -m serial

lint: test-setup
	$(BIN)/ruff check transformer scripts tests
	$(BIN)/lint-imports --no-cache

tcmalloc:
	@ls $(TCMALLOC_LIBS) >/dev/null 2>&1 || ($(SUDO) apt-get install -y -qq libtcmalloc-minimal4 >/dev/null 2>&1 \
		|| ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libtcmalloc-minimal4) >/dev/null 2>&1) \
		|| echo "note: could not install tcmalloc (libtcmalloc-minimal4); CPU training will be slower"

train: setup tcmalloc
	LD_PRELOAD="$(TCMALLOC)" $(BIN)/transformer-train +experiment=multi30k_cpu_fren $(ARGS)

# make train-bt ARGS="finals=1 finetune_minutes=5"; run it again to continue after an interruption
train-bt: setup tcmalloc
	LD_PRELOAD="$(TCMALLOC)" $(BIN)/transformer-recipe mode=bt $(ARGS)

train-st: setup tcmalloc
	LD_PRELOAD="$(TCMALLOC)" $(BIN)/transformer-recipe mode=st $(ARGS)

bench-setup: setup
	$(BIN)/pip install --quiet -e ".[bench]"

bench: bench-setup tcmalloc
	LD_PRELOAD="$(TCMALLOC)" $(BIN)/python scripts/benchmark_decoding.py --size small
	LD_PRELOAD="$(TCMALLOC)" $(BIN)/python scripts/benchmark_training.py --size small

# make results RUNS="outputs/make_train outputs/other"  (run folders or checkpoint files, space-separated)
comma := ,
space := $(subst ,, )
results: setup
	$(BIN)/transformer-results 'checkpoints=[$(subst $(space),$(comma),$(strip $(RUNS)))]' output=results.md

clean:
	rm -rf outputs .pytest_cache

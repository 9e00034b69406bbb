# Loom fabric — the two set-up commands are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
TS_CLIENT := test-scenarios/performance/ts-client
TS_STAMP := $(TS_CLIENT)/node_modules/.installed
HOSTS := tests/plugins/hosts
HOSTS_STAMP := $(HOSTS)/node_modules/.installed
CONFORMANCE := test-scenarios/conformance
CONFORMANCE_STAMP := $(CONFORMANCE)/node_modules/.installed
PYTEST_ARGS ?=
# Python writes its bytecode cache here whatever the caller's shell says: with
# PYTHONDONTWRITEBYTECODE set, every process the suite starts (hundreds: Warps, Wefts,
# CLIs) would compile Loom's modules again, about 0.3 s of CPU each.
unexport PYTHONDONTWRITEBYTECODE
# pytest-xdist: four workers, each test file on one of them (conftest.py); most tests wait on
# NATS, processes and sockets, so four keep two cores busy (docs/testing.md). Serial: make test PYTEST_XDIST=
PYTEST_XDIST ?= -n 4 --dist loadgroup

.PHONY: help install system-tools run demo test lint typecheck lint-deploy pytest drill scenarios bench clean

help:
	@echo "make run        start embedded NATS (JetStream) + Weft in the foreground"
	@echo "                (make run NATS_AUTH=scoped: every agent needs its own credentials)"
	@echo "make demo       see the loop close without an AI agent, on a throw-away fabric"
	@echo "                (make demo KEEP=1: keep it up afterwards to open its console)"
	@echo "make test       ruff, mypy, pytest (unit, integration and quick scenarios)"
	@echo "make drill      the multi-host drill (root: network namespaces), CI's second stage"
	@echo "make scenarios  every multi-agent scenario in test-scenarios/"
	@echo "make bench      the performance suite (prints a table, writes results.json)"

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(RUN_STAMP)

# `make run` and `make demo` need Loom's runtime dependencies only (no linters, type
# checker, browser driver or fuzzer): a newcomer's first command installs what it runs.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

# bench_warp also drives Warp through the official TypeScript MCP SDK client; without
# Node (or if the install fails) those rows are left out and the bench says so.
$(TS_STAMP): $(TS_CLIENT)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: bench_warp will leave out its TypeScript SDK client rows"; \
	elif npm ci --prefix $(TS_CLIENT) --no-audit --no-fund --loglevel=error; then \
		touch $@; \
	else \
		echo "npm ci in $(TS_CLIENT) failed: bench_warp will leave out its TypeScript SDK client rows"; \
	fi

# tests/plugins also runs the hosts' own plugin validators where they need no account
# (Claude Code's `claude plugin validate`); without npm those tests say so and stand down.
$(HOSTS_STAMP): $(HOSTS)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: tests/plugins will not run the hosts' own plugin validators"; \
	elif npm ci --prefix $(HOSTS) --no-audit --no-fund --loglevel=error; then \
		touch $@; \
	else \
		echo "npm ci in $(HOSTS) failed: tests/plugins will report the missing validator"; \
	fi

# The MCP conformance suite (tests/shared/mcp/test_mcp_conformance.py), the MCP Inspector
# (tests/shared/mcp/test_mcp_inspector.py) and the Node 22 they need, pinned npm packages;
# without npm those tests say so and stand down. `npm install --no-save` installs what the
# lock pins, as `npm ci` would, but tolerates an optional dependency the registry lacks
# (vite's napi-windows-process-start-time, absent here), which `npm ci` refuses.
$(CONFORMANCE_STAMP): $(CONFORMANCE)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the MCP conformance suite will not run"; \
	elif npm install --no-save --prefix $(CONFORMANCE) --no-audit --no-fund --loglevel=error; then \
		touch $@; \
	else \
		echo "npm install in $(CONFORMANCE) failed: the MCP conformance and Inspector tests will report it"; \
	fi

# Debian packages some tests drive, installed when missing (CI runs as root): chromium for
# the console's browser tests (tests/console; never a browser Playwright downloads) and
# nftables for the multi-host drill's packet loss (scenario 31), on a kernel without netem.
# Each entry is command:package.
DEBIAN_TOOLS := chromium:chromium nft:nftables
system-tools:
	@missing=""; for pair in $(DEBIAN_TOOLS); do \
		command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update && apt-get install -y $$missing; \
		else echo "not root, so not installed:$$missing (apt-get install$$missing): the console's browser tests fail without chromium; the drill injects no loss without nftables"; fi; fi

install: $(STAMP) $(TS_STAMP) $(HOSTS_STAMP) $(CONFORMANCE_STAMP) system-tools

ifdef NATS_AUTH
run: export WEFT_NATS_AUTH = $(NATS_AUTH)
endif
run: $(RUN_STAMP)
	$(BIN)/weft serve

demo: $(RUN_STAMP)
	$(BIN)/weft demo $(if $(KEEP),--keep)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# deploy's Python is type-checked with the rest (pyproject.toml's mypy files).
lint-deploy: $(STAMP)
	$(BIN)/python -m deploy.checks

# --durations: every run says which tests take the time (the suite is over its budget).
# The multi-host drill (marker `drill`) is a stage of its own: `make drill`, after `make test`
# in CI (.ci/run); a later -m in PYTEST_ARGS overrides the one here.
pytest: $(STAMP) $(TS_STAMP) $(HOSTS_STAMP) $(CONFORMANCE_STAMP) system-tools
	$(BIN)/pytest $(PYTEST_XDIST) -m "not drill" --durations=30 --durations-min=20 $(PYTEST_ARGS)

# Alone, so its recovery figures are the fabric's and not the suite's load (docs/scaling.md).
drill: $(STAMP) system-tools
	$(BIN)/pytest -m drill --durations=5 test-scenarios/31-multi-host $(PYTEST_ARGS)

# The installs run side by side (pip and each npm keep about one core busy: on a fresh clone,
# one after another they took 82 s, together 59 s), then the checks beside the tests
# (mypy is one process: alone, it would leave a core idle for most of a minute); make test
# fails when any of them fails.
test:
	@$(MAKE) --no-print-directory -j4 install
	@$(MAKE) --no-print-directory -j4 lint typecheck lint-deploy pytest

scenarios: $(STAMP)
	$(BIN)/pytest test-scenarios -m "scenario or not scenario" $(PYTEST_ARGS)

bench: $(STAMP) $(TS_STAMP)
	$(BIN)/python test-scenarios/performance/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

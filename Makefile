# Loom fabric — the two set-up commands are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: help install run test lint typecheck lint-deploy pytest scenarios bench clean

help:
	@echo "make run        start embedded NATS (JetStream) + Weft in the foreground"
	@echo "make test       ruff, mypy, pytest (unit, integration and quick scenarios)"
	@echo "make scenarios  every multi-agent scenario in test-scenarios/"
	@echo "make bench      the performance suite (prints a table, writes results.json)"

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/weft serve

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

lint-deploy: $(STAMP)
	$(BIN)/mypy deploy
	$(BIN)/python -m deploy.checks

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck lint-deploy pytest

scenarios: $(STAMP)
	$(BIN)/pytest test-scenarios -m "scenario or not scenario" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python test-scenarios/performance/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

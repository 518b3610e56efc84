# Two commands for a newcomer: `make demo` and `make test`. Both provision .venv first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup test test-fast demo lint bench docs clean-venv help

help:
	@echo "make demo   - run the end-to-end demo on the embedded default (CPU, no downloads)"
	@echo "make test   - run the whole test suite"
	@echo "make test-fast - a quick subset (the files marked slow in test/conftest.py left out)"
	@echo "make lint   - flake8 (99 columns, the ament convention)"
	@echo "make bench  - run the benchmarks in benchmarks/ (results: benchmarks/RESULTS.md)"
	@echo "make docs   - regenerate docs/PARAMETERS.md (the nodes' parameters, topics, services)"
	@echo "make setup  - provision .venv (idempotent; called by every other target)"

setup:
	@tools/setup.sh

# The test files run in PYTEST_WORKERS processes (pytest-xdist; a file's tests stay together,
# so its module fixtures are built once): most tests wait on DDS and on node processes, and one
# process kept about half of two cores busy. PYTEST_WORKERS=0 runs them in this process.
PYTEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),-n 0,-n $(PYTEST_WORKERS) --dist loadfile)

test: setup
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "not slow" $(XDIST) $(PYTEST_ARGS)

demo: setup
	$(PY) -m g2g_ros.demo $(DEMO_ARGS)

lint: setup
	$(PY) -m flake8

bench: setup
	$(PY) -m benchmarks.run_all

docs: setup
	$(PY) -m g2g_ros.node_docs

clean-venv:
	rm -rf $(VENV) build

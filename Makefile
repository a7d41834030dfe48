# The two commands of the quick start. Both create (or refresh) the virtual environment themselves.
#   make demo   -- set up and run the main job (the demo loop)
#   make test   -- set up and run every check CI runs
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0

.PHONY: venv demo test lint docs-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first: a later resolver pass would otherwise pull the newest torch with GBs of CUDA wheels.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q -e ".[all,dev]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(BIN)/knowlyr-lab demo

test: venv
	PATH="$(abspath $(BIN)):$$PATH" bash tools/run_tests.sh

clean:
	rm -rf _proc _docs .quarto $(VENV)

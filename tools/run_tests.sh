#!/usr/bin/env bash
# Every check CI runs, in order. Called by `make test` with the project's venv first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0
export JUPYTER_CONFIG_DIR="${JUPYTER_CONFIG_DIR:-$PWD/.jupyter-test/config}" JUPYTER_DATA_DIR="${JUPYTER_DATA_DIR:-$PWD/.jupyter-test/data}"
export MPLCONFIGDIR="${MPLCONFIGDIR:-$PWD/.jupyter-test/mpl}"

# every step announces itself and its start time; the summary at the end lists each step's duration
STEPS=(); T0=$(date +%s); T=$T0; CUR=""
step() { local now; now=$(date +%s); [[ -n "$CUR" ]] && STEPS+=("$(printf '%5ds  %s' $((now - T)) "$CUR")"); CUR="$*"; T=$now; echo; echo "== $* ($(date +%T))"; }
summary() { local rc=$? now; now=$(date +%s); [[ -n "$CUR" ]] && STEPS+=("$(printf '%5ds  %s' $((now - T)) "$CUR")")
  echo; echo "== durations (total $((now - T0)) s, exit $rc)"; printf '%s\n' "${STEPS[@]}"; }

snapshot() { find nbs knowlyr_lab experiments README.md -type f \( -name '*.ipynb' -o -name '*.py' -o -name '*.md' \) -not -path '*/.ipynb_checkpoints/*' -print0 | sort -z | xargs -0 sha256sum; }

# System packages are installed before this script, by `make system` (tools/setup_system.sh), which `make test` runs and names.
step "docker engine for the docker flag (tools/docker_engine.py: reuse one, or start dockerd and build the sandbox image)"
eval "$(python tools/docker_engine.py start)" || true
trap 'summary; python tools/docker_engine.py stop' EXIT   # stops only a dockerd started here, by its pid

step "notebook house rules (tools/lint_nbs.py) and layering (tools/check_layering.py: no import of a higher-numbered page)"
python tools/lint_nbs.py
python tools/check_layering.py

step "pages link the pytest files that test their module (tools/test_links.py)"
python tools/test_links.py

step "thoughts per cell (tools/cell_metrics.py: issue 40's measures, none worse than tools/cell_metrics.json records)"
python tools/cell_metrics.py --check tools/cell_metrics.json

step "ruff (F, B, I) on every .py and .ipynb"
ruff check

step "nbdev-clean / widget state / nbdev-export / README must not change anything"
before=$(snapshot)
nbdev-clean
python tools/clean_widgets.py
nbdev-export
python tools/render_readme.py
after=$(snapshot)
if [[ "$before" != "$after" ]]; then
  echo "ERROR: nbdev-clean, tools/clean_widgets.py, nbdev-export or tools/render_readme.py changed files; run them and commit:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi

flags="$(python tools/test_flags.py)"
step "nbdev-test (flags: ${flags:-none}; cells slower than 10 s listed, then seconds per notebook)"
# --timing prints whole seconds per notebook: most pages take under one (each worker imports the library once), so
# they read 0; the cell list says where the time goes
# two workers, one compute thread each (two torch thread pools on two cores would oversubscribe them)
OMP_NUM_THREADS=1 nbdev-test --n-workers 2 --timing --cell-timing-min 10 --flags "$flags"

# the browser tests (JupyterLab + headless Chromium, ~2 min) run when asked: KNOWLYR_BROWSER=1
[[ "${KNOWLYR_BROWSER:-0}" == 1 ]] && flags="$flags browser"

step "pytest tests/ (pytest-xdist, ${KNOWLYR_TEST_WORKERS:-2} workers)"
set +e
# KNOWLYR_TEST_WORKERS workers (default 2, one per core here), a test file per worker at a time (module fixtures start once)
KNOWLYR_TEST_FLAGS="$flags" python -m pytest tests/ -q -rs --durations=15 -n "${KNOWLYR_TEST_WORKERS:-2}" --dist loadfile
rc=$?
set -e
if [[ $rc -eq 5 ]]; then echo "pytest collected no tests"; rc=0; fi
[[ $rc -eq 0 ]] || exit $rc

step "docs processing (tools/docs.py: nbdev-proc-nbs without its Quarto install)"
python tools/docs.py
echo "all checks passed"

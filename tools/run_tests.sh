#!/usr/bin/env bash
# Every check CI runs, in order. Called by `make test` with the project's venv first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0
export JUPYTER_CONFIG_DIR="${JUPYTER_CONFIG_DIR:-$PWD/.jupyter-test/config}" JUPYTER_DATA_DIR="${JUPYTER_DATA_DIR:-$PWD/.jupyter-test/data}"
export MPLCONFIGDIR="${MPLCONFIGDIR:-$PWD/.jupyter-test/mpl}"

step() { echo; echo "== $* ($(date +%T))"; }

snapshot() { find nbs knowlyr_lab README.md -type f \( -name '*.ipynb' -o -name '*.py' -o -name '*.md' \) -not -path '*/.ipynb_checkpoints/*' -print0 | sort -z | xargs -0 sha256sum; }

step "optional system components (bubblewrap, docker)"
bash tools/setup_system.sh || echo "system setup incomplete; tests that need it will be skipped with a reason"

step "docker engine for the docker flag (tools/docker_engine.py: reuse one, or start dockerd and build the sandbox image)"
eval "$(python tools/docker_engine.py start)" || true
trap 'python tools/docker_engine.py stop' EXIT   # stops only a dockerd started here, by its pid

step "notebook house rules (tools/lint_nbs.py)"
python tools/lint_nbs.py

step "nbdev-clean / nbdev-export / README must not change anything"
before=$(snapshot)
nbdev-clean
nbdev-export
python tools/render_readme.py
after=$(snapshot)
if [[ "$before" != "$after" ]]; then
  echo "ERROR: nbdev-clean, nbdev-export or tools/render_readme.py changed files; run them and commit:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi

flags="$(python tools/test_flags.py)"
step "nbdev-test (flags: ${flags:-none})"
nbdev-test --n-workers 2 --timing --flags "$flags"

step "pytest tests/"
set +e
KNOWLYR_TEST_FLAGS="$flags" python -m pytest tests/ -q -rs --durations=15
rc=$?
set -e
if [[ $rc -eq 5 ]]; then echo "pytest collected no tests"; rc=0; fi
[[ $rc -eq 0 ]] || exit $rc

step "nbdev-proc-nbs (docs pre-processing)"
nbdev-proc-nbs
echo "all checks passed"

"""A core install (no extras) in a fresh virtual environment gives the package-level API without torch.

`nbs/98_api.ipynb` checks the same in this environment with the extras made unimportable; this test really installs
the checkout with `pip install -e .` into a new venv without system site packages. It downloads the core dependencies
(~2 minutes, PyPI needed), so it runs under the `install` flag: `KNOWLYR_TEST_FLAGS=install pytest tests/test_facade.py`.
"""
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ['torch', 'transformers', 'peft', 'accelerate', 'openai', 'anthropic', 'docker', 'ray', 'mcp', 'ipywidgets', 'plotly',
          'sklearn', 'jupyterlab']

@pytest.mark.skipif('install' not in os.environ.get('KNOWLYR_TEST_FLAGS', '').split(),
                    reason="needs the 'install' component (KNOWLYR_TEST_FLAGS='install'; downloads the core dependencies)")
def test_core_install_imports_the_facade_without_extras(tmp_path):
    venv.create(tmp_path / 'venv', with_pip=True, system_site_packages=False)
    py = str(tmp_path / 'venv' / 'bin' / 'python')
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    r = subprocess.run([py, '-m', 'pip', 'install', '-q', '-e', str(ROOT)], env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    code = ("import importlib.util, sys\n"
            f"missing = [m for m in {EXTRAS!r} if importlib.util.find_spec(m) is None]\n"
            "import knowlyr_lab\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('knowlyr_lab.'))\n"
            "from knowlyr_lab import make, compare_agents, convert, collect, evaluate_agent, RewardEngine, DatasetExporter\n"
            "import knowlyr_lab.stats\n"
            "print(len(missing), loaded, make('knowlyr/maze-easy').env_id, 'torch' in sys.modules, knowlyr_lab.stats.wilson_ci(3, 10) is not None)")
    r = subprocess.run([py, '-c', code], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == [str(len(EXTRAS)), '[]', 'knowlyr/maze-easy', 'False', 'True'], r.stdout
    r = subprocess.run([py, '-c', 'from knowlyr_lab import SFTTrainer'], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0 and 'ModuleNotFoundError' in r.stderr, r.stderr[-2000:]   # the trainer needs the `train` extra

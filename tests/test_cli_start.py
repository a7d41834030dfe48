"""Every command starts fast (issue 41, item 1: "a CLI call starts in well under a second"): `--help` imports only
the standard library, the command's own parser and `knowlyr_lab.cli_errors`/`core`, never a heavy library, a
recorder `convert` of a small log loads none of the numeric or server stacks, a small JSONL export (SFT, GRPO, DPO
rows) loads neither numpy nor pandas nor pyarrow, and rule scoring of a small file loads no numeric stack. Checked by the modules a fresh
interpreter has loaded -- not by timing, which a busy machine would make flaky."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from knowlyr_lab.cli import TOOLS

# libraries that take tens to hundreds of milliseconds to import, none needed to print a usage text
HEAVY = ('pydantic', 'rich', 'detect_secrets', 'requests', 'numpy', 'pandas', 'pyarrow', 'torch', 'transformers',
         'yaml', 'tqdm', 'mcp', 'starlette', 'uvicorn', 'httpx', 'fastapi', 'ray', 'jsonschema', 'scipy', 'msgspec')

SCRIPT = '''
import importlib, json, sys
mod = importlib.import_module(sys.argv[1])
try: mod.main(sys.argv[2:])
except SystemExit: pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))
'''

def loaded_after(module:str, *argv:str)->set[str]:
    "Top-level packages loaded by a fresh interpreter after `module.main(argv)`"
    r = subprocess.run([sys.executable, '-c', SCRIPT, module, *argv], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout.strip().splitlines()[-1]))

@pytest.mark.parametrize('tool', sorted(TOOLS))
def test_help_imports_nothing_heavy(tool):
    assert sorted(loaded_after(TOOLS[tool][0], '--help') & set(HEAVY)) == []

def test_small_convert_loads_no_numeric_or_server_stack(tmp_path):
    log = Path(__file__).parent / 'fixtures/recorder/openhands/eval_pairs_output.jsonl'
    got = loaded_after('knowlyr_lab.cli.recorder', 'convert', str(log), '-o', str(tmp_path / 'out.jsonl'),
                       '--no-progress')
    assert (tmp_path / 'out.jsonl').exists()
    assert sorted(got & {'numpy', 'pandas', 'pyarrow', 'torch', 'transformers', 'mcp', 'starlette', 'httpx',
                         'ray', 'scipy', 'yaml', 'asyncio'}) == []

@pytest.mark.parametrize('fmt', ['sft', 'grpo', 'dpo'])
def test_small_export_loads_no_numeric_stack(tmp_path, fmt):
    "A JSONL export (SFT, GRPO, DPO rows) loads neither pyarrow nor pandas nor numpy: they are for Parquet, tables and checks"
    from knowlyr_lab.trajectory import Observation, Outcome, Step, Task, ToolCall, Trajectory
    from knowlyr_lab.trajectory_io import write_trajectories
    trajs = [Trajectory(task=Task(id=f"t{i // 2}", instruction=f"Fix test {i // 2}.", domain='coding'),
                        steps=[Step(index=0, action=ToolCall(tool='shell', params={'command': 'pytest'}),
                                    observation=Observation(content='ok'), reward=0.2 + 0.5 * (i % 2))],
                        outcome=Outcome(success=bool(i % 2), terminated=True)) for i in range(4)]
    src = tmp_path / 'trajs.jsonl'; write_trajectories(trajs, src)
    got = loaded_after('knowlyr_lab.cli.hub', 'export', '-t', str(src), '--format', fmt, '-o', str(tmp_path / 'out'))
    assert sorted((tmp_path / 'out').glob('*.jsonl'))       # the export wrote its rows
    assert sorted(got & {'numpy', 'pandas', 'pyarrow', 'scipy', 'datasets', 'torch'}) == []

def test_small_score_loads_no_numeric_stack(tmp_path):
    "Rule scoring of a small file loads no numpy, pandas, scipy or sklearn: those are for calibration and tables"
    from knowlyr_lab.trajectory import Observation, Outcome, Step, Task, ToolCall, Trajectory
    from knowlyr_lab.trajectory_io import write_trajectories
    src = tmp_path / 'trajs.jsonl'
    write_trajectories([Trajectory(task=Task(id='t0', instruction='Fix the test.', domain='coding'),
                                   steps=[Step(index=0, action=ToolCall(tool='shell', params={'command': 'pytest'}),
                                               observation=Observation(content='1 passed'))],
                                   outcome=Outcome(success=True, terminated=True))], src)
    got = loaded_after('knowlyr_lab.cli.reward', 'score', str(src), '-o', str(tmp_path / 'scored.jsonl'), '--no-progress')
    assert (tmp_path / 'scored.jsonl').exists()
    assert sorted(got & {'numpy', 'pandas', 'pyarrow', 'scipy', 'sklearn', 'torch'}) == []

"""trn10: the experiments' scripts took `provenance()` without their tokenizer, so a results file recorded the pinned
day and no chat template (`chat_template` None), whatever template their chats rendered with. Each call now passes
the tokenizer its run renders with; each script still imports and parses its arguments."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.relative_to(ROOT) for p in (ROOT / 'experiments').rglob('*.py'))
CALLING = [p for p in SCRIPTS if 'provenance(' in (ROOT / p).read_text()]


def _provenance_calls(path:Path)->list[ast.Call]:
    "Every call of `provenance(...)` in a script"
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
            and getattr(n.func, 'id', getattr(n.func, 'attr', None)) == 'provenance']


def test_every_experiment_script_gives_provenance_its_tokenizer():
    "A call without `tokenizer=` records the pinned day and no template: the run's own were not what it says"
    assert len(CALLING) >= 7, CALLING
    bare = [f"{p}:{c.lineno}" for p in CALLING for c in _provenance_calls(ROOT / p)
            if not any(k.arg == 'tokenizer' for k in c.keywords)]
    assert not bare, f"provenance() without tokenizer= in {bare}"


@pytest.mark.parametrize('script', CALLING, ids=str)
def test_a_script_that_records_provenance_still_parses_its_arguments(script):
    "`--help` imports the script and builds its parser; no run, nothing downloaded"
    r = subprocess.run([sys.executable, str(ROOT / script), '--help'], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith('usage:'), (r.stdout[-500:], r.stderr[-2000:])

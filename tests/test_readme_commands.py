"README's development commands name things that exist: every path in a code span, every `make` target, every test flag"
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / 'README.md').read_text()
SPANS = re.findall(r'`([^`\n]+)`', README)

def test_every_path_in_readme_exists():
    "A path in a code span exists (a notebook may be named without `.ipynb`); results files may be absent until a run commits them"
    paths = {m for s in SPANS for m in re.findall(r'(?:tests|nbs|experiments|tools|\.ci)/[\w./-]+', s)}
    missing = [p for p in sorted(paths) if not (ROOT / p).exists() and not (ROOT / f'{p}.ipynb').exists()
               and not p.startswith('experiments/results/')]
    assert len(paths) > 20 and not missing, missing

def test_every_make_target_in_readme_exists():
    targets = set(re.findall(r'^([\w-]+):', (ROOT / 'Makefile').read_text(), re.M))
    named = set(re.findall(r'make ([a-z][\w-]*)', README))
    assert {'demo', 'test'} <= named and named <= targets, named - targets

def test_every_flag_in_readme_is_a_test_flag():
    flags = set(tomllib.loads((ROOT / 'pyproject.toml').read_text())['tool']['nbdev']['tst_flags'].split())
    named = {f for s in SPANS for f in re.findall(r'--flags ([\w ]+)', s) for f in f.split()}
    named |= {f for s in SPANS for f in re.findall(r'KNOWLYR_TEST_FLAGS=(\w+)', s)}
    read = {f for t in (ROOT / 'tests').glob('*.py') if 'KNOWLYR_TEST_FLAGS' in (x := t.read_text()) for f in named if f"'{f}'" in x}
    assert named and named <= flags | read, named - flags - read   # a tst_flag, or a flag a test reads itself (install, browser)

"The docs site's navigation (#27): the sidebar is grouped by layer, lists every page once, and reaches the experiments"
import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / 'nbs'

def _entries(items):
    for it in items:
        if isinstance(it, str): yield it
        elif 'contents' in it: yield from _entries(it['contents'])
        elif 'href' in it: yield it['href']

def _sidebar():
    return yaml.safe_load((NBS / '_quarto.yml').read_text())['website']['sidebar']

def test_sidebar_groups_every_page_by_layer_once():
    sb = _sidebar()
    sections = [s for s in sb['contents'] if isinstance(s, dict) and 'section' in s]
    assert len(sections) >= 9, [s['section'] for s in sections]          # not one flat list of ~75 pages
    entries = list(_entries(sb['contents']))
    pages = sorted(p.relative_to(NBS).as_posix() for p in NBS.rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts and not p.name.startswith('_'))
    listed = [e for e in entries if not e.startswith(('http', 'experiments/'))]
    assert sorted(listed) == pages, (sorted(set(pages) - set(listed)), sorted(set(listed) - set(pages)))   # every page, once, nothing stale
    for s in sections:   # a layer section holds the pages of its tens (0x core ... 9x commands)
        tens = {re.match(r'(\d)\d', Path(e).name).group(1) for e in _entries(s['contents']) if re.match(r'\d\d', Path(e).name)}
        assert len(tens) <= 1, (s['section'], tens)

def test_experiment_notebooks_are_on_the_site():
    "Each experiment is a sidebar page, and the docs build copies the notebooks (with their outputs) where Quarto renders them"
    hrefs = [e for e in _entries(_sidebar()['contents']) if e.startswith('experiments/')]
    exps = sorted(p.name for p in (ROOT / 'experiments').glob('*.ipynb'))
    assert exps and sorted(h.split('/')[-1] for h in hrefs) == exps, (exps, hrefs)
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / 'tools' / 'docs.py')], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]   # the notebook, cell and error that stopped the build
    assert sorted(p.name for p in (ROOT / '_proc' / 'experiments').glob('*.ipynb')) == exps

def test_cli_page_says_what_the_demo_runs():
    "#27: nbs/99_cli said the demo runs the maze; it runs the arithmetic suite of DemoConfig"
    from knowlyr_lab.demo import DemoConfig
    text = ' '.join(''.join(c['source']) for c in json.loads((NBS / '99_cli.ipynb').read_text())['cells'] if c['cell_type'] == 'markdown')
    demo = text[text.index('`knowlyr-lab demo`'):text.index('`knowlyr-lab loop`')]
    assert DemoConfig().env_id in demo and 'maze' not in demo, demo

def test_log_formats_page_names_every_schema_field():
    "nbs/log_formats.md states the schema the adapters emit: every field of every part of it, none invented"
    from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Source, Step, Task, TokenUsage, ToolCall, Trajectory
    text = (ROOT / 'nbs' / 'log_formats.md').read_text()
    line = text[text.index('`Trajectory{'):]; line = line[:line.index('}`') + 2]
    named = set(re.findall(r'[A-Za-z_]+', line)) - {'Trajectory', 'Step'}
    fields = set().union(*(m.model_fields for m in (Trajectory, Step, Task, Outcome, TokenUsage, ToolCall, Observation, AgentInfo, Source)))
    assert fields - named == set(), f"fields missing from the page: {sorted(fields - named)}"
    assert named - fields == set(), f"names on the page that are not fields: {sorted(named - fields)}"

def test_layering_no_page_imports_a_higher_page():
    "tools/check_layering.py: no module imports (at the top or inside a function) a module of a higher-numbered page"
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / 'tools' / 'check_layering.py')], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr

def test_page_numbers_are_unique():
    "Two pages never share a number and letter (10b twice made the order of the sandbox pages a guess)"
    import collections
    keys = collections.Counter(re.match(r'(\d+[a-z]*)_', p.name).group(1) for p in NBS.glob('*.ipynb') if re.match(r'\d', p.name))
    assert not [k for k, n in keys.items() if n > 1], [k for k, n in keys.items() if n > 1]

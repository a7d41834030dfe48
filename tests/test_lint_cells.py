"The notebook linter (tools/lint_nbs.py) refuses an export cell over 80 code lines and names notebook, cell id and count."
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

def _plant(folder, n, directive='#| export'):
    "A notebook in `folder` whose one export cell holds `n` code lines (plus blanks and a directive that do not count)"
    body = '\n'.join(f'x{k} = {k}' + ('\n' if k % 10 == 0 else '') for k in range(n))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell('# Planted'),
                                         nbformat.v4.new_code_cell(f'{directive}\n#| hide\n{body}')])
    p = folder / 'planted.ipynb'
    nbformat.write(nb, p)
    return p, nb.cells[1].id

def _lint(*paths):
    return subprocess.run([sys.executable, str(ROOT / 'tools' / 'lint_nbs.py'), *map(str, paths)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)

def test_export_cell_over_80_fails(tmp_path):
    p, cid = _plant(tmp_path, 81)
    r = _lint(p)
    assert r.returncode == 1, r.stdout
    lines = r.stdout.splitlines()
    assert f'  notebook: {p}' in lines
    assert f'  cell id: {cid}' in lines
    assert any(l.startswith('  lines: 81 ') for l in lines), r.stdout
    assert 'one thought per cell' in r.stdout and 'prose between' in r.stdout

def test_export_cell_of_80_passes(tmp_path):
    p, _ = _plant(tmp_path, 80)
    r = _lint(p)
    assert r.returncode == 0, r.stdout
    assert 'notebook lint: ok' in r.stdout

def test_exports_directive_and_directory_argument(tmp_path):
    "`#| exports` counts too, and a folder argument lints every notebook under it"
    _plant(tmp_path, 81, directive='#| exports')
    r = _lint(tmp_path)
    assert r.returncode == 1 and '  lines: 81 ' in r.stdout, r.stdout

def test_long_cell_not_exported_passes(tmp_path):
    "Only export cells are held to the limit (an example or test cell may be longer)"
    p, _ = _plant(tmp_path, 120, directive='#| hide')
    assert _lint(p).returncode == 0

def test_two_patch_methods_in_one_export_cell_fail(tmp_path):
    "One @patch method per export cell: two in one cell are named with the cell id; one each passes"
    two = "#| export\n@patch\ndef a(self:A): return 1\n\n@patch\ndef b(self:A): return 2"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(two)])
    p = tmp_path / 'two.ipynb'; nbformat.write(nb, p)
    r = _lint(p)
    assert r.returncode == 1 and f'export cell with 2 methods added to classes (cell id {nb.cells[0].id})' in r.stdout, r.stdout
    one = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in ['#| export\nclass A: pass', *two.split('\n\n')]])
    one.cells[2].source = '#| export\n' + one.cells[2].source
    nbformat.write(one, p)
    assert _lint(p).returncode == 0

def _metrics(*args):
    return subprocess.run([sys.executable, str(ROOT / 'tools' / 'cell_metrics.py'), *args], capture_output=True, text=True, cwd=ROOT, timeout=300)

def test_cell_metrics_hold_their_recorded_ceilings():
    "Issue 40's measures (export-cell lines, long lines, private imports, page length, outputs) are no worse than recorded"
    r = _metrics('--check', str(ROOT / 'tools' / 'cell_metrics.json'))
    assert r.returncode == 0, r.stdout
    assert 'export_cell_median_lines' in r.stdout and 'target <= 10' in r.stdout

def test_cell_metrics_refuse_a_worse_value(tmp_path):
    "A ceiling below today's value (or a floor above it) fails the check and names the measure"
    import json
    rec = json.loads((ROOT / 'tools' / 'cell_metrics.json').read_text())
    now = {k: float(v) for k, v, *_ in (line.split() for line in _metrics().stdout.splitlines()) if k in rec}
    # below today's value, not below the recorded ceiling: the measures may be better than recorded (7 lines vs 8)
    rec['export_cell_median_lines'] = now['export_cell_median_lines'] - 1
    rec['code_cells_with_output_pct'] = now['code_cells_with_output_pct'] + 1
    (tmp_path / 'm.json').write_text(json.dumps(rec))
    r = _metrics('--check', str(tmp_path / 'm.json'))
    assert r.returncode == 1 and 'export_cell_median_lines:' in r.stdout and 'code_cells_with_output_pct:' in r.stdout, r.stdout

def test_method_attached_by_hand_fails(tmp_path):
    "`Cls.attr = fn`, `= lambda` and `= property(fn)` attach a method the one-@patch rule would not see: each is named"
    src = ("#| export\nclass A: pass\ndef _f(self): return 1\nA.f = _f\nA.g = lambda self: 2\nA.h = property(_f)\n"
           "A.limit = 3")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src)])
    p = tmp_path / 'hand.ipynb'; nbformat.write(nb, p)
    r = _lint(p)
    assert r.returncode == 1, r.stdout
    for name in ('A.f', 'A.g', 'A.h'): assert f'{name} = ... attaches a method by hand' in r.stdout, r.stdout
    assert 'A.limit' not in r.stdout and 'export cell with 3 methods added to classes' in r.stdout

def _wrap():
    sys.path.insert(0, str(ROOT / 'tools'))
    import wrap_lines
    return wrap_lines

LONG = '''def summarise(rows:list,                 # the rows to summarise, one dict per episode, as the evaluation wrote them down
              metric:str='success',     # which column of each row to average
             )->dict:                   # {'mean', 'n'}: the average over the rows that hold the column, and how many did
    "Average `metric` over `rows` that hold it, and how many rows that was: a helper with a long docstring that says so twice"
    vals = [r[metric] for r in rows if metric in r and r[metric] is not None and not isinstance(r[metric], str) and r[metric] == r[metric]]
    if not vals: raise ValueError(f"no row holds {metric!r}: the rows hold {sorted({k for r in rows for k in r})} and nothing else at all")
    return {'mean': sum(vals) / len(vals), 'n': len(vals)}   # a trailing comment that makes this line longer than the width
'''

def test_wrap_lines_shortens_without_changing_the_code(tmp_path):
    "Every line fits in 120 characters, the syntax tree is the same, and docments still reads each parameter's comment"
    import ast
    import importlib.util

    from fastcore.docments import docments
    w = _wrap()
    new, left = w.wrap_source(LONG)
    assert left == [] and max(map(len, new.split('\n'))) <= 120 and len(new.split('\n')) > len(LONG.split('\n'))
    assert ast.dump(ast.parse(new)) == ast.dump(ast.parse(LONG))
    def docs(src):
        f = tmp_path / f'm{abs(hash(src))}.py'; f.write_text(src)
        spec = importlib.util.spec_from_file_location(f.stem, f); m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        return docments(m.summarise)
    assert docs(new) == docs(LONG) and docs(new)['return'].startswith("{'mean', 'n'}")

def test_wrap_lines_leaves_what_it_cannot_wrap_and_reports_it():
    "A line inside a multi-line string is text, not code: left as it is and reported"
    w = _wrap()
    src = 'x = """\n' + 'word ' * 40 + '\n"""'
    new, left = w.wrap_source(src)
    assert new == src and left == [2]

def test_patching_another_modules_class_fails(tmp_path):
    "A page adds methods only to classes its own export cells define (`@patch` or `@patch_to`); its own class passes"
    cells = ["#| export\nfrom fastcore.basics import patch, patch_to\nfrom knowlyr_lab.core import AgentEnv",
             "#| export\nclass Mine: pass", "#| export\n@patch\ndef a(self:Mine): return 1",
             "#| export\n@patch\ndef b(self:AgentEnv): return 2", "#| export\n@patch_to(AgentEnv)\ndef c(self): return 3"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    p = tmp_path / 'foreign.ipynb'; nbformat.write(nb, p)
    r = _lint(p)
    assert r.returncode == 1, r.stdout
    assert 'b is patched onto AgentEnv, a class another module defines' in r.stdout
    assert 'c is patched onto AgentEnv' in r.stdout and 'onto Mine' not in r.stdout

def test_wrap_lines_keeps_a_pragma_on_its_line():
    "A line with `# noqa` is left whole: the pragma applies to the line it is on"
    w = _wrap()
    src = "def reply(self, task, transcript, " + ", ".join(f"arg{k}" for k in range(14)) + "): pass  # noqa: F811"
    new, left = w.wrap_source(src)
    assert new == src and left == [1]

def test_annotation_only_import_needs_an_import_cell(tmp_path):
    "A documented signature naming what only `if TYPE_CHECKING:` imports is a NameError in the docs build's show_doc: refused, named; an import cell before it passes"
    head = "#| export\nfrom __future__ import annotations\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas as pd"
    use = "#| export\ndef table(rows:list)->pd.DataFrame:\n    import pandas as pd\n    return pd.DataFrame(rows)"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(head), nbformat.v4.new_code_cell(use)])
    p = tmp_path / 'tc.ipynb'; nbformat.write(nb, p)
    r = _lint(p)
    assert r.returncode == 1, r.stdout
    assert f"table's signature names pd, which nothing run before it binds in the docs build (cell id {nb.cells[1].id})" in r.stdout
    nb.cells.insert(1, nbformat.v4.new_code_cell('import pandas as pd'))
    nbformat.write(nb, p)
    assert _lint(p).returncode == 0, _lint(p).stdout
    nb.cells[1], nb.cells[2] = nb.cells[2], nb.cells[1]          # the import after the def: still unbound when show_doc runs
    nbformat.write(nb, p)
    assert _lint(p).returncode == 1
    nb.cells[1].source = "#| export\ndef _table(rows:list)->pd.DataFrame: ..."   # private: not documented
    nb.cells.pop(2); nbformat.write(nb, p)
    assert _lint(p).returncode == 0, _lint(p).stdout

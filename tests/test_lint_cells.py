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
    two = "#| export\n@patch\ndef a(self:int): return 1\n\n@patch\ndef b(self:int): return 2"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(two)])
    p = tmp_path / 'two.ipynb'; nbformat.write(nb, p)
    r = _lint(p)
    assert r.returncode == 1 and f'export cell with 2 @patch methods (cell id {nb.cells[0].id})' in r.stdout, r.stdout
    one = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in two.split('\n\n')])
    one.cells[1].source = '#| export\n' + one.cells[1].source
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
    rec['export_cell_median_lines'] -= 1; rec['code_cells_with_output_pct'] += 1
    (tmp_path / 'm.json').write_text(json.dumps(rec))
    r = _metrics('--check', str(tmp_path / 'm.json'))
    assert r.returncode == 1 and 'export_cell_median_lines:' in r.stdout and 'code_cells_with_output_pct:' in r.stdout, r.stdout

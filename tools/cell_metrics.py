"""Issue 40's measures of thoughts per cell, over `nbs/` and the package: export-cell lines (median, share over 30),
export-cell characters (median, code lines only),
package lines over 120 characters, private names imported across modules, pages over 400 code lines (every code
cell's non-blank lines that are not `#|` directives), the share of non-empty code cells that store an output. Prints each with its target; `--check FILE` fails when one is worse than the ceiling FILE records
(a ratchet: it may only improve), `--write FILE` records the current values as the ceilings.
Usage: python tools/cell_metrics.py [--check tools/cell_metrics.json] [--write tools/cell_metrics.json]"""
import argparse
import ast
import json
import statistics
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
from lint_nbs import export_lines  # noqa: E402

TARGETS = {'export_cell_median_lines': 10, 'export_cell_median_chars': 400, 'export_cells_over_30_pct': 10.0, 'package_lines_over_120_pct': 3.0,
           'private_cross_module_imports': 3, 'pages_over_400_code_lines': 0, 'code_cells_with_output_pct': 40.0}
HIGHER_IS_BETTER = {'code_cells_with_output_pct'}

def is_export(c): return any(l.startswith('#| export') for l in c.source.splitlines())

def notebook_measures(nbs:Path)->dict:
    cells, chars, pages, code, shown = [], [], {}, 0, 0
    for p in sorted(nbs.rglob('*.ipynb')):
        if '.ipynb_checkpoints' in p.parts: continue
        nb = nbformat.read(p, as_version=4)
        cells += [export_lines(c.source) for c in nb.cells if c.cell_type == 'code' and is_export(c)]
        chars += [sum(len(l) for l in c.source.splitlines() if l.strip() and not l.lstrip().startswith('#|'))
                  for c in nb.cells if c.cell_type == 'code' and is_export(c)]
        pages[str(p.relative_to(nbs))] = sum(export_lines(c.source) for c in nb.cells if c.cell_type == 'code')
        for c in nb.cells:
            if c.cell_type == 'code' and c.source.strip(): code += 1; shown += bool(c.get('outputs'))
    return {'export_cells': len(cells), 'export_cell_median_lines': statistics.median(cells),
            'export_cell_median_chars': round(statistics.median(chars)),
            'export_cells_over_30_pct': round(100 * sum(n > 30 for n in cells) / len(cells), 1),
            'pages_over_400_code_lines': sum(n > 400 for n in pages.values()),
            'pages_over_400': sorted(k for k, n in pages.items() if n > 400),
            'code_cells_with_output_pct': round(100 * shown / max(code, 1), 1)}

def package_measures(pkg:Path)->dict:
    lines = long = 0
    private = set()
    for p in sorted(pkg.rglob('*.py')):
        if p.name == '_modidx.py': continue
        text = p.read_text()
        ls = text.splitlines(); lines += len(ls); long += sum(len(l) > 120 for l in ls)
        mod = '.'.join(p.relative_to(pkg.parent).with_suffix('').parts)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').startswith(pkg.name)):
                for a in node.names:
                    if a.name.startswith('_') and not a.name.startswith('__'): private.add((mod, node.module or '.', a.name))
    return {'package_lines_over_120_pct': round(100 * long / lines, 1), 'private_cross_module_imports': len(private),
            'private_imports': sorted(f"{m} <- {src}.{n}" for m, src, n in private)}

def measure()->dict: return {**notebook_measures(ROOT / 'nbs'), **package_measures(ROOT / 'knowlyr_lab')}

def worse(now:dict, ceiling:dict)->list[str]:
    out = []
    for k in TARGETS:
        if k not in ceiling: continue
        bad = now[k] < ceiling[k] if k in HIGHER_IS_BETTER else now[k] > ceiling[k]
        if bad: out.append(f"{k}: {now[k]} is worse than the recorded {ceiling[k]} (target {TARGETS[k]})")
    return out

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('--check'); ap.add_argument('--write')
    a = ap.parse_args()
    now = measure()
    for k, t in TARGETS.items(): print(f"{k:34} {now[k]:>7}   target {'>=' if k in HIGHER_IS_BETTER else '<='} {t}")
    print('pages over 400 code lines:', ', '.join(now['pages_over_400']) or 'none')
    if a.write: Path(a.write).write_text(json.dumps({k: now[k] for k in TARGETS}, indent=1) + '\n')
    if a.check and (bad := worse(now, json.loads(Path(a.check).read_text()))):
        print('\n'.join(bad)); sys.exit(1)

if __name__ == '__main__': main()

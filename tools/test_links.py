"""Each page links the pytest files that test its module further (issue 40): a markdown cell, just before the page's
closing `nbdev_export` cell, that starts with `TESTED_IN` and links every file of `tests/` importing the page's module
(found by parsing the tests' imports), and nothing else.
Usage: python tools/test_links.py [--write]   (without --write: exit 1 listing the pages whose links are wrong)"""
import ast
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TESTED_IN = '**Tested further in**'
URL = 'https://github.com/knowlyr/knowlyr-lab/blob/main/'

def page_modules()->dict:
    "Module name -> page, from each page's `default_exp`"
    out = {}
    for p in sorted((ROOT / 'nbs').glob('*.ipynb')):
        m = re.search(r'^#\|\s*default_exp\s+(\S+)', '\n'.join(c.source for c in nbformat.read(p, as_version=4).cells), re.M)
        if m: out[f'knowlyr_lab.{m[1]}'] = p
    return out

def tests_of(modules:dict)->dict:
    "Page -> the sorted test files that import its module (at any depth of the file)"
    out = {}
    for t in sorted((ROOT / 'tests').glob('test_*.py')):
        for n in ast.walk(ast.parse(t.read_text())):
            names = [n.module] if isinstance(n, ast.ImportFrom) and n.module and not n.level else \
                    [a.name for a in n.names] if isinstance(n, ast.Import) else []
            for name in names:
                if name in modules: out.setdefault(modules[name], set()).add(t.relative_to(ROOT).as_posix())
    return {p: sorted(ts) for p, ts in out.items()}

def link_text(tests:list)->str:
    return f"{TESTED_IN} (pytest, across modules or with servers): " + ', '.join(f'[`{t}`]({URL}{t})' for t in tests) + '.'

def check(write=False)->list:
    bad = []
    for page, tests in sorted(tests_of(page_modules()).items()):
        nb = nbformat.read(page, as_version=4)
        cells = [c for c in nb.cells if c.cell_type == 'markdown' and c.source.startswith(TESTED_IN)]
        want = link_text(tests)
        if len(cells) == 1 and cells[0].source == want: continue
        if not write: bad.append(f"{page.relative_to(ROOT)}: its '{TESTED_IN}' cell should read: {want}"); continue
        nb.cells = [c for c in nb.cells if c not in cells]
        last = max((i for i, c in enumerate(nb.cells) if 'nbdev_export()' in c.source), default=len(nb.cells))
        nb.cells.insert(last, nbformat.v4.new_markdown_cell(want))
        nbformat.write(nb, page)
    return bad

if __name__ == '__main__':
    bad = check(write='--write' in sys.argv)
    print('\n'.join(bad) or 'test links: ok')
    sys.exit(1 if bad else 0)

"""Layering check: no page imports a higher-numbered page, at the top of a module or inside a function; and the pages of
each subpackage sit in that package's range of page numbers and are named after it (`PACKAGE_PAGES`: every command
line is in `cli`, pages 90-99; every trainer page is in 60-69), so a page's number says which package it is in.

The page of a module is the notebook its cells come from (the `# %% ../nbs/NN_name.ipynb` markers nbdev-export
writes); pages are ordered by their number and letter (`19a` after `19`, before `20`). Every `import`/`from ... import`
of a `knowlyr_lab` module anywhere in a generated module is checked. Prints each violation with file and line and
exits 1 when there is one. `--list` prints every module's page.

    python tools/check_layering.py [--list]"""
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / 'knowlyr_lab'
MARK = re.compile(r'^# %% \.\./(?:\.\./)*nbs/(\S+?)\.ipynb', re.M)

def page_key(page:str)->tuple:
    "Sort key of a page name: its number, then its letters ('19a_envs' -> (19, 'a'))"
    m = re.match(r'(\d+)([a-z]*)_', Path(page).name)
    return (int(m.group(1)), m.group(2)) if m else (10**6, page)

def module_name(path:Path)->str:
    rel = path.relative_to(ROOT).with_suffix('')
    parts = list(rel.parts)
    if parts[-1] == '__init__': parts = parts[:-1]
    return '.'.join(parts)

def pages()->dict:
    "module -> its page (the highest-numbered page that wrote cells into it)"
    out = {}
    for p in PKG.rglob('*.py'):
        found = MARK.findall(p.read_text())
        if found: out[module_name(p)] = max(found, key=page_key)
    return out

def resolve(mod:str, node:ast.ImportFrom|ast.Import, alias)->list[str]:
    "The knowlyr_lab modules an import statement names"
    if isinstance(node, ast.Import): return [alias.name]
    base = node.module or ''
    if node.level:
        pkg = mod.split('.')[:-node.level] if not mod.endswith('__init__') else mod.split('.')
        base = '.'.join(pkg + ([base] if base else []))
    return [base, f"{base}.{alias.name}"]

PACKAGE_PAGES = {  # subpackage -> the page numbers its modules' pages use (top-level modules sit in their layer's range)
    'sandbox': (10, 12), 'envs': (15, 19), 'recorder': (20, 29), 'reward': (30, 39), 'rollout': (40, 40), 'hub': (41, 49),
    'serving': (50, 59), 'trainer': (60, 69), 'eval': (70, 79), 'cli': (90, 99)}

def misplaced(pg:dict)->list[str]:
    "Modules of a subpackage whose page is outside its range or not named `NN_<package>_...`"
    out = []
    for mod, page in sorted(pg.items()):
        parts = mod.split('.')
        if len(parts) < 2 or parts[1] not in PACKAGE_PAGES: continue
        pkg, (lo, hi) = parts[1], PACKAGE_PAGES[parts[1]]
        num, name = page_key(page)[0], re.sub(r'^\d+[a-z]*_', '', Path(page).name)
        if not lo <= num <= hi or not (name == pkg or name.startswith(pkg + '_')):
            out.append(f"{mod}: its page {page} should be numbered {lo}-{hi} and named {lo}_{pkg}_...")
    return out

def violations(pg:dict)->list[str]:
    out = []
    for p in sorted(PKG.rglob('*.py')):
        mod = module_name(p)
        if mod not in pg: continue
        for node in ast.walk(ast.parse(p.read_text())):
            if not isinstance(node, (ast.Import, ast.ImportFrom)): continue
            for a in node.names:
                for target in resolve(mod, node, a):
                    if target in pg and target != mod and page_key(pg[target]) > page_key(pg[mod]):
                        where = 'inside a function' if node.col_offset else 'at the top'
                        out.append(f"{p.relative_to(ROOT)}:{node.lineno}: {mod} (page {pg[mod]}) imports {target} (page {pg[target]}) {where}")
                        break
    return sorted(set(out))

def main(argv)->int:
    pg = pages()
    if '--list' in argv:
        for m, p in sorted(pg.items(), key=lambda kv: page_key(kv[1])): print(f"{p:40} {m}")
        return 0
    bad = violations(pg) + misplaced(pg)
    for v in bad: print(v)
    print(f"layering: {len(bad)} import(s) of a higher-numbered page or misplaced page(s)" if bad else f"layering: ok ({len(pg)} modules)")
    return 1 if bad else 0

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))

"""House rules that nbdev itself does not check (STYLE.md):
- a code cell that imports must import only (the docs build re-runs import cells on their own, out of context);
- no import inside a flagged cell (#| slow, docker, llm, ray, gpu);
- no exec_doc on a flagged cell;
- an export cell (#| export / #| exports) holds at most MAX_EXPORT_LINES code lines (non-blank, not #| directives):
  one thought per cell, with prose between;
- an export cell holds at most one `@patch` method (each method gets its paragraph and, where cheap, its example), and no
  method is attached by hand (`Cls.attr = fn`, `= lambda`, `= property(fn)`): `@patch` does that, one per cell;
- a page patches only classes its own export cells define (no module adds methods to another module's class);
- every name in a documented signature (a public def or class of an export cell) is bound when the docs build runs the
  page: imported for annotations only (`if TYPE_CHECKING:`, or inside the function) it needs an import cell before it.
Usage: python tools/lint_nbs.py [NOTEBOOK_OR_DIR ...] (default: every notebook under nbs/).
Exit 1 listing every offending cell."""
import ast
import builtins
import sys
from pathlib import Path

import nbformat

FLAGS = {'slow', 'docker', 'llm', 'ray', 'gpu'}
MAX_EXPORT_LINES = 80

def export_lines(src):
    "Code lines of a cell as the export-cell limit counts them: non-blank and not a `#|` directive"
    return sum(1 for l in src.splitlines() if l.strip() and not l.lstrip().startswith('#|'))

def too_long(path, i, c):
    "The lines that report an export cell over `MAX_EXPORT_LINES` code lines, or none"
    keys = {l[2:].strip().split()[0].rstrip(':') for l in c.source.splitlines() if l.startswith('#|') and l[2:].strip()}
    n = export_lines(c.source)
    if not keys & {'export', 'exports'} or n <= MAX_EXPORT_LINES: return []
    return [f"{path}: cell {i}: export cell over {MAX_EXPORT_LINES} lines",
            f"  notebook: {path}", f"  cell id: {c.get('id', '?')}",
            f"  lines: {n} (at most {MAX_EXPORT_LINES}; non-blank lines that are not #| directives)",
            "  split it into one thought per cell (a function, or a class core then @patch methods), with prose between"]

def attached(tree)->list[str]:
    "`Cls.attr = fn` (a name, a lambda or `property(...)` assigned to a class attribute): a method attached by hand"
    out = []
    for n in tree.body:
        if not isinstance(n, ast.Assign): continue
        v = n.value
        method = isinstance(v, (ast.Name, ast.Lambda)) or (isinstance(v, ast.Call) and getattr(v.func, 'id', '') == 'property')
        out += [f"{t.value.id}.{t.attr}" for t in n.targets if method and isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name) and t.value.id[:1].isupper()]
    return out

def patches(path, i, c):
    "The lines that report an export cell holding more than one method added to a class (`@patch`, or `Cls.attr = fn`)"
    src = c.source
    if not any(l.startswith('#| export') for l in src.splitlines()): return []
    try: tree = ast.parse('\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('%', '!'))))
    except SyntaxError: return []
    n = sum(1 for l in src.splitlines() if l.startswith('@patch'))
    hand = attached(tree)
    out = [f"{path}: cell {i}: {a} = ... attaches a method by hand (cell id {c.get('id', '?')}): use @patch" for a in hand]
    if n + len(hand) > 1:
        out.append(f"{path}: cell {i}: export cell with {n + len(hand)} methods added to classes (cell id {c.get('id', '?')}): "
                   "one method per cell, each with its paragraph")
    return out

def _export_trees(nb):
    "(cell index, cell, syntax tree) of each export cell that parses"
    for i, c in enumerate(nb.cells):
        if c.cell_type != 'code' or not any(l.startswith('#| export') for l in c.source.splitlines()): continue
        try: yield i, c, ast.parse('\n'.join(l for l in c.source.splitlines() if not l.lstrip().startswith(('%', '!'))))
        except SyntaxError: continue

def _patched(fn)->list[str]:
    "The class names a function's `@patch` (first parameter's annotation) or `@patch_to(Cls)` decorator adds it to"
    out = []
    for d in fn.decorator_list:
        name = getattr(d.func, 'id', None) if isinstance(d, ast.Call) else getattr(d, 'id', None)
        if name == 'patch' and fn.args.args and fn.args.args[0].annotation is not None:
            out += [n.id for n in ast.walk(fn.args.args[0].annotation) if isinstance(n, ast.Name)]
        elif name == 'patch_to' and isinstance(d, ast.Call) and d.args:
            out += [n.id for n in ast.walk(d.args[0]) if isinstance(n, ast.Name)]
    return out

def foreign_patches(path, nb)->list[str]:
    "A page adds methods only to classes its own export cells define: patching another module's class at import time makes what a class can do depend on what was imported"
    trees = list(_export_trees(nb))
    own = {n.name for _, _, t in trees for n in t.body if isinstance(n, ast.ClassDef)}
    out = []
    for i, c, t in trees:
        for n in t.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out += [f"{path}: cell {i}: {n.name} is patched onto {k}, a class another module defines (cell id {c.get('id', '?')}): "
                        "define it in that class's module, or subclass" for k in _patched(n) if k not in own]
            elif isinstance(n, ast.Assign):
                out += [f"{path}: cell {i}: {a} = ... attaches to a class another module defines (cell id {c.get('id', '?')})"
                        for a in attached(ast.Module(body=[n], type_ignores=[])) if a.split('.')[0] not in own]
    return out

def _binds(body)->set:
    "Names a cell's top-level statements bind when run (imports under `if TYPE_CHECKING:` bind nothing)"
    out = set()
    for n in body:
        if isinstance(n, (ast.Import, ast.ImportFrom)): out |= {(a.asname or a.name).split('.')[0] for a in n.names}
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): out.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            ts = n.targets if isinstance(n, ast.Assign) else [n.target]
            out |= {m.id for t in ts for m in ast.walk(t) if isinstance(m, ast.Name)}
        elif isinstance(n, ast.If) and getattr(n.test, 'id', None) != 'TYPE_CHECKING': out |= _binds(n.body + n.orelse)
        elif isinstance(n, ast.Try): out |= _binds(n.body + n.orelse + [s for h in n.handlers for s in h.body])
        elif isinstance(n, (ast.For, ast.With)): out |= _binds(n.body)
    return out

def _names(t)->set:
    "The names an annotation (a node, or a string under `from __future__ import annotations`) reads"
    if isinstance(t, ast.Constant) and isinstance(t.value, str):
        try: t = ast.parse(t.value, mode='eval')
        except SyntaxError: return set()
    return {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}

def _signature_names(n)->set:
    "The names in the annotations show_doc evaluates for a def (parameters, return) or a class (fields, `__init__`)"
    if isinstance(n, ast.ClassDef):
        init = [m for m in n.body if isinstance(m, ast.FunctionDef) and m.name == '__init__']
        fields = set().union(*[_names(m.annotation) for m in n.body if isinstance(m, ast.AnnAssign)])
        return fields | (_signature_names(init[0]) if init else set())
    a = n.args
    anns = [x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None and x.annotation is not None]
    return set().union(*[_names(t) for t in anns + ([n.returns] if n.returns else [])])

def unbound_annotations(path, nb)->list[str]:
    "The docs build runs a page's export and import cells and `show_doc` evaluates each documented signature there: a name imported for annotations only is a NameError"
    bound, out, trees = set(dir(builtins)), [], {i: t for i, _, t in _export_trees(nb)}
    for i, c in enumerate(nb.cells):
        if c.cell_type != 'code': continue
        if (t := trees.get(i)) is None:
            try: t = ast.parse('\n'.join(l for l in c.source.splitlines() if not l.lstrip().startswith(('%', '!', '#|'))))
            except SyntaxError: continue
            if t.body and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in t.body): bound |= _binds(t.body)
            continue
        bound |= _binds(t.body)
        for n in t.body:
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or n.name.startswith('_'): continue
            if miss := sorted(_signature_names(n) - bound):
                out.append(f"{path}: cell {i}: {n.name}'s signature names {', '.join(miss)}, which nothing run before it binds in "
                           f"the docs build (cell id {c.get('id', '?')}): import it in a cell of its own before this one")
    return out

def problems(path):
    nb = nbformat.read(path, as_version=4)
    yield from foreign_patches(path, nb)
    yield from unbound_annotations(path, nb)
    for i, c in enumerate(nb.cells):
        if c.cell_type != 'code': continue
        yield from too_long(path, i, c)
        yield from patches(path, i, c)
        lines = c.source.splitlines()
        directives = [l[2:].strip() for l in lines if l.startswith('#|')]
        code = '\n'.join(l for l in lines if not l.startswith('#|') and not l.lstrip().startswith(('%', '!')))
        try: tree = ast.parse(code)
        except SyntaxError: continue
        if 'nbdev_export()' in c.source: continue
        keys = {d.split()[0].rstrip(':') for d in directives if d}
        if 'exec_doc' in keys and keys & FLAGS:
            yield f"{path}: cell {i}: exec_doc on a flagged cell (the docs build runs it without the flagged cells it needs)"
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        if not imports: continue
        first = lines[0] if lines else ''
        if any(d.split()[0] in FLAGS for d in directives if d):
            yield f"{path}: cell {i}: import inside a flagged cell ({first})"
        elif not all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body) and not any(d.startswith(('export', 'exports', 'exporti', 'exec_doc')) for d in directives):
            yield f"{path}: cell {i}: mixes imports with other code (split the imports into their own cell): {code.splitlines()[0][:70]}"

def fix(path):
    "Move the top-level imports of offending cells into a cell of their own just before (hidden if the cell is)"
    nb = nbformat.read(path, as_version=4)
    out = []
    for c in nb.cells:
        if c.cell_type == 'code' and 'nbdev_export()' not in c.source:
            lines = c.source.splitlines()
            dirs = [l for l in lines if l.startswith('#|')]
            keys = {d[2:].strip().split()[0] for d in dirs if d[2:].strip()}
            if not keys & {'export', 'exports', 'exporti', 'exec_doc'}:
                try: tree = ast.parse(c.source)
                except SyntaxError: tree = None
                imps = [n for n in (tree.body if tree else []) if isinstance(n, (ast.Import, ast.ImportFrom))]
                if imps and len(imps) != len(tree.body):
                    drop = set()
                    for n in imps: drop.update(range(n.lineno - 1, n.end_lineno))
                    imp_src = '\n'.join(lines[k] for k in sorted(drop))
                    head = '#| hide\n' if 'hide' in keys else ''
                    out.append(nbformat.v4.new_code_cell(head + imp_src))
                    c.source = '\n'.join(l for k, l in enumerate(lines) if k not in drop)
        out.append(c)
    nb.cells = out
    nbformat.write(nb, path)

if __name__ == '__main__':
    if sys.argv[1:2] == ['--fix']:
        for p in sys.argv[2:]: fix(Path(p))
        sys.exit(0)
    args = [Path(p) for p in sys.argv[1:]] or [Path('nbs')]
    paths = [q for p in args for q in (sorted(p.rglob('*.ipynb')) if p.is_dir() else [p])]
    errs = [e for p in paths if '.ipynb_checkpoints' not in str(p) for e in problems(p)]
    print('\n'.join(errs) or 'notebook lint: ok')
    sys.exit(1 if errs else 0)

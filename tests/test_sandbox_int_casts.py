"""No sandbox module casts a checked integer limit again (sbx15 item 3).

`SandboxLimits` refuses any int field that is not an int of at least 1 as it is made (`positive_int`), so `int()` of
one does nothing and tells a reader a float could arrive. 964761b removed such casts from docker.py and host.py, but
its check was a regex over those two files and the spelling `int(L.x)`: local.py (`int(L.cpu_seconds)` ... five),
snapshot.py (`int(limits.max_files)`) and host.py's `int(inodes)` (a parameter typed int, given `max_files`) stayed.
This check reads the syntax of every module of the sandbox package."""
import ast
import inspect
import pkgutil
from dataclasses import fields
from importlib import import_module

import pytest

import knowlyr_lab.sandbox as S
from knowlyr_lab.sandbox.base import SandboxLimits

INT_FIELDS = {f.name for f in fields(SandboxLimits) if f.type == 'int'}

def _is_int(ann)->bool:
    "An annotation that says int (or int|None)"
    return ann is not None and ast.unparse(ann).replace(' ', '') in ('int', 'int|None', 'None|int', 'Optional[int]')

def _known_ints(fn:ast.AST)->set[str]:
    "Names in `fn` that hold an int already: parameters typed int, locals bound to a checked int field"
    a = fn.args
    names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs] if _is_int(p.annotation)}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) and n.value.attr in INT_FIELDS:
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    return names

def recasts(src:str)->list[str]:
    "The `int(...)` calls in `src` of a checked integer limit (any spelling: `L.x`, `self.limits.x`, an alias)"
    out = []
    for fn in ast.walk(ast.parse(src)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)): continue
        known = _known_ints(fn) if not isinstance(fn, ast.Lambda) else set()
        for c in ast.walk(fn):
            if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == 'int' and len(c.args) == 1):
                continue
            x = c.args[0]
            if (isinstance(x, ast.Attribute) and x.attr in INT_FIELDS) or (isinstance(x, ast.Name) and x.id in known):
                out.append(ast.unparse(c))
    return sorted(set(out))

@pytest.mark.parametrize('src', [
    'def f(L): return int(L.tmp_mb)', 'def f(limits): return int(limits.max_files) + 1',
    'def f(self): return int(self.limits.memory_mb)', 'def f(self):\n    n = self.limits.cpu_seconds\n    return int(n)',
    'def f(inodes:int|None=None): return int(inodes) if inodes else 0', 'def f(n:int): return int(n)'])
def test_the_check_finds_every_spelling(src):
    assert recasts(src), src

@pytest.mark.parametrize('src', ['def f(L): return int(L.cpus * 1e9)', 'def f(m): return int(m.mtime)',
                                 'def f(s:str): return int(s)', 'def f(p): return int(p.name)'])
def test_the_check_leaves_other_casts(src):
    assert not recasts(src), src

def test_no_sandbox_module_casts_a_checked_integer_limit_again():
    "On main: local.py's five prlimit/bwrap casts, snapshot.py's int(limits.max_files), host.py's int(inodes)"
    mods = [import_module(f'{S.__name__}.{m.name}') for m in pkgutil.iter_modules(S.__path__)]
    assert len(mods) >= 10, [m.__name__ for m in mods]       # every module of the package is read
    found = {m.__name__: r for m in mods if (r := recasts(inspect.getsource(m)))}
    assert found == {}, found

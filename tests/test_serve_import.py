"""The serving package stands on its own (issue 40, item 1): in a fresh interpreter, importing only
`knowlyr_lab.serving` gives an `AgentInference` whose `serve()` answers an OpenAI request, with no trainer module
loaded; and no module of the package assigns a function to a class of another module."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import knowlyr_lab

SCRIPT = '''
import json, sys, urllib.request
from knowlyr_lab.serving import AgentInference
inf = AgentInference.from_pretrained(sys.argv[1])
assert 'serve' in vars(AgentInference), 'serve is not a method of the class'
with inf.serve() as srv:
    body = json.dumps({'messages': [{'role': 'user', 'content': 'Hi'}], 'max_tokens': 4}).encode()
    answer = json.loads(urllib.request.urlopen(srv.url + '/chat/completions', data=body).read())
print(json.dumps({'object': answer['object'], 'tokens': answer['usage']['completion_tokens'], 'stopped': srv.thread is None,
                  'trainer': sorted(m for m in sys.modules if m.startswith('knowlyr_lab.trainer'))}))
'''

def test_serve_works_after_importing_only_the_serving_package(tmp_path):
    from knowlyr_lab.trainer.tiny import make_tiny_model, save_tiny_model
    folder = save_tiny_model(*make_tiny_model(), tmp_path / 'tiny')
    r = subprocess.run([sys.executable, '-c', SCRIPT, str(folder)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {'object': 'chat.completion', 'tokens': got['tokens'], 'stopped': True, 'trainer': []}
    assert 1 <= got['tokens'] <= 4

def _foreign_class_assignments(path:Path)->list[str]:
    "`Cls.attr = fn` lines where `Cls` is not defined in the module itself"
    tree = ast.parse(path.read_text())
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    out = []
    for n in tree.body:
        if not isinstance(n, ast.Assign): continue
        for t in n.targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id[:1].isupper() and t.value.id not in own:
                out.append(f"{path.name}:{n.lineno}: {t.value.id}.{t.attr}")
    return out

def test_no_module_assigns_to_another_modules_class():
    pkg = Path(knowlyr_lab.__file__).parent
    bad = [b for p in sorted(pkg.rglob('*.py')) if p.name != '_modidx.py' for b in _foreign_class_assignments(p)]
    assert bad == [], bad

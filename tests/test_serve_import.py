"""`serve` is a method `knowlyr_lab.trainer.serve` adds to `AgentInference`: the model module alone has no HTTP server,
and importing the serve module (as every caller of `.serve(` does) is what gives it one."""
import subprocess
import sys


def _has_serve(imports:str)->str:
    code = f"{imports}\nfrom knowlyr_lab.trainer.inference import AgentInference\nprint(hasattr(AgentInference, 'serve'))"
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()

def test_the_model_module_alone_has_no_server():
    assert _has_serve('') == 'False'

def test_importing_the_serve_module_adds_it():
    assert _has_serve('import knowlyr_lab.trainer.serve') == 'True'
    assert _has_serve('from knowlyr_lab.trainer.serve import load_lora_adapter') == 'True'

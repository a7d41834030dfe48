"""srv16: every server command's --max-head-bytes default is `MAX_HEAD_BYTES` of `knowlyr_lab.envs.sessions`, the one
bound the servers share. The trainer's `serve` wrote its own `16 * 2**10` (the same number today, a second home
tomorrow), and `knowlyr-lab-mcp` had no such flag. Checked on a copy of the package whose MAX_HEAD_BYTES is changed:
each command's default follows it."""
import json
import os
import shutil
import subprocess
import sys

import knowlyr_lab

SCRIPT = '''
import json
from knowlyr_lab.cli.env_serve import _env_serve_parser
from knowlyr_lab.cli.trainer import build_parser
from knowlyr_lab.mcp import _parser
print(json.dumps({'env-serve': _env_serve_parser().parse_args(['x']).max_head_bytes,
                  'trainer serve': build_parser().parse_args(['serve', '--model', 'm']).max_head_bytes,
                  'knowlyr-lab-mcp': _parser().parse_args([]).max_head_bytes}))
'''

def test_every_max_head_bytes_flag_defaults_to_the_one_constant(tmp_path):
    "main: knowlyr-lab-mcp had no such flag; with it (the previous commit) the trainer's stayed 16384 under a 32768"
    pkg = shutil.copytree(os.path.dirname(knowlyr_lab.__file__), tmp_path / 'knowlyr_lab', ignore=shutil.ignore_patterns('__pycache__'))
    src = (pkg / 'envs' / 'sessions.py').read_text()
    assert src.count('\nMAX_HEAD_BYTES = 16_384 ') == 1
    (pkg / 'envs' / 'sessions.py').write_text(src.replace('\nMAX_HEAD_BYTES = 16_384 ', '\nMAX_HEAD_BYTES = 32_768 '))
    r = subprocess.run([sys.executable, '-c', SCRIPT], cwd=tmp_path, env={**os.environ, 'PYTHONPATH': str(tmp_path)},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == {'env-serve': 32768, 'trainer serve': 32768, 'knowlyr-lab-mcp': 32768}, r.stdout

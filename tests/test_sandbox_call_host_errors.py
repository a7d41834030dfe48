"""Who failed in a tool call: the host (its devices, memory or file table: `host_errno`) or the agent.

`SandboxCalls._execute_tool` (page 10b) answered every `OSError` to the agent, so the host's own failure (EMFILE: its
file table full) read as the agent's error and the episode was scored. It is the sandbox's failure now
(`SandboxBackendError`, the episode left out), which an agent must not be able to cause: the per-component path walk
(page 10ea, used where openat2 is missing) held one descriptor per directory of a path the agent chose, so a deep
enough path filled the host's file table. Each case runs in a child process whose RLIMIT_NOFILE is lowered (a real
EMFILE, nothing mocked); the sandbox is the local backend without isolation (no bubblewrap needed: only the host's
side of a file read is under test)."""
import errno
import subprocess
import sys

PRELUDE = '''
import errno, resource, tempfile, warnings
from pathlib import Path
from knowlyr_lab.sandbox.base import SandboxBackendError
from knowlyr_lab.sandbox.protocol import create_sandbox
warnings.simplefilter('ignore', UserWarning)   # isolation='none' says it is not isolated
src = Path(tempfile.mkdtemp()); (src / 'a.txt').write_text('hello')
deep = Path(src, *['d'] * 150); deep.mkdir(parents=True); (deep / 'b.txt').write_text('deep')
sb = create_sandbox('local', isolation='none', workspace=src)
def call(path):
    try: r = sb.execute_tool('file_read', {'path': path}); return f'answered is_error={r.is_error} {r.output}'
    except SandboxBackendError as e: return f'SandboxBackendError errno={getattr(e.__cause__, "errno", None)} {e}'
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
'''

def run(code:str)->list[str]:
    # -P: the package on PYTHONPATH, as this test's (not one in the working directory)
    r = subprocess.run([sys.executable, '-P', '-c', PRELUDE + code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.splitlines()

def test_the_hosts_file_table_full_is_the_sandboxs_failure():
    "EMFILE under a file_read: on main 'answered is_error=True Error: Too many open files: .', the agent's"
    out = run('''
print(call('a.txt'))
held = []
try:
    while True: held.append(open('/dev/null'))   # the host's file table, full for this process
except OSError as e: assert e.errno == errno.EMFILE, e
print(call('a.txt'))
for f in held: f.close()
print(call('a.txt'))
''')
    assert out[0] == 'answered is_error=False hello', out
    assert out[1].startswith(f'SandboxBackendError errno={errno.EMFILE} the host failed under the file_read call: '), out
    assert out[2] == 'answered is_error=False hello', out   # the sandbox still works once the host has descriptors

def test_a_deep_path_cannot_fill_the_hosts_file_table():
    """150 nested directories under a 64-descriptor limit, read along the per-component walk (a kernel without openat2):
    on main the walk held one descriptor per directory and the read failed with EMFILE -- which, now the host's, would
    let an agent have its episode left out"""
    out = run('''
import knowlyr_lab.sandbox.beneath as beneath
for use_openat2 in (True, False):
    if use_openat2 and not beneath.openat2_available(): print('answered is_error=False deep'); continue
    beneath.openat2_available = lambda: use_openat2
    print(call('/'.join(['d'] * 150) + '/b.txt'))
print(call('x' * 300))
''')
    assert out[:2] == ['answered is_error=False deep'] * 2, out
    assert out[2].startswith('answered is_error=True Error: File name too long: xxx'), out   # the agent's name: its answer

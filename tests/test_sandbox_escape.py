"""Containment: what an agent must not be able to do from inside a sandbox, on every backend.

Network tests only attempt connections (to the host's loopback and to 1.1.1.1); they never send data.
The unisolated local fallback cannot hold the filesystem and network checks; those are skipped there with the reason."""
import os
import secrets
import socket
import time
from pathlib import Path

import pytest
from sandbox_backends import BACKENDS, open_sandbox

LIMITS = {'wall_timeout': 5, 'cpu_seconds': 2, 'memory_mb': 256, 'max_processes': 64, 'max_file_mb': 1, 'max_output_chars': 4000}

@pytest.fixture(scope='module', params=BACKENDS)
def msb(request):
    return open_sandbox(request, request.param, limits=LIMITS)

@pytest.fixture
def sb(msb):
    msb.reset()
    return msb

def isolated_only(sb):
    if sb.isolation.startswith('none'): pytest.skip('the unisolated fallback (no bubblewrap) shares the host filesystem and network: this cannot hold there')

def sh(sb, command, **kw):
    return sb.execute_tool('shell', {'command': command, **kw})

CONNECT = '''python3 - <<'EOF'
import socket
for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53)]:
    s = socket.socket(); s.settimeout(2)
    try: s.connect((host, port)); print(host, "CONNECTED")
    except OSError as e: print(host, "failed:", type(e).__name__, e.errno)
    finally: s.close()
EOF'''

def test_no_network(sb):
    isolated_only(sb)
    srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1); srv.setblocking(False)
    port = srv.getsockname()[1]
    try:
        r = sh(sb, CONNECT.format(port=port))
        lines = r.output.splitlines()
        assert len(lines) == 2 and all('failed:' in l for l in lines), r.output
        assert 'CONNECTED' not in r.output
        with pytest.raises(BlockingIOError): srv.accept()   # nothing reached the host's listener
    finally: srv.close()
    assert sh(sb, 'cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "').output.split() == ['lo']

@pytest.fixture
def host_secret(tmp_path):
    d = tmp_path/'host'; d.mkdir(); d.chmod(0o755)
    secret = 'SECRET-' + secrets.token_hex(8)
    f = d/'secret.txt'; f.write_text(secret + '\n'); f.chmod(0o644)
    return f, secret

def test_file_tools_cannot_leave_workspace(sb, host_secret):
    f, secret = host_secret
    target = f.parent/'written.txt'
    sh(sb, f'ln -s {f} s_abs && ln -s {f.parent} s_dir && ln -s ../../../../../../../../{str(f)[1:]} s_rel')
    for p in [str(f), str(target), '../' * 12 + str(f)[1:], 's_abs', 's_dir/secret.txt', 's_rel', 's_dir/written.txt']:
        for tool, extra in [('file_read', {}), ('file_write', {'content': 'pwned'}), ('edit_file', {'old_str': 'SECRET', 'new_str': 'x'})]:
            r = sb.execute_tool(tool, {'path': p, **extra})
            assert r.is_error and r.info['error_type'] == 'PathEscapeError', (tool, p, r.output)
            assert secret not in r.output
        r = sb.execute_tool('search', {'pattern': 'SECRET', 'path': p})
        assert r.is_error and secret not in r.output
    assert not target.exists() and f.read_text() == secret + '\n'

def test_shell_cannot_write_outside(sb, host_secret):
    isolated_only(sb)
    f, secret = host_secret
    r = sh(sb, f'echo pwned > {f.parent}/new.txt; echo pwned > {f}; touch /usr/pwned /etc/pwned /pwned; mkdir -p /opt/x; '
              'echo done')
    assert 'done\n' in r.output and r.output.count('Read-only file system') + r.output.count('No such file or directory') + r.output.count('Permission denied') >= 5, r.output
    assert f.read_text() == secret + '\n' and not (f.parent/'new.txt').exists()
    for p in ['/usr/pwned', '/etc/pwned', '/pwned', '/opt/x']: assert not Path(p).exists()

def test_shell_cannot_read_host_secrets(sb, host_secret):
    isolated_only(sb)
    f, secret = host_secret
    r = sh(sb, f'cat {f}; ls {f.parent}; cat /etc/shadow; ls /root /home; grep -rs SECRET- /etc /tmp /var 2>/dev/null | head -3; echo end')
    assert secret not in r.output and r.output.endswith('end\n'), r.output
    assert 'root:' not in r.output  # no /etc/shadow content

def test_no_parent_environment(request, msb):
    os.environ['OPENAI_API_KEY'] = 'sk-test-planted'
    try:
        backend = 'docker' if msb.backend == 'docker' else ('local-none' if msb.isolation.startswith('none') else 'local')
        fresh = open_sandbox(request, backend, limits=LIMITS)
        r = sh(fresh, 'env; echo ---; echo "[$OPENAI_API_KEY]"')
        assert 'sk-test-planted' not in r.output and '[]' in r.output and 'HOME=' in r.output
        if not fresh.isolation.startswith('none'):
            r = sh(fresh, 'cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n"')
            assert 'sk-test-planted' not in r.output
    finally: del os.environ['OPENAI_API_KEY']

def test_runs_unprivileged(sb):
    r = sh(sb, 'id -u; id -g; grep CapEff /proc/self/status')
    uid, gid, cap = r.output.splitlines()
    assert (uid, gid) == (str(sb.uid), str(sb.uid))
    if os.geteuid() == 0: assert sb.uid >= 2_000_000_000      # a uid of its own, from the sandbox range
    assert cap.split()[1] == '0000000000000000', cap

def _leftovers(marker):
    n = 0
    for p in Path('/proc').iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p/'cmdline').read_bytes(): n += 1
            except OSError: pass
    return n

def test_fork_bomb_contained(sb):
    if sb.isolation.startswith('none'):
        pytest.skip("the unisolated fallback has no pid namespace: killed fork-bomb processes stay as zombies (counted by "
                    "RLIMIT_NPROC for the sandbox uid) until the host's init reaps them, so this cannot hold there")
    marker = 'forkbomb_' + secrets.token_hex(4)
    t0 = time.monotonic()
    r = sh(sb, f'M={marker}; b() {{ b | b & }}; b; sleep 3; echo survived-$M')
    took = time.monotonic() - t0
    assert took < LIMITS['wall_timeout'] + 5, took
    assert r.exit_code in (0, None) or r.is_error
    assert 'Resource temporarily unavailable' in r.output or 'retry' in r.output or r.info['timed_out'], r.output[-500:]
    time.sleep(0.5)
    assert _leftovers(marker) == 0, 'fork bomb processes survived the command'
    assert sh(sb, 'echo alive').output == 'alive\n'

@pytest.mark.parametrize('hold', ['ends at once', 'holds the output past the deadline'])
def test_no_process_outlives_a_command_that_kills_what_runs_it(sb, hold):
    "The agent's uid may kill the process that runs its command (docker: the wrapper whose `kill -9 -1` ends what a command started, whose fallback, `_kill_all`, exec'd a `kill` binary the image lacks); a daemon it started ran on beside the next commands"
    isolated_only(sb)                          # unisolated, the parent's parent is the host's own process
    marker = 'daemon_' + secrets.token_hex(4)
    out = '' if hold.startswith('holds') else ' >/dev/null 2>&1'
    r = sh(sb, f'p=$(cut -d" " -f4 /proc/$PPID/stat); (exec -a {marker} sleep 60{out} &); '
               f'[ "$p" -gt 1 ] && kill -9 "$p"; echo started', timeout=2)
    assert 'started' in r.output, r
    seen = sh(sb, f'grep -l "{marker[:-1]}[{marker[-1]}]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l')
    assert seen.output.strip() == '0', (r, seen)          # gone before the next command starts
    assert _leftovers(marker) == 0
    assert sh(sb, 'echo alive').output == 'alive\n'

def test_memory_bomb_contained(sb):
    t0 = time.monotonic()
    r = sh(sb, 'python3 -c "x = bytearray(2 * 2**30); print(len(x))"')
    assert time.monotonic() - t0 < LIMITS['wall_timeout'] + 5
    assert r.is_error and '2147483648' not in r.output
    assert 'MemoryError' in r.output or r.exit_code == 137 and 'out of memory' in r.output, r
    assert sh(sb, 'echo alive').output == 'alive\n'

def test_infinite_output_truncated(sb):
    t0 = time.monotonic()
    r = sh(sb, 'yes infinite-output', timeout=2)
    assert time.monotonic() - t0 < 2 + 5
    assert r.info['timed_out'] and r.truncated and r.exit_code is None
    assert len(r.output) < LIMITS['max_output_chars'] + 200 and r.info['cut_chars'] > 100_000
    assert r.output.startswith('infinite-output\n') and 'truncated' in r.output and 'timeout of 2 s' in r.output

def test_infinite_loop_killed(sb):
    t0 = time.monotonic()
    r = sh(sb, 'while :; do :; done', timeout=1.5)
    took = time.monotonic() - t0
    assert r.info['timed_out'] and r.exit_code is None and took < 6, (r, took)
    # CPU seconds are enforced too: a busy loop with a generous wall clock dies of SIGXCPU/SIGKILL after cpu_seconds
    t0 = time.monotonic()
    r = sh(sb, 'python3 -c "while True: pass"', timeout=30)
    took = time.monotonic() - t0
    assert not r.info['timed_out'] and r.exit_code in (137, 152) and 'killed by' in r.output and took < 20, (r, took)

def test_file_size_limit(sb):
    r = sh(sb, 'head -c 5000000 /dev/zero > big.bin; ls -l big.bin | cut -d" " -f5')
    assert int(r.output.strip().splitlines()[-1]) <= LIMITS['max_file_mb'] * 2**20
    r = sb.execute_tool('file_write', {'path': 'big2.txt', 'content': 'x' * (2 * 2**20)})
    assert r.is_error and 'max_file_mb' in r.output

# ---- issue 13: attacks a hostile agent tried through the tool API ----

@pytest.fixture
def root_only_dir(tmp_path):
    "A host directory only root may enter, with a root-only file in it"
    d = tmp_path/'rootonly'; d.mkdir(); d.chmod(0o700)
    f = d/'victim.txt'; f.write_text('root only\n'); f.chmod(0o600)
    return d

def _unchanged(d:Path, names=('victim.txt',)):
    st = (d/'victim.txt').stat()
    assert sorted(p.name for p in d.iterdir()) == sorted(names), list(d.iterdir())
    assert (st.st_uid, st.st_mode & 0o777, (d/'victim.txt').read_text()) == (0, 0o600, 'root only\n')
    assert (d.stat().st_uid, d.stat().st_mode & 0o777) == (0, 0o700)

def test_symlink_race_with_concurrent_calls(sb, root_only_dir):
    "One call flips `x` between absent and a symlink to a root-only host dir while others write `x/pwned`"
    import threading
    stop = threading.Event()
    def flipper():
        sh(sb, f'end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do ln -sfn {root_only_dir} x; rm -rf x; done', timeout=10)
        stop.set()
    t = threading.Thread(target=flipper); t.start()
    while not stop.is_set():
        sb.execute_tool('file_write', {'path': 'x/pwned', 'content': 'pwned'})
        sb.execute_tool('shell', {'command': 'rm -rf x'}) if not stop.is_set() else None
    t.join()
    _unchanged(root_only_dir)

def test_symlink_race_below_the_lock(sb, root_only_dir):
    "The host-side file primitives hold even without the per-sandbox lock: a host thread flips the link as fast as it can"
    if sb.workspace is None: pytest.skip('file primitives run inside the container on this backend (no host-side path walk)')
    import subprocess
    ws = Path(sb.workspace)
    flip = subprocess.Popen(['sh', '-c', f'cd {ws} && while :; do ln -sfn {root_only_dir} y; rm -rf y; done'])
    leaked = []
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2:
            try: sb._write_bytes('y/pwned', b'pwned')
            except Exception: pass
            try: leaked.append(sb._read_bytes('y/victim.txt', 100))
            except Exception: pass
    finally: flip.kill(); flip.wait()
    assert b'root only\n' not in leaked
    _unchanged(root_only_dir)

def test_fifo_and_special_files_refused(sb):
    t0 = time.monotonic()
    assert 'ok' in sh(sb, 'mkfifo p && ln -s p plink && echo ok').output
    for tool, extra in [('file_write', {'content': 'x'}), ('file_read', {}), ('edit_file', {'old_str': 'a', 'new_str': 'b'})]:
        for p in ('p', 'plink'):
            r = sb.execute_tool(tool, {'path': p, **extra})
            assert r.is_error and 'regular file' in r.output, (tool, p, r.output)
    r = sb.execute_tool('search', {'pattern': 'x'})
    assert not r.is_error or 'No matches' in r.output, r.output
    assert time.monotonic() - t0 < 30                      # a hang bound, not a speed check: a FIFO open used to block forever
    snap = sb.snapshot()                      # a FIFO in the workspace does not break snapshots (it is left out)
    assert 'p' not in snap.files() and snap.info.get('skipped') == ['p']

def test_fail_closed_without_bubblewrap(tmp_path, monkeypatch):
    "No bubblewrap on PATH: creating a local sandbox raises with the fix instead of running unisolated"
    import shutil

    from knowlyr_lab.sandbox.base import SandboxError
    from knowlyr_lab.sandbox.protocol import create_sandbox
    bin_ = tmp_path/'bin'; bin_.mkdir()
    for tool in ('prlimit', 'setpriv', 'bash', 'sh', 'tar', 'python3', 'mount', 'umount'):
        if shutil.which(tool): os.symlink(shutil.which(tool), bin_/tool)
    monkeypatch.setenv('PATH', str(bin_))
    with pytest.raises(SandboxError, match='bubblewrap'): create_sandbox()
    with pytest.raises(SandboxError, match='bubblewrap'): create_sandbox('local', isolation='auto')
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        with create_sandbox('local', isolation='none') as s: assert s.isolation == 'none'
    assert any('NOT ISOLATED' in str(x.message) for x in w)

def test_isolation_recorded_in_trajectories():
    "An explicit isolation='none' opt-in is written into every trajectory the env records (and so is real isolation)"
    import warnings

    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.envs.sandbox import SandboxEnv
    from knowlyr_lab.rollout.engine import run_episode
    got = {}
    for iso in (['none', 'bwrap'] if os.environ.get('KNOWLYR_NO_BWRAP') is None else ['none']):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)
            env = SandboxEnv(sandbox_kwargs={'isolation': iso})
            try: traj = run_episode(env, ExpertAgent(), 'py-fizzbuzz-order', seed=0)
            finally: env.close()
        assert traj.outcome.success, traj.metadata
        got[iso] = traj.metadata.get('isolation')
    assert got == {'none': 'none', 'bwrap': 'bubblewrap'}, got

def test_a_local_sandbox_with_network_cannot_reach_the_hosts_loopback(tmp_path):
    "network=True made bubblewrap share the host's network namespace: the agent connected to a 127.0.0.1 listener of the host and to its abstract unix sockets"
    from knowlyr_lab.sandbox.base import SandboxUnavailableError
    from knowlyr_lab.sandbox.local import bwrap_available
    from knowlyr_lab.sandbox.protocol import create_sandbox
    if not bwrap_available(): pytest.skip('bubblewrap unavailable')
    srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1); srv.setblocking(False)
    try:
        try: sb = create_sandbox('local', isolation='bwrap', limits={**LIMITS, 'network': True})
        except SandboxUnavailableError as e:
            assert "backend='docker'" in str(e) and 'loopback' in str(e), str(e); return
        with sb: r = sh(sb, CONNECT.format(port=srv.getsockname()[1]))
        assert '127.0.0.1 CONNECTED' not in r.output, r.output
        with pytest.raises(BlockingIOError): srv.accept()
    finally: srv.close()

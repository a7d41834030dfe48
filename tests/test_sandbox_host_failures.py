"""Who failed while a workspace was judged: the host (its disk full or failing) or the agent (its files).

A host `OSError` of its devices while the agent's files were copied out and judged (EIO) was scored as the agent's
failure (a valid episode, reward 0, 'workspace not judged'); it is the harness's failure, and the episode is left out
(invalid). What the agent's files cause stays the agent's scored failure: a path too long for the host
(ENAMETOOLONG), running out of space on the host's copy (ENOSPC: the copy grows with the agent's files, so an agent
could otherwise write a big failing workspace and have the episode excluded), and hard links whose copies pass the
workspace quota, which are refused before any copy is made."""
import errno
import io
import os
import subprocess
import sys
import tarfile
from types import SimpleNamespace

import pytest

import knowlyr_lab.verifiers as verifiers
from knowlyr_lab.agents import ScriptedAgent
from knowlyr_lab.envs.sandbox import SandboxEnv
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.sandbox.base import SandboxError, SandboxLimits
from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.sandbox.snapshot import ArchiveWriter, SandboxSnapshot, check_archive

pytestmark = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the sandbox env refuses to start')

TASK = 'py-fizzbuzz-order'
SUBMIT = {'tool': 'submit', 'params': {}}
LIMITS = {'wall_timeout': 20}

def sh(command): return {'tool': 'shell', 'params': {'command': command}}

def episode(actions, limits=LIMITS):
    t, = collect(lambda: SandboxEnv(limits=limits), ScriptedAgent([*actions, SUBMIT]), 1, tasks=[TASK], progress=False)
    return t

def quotas_here()->bool:
    "Whether this host's sandboxes have tmpfs quotas on the workspace and /tmp (root can mount them)"
    with SandboxEnv(limits=LIMITS) as env:
        env.reset(task=TASK)
        return {'workspace', 'tmp'} <= set(env.sandbox.containment.get('quotas_mb') or {})

@pytest.mark.parametrize('code', [errno.EIO])
def test_a_host_failure_while_judging_is_an_infrastructure_failure(monkeypatch, code):
    "The host's disk fails as the candidate is written: on main a valid episode scored 0, 'workspace not judged: OSError ...'"
    def host_fails(root, files): raise OSError(code, os.strerror(code), str(root))
    monkeypatch.setattr(verifiers, '_write_tree', host_fails)
    t = episode([])
    if not quotas_here():              # the agent's writes were not bounded: it may have filled the host itself
        assert t.valid and t.outcome.reason.startswith('workspace not judged: OSError'), t.outcome
        return
    assert not t.valid and (t.outcome.score, len(t.steps)) == (None, 0), t.outcome
    assert t.outcome.invalid.startswith(f'InfrastructureError: the host failed while judging the workspace (OSError: [Errno {code}]'), \
        t.outcome.invalid

def test_no_space_on_the_hosts_copy_is_the_agents_failure(monkeypatch):
    "ENOSPC as the candidate is written: the copy's size is the agent's doing, so the episode is scored, never left out"
    def host_full(root, files): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(root))
    monkeypatch.setattr(verifiers, '_write_tree', host_full)
    t = episode([])
    assert t.valid and (t.outcome.success, t.outcome.score) == (False, 0.0), t.outcome
    assert t.outcome.reason.startswith('workspace not judged: OSError: [Errno 28]'), t.outcome.reason

def test_a_path_too_long_for_the_host_is_the_agents_failure():
    "4,063 characters: the sandbox archives it (./ + path < PATH_MAX), the host's candidate folder cannot hold it (ENAMETOOLONG)"
    deep = 'for i in $(seq 16); do d=$(printf "d%.0s" $(seq 250)); mkdir $d && cd $d; done; mkdir eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee && echo x > eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee/f'
    t = episode([sh(deep)])
    assert t.valid and t.outcome.invalid is None, t.outcome.invalid
    assert (t.outcome.success, t.outcome.score) == (False, 0.0), t.outcome
    assert t.outcome.reason.startswith('workspace not judged: OSError: [Errno 36] File name too long'), t.outcome.reason

def test_hard_links_past_the_quota_are_refused_before_any_copy(monkeypatch):
    "6 MiB under 10 names in an 8 MiB workspace: on main 60 MiB of candidate files went to the verifier and onto the host"
    got = []
    real = verifiers.HiddenTestVerifier.verify
    def seen(self, files): got.append(sum(map(len, files.values()))); return real(self, files)
    monkeypatch.setattr(verifiers.HiddenTestVerifier, 'verify', seen)
    t = episode([sh('head -c 6M /dev/urandom > big.bin && for i in $(seq 9); do ln big.bin l$i.bin; done')],
                limits={**LIMITS, 'disk_mb': 8})
    assert got == [], got                                   # nothing was copied out to judge
    assert t.valid and (t.outcome.success, t.outcome.score) == (False, 0.0), t.outcome
    assert "more than 8 MiB counted once per name (hard links)" in t.outcome.reason, t.outcome.reason


def test_a_fractional_quota_bounds_the_copy_at_its_own_size():
    "disk_mb=1.5 (SandboxLimits takes any positive number): the copy's bound was int(disk_mb) MiB, so a workspace within its quota was refused"
    def snapshot(files):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode='w:gz') as tf:
            for n, d in files.items(): ti = tarfile.TarInfo(n); ti.size = len(d); tf.addfile(ti, io.BytesIO(d))
        return SandboxSnapshot(buf.getvalue(), {'skipped': []})
    class Sb:   # what verify_sandbox asks of a sandbox: its limits and a snapshot
        def __init__(self, limits, files): self.limits, self._files = limits, files
        def snapshot(self): return snapshot(self._files)
    v = verifiers.HiddenTestVerifier({'a.py': 'x = 1\n'}, {'test_a.py': 'import unittest\nclass T(unittest.TestCase):\n    def test_x(self): pass\n'})
    # the sandboxed run, stood in for: the bytes it got
    v.verify = lambda files: SimpleNamespace(n=sum(map(len, files.values())), ignored={})
    assert v.verify_sandbox(Sb(SandboxLimits(disk_mb=1.5), {'data.bin': b'x' * 1_200_000})).n >= 1_200_000
    assert v.verify_sandbox(Sb(SandboxLimits(disk_mb=0.5), {'data.bin': b'x' * 100})).n >= 100
    with pytest.raises(SandboxError, match='more than 1.5 MiB'):
        v.verify_sandbox(Sb(SandboxLimits(disk_mb=1.5), {'data.bin': b'x' * 1_700_000}))


class FailingDisk:
    "A binary file over `data` whose reads fail with `code` once `at` bytes were read: the host's disk failing under it"
    def __init__(self, data, at, code=errno.EIO):
        self.f, self.at, self.code = io.BytesIO(data), at, code
    def read(self, n=-1):
        if self.f.tell() >= self.at: raise OSError(self.code, os.strerror(self.code))
        left = self.at - self.f.tell()
        return self.f.read(left if n is None or n < 0 else min(n, left))
    def seek(self, *a): return self.f.seek(*a)
    def tell(self): return self.f.tell()
    def __enter__(self): return self
    def __exit__(self, *exc): pass

def test_check_archive_passes_the_hosts_read_error_through():
    "On main: SandboxError 'snapshot archive is not a readable tar (OSError: [Errno 5] ...)', the agent's failure"
    w = ArchiveWriter()
    for i in range(5):
        ti = tarfile.TarInfo(f'f{i}.bin'); ti.size = 2000; w.add(ti, io.BytesIO(os.urandom(2000)))
    data = w.close()
    assert check_archive(data) == 5
    with pytest.raises(OSError) as e: check_archive(FailingDisk(data, 5000))
    assert e.value.errno == errno.EIO and not isinstance(e.value, SandboxError), repr(e.value)
    with pytest.raises(SandboxError, match='not a readable tar'): check_archive(data[:5000])   # a cut archive: the agent's

def test_a_host_read_error_of_the_snapshot_leaves_the_episode_out(monkeypatch):
    "The host's disk fails while the workspace's snapshot is checked: on main a valid episode scored 0, 'workspace not judged'"
    real = SandboxSnapshot.open
    def failing(self): return FailingDisk(real(self).read(), 5000)
    monkeypatch.setattr(SandboxSnapshot, 'open', failing)
    t = episode([sh('head -c 20000 /dev/urandom > data.bin')])
    if not quotas_here():              # the agent's writes were not bounded: the error stays the agent's
        assert t.valid and t.outcome.reason.startswith('workspace not judged: OSError'), t.outcome
        return
    assert not t.valid and t.outcome.score is None, t.outcome
    assert t.outcome.invalid.startswith('InfrastructureError: the host failed while judging the workspace (OSError: [Errno 5]'), \
        t.outcome.invalid

class FirstReadFails(FailingDisk):
    "The host's disk fails the very first read with EIO, then gives the bytes (to a retry, as tarfile's 'r:*' makes)"
    def __init__(self, data): super().__init__(data, len(data)); self.failed = False
    def read(self, n=-1):
        if not self.failed: self.failed = True; raise OSError(errno.EIO, os.strerror(errno.EIO))
        return super().read(n)

@pytest.mark.parametrize('disk', [FirstReadFails, lambda data: FailingDisk(data, 100)], ids=['first read', 'at byte 100'])
def test_check_archive_passes_a_read_error_before_the_first_header_through(disk):
    "On main: SandboxError 'not a readable tar (ReadError: file could not be opened successfully ...)', errno lost"
    w = ArchiveWriter()
    ti = tarfile.TarInfo('f.bin'); ti.size = 2000; w.add(ti, io.BytesIO(os.urandom(2000)))
    data = w.close()
    with pytest.raises(OSError) as e: check_archive(disk(data))
    assert e.value.errno == errno.EIO and not isinstance(e.value, SandboxError), repr(e.value)
    snap = SandboxSnapshot(data, {})
    snap.open = lambda: disk(data)          # the snapshot's own file, failing the same way
    with pytest.raises(OSError) as e: _ = snap.digest
    assert e.value.errno == errno.EIO and not isinstance(e.value, SandboxError), repr(e.value)
    with pytest.raises(SandboxError, match='not a readable tar'): check_archive(data[:100])   # a cut archive: the agent's

LOAD_OUT_OF_FILES = '''
import errno, gzip, resource, tempfile
from pathlib import Path
from knowlyr_lab.sandbox.snapshot import SandboxSnapshot, tar_directory
path = SandboxSnapshot(gzip.compress(tar_directory(None)), {}).save(Path(tempfile.mkdtemp()) / 'a.snap')
SandboxSnapshot.load(path)                       # a good file loads
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
held = []
try:
    while True: held.append(open('/dev/null'))   # the host's file table, full for this process
except OSError as e: assert e.errno == errno.EMFILE, e
try: SandboxSnapshot.load(path); print('loaded')
except Exception as e: print(type(e).__name__, getattr(e, 'errno', None), e)
'''

def test_load_passes_the_hosts_error_through():
    "EMFILE (the host's file table) while a saved snapshot is loaded: on main SandboxError '...: not a sandbox snapshot file (OSError: [Errno 24] ...)', the caller's"
    # -P: the package on PYTHONPATH, as this test's (not one in the working directory)
    r = subprocess.run([sys.executable, '-P', '-c', LOAD_OUT_OF_FILES], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith(f'OSError {errno.EMFILE} '), r.stdout

def test_load_of_a_missing_or_bad_file_stays_the_callers_error(tmp_path):
    "What the caller gave (no file, not a snapshot) is a SandboxError it can act on, never the host's"
    (tmp_path / 'bad.snap').write_bytes(b'x' * 1000)
    for p in (tmp_path / 'nothing.snap', tmp_path / 'bad.snap', tmp_path):
        with pytest.raises(SandboxError, match='not a sandbox snapshot file'): SandboxSnapshot.load(p)

"""Crafted snapshot archives (issue 13): restoring must never touch the host, whatever the archive holds.

Each archive is tried twice: through `restore` (which checks the archive first) and straight through the backend's
`_unpack` (as if the check had a hole), so the extraction itself is shown to be contained."""
import io
import tarfile
from pathlib import Path

import pytest
from sandbox_backends import BACKENDS, open_sandbox

from knowlyr_lab.sandbox.base import SandboxError
from knowlyr_lab.sandbox.snapshot import SandboxSnapshot, check_archive

ISOLATING = [p for p in BACKENDS if p.id != 'local-unisolated']

def _tar(members)->bytes:
    "A gzipped tar from (name, kind, arg) triples: kind 'file' (arg: bytes), 'dir', 'sym' / 'hard' (arg: target), 'fifo', 'chr'"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w:gz', format=tarfile.GNU_FORMAT) as tf:
        for name, kind, arg in members:
            ti = tarfile.TarInfo(name); ti.mode = 0o644; ti.uid = ti.gid = 0
            if kind == 'file': ti.size = len(arg); tf.addfile(ti, io.BytesIO(arg)); continue
            if kind == 'dir': ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            elif kind == 'sym': ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, arg, 0o777
            elif kind == 'hard': ti.type, ti.linkname = tarfile.LNKTYPE, arg
            elif kind == 'fifo': ti.type = tarfile.FIFOTYPE
            elif kind == 'chr': ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            tf.addfile(ti)
    return buf.getvalue()

def crafted(host:Path)->dict:
    v = str(host/'victim.txt')
    return {
        'symlink-to-host-dir': [('dl', 'sym', str(host)), ('dl/pwned', 'file', b'x')],
        'issue-13-chain': [('dl', 'sym', str(host)), ('a', 'sym', 'dl/victim.txt'), ('b', 'hard', 'a'), ('././dl/victim.txt', 'file', b'pwned')],
        'symlink-chain': [('c1', 'sym', 'c2'), ('c2', 'sym', 'c3'), ('c3', 'sym', str(host)), ('c1/pwned', 'file', b'x')],
        'relative-escape': [('up', 'sym', '../' * 20 + str(host)[1:]), ('up/pwned', 'file', b'x')],
        'hard-link-to-symlink': [('s', 'sym', v), ('h', 'hard', 's'), ('h', 'file', b'pwned')],
        'hard-link-outside': [('h', 'hard', v), ('h2', 'hard', '../' * 20 + v[1:])],
        'decoy-dot-paths': [('dl', 'sym', str(host)), ('./././dl/./pwned', 'file', b'x'), ('x/../dl/pwned2', 'file', b'x')],
        'absolute': [(str(host/'pwned'), 'file', b'x')],
        'dotdot': [('../' * 20 + str(host/'pwned')[1:], 'file', b'x'), ('a/../../pwned', 'file', b'x')],
        'fifo': [('p', 'fifo', None)],
        'device': [('null2', 'chr', None)],
        'dir-then-symlink': [('d', 'dir', None), ('d', 'sym', str(host)), ('d/pwned', 'file', b'x')],
    }

@pytest.fixture
def host(tmp_path):
    d = tmp_path/'rootonly'; d.mkdir(); d.chmod(0o700)
    f = d/'victim.txt'; f.write_text('root only\n'); f.chmod(0o600)
    return d

def _host_unchanged(d):
    assert sorted(p.name for p in d.iterdir()) == ['victim.txt'], list(d.iterdir())
    st = (d/'victim.txt').stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777, (d/'victim.txt').read_text()) == (0, 0, 0o600, 'root only\n')
    assert (d.stat().st_uid, d.stat().st_mode & 0o7777) == (0, 0o700)

@pytest.fixture(scope='module', params=ISOLATING)
def msb(request): return open_sandbox(request, request.param, limits={'wall_timeout': 10})

@pytest.mark.parametrize('case', list(crafted(Path('/x'))))
def test_crafted_archive_is_refused(host, case):
    with pytest.raises(SandboxError): check_archive(_tar(crafted(host)[case]))

@pytest.mark.parametrize('case', list(crafted(Path('/x'))))
def test_crafted_restore_cannot_touch_host(msb, host, case):
    arch = _tar(crafted(host)[case])
    with pytest.raises(SandboxError): msb.restore(SandboxSnapshot(arch))
    _host_unchanged(host)
    try: msb._unpack(arch)                                # the extraction itself, with the check bypassed
    except SandboxError: pass
    _host_unchanged(host)
    msb.reset()
    assert msb.execute_tool('shell', {'command': 'echo alive'}).output == 'alive\n'

def test_agent_made_snapshot_cannot_touch_host(request, msb, host, tmp_path):
    "The issue's attack from inside: the agent builds the links itself, the snapshot is saved, then restored elsewhere"
    r = msb.execute_tool('shell', {'command': f'ln -s {host} dl && ln -s dl/victim.txt a && ln -P a b && ls -l'})
    assert not r.is_error, r.output
    snap = msb.snapshot()
    path = snap.save(tmp_path/'agent.snap')
    backend = 'docker' if msb.backend == 'docker' else 'local'
    other = open_sandbox(request, backend, limits={'wall_timeout': 10})
    other.restore(path)                                   # symlinks are data inside the sandbox: allowed, but inert
    assert other.execute_tool('shell', {'command': 'readlink dl'}).output.strip() == str(host)
    for tool, extra in [('file_write', {'content': 'pwned'}), ('file_read', {})]:
        for p in ('a', 'b', 'dl/victim.txt'):
            assert other.execute_tool(tool, {'path': p, **extra}).is_error
    _host_unchanged(host)

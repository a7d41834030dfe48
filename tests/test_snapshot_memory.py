"""Snapshots stream (issue 24, item 7): snapshotting and restoring a workspace of a few hundred MiB grows the host
process's peak RSS by a bounded amount, not by the workspace's size (before: 2-3x the workspace).

The sandbox runs in a child process so its peak RSS (`ru_maxrss`) is measured from a clean baseline; the files are
made inside the sandbox (a big file read in pieces, many 1 MiB files archived in batches, half of the data random so
gzip cannot shrink it), then the workspace is snapshotted, saved, loaded, wiped and restored, and compared."""
import json
import os
import subprocess
import sys

import pytest
from sandbox_backends import BACKENDS

WORKSPACE_MB = 256          # data in the workspace
BOUND_MB = 100              # the host's peak RSS may grow by at most this much (the old in-memory path: > 500 MiB)

CHILD = r'''
import json, resource, sys, tempfile, warnings
from pathlib import Path
from knowlyr_lab.sandbox.protocol import create_sandbox
def peak_mb(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
backend, mb = sys.argv[1], int(sys.argv[2])
kw = {'isolation': 'bwrap'} if backend == 'local' else {}
with create_sandbox(backend, limits={'disk_mb': mb + 100, 'wall_timeout': 120, 'max_file_mb': mb}, **kw) as sb:
    big, n = mb // 2, mb - mb // 2
    make = (f'head -c {big}M /dev/zero > big.bin && mkdir -p many && '
            f'for i in $(seq {n}); do head -c 1M /dev/urandom > many/f$i; done && ln big.bin big.link && du -sm .')
    r = sb.execute_tool('shell', {'command': make, 'timeout': 300})
    assert not r.is_error, r.output
    base = peak_mb()
    snap = sb.snapshot()
    after_snapshot = peak_mb()
    digest = snap.digest
    with tempfile.TemporaryDirectory() as d:
        saved = snap.save(Path(d) / 'ws.snap')
        r = sb.execute_tool('shell', {'command': 'rm -rf ./* && du -sm .'})
        sb.restore(saved)
        after_restore = peak_mb()
    listing = sb.execute_tool('shell', {'command': 'stat -c "%s %h" big.bin; ls many | wc -l; cmp big.bin big.link && echo same'}).output
    again = sb.snapshot().digest
on_disk = getattr(snap, 'path', None) is not None
print(json.dumps({'base': base, 'after_snapshot': after_snapshot, 'after_restore': after_restore, 'archive_bytes': len(snap.archive),
                  'on_disk': on_disk, 'same_digest': digest == again, 'listing': listing, 'n': n, 'big': big}))
'''

@pytest.mark.slow
@pytest.mark.parametrize('backend', [p for p in BACKENDS if p.id != 'local-unisolated'])
def test_snapshot_and_restore_hold_bounded_host_memory(request, backend):
    if backend == 'docker': request.getfixturevalue('docker_host')
    p = subprocess.run([sys.executable, '-c', CHILD, backend, str(WORKSPACE_MB)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r['same_digest'], r
    assert r['listing'].split() == [str(r['big'] * 2**20), '2', str(r['n']), 'same'], r['listing']
    assert r['archive_bytes'] > r['n'] * 2**20, r          # the random half really went through the archive
    grow_snap, grow_restore = r['after_snapshot'] - r['base'], r['after_restore'] - r['base']
    assert grow_snap < BOUND_MB, f"snapshot of {WORKSPACE_MB} MiB grew the host's peak RSS by {grow_snap:.0f} MiB"
    assert grow_restore < BOUND_MB, f"save/restore of {WORKSPACE_MB} MiB grew the host's peak RSS by {grow_restore:.0f} MiB"
    assert r['on_disk'], r                                 # a big archive waits in a temporary file

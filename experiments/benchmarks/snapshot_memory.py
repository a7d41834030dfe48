#!/usr/bin/env python
"""Snapshot memory: how much a snapshot and a save/load/restore of a workspace grow the host process's peak RSS.

For each workspace size, a child process opens a local (bubblewrap) sandbox, fills its workspace inside the sandbox
(half one big file of zeros, half 1 MiB files of random bytes, plus a hard link), then snapshots it, saves the
snapshot to a file, wipes the workspace and restores it from the file. It reports the growth of its peak RSS
(`ru_maxrss`) over the baseline taken just before the snapshot, and the seconds each phase took. Issue 24: the
growth should stay bounded (tens of MiB) whatever the workspace size.

    python experiments/benchmarks/snapshot_memory.py                 # --sizes 64 256
    PYTHONPATH=/work/main python experiments/benchmarks/snapshot_memory.py   # another checkout's code
"""
import argparse
import json
import os
import subprocess
import sys

CHILD = r'''
import json, resource, sys, tempfile, time
from pathlib import Path
import knowlyr_lab
from knowlyr_lab.sandbox.protocol import create_sandbox
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
mb = int(sys.argv[1])
with create_sandbox('local', isolation='bwrap', limits={'disk_mb': mb + 100, 'wall_timeout': 300, 'max_file_mb': mb}) as sb:
    big, n = mb // 2, mb - mb // 2
    r = sb.execute_tool('shell', {'command': f'head -c {big}M /dev/zero > big.bin && mkdir many && for i in $(seq {n}); do head -c 1M /dev/urandom > many/f$i; done && ln big.bin big.link', 'timeout': 300})
    assert not r.is_error, r.output
    base = peak(); t0 = time.perf_counter()
    snap = sb.snapshot(); t1 = time.perf_counter(); after_snap = peak()
    with tempfile.TemporaryDirectory() as d:
        saved = snap.save(Path(d) / 'ws.snap'); sb.execute_tool('shell', {'command': 'rm -rf ./*'})
        t2 = time.perf_counter(); sb.restore(saved); t3 = time.perf_counter()
    print(json.dumps({'code': str(Path(knowlyr_lab.__file__).parent), 'mb': mb, 'snapshot_mb': after_snap - base, 'restore_mb': peak() - base,
                      'snapshot_s': t1 - t0, 'restore_s': t3 - t2}))
'''

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--sizes', type=int, nargs='+', default=[64, 256], help='workspace sizes in MiB')
    a = ap.parse_args()
    print(f"{os.uname().nodename} cpus={os.cpu_count()} load {open('/proc/loadavg').read().split()[:3]}")
    for mb in a.sizes:
        p = subprocess.run([sys.executable, '-c', CHILD, str(mb)], capture_output=True, text=True, timeout=1800)
        if p.returncode: print(f"{mb} MiB: failed: {p.stderr.strip()[-500:]}"); continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"{r['code']}  workspace {mb:4d} MiB  peak RSS growth: snapshot {r['snapshot_mb']:6.1f} MiB, save+restore {r['restore_mb']:6.1f} MiB"
              f"  (snapshot {r['snapshot_s']:.1f} s, restore {r['restore_s']:.1f} s)", flush=True)

if __name__ == '__main__':
    main()

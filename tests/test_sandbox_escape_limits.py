"""Aggregate limits per sandbox (issue 13): memory, processes, /tmp, /dev/shm and the workspace are bounded per
sandbox, not per process or per uid, and one sandbox's bomb leaves the others usable. Runs on every isolating backend."""
import os
import threading
import time
from pathlib import Path

import pytest
from sandbox_backends import BACKENDS, open_sandbox

ISOLATING = [p for p in BACKENDS if p.id != 'local-unisolated']
LIMITS = {'wall_timeout': 8, 'cpu_seconds': 5, 'memory_mb': 128, 'max_processes': 48, 'max_file_mb': 16, 'max_output_chars': 4000,
          'disk_mb': 48, 'tmp_mb': 16}
MB = 2**20

def sh(sb, command, **kw): return sb.execute_tool('shell', {'command': command, **kw})

def uid_rss(uid)->int:
    "Private resident memory (RssAnon, bytes) of every host process whose real uid is `uid` (shared library pages counted once by the kernel are left out)"
    n = 0
    for p in Path('/proc').iterdir():
        if not p.name.isdigit(): continue
        try:
            st = (p/'status').read_text()
            if int(st.split('\nUid:\t', 1)[1].split()[0]) != uid: continue
            n += int(st.split('\nRssAnon:', 1)[1].split()[0]) * 1024 if '\nRssAnon:' in st else 0
        except (OSError, IndexError, ValueError): pass
    return n

@pytest.fixture(params=ISOLATING)
def backend(request): return request.param

def test_memory_bomb_is_bounded_and_leaves_others_usable(request, backend):
    "Six processes of 100 MiB each (under the per-process limit): the host's growth stays within the sandbox's budget, and a second sandbox works meanwhile"
    sb = open_sandbox(request, backend, limits=LIMITS)
    other = open_sandbox(request, backend, limits=LIMITS)
    cap = (LIMITS['memory_mb'] + LIMITS['disk_mb'] + 2 * LIMITS['tmp_mb']) * MB
    peak, done, during = [0], threading.Event(), []
    def watch():
        while not done.is_set(): peak[0] = max(peak[0], uid_rss(sb.uid)); time.sleep(0.02)
    w = threading.Thread(target=watch); w.start()
    bomb = threading.Thread(target=lambda: during.append(sh(sb, 'for i in 1 2 3 4 5 6; do python3 -c "import time; b = b\'x\' * (100 * 2**20); '
                                                              'time.sleep(2); print(\'held\')" & done; wait; echo end')))
    try:
        bomb.start(); time.sleep(0.8)
        usable = sh(other, 'python3 -c "b = b\'y\' * (50 * 2**20); print(len(b) // 2**20)"')
        bomb.join()
    finally: done.set(); w.join()
    r = during[0]
    assert r.output.splitlines().count('held') < 6, r.output   # some were killed: the budget is per sandbox
    assert peak[0] <= cap + 16 * MB, (peak[0] / MB, cap / MB)
    assert usable.output == '50\n', usable.output
    assert sh(sb, 'echo alive').output == 'alive\n'

@pytest.mark.parametrize('where', ['/dev/shm', '/tmp', '.'])
def test_tmpfs_and_workspace_are_bounded(request, backend, where):
    sb = open_sandbox(request, backend, limits=LIMITS)
    quota = LIMITS['disk_mb'] if where == '.' else LIMITS['tmp_mb']
    r = sh(sb, f'mkdir -p {where}/fill; for i in $(seq 1 12); do head -c {10 * MB} /dev/zero > {where}/fill/$i || break; done; du -sm {where}/fill | cut -f1')
    used = int(r.output.strip().splitlines()[-1])
    assert used <= quota + 1, (where, used, r.output[-300:])
    assert 'No space left' in r.output, r.output[-300:]
    sb.reset()                                            # a full workspace or /tmp never stops reset()
    assert sh(sb, 'ls -A; echo alive').output == 'alive\n'

def test_fork_bomb_leaves_other_sandboxes_usable(request, backend):
    "A fork bomb in one sandbox: another keeps working and a new one still starts"
    a = open_sandbox(request, backend, limits=LIMITS)
    b = open_sandbox(request, backend, limits=LIMITS)
    out = {}
    bomb = threading.Thread(target=lambda: out.setdefault('a', sh(a, 'b() { b | b & }; b; sleep 4', timeout=6)))
    bomb.start(); time.sleep(1.5)
    try:
        rb = [sh(b, 'echo ok; python3 -c "print(1 + 1)"') for _ in range(3)]
        c = open_sandbox(request, backend, limits=LIMITS)
        rc = sh(c, 'echo fresh')
    finally: bomb.join()
    assert all(r.output == 'ok\n2\n' for r in rb), [r.output for r in rb]
    assert rc.output == 'fresh\n', rc.output
    assert sh(a, 'echo survived').output == 'survived\n'
    if os.geteuid() == 0: assert len({a.uid, b.uid, c.uid}) == 3

def test_the_workspace_holds_at_most_max_files_entries(request, backend):
    "400,000 empty files (15 s for an agent) made a snapshot take 230 s and 540 MiB: the tmpfs holds `max_files` inodes, and snapshot refuses more"
    import dataclasses

    from knowlyr_lab.sandbox.base import SandboxError
    sb = open_sandbox(request, backend, limits={**LIMITS, 'max_files': 300})
    r = sh(sb, 'mkdir many; for i in $(seq 1 400); do : > many/$i || break; done; ls many | wc -l')
    assert int(r.output.split()[-1]) < 300 and 'No space left' in r.output, r.output[-300:]
    assert sb.snapshot().info['n_entries'] < 300                        # what fits is snapshotted
    sb.limits = dataclasses.replace(sb.limits, max_files=100)          # a host without tmpfs quotas: snapshot's own check
    with pytest.raises(SandboxError, match='more than 100 entries'): sb.snapshot()

def test_a_deep_tree_of_long_names_cannot_flood_the_host_with_its_listing(request, backend):
    "A chain of directories with 250-character names lists a path per level, each longer than the last: 200 levels list 5 MB, 10,000 list 12 GB, which the snapshot read into host memory whole (depth 1,200 took the host 370 MiB)"
    from knowlyr_lab.sandbox.base import SandboxError
    sb = open_sandbox(request, backend, limits={**LIMITS, 'max_files': 2000})
    read, run = [], sb._run
    def spy(*a, **kw):
        r = run(*a, **kw); read.append(len(r.raw or b'')); return r
    sb._run = spy
    r = sh(sb, 'python3 -c "import os\nfor i in range(200): os.mkdir(\'d\' * 250); os.chdir(\'d\' * 250)\nprint(i + 1)"')
    assert r.output == '200\n', r.output
    with pytest.raises(SandboxError) as e: sb.snapshot()
    assert max(read) <= 2001 * 1024, max(read)           # 1 KiB per entry the workspace may hold (max_files), not 5 MB
    assert 'workspace listing over 2,049,024 bytes: snapshot refused' in str(e.value), str(e.value)   # names the cap
    assert sh(sb, 'echo alive').output == 'alive\n'
    sb.reset()
    assert sb.snapshot().info['n_entries'] == 0

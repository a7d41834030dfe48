"""`memory_mb` means what is enforced (issue 24): each process's address space (RLIMIT_AS), while the sandbox's
processes together share the cgroup's `budget_mb` (memory_mb + disk_mb + 2 * tmp_mb) with the files of its
memory-backed workspace, /tmp and /dev/shm. Runs on every isolating backend."""
import pytest
from sandbox_backends import BACKENDS, open_sandbox

from knowlyr_lab.sandbox.base import SandboxLimits

ISOLATING = [p for p in BACKENDS if p.id != 'local-unisolated']
LIMITS = {'wall_timeout': 20, 'memory_mb': 128, 'disk_mb': 48, 'tmp_mb': 16, 'max_output_chars': 4000}
HOLD = 'python3 -c "import time; b = bytearray({mb} * 2**20); time.sleep(1.5); print(\'held {mb}\')"'

@pytest.fixture(params=ISOLATING)
def backend(request): return request.param

def test_memory_mb_is_per_process_and_budget_mb_is_the_sandbox(request, backend):
    sb = open_sandbox(request, backend, limits=LIMITS)
    assert SandboxLimits(**LIMITS).budget_mb == 128 + 48 + 2 * 16
    one = sb.execute_tool('shell', {'command': HOLD.format(mb=160) + ' 2>&1 | tail -1'}).output
    assert 'MemoryError' in one and 'held' not in one, one            # one process: at most memory_mb of address space
    two = sb.execute_tool('shell', {'command': f'{HOLD.format(mb=80)} & {HOLD.format(mb=80)} & wait'}).output
    assert two.count('held 80') == 2, two                               # together they may pass memory_mb (160 > 128), within budget_mb (208)

def test_the_page_documents_the_enforced_numbers():
    import inspect

    from knowlyr_lab.sandbox import base
    src = inspect.getsource(base.SandboxLimits)
    assert 'memory of the sandbox\'s processes together' not in src      # the old, wrong description
    assert 'RLIMIT_AS' in src and 'budget_mb' in src

@pytest.mark.parametrize('disk_mb', [0.5, 1.0001, 0.3])
def test_a_fraction_of_a_mib_is_still_a_quota(request, backend, disk_mb):
    """disk_mb=0.5 was mounted as `size=0m`, which tmpfs reads as no limit: the workspace took any amount of data. Then
    sizes rounded up to KiB (and by the kernel to pages) let 1.0001 MiB hold 1,052,672 bytes, past the snapshot's cap of
    disk_mb MiB, so a full workspace could not be snapshotted; rounded down instead, a snapshot within the cap (313,000
    bytes at 0.3 MiB) could not be restored. The filesystem and every cap are `disk_bytes` now: whole 64 KiB blocks, rounded up (test_sandbox_docker_quota.py)."""
    cap = SandboxLimits(disk_mb=disk_mb).disk_bytes
    sb = open_sandbox(request, backend, limits={**LIMITS, 'disk_mb': disk_mb})
    out = sb.execute_tool('shell', {'command': 'head -c 2000000 /dev/zero > big; echo rc=$?; wc -c < big'}).output
    assert 'rc=0' not in out and 'No space left' in out, out
    assert disk_mb * 2**20 - 4096 <= int(out.split()[-1]) <= cap, out   # what was written before the quota stopped it
    snap = sb.snapshot()                                                 # a full workspace is within the snapshot's cap
    sb.execute_tool('shell', {'command': 'rm big; head -c 313000 /dev/urandom > f'})
    sb.restore(snap)                                                     # and a snapshot within the cap fits the workspace
    assert int(sb.execute_tool('shell', {'command': 'wc -c < big'}).output.split()[-1]) > disk_mb * 2**20 - 4096

def test_a_snapshot_within_the_cap_restores_into_a_fractional_quota(request, backend):
    "313,000 bytes fit 0.3 MiB (314,572.8): the snapshot's cap took them, and a tmpfs rounded down to 311,296 failed mid-tar"
    src = open_sandbox(request, backend, limits={**LIMITS, 'disk_mb': 1})
    src.execute_tool('shell', {'command': 'head -c 313000 /dev/urandom > f'})
    snap = src.snapshot()
    dst = open_sandbox(request, backend, limits={**LIMITS, 'disk_mb': 0.3})
    dst.restore(snap)
    assert dst.execute_tool('shell', {'command': 'wc -c < f'}).output.split()[-1] == '313000'

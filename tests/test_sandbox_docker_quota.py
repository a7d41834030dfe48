"""The workspace quota is exact whatever the page size of the kernel that mounts it (sbx14 item 1).

`quota_bytes` rounded `disk_mb` up to the CLIENT's pages (4 KiB here), but a Docker daemon may run on a machine with
16 or 64 KiB pages (arm64): its kernel rounds the tmpfs further up, so a full workspace held more than `disk_bytes`
and its snapshot was refused ('the workspace holds more than 0.3 MiB of file data'). The quota is whole 64 KiB blocks
now, a multiple of every Linux page size in use, and the same figure is the tmpfs, `disk_bytes` and every cap."""
import docker
import pytest

from knowlyr_lab.sandbox.base import SandboxLimits, quota_bytes
from knowlyr_lab.sandbox.docker import DockerSandbox

SIZES = [0.3, 1.0001, 1.5, 2.7, 1e-9, 512]

@pytest.mark.parametrize('page', [4096, 16384, 65536])
def test_every_kernel_keeps_the_quota_as_given(page):
    "On main 0.3 MiB was 315,392 bytes (77 pages of 4 KiB): a 16 KiB-page kernel mounts 327,680, a 64 KiB one too"
    for mb in SIZES:
        q = quota_bytes(mb)
        assert -(-q // page) * page == q, (mb, q, page)          # what that kernel's tmpfs holds for size=q
        assert mb * 2**20 <= q < mb * 2**20 + 65536               # rounded up, by less than one 64 KiB block
    assert SandboxLimits(disk_mb=0.3).disk_bytes == quota_bytes(0.3) == 327680

def _sandbox(host, mb):
    return DockerSandbox(client=docker.DockerClient(base_url=host, timeout=60), limits={'wall_timeout': 20, 'disk_mb': mb})

@pytest.mark.docker
@pytest.mark.parametrize('mb', [0.3, 1.0001])
def test_a_full_workspace_of_a_fractional_quota_snapshots_and_restores(docker_host, mb):
    "The container's tmpfs is `disk_bytes` (a multiple of 64 KiB), and a workspace filled to it snapshots and restores"
    src, dst = _sandbox(docker_host, mb), _sandbox(docker_host, mb)
    try:
        cap = src.limits.disk_bytes
        size = src.client.api.inspect_container(src.container.id)['HostConfig']['Tmpfs']['/workspace']
        assert f'size={cap // 1024}k' in size.split(','), size     # what the daemon is asked for: the cap itself
        assert cap % 65536 == 0                                   # which no page size of the daemon's rounds further
        out = src.execute_tool('shell', {'command': 'head -c 3000000 /dev/zero > big; wc -c < big'}).output
        assert 'No space left' in out and int(out.split()[-1]) == cap, out   # full: the workspace holds the cap exactly
        snap = src.snapshot()                                     # within the snapshot's cap
        dst.restore(snap)                                         # and fits a workspace of the same quota
        assert dst.execute_tool('shell', {'command': 'wc -c < big'}).output.split()[-1] == str(cap)
    finally: src.close(); dst.close()

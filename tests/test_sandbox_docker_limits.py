"""The docker backend hands the engine its limits as they are (sbx14 item 2).

`SandboxLimits` checks each integer field as it is made (`positive_int`: an int of at least 1, never a float or a
bool), so the backend's `int(L.tmp_mb)`, `int(L.max_processes)` ... casts re-did that check's work, and said to a
reader that a float might still arrive. They are gone (tests/test_sandbox_int_casts.py checks every sandbox module);
what the container gets is unchanged, and pinned here."""
import docker
import pytest

from knowlyr_lab.sandbox.docker import DockerSandbox

LIMITS = dict(cpu_seconds=7, memory_mb=200, max_processes=40, max_file_mb=3, disk_mb=2, max_files=900, tmp_mb=5, cpus=0.5)

@pytest.mark.docker
def test_the_container_gets_the_limits_as_given(docker_host):
    "Behaviour unchanged: the engine's HostConfig and `containment` carry each limit, as the integer it was given"
    sb = DockerSandbox(client=docker.DockerClient(base_url=docker_host, timeout=60), limits=LIMITS)
    try:
        L, hc = sb.limits, sb.client.api.inspect_container(sb.container.id)['HostConfig']
        assert hc['Memory'] == hc['MemorySwap'] == L.budget_mb * 2**20 and hc['PidsLimit'] == 40 + 32
        assert hc['NanoCpus'] == 500_000_000 and hc['ShmSize'] == 5 * 2**20
        assert {u['Name']: (u['Soft'], u['Hard']) for u in hc['Ulimits']} == {
            'cpu': (7, 7), 'nproc': (40, 40), 'fsize': (3 * 2**20, 3 * 2**20), 'core': (0, 0)}
        assert 'nr_inodes=900' in hc['Tmpfs']['/workspace'].split(',') and 'size=5m' in hc['Tmpfs']['/tmp'].split(',')
        assert sb.containment['cgroup']['pids'] == 72 and sb.containment['quotas_mb'] == {'workspace': 2, 'tmp': 5, 'shm': 5}
        assert sb.execute_tool('shell', {'command': 'ulimit -v'}).output.split()[-1] == str(200 * 1024)
    finally: sb.close()

"""A docker exec whose stream ended but whose exit code the engine reports late is never the agent's failure.

The engine marks an exec finished a moment after its stream ends, later on a loaded host. `docker_exec` asked 100
times, 10 ms apart, then returned exit code None as if the command had finished without one; `_run` read that as a
timeout ('[killed: wall-clock timeout ...]', the agent's failed call). Here the real engine answers through an API
whose `exec_inspect` calls each exec running for `lag` seconds after it was first asked, as a slow engine does."""
import time

import docker
import pytest

from knowlyr_lab.sandbox import docker as D
from knowlyr_lab.sandbox.base import SandboxBackendError
from knowlyr_lab.sandbox.docker import DockerSandbox, docker_exec

pytestmark = pytest.mark.docker

class LateEngine:
    "The real engine's API, but an exec whose argv holds `marker` is reported running for `lag` s after its first inspection"
    def __init__(self, api, lag, marker=''): self.api, self.lag, self.marker, self.late = api, lag, marker, {}
    def __getattr__(self, name): return getattr(self.api, name)
    def exec_create(self, container, cmd, **kw):
        e = self.api.exec_create(container, cmd, **kw)
        if any(self.marker in a for a in cmd): self.late[e['Id']] = None
        return e
    def exec_inspect(self, eid):
        ins = self.api.exec_inspect(eid)
        if eid not in self.late: return ins
        t = self.late[eid] = self.late[eid] or time.monotonic()
        return {**ins, 'Running': True} if time.monotonic() - t < self.lag else ins

@pytest.fixture
def sandbox(docker_host):
    sb = DockerSandbox(client=docker.DockerClient(base_url=docker_host, timeout=60), limits={'wall_timeout': 20})
    yield sb
    sb.close()

def test_a_late_exit_code_is_waited_for_within_the_deadline(sandbox):
    "Reported 3 s late: on main exit code None (then '[killed: wall-clock timeout of 20 s exceeded]'), now 3"
    sandbox.client.api = LateEngine(sandbox.client.api, 3, 'echo done')
    r = sandbox.execute_tool('shell', {'command': 'echo done; exit 3'})
    assert (r.exit_code, r.info['timed_out'], r.output.strip()) == (3, False, 'done'), r

def test_an_exit_code_never_reported_is_the_engines_failure(sandbox, monkeypatch):
    """Never reported within the call's deadline + grace: on ad629de^ RunResult(exit_code=None, timed_out=False).
    The deadline runs from the attach, before the engine starts the process: here a command that ends 2 s later, as
    a loaded host's slow start can make `true`; the 1 s this test gave `true` timed out first (exit None, no raise).
    A generous deadline instead, and no grace past it: the wait for the code is what is tested, not how long it is"""
    monkeypatch.setattr(D, 'EXEC_CODE_GRACE', 0)
    api = LateEngine(sandbox.client.api, 10**6)
    with pytest.raises(SandboxBackendError, match='exit code unknown'):
        docker_exec(api, sandbox.container.id, ['sleep', '2'], timeout=10, user='0')
    (eid,) = api.late                                  # its stream ended: the code was asked for, and never given
    assert api.late[eid] is not None and sandbox.client.api.exec_inspect(eid)['ExitCode'] == 0

"""A rollout batch larger than a remote env server's per-client session cap: the sessions the server refuses (HTTP 429,
with `Retry-After`) are waited for while the batch's other episodes play and free theirs, so no episode is lost; a
server that never frees a place fails the episode, invalid, after `RolloutSpec.session_wait`, naming the cap.

Real servers (`EnvServer`, a subprocess), the project's own clients. Outcomes are asserted, never durations; every wait
is bounded and tolerates a slow start (the OpenEnv server imports openenv-core)."""
import contextlib
import functools

import httpx
import pytest

from knowlyr_lab.agents import ExpertAgent
from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient, SessionCapError
from knowlyr_lab.envs.serve import EnvServer
from knowlyr_lab.envs.sessions import SessionLimits
from knowlyr_lab.rollout.collect import collect

ENV_ID = 'knowlyr/maze-easy'
CAP = SessionLimits(max_sessions=4, max_sessions_per_client=2)
CLIENTS = {'agentgym': AgentGymClient, 'openenv': OpenEnvClient}


@contextlib.contextmanager
def held_sessions(protocol, url, n):
    "Hold `n` sessions of the server from this process's address (the rollout's own), never freed while the block runs"
    if protocol == 'agentgym':
        with httpx.Client(timeout=60) as c:
            ids = [c.post(url + '/create', json={}).json()['id'] for _ in range(n)]
            assert all(isinstance(i, str) for i in ids), ids
            try: yield
            finally:
                for i in ids: c.post(url + '/close', json={'id': i})
        return
    from websockets.sync.client import connect
    socks = [connect(url.replace('http', 'ws', 1) + '/ws', open_timeout=60).__enter__() for _ in range(n)]   # entered: closed below
    try: yield
    finally:
        for s in socks: s.close()


@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_a_batch_larger_than_the_per_client_cap_loses_no_episode(protocol):
    with EnvServer(ENV_ID, protocol, expose_oracle=True, limits=CAP, startup_timeout=240) as srv:
        remote = functools.partial(CLIENTS[protocol], srv.url, name='maze', step_timeout=60)
        trajs = collect(remote, ExpertAgent, tasks=[f'maze-s{s}' for s in range(6)], batch_size=6, progress=False)
        assert [(t.valid, t.outcome.invalid) for t in trajs] == [(True, None)] * 6, [t.outcome.invalid for t in trajs]
        assert [t.outcome.success for t in trajs] == [True] * 6
        assert sorted(t.metadata['episode'] for t in trajs) == list(range(6))
        # the cap was in force: a third session of this client is refused, and told when to ask again
        with held_sessions(protocol, srv.url, 2):
            with pytest.raises(SessionCapError, match=r'HTTP 429: .*max_sessions_per_client=2') as e: remote().reset(seed=0)
            assert e.value.retry_after == 1.0


@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_a_server_that_never_frees_a_session_fails_the_episode_after_the_wait(protocol):
    with EnvServer(ENV_ID, protocol, expose_oracle=True, limits=CAP, startup_timeout=240) as srv:
        remote = functools.partial(CLIENTS[protocol], srv.url, name='maze', step_timeout=60)
        with held_sessions(protocol, srv.url, 2):
            trajs = collect(remote, ExpertAgent, 2, batch_size=2, session_wait=1.5, progress=False)
        assert [t.valid for t in trajs] == [False, False]
        for t in trajs:
            why = t.outcome.invalid
            assert why.startswith('SessionCapError: ') and 'HTTP 429' in why, why
            assert 'the per-client cap (max_sessions_per_client=2)' in why and 'RolloutSpec.session_wait' in why, why
            assert len(t.steps) == 0 and t.outcome.success is False
        # the server was not left holding anything of the run: its places are free again for this client
        after = collect(remote, ExpertAgent, 2, batch_size=2, progress=False)
        assert [(t.valid, t.outcome.success) for t in after] == [(True, True)] * 2

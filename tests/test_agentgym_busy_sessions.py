"""The AgentGym env server against a client that calls a session while a call on it is in flight (srv30, review31).

main: `/close` took the session out of the table before waiting for the call in flight, so create -> step `sleep` ->
close -> create ran any number of envs past the caps; and every call on a busy session waited for its lock on one of
anyio's 40 threads, so one client's flood of `/step` calls on its busy session stalled every other client's `GET /`.
Real server on 127.0.0.1 (uvicorn in a thread of this process), real HTTP client (httpx), a real sandbox env whose
shell step runs `sleep`."""
import threading
import time

import httpx
import pytest
from helpers import served, until

from knowlyr_lab.envs.serve import agentgym_app
from knowlyr_lab.envs.sessions import SessionLimits
from knowlyr_lab.registry import make

SLEEP = 'shell(command="sleep 5")'


def _sleeping(c:httpx.Client, sid:str, sessions)->tuple[threading.Thread, list]:
    "A `/step` running `sleep 5` on `sid` in a thread, started once the server holds the session's lock; its answer"
    out = []
    th = threading.Thread(target=lambda: out.append(c.post('/step', json={'id': sid, 'action': SLEEP}, timeout=120)))
    th.start()
    until(lambda: sessions.rows[sid].lock.locked(), 60, 'the sleeping step to hold its session')
    return th, out

def _session(c:httpx.Client)->str:
    r = c.post('/create', timeout=120); assert r.status_code == 200, r.text
    sid = r.json()['id']
    assert 'observation' in c.post('/reset', json={'id': sid, 'data_idx': 0}, timeout=120).json()
    return sid

def test_close_during_a_call_frees_the_place_only_once_the_env_is_closed():
    "max_sessions 2, 1 per client: close while a step sleeps, then create: main 200 (a second live env), now 429"
    app = agentgym_app(lambda: make('knowlyr/sandbox'), limits=SessionLimits(max_sessions=2, max_sessions_per_client=1))
    sessions = app.state.sessions
    with served(app) as url, httpx.Client(base_url=url, timeout=120) as c:
        sid = _session(c)
        th, stepped = _sleeping(c, sid, sessions)
        closing = []
        closer = threading.Thread(target=lambda: closing.append(c.post('/close', json={'id': sid}, timeout=120)))
        closer.start(); closer.join(3)
        assert not closer.is_alive(), "/close waited for the call in flight on a server thread"
        assert closing[0].status_code == 200 and closing[0].json() == {'closed': sid}, closing[0].text
        assert th.is_alive(), 'the sleeping step ended before the test could check the cap'
        again = c.post('/create', timeout=120)
        assert again.status_code == 429, f"a second env while the first still runs: {again.status_code} {again.text[:200]}"
        assert 'per-client cap' in again.json()['error'] and again.headers['Retry-After'] == '1'
        later = c.post('/step', json={'id': sid, 'action': 'shell(command="true")'}, timeout=120).json()   # closed to its client
        assert later.get('error_type') == 'UnknownSessionError', later
        th.join(120)
        assert stepped[0].status_code == 200 and 'observation' in stepped[0].json(), stepped[0].text   # the call ran whole
        until(lambda: not sessions.rows, 30, 'the place freed once the step ended and the env closed')
        fresh = c.post('/create', timeout=120)
        assert fresh.status_code == 200, fresh.text                      # then the place is the client's again
        c.post('/close', json={'id': fresh.json()['id']})
        until(lambda: not sessions.rows, 30, 'an idle session closed at once')

def test_calls_on_a_busy_session_are_refused_at_once_and_other_clients_are_served():
    "A step sleeps, 45 more calls on its session: main parked them on the thread pool and `GET /` waited for the sleep"
    app = agentgym_app(lambda: make('knowlyr/sandbox'))
    sessions = app.state.sessions
    with served(app) as url, httpx.Client(base_url=url, timeout=120) as c:
        sid = _session(c)
        th, stepped = _sleeping(c, sid, sessions)
        answers, lock = [], threading.Lock()
        def call(i):
            with httpx.Client(base_url=url, timeout=120) as own:
                r = (own.post('/step', json={'id': sid, 'action': 'shell(command="true")'}) if i % 3 == 0 else
                     own.post('/reset', json={'id': sid}) if i % 3 == 1 else
                     own.get('/observation' if i % 2 else '/available_actions', params={'id': sid}))
            with lock: answers.append(r)
        flood = [threading.Thread(target=call, args=(i,)) for i in range(45)]
        for t in flood: t.start()
        s = sessions.rows[sid]                   # each call answered, or parked on a thread of the pool (main: 39 of 40)
        until(lambda: len(answers) + s.busy - 1 >= 39, 60, 'the flood to be answered or parked')
        hello = httpx.get(url + '/', timeout=120)
        assert hello.status_code == 200 and th.is_alive(), 'GET / was answered only after the sleeping step ended'
        other = httpx.post(url + '/create', timeout=120)                 # an endpoint that runs on a thread of the pool
        assert other.status_code == 200 and th.is_alive(), '/create was answered only after the sleeping step ended'
        assert httpx.post(url + '/close', json={'id': other.json()['id']}, timeout=120).json() == {'closed': other.json()['id']}
        for t in flood: t.join(120)
        assert th.is_alive(), 'the refusals came only after the sleeping step ended'
        assert [r.status_code for r in answers] == [409] * 45, sorted({r.status_code for r in answers})
        err = answers[0].json()['error']
        assert f"session {sid!r} has a call in flight" in err and 'one call at a time' in err, err
        assert answers[0].headers['Retry-After'] == '1'
        th.join(120)
        assert stepped[0].status_code == 200 and 'observation' in stepped[0].json(), stepped[0].text
        r = c.post('/step', json={'id': sid, 'action': 'shell(command="echo done")'}, timeout=120)   # free again: served
        assert r.status_code == 200 and 'done' in r.json()['observation'], r.text

def test_a_client_whose_step_timed_out_resets_once_the_servers_step_ends():
    "AgentGymClient: its step gave up at `step_timeout` while the server's ran on; the reset that follows waits (409, Retry-After) instead of failing"
    from knowlyr_lab.envs.remote import AgentGymClient, RemoteEnvError
    with served(agentgym_app(lambda: make('knowlyr/sandbox'))) as url:
        env = AgentGymClient(url, step_timeout=5, max_step_seconds=0)   # no more than 5 s a step, whatever the server allows
        env.reset(seed=0)
        t0 = time.monotonic()
        with pytest.raises(RemoteEnvError, match='no answer within 5 s'):
            env.step({'tool': 'act', 'params': {'action': 'shell(command="sleep 7")'}})
        ts = env.reset(seed=1)               # main: RemoteEnvError "answered HTTP 409: session ... has a call in flight"
        assert time.monotonic() - t0 >= 6.5 and ts.info['task']['seed'] == 1, ts   # served once the sleep ended
        assert 'done' in env.step({'tool': 'act', 'params': {'action': 'shell(command="echo done")'}}).observation
        env.close()

def test_more_sessions_than_anyios_40_threads_all_step_at_once():
    "max_sessions 48: 44 sessions stepping at once all run (main: 40 ran, the rest queued for a thread) and /create is served"
    from knowlyr_lab.core import AgentEnv, TimeStep, tool_schema
    running, most, release, lock = [0], [0], threading.Event(), threading.Lock()
    class Held(AgentEnv):
        "Its step holds until the test releases it"
        tool_schemas = [tool_schema('hold', 'Hold until released', {}, [])]
        def _reset(self, task=None, seed=None): return TimeStep('ready')
        def _step(self, tool, params):
            with lock: running[0] += 1; most[0] = max(most[0], running[0])
            release.wait(60)
            with lock: running[0] -= 1
            return TimeStep('released')
    n = 44
    app = agentgym_app(Held, limits=SessionLimits(max_sessions=48, max_sessions_per_client=48))
    with served(app) as url, httpx.Client(base_url=url, timeout=120) as c:
        sids = [_session(c) for _ in range(n)]
        answers = []
        def step(sid):
            with httpx.Client(base_url=url, timeout=120) as own: answers.append(own.post('/step', json={'id': sid, 'action': 'hold()'}))
        threads = [threading.Thread(target=step, args=(s,)) for s in sids]
        for t in threads: t.start()
        try:
            until(lambda: running[0] == n, 60, f'all {n} steps running at once')
            fresh = c.post('/create', timeout=120)          # a thread is left for another call
            assert fresh.status_code == 200, fresh.text
        finally:
            release.set()
            for t in threads: t.join(120)
        assert most[0] == n and [r.status_code for r in answers] == [200] * n
        assert all(r.json()['observation'] == 'released' for r in answers)

"""Issue 39 item 6, the env servers (OpenEnv and AgentGym protocols, no authentication): a session is its client's alone,
one client cannot take every session, an idle session is closed with its env, and `knowlyr-env-serve` serves an env.

Servers listen on 127.0.0.1 only. A second client is a second loopback address (127.0.0.2: Linux routes all of 127/8 to
`lo`), which is how these servers tell clients apart (the peer's address). Every wait is bounded and tolerates a slow
start. The victims use the project's own clients (`AgentGymClient`, `OpenEnvClient`); the attackers use plain HTTP and
WebSocket connections, as an attacker would."""
import contextlib
import functools
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import httpx
import jsonschema  # noqa: F401 (a client's first step imports it: seconds on a loaded machine, which a server counts as idle time)
import pytest
from helpers import served, until

from knowlyr_lab.agents import ExpertAgent, ScriptedAgent
from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient, RemoteEnvError, SessionExpiredError
from knowlyr_lab.envs.serve import EnvServer, agentgym_app, openenv_app
from knowlyr_lab.envs.sessions import SessionLimits
from knowlyr_lab.registry import make
from knowlyr_lab.rollout.collect import collect

ROOT = Path(__file__).resolve().parent.parent
ENV_ID = 'knowlyr/maze-easy'
OTHER, THIRD = '127.0.0.2', '127.0.0.3'

def _can_bind(addr):
    try:
        with socket.socket() as s: s.bind((addr, 0))
        return True
    except OSError: return False

pytestmark = pytest.mark.skipif(not _can_bind(OTHER), reason='no second loopback address (127.0.0.2) to be a second client from')

def client_at(addr): return httpx.Client(transport=httpx.HTTPTransport(local_address=addr), timeout=30)

def ws_at(url, addr):
    "A WebSocket to an OpenEnv server's /ws from `addr`: an idle session (the server builds its env on connect)"
    from websockets.sync.client import connect
    return connect(url.replace('http', 'ws', 1) + '/ws', source_address=(addr, 0), open_timeout=60).__enter__()   # entered: closed by .close()

# -- a session is its client's alone ----------------------------------------------------------------------------------

def test_agentgym_a_second_client_cannot_read_step_or_close_anothers_session():
    "The attack: a second client guessed the victim's sequential id (0), then read its observation, submitted and closed it"
    with EnvServer(ENV_ID, 'agentgym', expose_oracle=True) as srv, client_at(OTHER) as thief:
        victim = AgentGymClient(srv.url, name='maze')
        first = victim.reset(seed=3)
        sid = victim._id
        assert isinstance(sid, str) and len(sid) >= 21, sid           # 128 random bits, not a counter
        for guess in [0, 1, 2, '0', '1']:                              # guessing: what a counter would have handed out
            r = thief.post(srv.url + '/step', json={'id': guess, 'action': 'submit()'}).json()
            assert "not one of this client's sessions" in r.get('error', ''), (guess, r)
        taken = {'observation': thief.get(srv.url + '/observation', params={'id': sid}).json(),       # reusing the id
                 'available_actions': thief.get(srv.url + '/available_actions', params={'id': sid}).json(),
                 'reset': thief.post(srv.url + '/reset', json={'id': sid, 'data_idx': 0}).json(),
                 'step': thief.post(srv.url + '/step', json={'id': sid, 'action': 'submit()'}).json(),
                 'close': thief.post(srv.url + '/close', json={'id': sid}).json()}
        assert all(isinstance(v, dict) and "not one of this client's sessions" in v.get('error', '') for v in taken.values()), taken
        assert victim.available_actions and first.observation.startswith('Find the goal')
        ts = first                                                     # the victim's episode was not touched: it plays on from where it was
        while not ts.done: ts = victim.step(victim.oracle_action())
        assert ts.verdict.success is True
        victim.close()

def test_openenv_a_second_client_cannot_reach_anothers_session_over_http():
    "OpenEnv's session is its WebSocket (no id on the wire): another client's HTTP /reset, /step, /state (a throwaway env each) and /mcp reach nothing of it"
    with served(openenv_app(lambda: make(ENV_ID), expose_oracle=True)) as url, client_at(OTHER) as thief:
        victim = OpenEnvClient(url, name='maze', step_timeout=60)
        victim.reset(seed=3)
        ts = victim.step(victim.oracle_action())
        def answer(method, path, **kw):
            try: r = thief.request(method, url + path, **kw); return r.status_code, r.text
            except httpx.TransportError as e: return None, repr(e)       # openenv-core's HTTP /step on a throwaway env that was never reset: no answer
        taken = {'reset': answer('POST', '/reset', json={'seed': 3}), 'step': answer('POST', '/step', json={'action': {'tool': 'submit', 'params': {}}}),
                 'state': answer('GET', '/state'), 'mcp': answer('POST', '/mcp', json={'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'})}
        assert taken['mcp'][0] == 404, taken['mcp']
        assert all(ts.observation not in text for _, text in taken.values()), taken          # nothing of the victim's episode
        assert '"step_count":1' not in taken['state'][1].replace(' ', ''), taken['state']
        n = 1
        while not ts.done: ts = victim.step(victim.oracle_action()); n += 1   # the victim's episode goes on from where it was, and is won
        local = make(ENV_ID); lts = local.reset(seed=3); m = 0
        while not lts.done: lts = local.step(local.oracle_action()); m += 1
        assert ts.verdict.success is True and n == m, (n, m)             # in as many moves as a local run: nobody reset or moved it
        victim.close()

# -- caps --------------------------------------------------------------------------------------------------------------

def test_agentgym_per_client_and_global_caps_refuse_excess_creation():
    with EnvServer(ENV_ID, 'agentgym', limits=SessionLimits(max_sessions=3, max_sessions_per_client=2)) as srv, client_at(OTHER) as other:
        mine = [AgentGymClient(srv.url, name='maze', step_timeout=60) for _ in range(3)]
        mine[0].reset(seed=0); mine[1].reset(seed=1)
        with pytest.raises(RemoteEnvError, match=r'create: answered HTTP 429: .*already holds 2 sessions, the per-client cap \(max_sessions_per_client=2\)'):
            mine[2].reset(seed=2)
        assert other.post(srv.url + '/create').status_code == 200     # another client still gets its own
        r = other.post(srv.url + '/create')
        assert r.status_code == 503 and 'its cap (max_sessions=3)' in r.json()['error'], (r.status_code, r.text)
        mine[0].close()                                                # a closed session makes room
        assert other.post(srv.url + '/create').status_code == 200
        for c in mine: c.close()

def test_openenv_idle_websockets_of_one_client_do_not_lock_out_another():
    "The attack: 16 idle WebSockets of one client filled the server; now that client gets its share, the others theirs, and a full server says 503"
    from websockets.exceptions import InvalidStatus
    with EnvServer(ENV_ID, 'openenv', expose_oracle=True, startup_timeout=240, limits=SessionLimits(max_sessions=4, max_sessions_per_client=2)) as srv:
        held, refused = [], []
        try:
            for _ in range(16):
                try: held.append(ws_at(srv.url, OTHER))
                except InvalidStatus as e: refused.append((e.response.status_code, bytes(e.response.body).decode()))
            trajs = collect(functools.partial(OpenEnvClient, srv.url, name='maze', step_timeout=60), ExpertAgent, 2, progress=False)
            assert [t.outcome.success for t in trajs] == [True, True], [t.metadata.get('error') for t in trajs]
            assert len(held) == 2 and [s for s, _ in refused] == [429] * 14, (len(held), refused[:2])
            assert 'the per-client cap (max_sessions_per_client=2)' in refused[0][1], refused[0]
            victim = OpenEnvClient(srv.url, name='maze', step_timeout=60)
            victim.reset(seed=1); victim.step({'tool': 'look', 'params': {}})
            extra = ws_at(srv.url, THIRD)                              # 2 + 1 open, and one of a third client: 4, the cap
            with pytest.raises(InvalidStatus) as e: ws_at(srv.url, THIRD).close()
            assert e.value.response.status_code == 503 and b'its cap (max_sessions=4)' in bytes(e.value.response.body)
            extra.close(); victim.close()
        finally:
            for ws in held: ws.close()

# -- idle sessions -----------------------------------------------------------------------------------------------------

class CountedEnvs:
    "An env factory that keeps the envs it built, to see which were closed"
    def __init__(self): self.built = []
    def __call__(self):
        env = make(ENV_ID); env.closed = False; close = env.close
        def closing(): env.closed = True; close()
        env.close = closing; self.built.append(env); return env
    def open(self): return [e for e in self.built if not e.closed]

STEPS = {'agentgym': {'tool': 'act', 'params': {'action': 'look()'}}, 'openenv': {'tool': 'look', 'params': {}}}

@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_an_idle_session_is_closed_with_its_env_after_the_timeout(protocol):
    envs, timeout = CountedEnvs(), 2.0
    app = (agentgym_app if protocol == 'agentgym' else openenv_app)(envs, limits=SessionLimits(idle_timeout=timeout))
    with served(app) as url:
        env = (AgentGymClient if protocol == 'agentgym' else OpenEnvClient)(url, name='maze', step_timeout=60)
        env.reset(seed=0)
        for _ in range(8):                                            # in use for longer than the timeout, never idle that long
            time.sleep(timeout / 5); env.step(STEPS[protocol])
        assert len(envs.open()) == 1
        took = until(lambda: not envs.open(), 60, "the idle session's env closing")
        assert took >= timeout * 0.9, took                            # idle for the timeout, then closed
        ts = env.step(STEPS[protocol])                                 # the agent sat idle past the timeout: its own time ran out
        assert ts.truncated and (ts.verdict.reason, ts.verdict.success, ts.info['idle_timeout']) == ('idle_timeout', False, timeout), ts.info
        assert ts.info['agent_seconds'] >= timeout * 0.75 and ts.observation.startswith('Episode ended: the agent took'), ts.observation   # measured by the client: less the transport's share
        env.close()                                                    # the client lets go of the closed session...
        assert env.reset(seed=1).observation.startswith('Find the goal')   # ...and its next episode opens a new one
        assert len(envs.open()) == 1
        env.close()
        until(lambda: not envs.open(), 60, 'the env closing with its session')

def test_agentgym_client_told_its_session_expired_forgets_it_and_starts_a_fresh_one():
    "The server reaped the session for idleness: the client hears so (the id, the idle timeout), stops using the id, and its next reset opens a new one"
    envs, timeout = CountedEnvs(), 1.0
    with served(agentgym_app(envs, limits=SessionLimits(idle_timeout=timeout))) as url, client_at(OTHER) as thief:
        env = AgentGymClient(url, name='maze', step_timeout=60)
        env.reset(seed=0); dead = env._id
        until(lambda: not envs.open(), 60, "the idle session's env closing")
        r = thief.post(url + '/step', json={'id': dead, 'action': 'look()'}).json()       # another client learns nothing of it
        assert "not one of this client's sessions" in r['error'] and 'expired' not in r['error'] and 'idle_timeout' not in r, r
        ts = env.step(STEPS['agentgym'])                               # idle past the timeout: the agent's timeout, not the server's failure
        assert ts.truncated and ts.verdict.reason == 'idle_timeout' and ts.info['idle_timeout'] == timeout, ts.info
        assert env._id is None
        with pytest.raises(RemoteEnvError, match=r'step: no session \(it expired or was closed\); reset to open a new one'): env._step('act', {'action': 'look()'})
        ts = env.reset(seed=1)                                         # no close() needed: a new session
        assert ts.observation.startswith('Find the goal') and env._id not in (None, dead) and len(envs.open()) == 1
        assert not env.step(STEPS['agentgym']).info.get('is_error')
        second = env._id
        until(lambda: not envs.open(), 60, "the second session's env closing")   # reaped between episodes: reset goes on with a new one
        assert env.reset(seed=2).observation.startswith('Find the goal') and env._id not in (None, second)
        env.close()

def test_agentgym_a_session_closed_as_idle_while_the_client_was_quick_is_the_servers_failure():
    "The server says it closed the session for idleness, but the client answered within the timeout: not the agent's time, the server's failure"
    envs = CountedEnvs()
    app = agentgym_app(envs, limits=SessionLimits(idle_timeout=300))
    with served(app) as url:
        env = AgentGymClient(url, name='maze', step_timeout=60)
        env.reset(seed=0)
        for s in app.state.sessions.reap(now=time.monotonic() + 10_000): s.env.close()   # a server whose clock jumped: it reaps at once
        with pytest.raises(SessionExpiredError, match=r"expired: the server closed it after 300 s idle") as e: env.step(STEPS['agentgym'])
        assert e.value.idle_timeout == 300
        t, = collect(lambda: AgentGymClient(url, name='maze', step_timeout=60), lambda: ReapsFirst(app), 1, progress=False)
        assert not t.valid and t.outcome.invalid.startswith('SessionExpiredError:'), t.outcome

class ReapsFirst(ScriptedAgent):
    "Looks around, on a server that reaps every session the moment the agent acts (a clock that jumps ahead)"
    def __init__(self, app): super().__init__([STEPS['agentgym']] * 3); self.app = app
    def __call__(self, observation, history):
        for s in self.app.state.sessions.reap(now=time.monotonic() + 10_000): s.env.close()
        return super().__call__(observation, history)

# -- the command -------------------------------------------------------------------------------------------------------

def _script():
    "The `python -c` code that runs the console script `knowlyr-env-serve` as pyproject.toml declares it"
    target = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['scripts']['knowlyr-env-serve']
    module, fn = target.split(':')
    return f"import sys; sys.argv[0] = 'knowlyr-env-serve'; from {module} import {fn}; sys.exit({fn}())"

def test_cli_help_lists_the_flags():
    r = subprocess.run([sys.executable, '-c', _script(), '--help'], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stdout.startswith('usage: knowlyr-env-serve'), (r.returncode, r.stdout, r.stderr)
    for flag in ('env_id', '--protocol', '--host', '--port', '--max-sessions', '--max-sessions-per-client', '--idle-timeout', '--request-timeout', '--env-kwargs', '--expose-oracle'):
        assert flag in r.stdout, flag
    r = subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.env_serve', '--help'], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stdout.startswith('usage: knowlyr-env-serve'), r.stderr

def test_cli_serves_an_env_a_client_plays():
    args = [ENV_ID, '--protocol', 'agentgym', '--port', '0', '--max-sessions', '2', '--max-sessions-per-client', '1', '--idle-timeout', '600', '--expose-oracle',
            '--request-timeout', '3']
    p = subprocess.Popen([sys.executable, '-c', _script(), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True, start_new_session=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stderr], daemon=True).start()
    try:
        t0, url = time.monotonic(), None
        while url is None:
            assert time.monotonic() - t0 < 180 and p.poll() is None, f'no URL from knowlyr-env-serve (exit {p.poll()})'
            with contextlib.suppress(queue.Empty):
                line = lines.get(timeout=1)
                if ' on http://' in line: url = line.split(' on ', 1)[1].strip()
        assert url.startswith('http://127.0.0.1:'), url
        trajs = collect(functools.partial(AgentGymClient, url, name='maze', step_timeout=60), ExpertAgent, 2, progress=False)
        assert [t.outcome.success for t in trajs] == [True, True]
        a, b = AgentGymClient(url, name='maze', step_timeout=60), AgentGymClient(url, name='maze', step_timeout=60)
        a.reset(seed=0)
        with pytest.raises(RemoteEnvError, match=r'HTTP 429: .*max_sessions_per_client=1'): b.reset(seed=1)   # the flags took effect
        a.close()
        host, port = url.split('//', 1)[1].split('/', 1)[0].rsplit(':', 1)
        with socket.create_connection((host, int(port)), timeout=60) as s:   # a client that sends nothing ...
            t0 = time.monotonic(); s.sendall(b'GET /')                       # ... after a first few bytes
            assert s.recv(4096).startswith(b'HTTP/1.1 408') and time.monotonic() - t0 < 20   # 3 s, not the default 30
    finally:
        if p.poll() is None: os.killpg(p.pid, signal.SIGTERM)
        try: p.wait(15)
        except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL); p.wait()

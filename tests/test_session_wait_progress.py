"""Waiting for a remote env server's sessions (rollout engine, 40b; wire, 19ca): a batch larger than the server's cap
plays through as long as sessions keep freeing (`RolloutSpec.session_wait` is counted from the last progress, not
from an episode's first refusal); a `Retry-After: 0` never makes the engine hammer the server; and with no cap
refusal an env client keeps one server session for all its episodes.

A real HTTP server in AgentGym's shape that counts what it is asked, the project's own `AgentGymClient` and
`collect`. Outcomes and request counts are asserted, never durations."""
import functools
import hashlib
import http.server
import json
import os
import threading
import time
import warnings

import pytest

import knowlyr_lab.envs._remote_wire as wire
from knowlyr_lab.envs.remote import AgentGymClient
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.rollout.engine import run_episode, run_episodes
from knowlyr_lab.rollout.spec import RolloutSpec


class CappedAgentGym(http.server.BaseHTTPRequestHandler):
    "An AgentGym server holding at most `cap` sessions (429 with `Retry-After` past it); an episode is two steps"
    def log_message(self, *a): pass
    def answer(self, status, out, headers=()):
        data = json.dumps(out).encode()
        self.send_response(status); self.send_header('content-type', 'application/json')
        for k, v in headers: self.send_header(k, v)
        self.send_header('content-length', str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_POST(self):
        s, body = self.server, json.loads(self.rfile.read(int(self.headers['content-length'] or 0)) or b'{}')
        with s.lock: s.asked[self.path] = s.asked.get(self.path, 0) + 1; s.log.append((self.path, body.get('id')))
        if self.path == '/create':
            with s.lock:
                if len(s.open) >= s.cap:
                    return self.answer(429, {'error': f'the per-client cap (max_sessions_per_client={s.cap})'}, [('Retry-After', s.retry_after)])
                s.made += 1; sid = f's{s.made}'; s.open[sid] = 0
            return self.answer(200, {'id': sid})
        if self.path == '/close':
            with s.lock: s.open.pop(body.get('id'), None)
            return self.answer(200, {'closed': body.get('id')})
        if body.get('id') not in s.open: return self.answer(200, {'error': f"The id {body.get('id')} is not valid."})
        if self.path == '/reset':
            s.open[body['id']] = 0
            return self.answer(200, {'observation': 'Start.', 'reward': 0, 'done': False, 'available_actions': []})
        slow, s.slow_first_s = s.slow_first_s, 0.0
        time.sleep(s.step_s + slow)
        if body['id'] not in s.open: return self.answer(200, {'error': f"The id {body['id']} is not valid."})
        s.open[body['id']] += 1; done = s.open[body['id']] >= 2
        return self.answer(200, {'observation': 'Done.' if done else 'Go on.', 'reward': int(done), 'done': done, 'available_actions': []})


@pytest.fixture
def server():
    "Start a server: `server(cap, retry_after, step_s, slow_first_s)` -> the server (its `url`, `asked`, `open`, `log`)"
    made = []
    def start(cap=99, retry_after='1', step_s=0.0, slow_first_s=0.0):
        srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), CappedAgentGym); srv.handle_error = lambda *a: None
        srv.cap, srv.retry_after, srv.step_s, srv.lock, srv.asked, srv.open, srv.made = cap, retry_after, step_s, threading.Lock(), {}, {}, 0
        srv.slow_first_s, srv.log = slow_first_s, []                           # the first step's extra time; (path, id)
        srv.url = f'http://127.0.0.1:{srv.server_address[1]}'
        threading.Thread(target=srv.serve_forever, daemon=True).start(); made.append(srv)
        return srv
    yield start
    for srv in made: srv.shutdown(); srv.server_close()


@pytest.fixture(autouse=True)
def fresh_notes(tmp_path, monkeypatch):
    "No note of another run's servers: this test's refusals and progress only (process workers read the env var)"
    monkeypatch.setenv('KNOWLYR_SESSION_NOTES', str(tmp_path / 'notes'))
    monkeypatch.setattr(wire, 'SESSION_NOTES', tmp_path / 'notes', raising=False)
    monkeypatch.setattr(wire, '_NOTED', {}, raising=False)
    monkeypatch.setattr(wire, '_NOTES_OK', {}, raising=False)


def go(obs, history): return {'tool': 'act', 'params': {'action': 'go'}}


def warm_client(url):
    "An AgentGym client, in a worker that has imported what a first step imports (jsonschema: seconds, cold)"
    import jsonschema  # noqa: F401
    return AgentGymClient(url, name='maze', step_timeout=30)


def client(url): return functools.partial(warm_client, url)


def test_with_no_cap_refusal_an_env_client_keeps_its_session_for_its_episodes(server):
    srv = server()
    trajs = collect(client(srv.url), go, 3, batch_size=1, progress=False)   # one worker, one env: three episodes in turn
    assert [(t.valid, t.outcome.success) for t in trajs] == [(True, True)] * 3, [t.outcome.invalid for t in trajs]
    assert (srv.asked.get('/create'), srv.asked.get('/reset')) == (1, 3), srv.asked   # one session, reset three times


def test_a_batch_larger_than_the_cap_plays_through_while_sessions_keep_freeing(server):
    # cap 2, 20 episodes in one lock-step batch of 2 steps of 0.5 s: a pair ends (2 places free) about every second,
    # the last pair starts some 9 s after its first refusal; session_wait 6 s: several times any wait between two
    # sessions freed (margin for a loaded machine), shorter than the queue ahead of the tail
    srv = server(cap=2, retry_after='0.1', step_s=0.5)
    trajs = collect(client(srv.url), go, 20, batch_size=20, session_wait=6.0, progress=False)
    assert [t.valid for t in trajs] == [True] * 20, [t.outcome.invalid for t in trajs]
    assert [t.outcome.success for t in trajs] == [True] * 20
    assert srv.asked['/create'] > 22, srv.asked                               # the cap was in force: refusals
    assert not srv.open, srv.open                                             # and no session outlived the run


def test_a_retry_after_of_zero_is_no_hot_loop(server):
    srv = server(cap=0, retry_after='0')                                      # every place held by another client
    trajs = collect(client(srv.url), go, 2, batch_size=2, session_wait=1.0, progress=False)
    assert [t.valid for t in trajs] == [False, False]
    assert all('RolloutSpec.session_wait' in t.outcome.invalid and 'HTTP 429' in t.outcome.invalid for t in trajs)
    # two episodes waiting 1 s, asking again no sooner than every 0.25 s: at most 5 asks each and a last one
    assert srv.asked['/create'] <= 2 * (1.0 / 0.25 + 2), srv.asked


def test_process_workers_see_the_sessions_the_others_free(server):
    # two process workers of 10 episodes each against a cap of 2 (a pair plays about 1 s): the last pair waits some 9 s
    # from its first refusal; the sessions the other worker frees are noted on this machine, so its clock restarts
    srv = server(cap=2, retry_after='0.1', step_s=0.5)
    trajs = collect(client(srv.url), go, 20, n_workers=2, backend='process', batch_size=10, session_wait=6.0,
                    progress=False)
    assert [t.valid for t in trajs] == [True] * 20, [t.outcome.invalid for t in trajs]
    assert not srv.open, srv.open


def test_a_notes_folder_others_may_write_is_not_used_and_the_wait_still_ends(server, tmp_path, monkeypatch):
    # another user made the notes folder first (anyone may write in it), forged the server's progress a century ahead
    # (a wait counted from it never ends) and planted a link where the refusal note goes
    srv = server(cap=0, retry_after='0.2')                                     # every place held by another client
    planted = tmp_path / 'planted'; planted.mkdir(); planted.chmod(0o777)
    name = hashlib.sha256(wire.server_of(srv.url).encode()).hexdigest()[:16]
    (planted / f'{name}.progress').touch(); os.utime(planted / f'{name}.progress', (4102444800, 4102444800))
    (planted / f'{name}.refused').symlink_to(tmp_path / 'made-through-the-link')
    monkeypatch.setattr(wire, 'SESSION_NOTES', planted)
    calls = iter(range(10**9))                                                 # a bound, so that a hang fails the test
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter('always')
        t, = run_episodes([warm_client(srv.url)], [go], [(0, None, 1)], RolloutSpec(session_wait=1.0),
                          stop=lambda: next(calls) > 0 and time.monotonic() - start > 60)
    assert not t.valid and 'RolloutSpec.session_wait' in t.outcome.invalid, t.outcome.invalid   # not 'run stopped'
    assert not (tmp_path / 'made-through-the-link').exists()
    assert [str(w.message) for w in warned if 'others may write' in str(w.message)], [str(w.message) for w in warned]


def test_a_failed_episode_ends_its_session_even_when_its_env_runs_again(server):
    srv = server(slow_first_s=3.0)                                             # the first step outlives step_timeout
    env = AgentGymClient(srv.url, name='maze', step_timeout=1.0)
    wait_for_it = [0.0]
    def agent(obs, history):
        time.sleep(wait_for_it[0]); wait_for_it[0] = 0.0                       # episode 2 acts once the stale step landed
        return {'tool': 'act', 'params': {'action': 'go'}}
    first, = run_episodes([env], [agent], [(0, None, 1)], again=True)        # as a collect worker runs its chunks
    assert not first.valid and 'no answer within 1 s' in first.outcome.invalid, first.outcome
    assert ('/close', 's1') in srv.log, srv.log                                # its session ended, the env kept
    wait_for_it[0] = 3.0
    second, = run_episodes([env], [agent], [(1, None, 2)], again=True)
    assert (second.valid, len(second.steps), second.outcome.success) == (True, 2, True), (second.outcome, srv.log)
    assert srv.made == 2, srv.log                                              # a new session for the next episode


def test_an_idle_env_holds_no_session_a_second_client_needs(server):
    srv = server(cap=1, retry_after='0.3')                                     # one session in all
    spec = RolloutSpec(session_wait=5.0)
    a, b = warm_client(srv.url), warm_client(srv.url)                          # e.g. two agents evaluated in turn
    ta = run_episode(a, go, seed=1, spec=spec)
    assert not srv.open, srv.open                                              # env A idle: its session ended
    tb = run_episode(b, go, seed=2, spec=spec)
    assert [(t.valid, t.outcome.success) for t in (ta, tb)] == [(True, True)] * 2, tb.outcome.invalid

"Remote envs against real servers on 127.0.0.1: OpenEnv (openenv-core's own server code) and AgentGym's protocol; collect with threads, processes and Ray; GRPO rollouts; servers that die or hang mid-episode."
import functools
import os
import signal
import threading
import time

import pytest

from knowlyr_lab.agents import Agent, ExpertAgent, RandomAgent
from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient, RemoteEnvError
from knowlyr_lab.envs.serve import EnvServer
from knowlyr_lab.registry import make, register
from knowlyr_lab.rollout.collect import collect

CLIENTS = {'openenv': OpenEnvClient, 'agentgym': AgentGymClient}

@pytest.fixture(scope='module')
def agentgym_server():
    with EnvServer('knowlyr/maze-easy', 'agentgym', expose_oracle=True) as srv: yield srv

@pytest.fixture(scope='module')
def openenv_server():
    with EnvServer('knowlyr/maze-easy', 'openenv', expose_oracle=True) as srv: yield srv

def server(request, protocol): return request.getfixturevalue(f'{protocol}_server')
def factory(protocol, url, **kw): return functools.partial(CLIENTS[protocol], url, name='maze', **kw)
def texts(t): return [s.observation.content.split('\nAvailable actions')[0] for s in t.steps]

PROTOCOLS = ['agentgym', pytest.param('openenv', marks=pytest.mark.slow)]

@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_collect_with_threads_equals_local_runs(request, protocol):
    url = server(request, protocol).url
    ex = collect(factory(protocol, url), ExpertAgent, 6, n_workers=3, progress=False)
    local = collect('knowlyr/maze-easy', ExpertAgent, 6, progress=False)
    assert [t.outcome.success for t in ex] == [True] * 6
    assert [texts(t) for t in ex] == [texts(t) for t in local]
    assert [t.task.id for t in ex] == ([t.task.id for t in local] if protocol == 'openenv' else [f'maze-s{t.metadata["seed"]}' for t in ex])

@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_registered_remote_id_with_make_and_random_agent(request, protocol):
    url = server(request, protocol).url
    register(f'test/remote-maze-{protocol}', CLIENTS[protocol], base_url=url, name='maze', overwrite=True)
    env = make(f'test/remote-maze-{protocol}')
    assert env.available_tools == (['look', 'move', 'submit'] if protocol == 'openenv' else ['act'])
    rnd = collect(f'test/remote-maze-{protocol}', RandomAgent, 4, seed=2, max_episode_steps=5, progress=False)
    again = collect(f'test/remote-maze-{protocol}', RandomAgent, 4, seed=2, max_episode_steps=5, progress=False)
    assert [texts(t) for t in rnd] == [texts(t) for t in again] and all(1 <= len(t.steps) <= 5 for t in rnd)
    if protocol == 'openenv':                       # the same tools as the local env: the same random episodes
        assert [texts(t) for t in rnd] == [texts(t) for t in collect('knowlyr/maze-easy', RandomAgent, 4, seed=2, max_episode_steps=5, progress=False)]
    env.close()

@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_collect_with_processes(request, protocol):
    url = server(request, protocol).url
    prc = collect(factory(protocol, url), ExpertAgent, 4, n_workers=2, backend='process', progress=False)
    assert [t.outcome.success for t in prc] == [True] * 4

@pytest.mark.ray
@pytest.mark.slow
def test_collect_with_ray(request):
    import shutil
    import tempfile

    import ray
    tmp = tempfile.mkdtemp(prefix='kr-'); os.environ['KNOWLYR_RAY_TMP'] = tmp
    try:
        for protocol in ('agentgym', 'openenv'):
            url = server(request, protocol).url
            ry = collect(factory(protocol, url), ExpertAgent, 4, n_workers=2, backend='ray', progress=False)
            assert [t.outcome.success for t in ry] == [True] * 4, protocol
    finally:
        ray.shutdown(); os.environ.pop('KNOWLYR_RAY_TMP', None); shutil.rmtree(tmp, ignore_errors=True)

@pytest.mark.slow
def test_openenv_server_speaks_openenv_cores_own_client(openenv_server):
    import asyncio

    from openenv.core import GenericEnvClient
    async def talk():
        async with GenericEnvClient(base_url=openenv_server.url) as c:
            r = await c.reset(seed=3)
            first = r.observation['text']
            r = await c.step({'tool': 'look', 'params': {}})
            return first, r.observation['text'], r.done
    first, look, done = asyncio.run(talk())
    assert first == make('knowlyr/maze-easy').reset(seed=3).observation and '@' in look and not done

class KillServer(Agent):
    "Plays the expert's moves; before its third action it kills (or freezes) the server"
    name = 'killer'
    def __init__(self, pid, sig): self.pid, self.sig, self.n, self.env = pid, sig, 0, None
    def bind_env(self, env): self.env = env
    def __call__(self, obs, history):
        self.n += 1
        if self.n == 3: os.killpg(self.pid, self.sig)
        return self.env.unwrapped.oracle_action()

@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_server_dying_mid_episode_gives_failed_trajectories(protocol):
    "A hung (SIGSTOP) and a crashed (SIGKILL) server: every episode comes back failed with the reason, within the step timeout"
    srv, step_timeout = EnvServer('knowlyr/maze-medium', protocol, expose_oracle=True), 2.0
    make_env = factory(protocol, srv.url, step_timeout=step_timeout, **({'connect_timeout': step_timeout} if protocol == 'openenv' else {}))
    try:
        for how, sig in (('frozen', signal.SIGSTOP), ('killed', signal.SIGKILL)):   # one server: frozen, resumed, then killed
            out = {}
            def run(out=out, sig=sig):
                t0 = time.monotonic()
                out['trajs'] = collect(make_env, lambda: KillServer(srv.proc.pid, sig), 2, progress=False)
                out['wall'] = time.monotonic() - t0
            th = threading.Thread(target=run, daemon=True); th.start(); th.join(120)
            assert not th.is_alive(), f'collect hung on a {how} server'
            trajs = out['trajs']
            print(f"\n{protocol} server {how}: {len(trajs)} failed episodes in {out['wall']:.1f} s (step timeout {step_timeout:g} s)")
            assert [(t.outcome.success, t.outcome.reason) for t in trajs] == [(False, 'error')] * 2, how
            assert all(len(t.steps) <= 2 for t in trajs)        # steps taken before the server went away are kept, none after
            msgs = [t.metadata['error']['message'] for t in trajs]
            assert all(m.startswith(('AgentGym server', 'OpenEnv server')) for m in msgs), msgs
            if how == 'frozen':
                assert f'within {step_timeout:g} s' in msgs[0], msgs[0]
                os.killpg(srv.proc.pid, signal.SIGCONT)
    finally: srv.kill()                                     # SIGKILL also ends a stopped server

def test_unreachable_server_is_a_clear_error():
    from knowlyr_lab.envs.serve import free_port
    env = AgentGymClient(f'http://127.0.0.1:{free_port()}', step_timeout=2)
    with pytest.raises(RemoteEnvError, match=r'AgentGym server http://127.0.0.1:\d+: create failed: ConnectionRefusedError'): env.reset(seed=0)
    oe = OpenEnvClient(f'http://127.0.0.1:{free_port()}', connect_timeout=2)
    with pytest.raises(RemoteEnvError, match=r'cannot read /schema'): _ = oe.tool_schemas
    with pytest.raises(RemoteEnvError, match=r'cannot connect for reset'): oe.reset(seed=0)

@pytest.mark.slow
def test_grpo_rollouts_on_a_remote_env(openenv_server, tmp_path):
    "GRPO's online rollouts `make(config.env_id)`: a registered remote id works like a local one"
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    from knowlyr_lab.trainer.tiny import make_tiny_model
    register('test/remote-maze-grpo', OpenEnvClient, base_url=openenv_server.url, name='maze', overwrite=True)
    model, tok = make_tiny_model(hidden_size=64)
    tr = GRPOTrainer(GRPOConfig(output_dir=str(tmp_path), env_id='test/remote-maze-grpo', num_generations=2, tasks_per_step=2, max_steps=1,
                                max_completion_length=16, max_invalid_actions=1, progress_bar=False), model, tok)
    assert [t['function']['name'] for t in tr.tools] == ['look', 'move', 'submit']
    groups = tr.rollout([0, 1])
    assert [len(g) for g in groups] == [2, 2]
    assert all(t.task.id.startswith('maze-easy-') and t.steps for g in groups for t in g)
    row = tr.train()[0]
    assert row['mode'] == 'online'

# --- hostile servers: a raw TCP server on 127.0.0.1 that answers as badly as it is told to ---------------------------
import base64
import contextlib
import hashlib
import json
import socket
import tracemalloc

MiB = 2**20

class HostileServer:
    "A server on 127.0.0.1 answering each connection with `behave(server, conn, request)`; it stops itself after `life` s"
    def __init__(self, behave, life=15.0, max_send=64 * MiB):
        self.behave, self.sent, self.max_send = behave, 0, max_send
        self.sock = socket.create_server(('127.0.0.1', 0)); self.sock.settimeout(0.1)
        self.url = f'http://127.0.0.1:{self.sock.getsockname()[1]}'
        self.stop_at = time.monotonic() + life
        self.thread = threading.Thread(target=self._serve, daemon=True); self.thread.start()
    def __enter__(self): return self
    def __exit__(self, *a): self.close()
    def close(self): self.stop_at = 0; self.thread.join(5)
    def _serve(self):
        conns = []
        while time.monotonic() < self.stop_at:
            try: c, _ = self.sock.accept()
            except TimeoutError: continue
            th = threading.Thread(target=self._one, args=(c,), daemon=True); th.start(); conns.append(th)
        self.sock.close()
        for th in conns: th.join(2)
    def _one(self, c):
        c.settimeout(2)
        try: self.behave(self, c, read_request(c))
        except OSError: pass                       # the client hung up: what a bounded client does
        finally: c.close()
    def send(self, c, data:bytes):
        "Send, unless the server's life or its byte budget is over"
        if time.monotonic() > self.stop_at or self.sent + len(data) > self.max_send: raise OSError('hostile server: budget spent')
        c.sendall(data); self.sent += len(data)
    def trickle(self, c, data:bytes, every=0.1):
        for i in range(len(data)): self.send(c, data[i:i + 1]); time.sleep(every)

def recvn(c, n):
    buf = b''
    while len(buf) < n:
        b = c.recv(n - len(buf))
        if not b: raise OSError('closed')
        buf += b
    return buf

def read_request(c)->dict:
    buf = b''
    while b'\r\n\r\n' not in buf:
        b = c.recv(4096)
        if not b: raise OSError('closed')
        buf += b
    head, body = buf.split(b'\r\n\r\n', 1)
    lines = head.decode().split('\r\n')
    method, path, _ = lines[0].split(' ', 2)
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(':', 1) for l in lines[1:])}
    body += recvn(c, int(headers.get('content-length', 0)) - len(body))
    return {'method': method, 'path': path.split('?')[0], 'headers': headers, 'body': body}

def http_answer(body:bytes|str, status='200 OK', headers='')->bytes:
    body = body.encode() if isinstance(body, str) else body
    return f'HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{headers}\r\n'.encode() + body

def endless_chunked(srv, c):
    srv.send(c, b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n')
    chunk = b'[' + b'0,' * 32767 + b'0'                    # 64 KiB of a JSON array that never closes
    while True: srv.send(c, b'%x\r\n%s\r\n' % (len(chunk), chunk))

def huge_length(srv, c):
    srv.send(c, b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1610612736\r\n\r\n')   # 1.5 GiB
    while True: srv.send(c, b' ' * 65536)

def trickled(answer:bytes, where='body'):
    def behave(srv, c):
        if where == 'headers': srv.trickle(c, answer)
        else:
            head, body = answer.split(b'\r\n\r\n', 1)
            srv.send(c, head + b'\r\n\r\n'); srv.trickle(c, body)
    return behave

GOOD_RESET = json.dumps({'observation': 'You are in a maze.', 'available_actions': ['look()'], 'reward': 0, 'done': False})

@contextlib.contextmanager
def held_memory():
    "Peak Python memory allocated inside the block (all threads), as a callable read after it"
    tracemalloc.start(); tracemalloc.reset_peak(); out = {}
    try: yield lambda: out['peak']
    finally: out['peak'] = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()

def agentgym(reset=None, step=None):
    "An AgentGym-protocol server: /create answers well; /reset and /step as told (a behaviour, or a JSON text)"
    def behave(srv, c, req):
        how = {'/create': '{"id": 0}', '/reset': reset or GOOD_RESET, '/step': step or GOOD_RESET}.get(req['path'], '{}')
        if callable(how): how(srv, c)
        else: srv.send(c, http_answer(how))
    return behave

@pytest.mark.parametrize('where', ['headers', 'body'])
def test_agentgym_one_deadline_per_call_against_a_trickling_server(where):
    "A server sending a byte every 0.1 s (each read is quick, the answer never ends in time): the call fails at its deadline"
    with HostileServer(agentgym(reset=trickled(http_answer(GOOD_RESET + ' ' * 400), where))) as srv:
        env = AgentGymClient(srv.url, step_timeout=1.5)
        t0 = time.monotonic()
        with pytest.raises(RemoteEnvError, match=r'AgentGym server http://127.0.0.1:\d+: reset: no answer within 1.5 s'): env.reset(seed=0)
        assert time.monotonic() - t0 < 2.5

@pytest.mark.parametrize('behave', [huge_length, endless_chunked], ids=['1.5GiB-content-length', 'endless-chunked'])
def test_agentgym_answer_size_is_capped_while_streaming(behave):
    "A 1.5 GiB answer and an endless chunked one: refused at the cap, read in pieces (the server got to send little)"
    with HostileServer(agentgym(reset=behave)) as srv:
        env = AgentGymClient(srv.url, step_timeout=10, max_response_bytes=MiB)
        t0 = time.monotonic()
        with held_memory() as peak, pytest.raises(RemoteEnvError, match=r'reset: the answer .*is over the 1048576-byte limit'): env.reset(seed=0)
        assert time.monotonic() - t0 < 5
    assert srv.sent < 16 * MiB, srv.sent                   # what a client reading to the end would have taken: 64 MiB
    assert peak() < 4 * MiB, peak()

def test_agentgym_default_cap_bounds_an_endless_body():
    with HostileServer(agentgym(reset=endless_chunked)) as srv:
        with pytest.raises(RemoteEnvError, match=r'is over the 16777216-byte limit'): AgentGymClient(srv.url, step_timeout=20).reset(seed=0)
    assert srv.sent < 32 * MiB, srv.sent

BAD_ANSWERS = {   # what the server sends to /step -> what the error says
    '{"observation": "x", "reward": "nan", "done": false}': 'reward must be a finite number',
    '{"observation": "x", "reward": "inf", "done": true}': 'reward must be a finite number',
    '{"observation": "x", "reward": NaN, "done": true}': 'NaN is not a JSON number',
    '{"observation": "x", "reward": 1e999, "done": true}': 'Infinity|finite number',
    '{"observation": "x", "reward": "1", "done": true}': 'reward must be a finite number',
    '{"observation": "x", "reward": 0, "done": "false"}': 'done must be true or false',
    '{"observation": "x", "reward": 0, "done": 1}': 'done must be true or false',
    '{"observation": "x", "reward": 1, "done": true, "success": "no"}': 'success must be true or false',
    '{"observation": "x", "reward": 0, "done": false, "info": "x"}': 'info must be an object',
    '{"observation": "x", "available_actions": [1, 2]}': 'available_actions must be a list of strings',
    '<html><body>502 Bad Gateway</body></html>': 'the answer is not JSON',
    '{"observation": "x", "reward": 0,': 'the answer is not JSON',
    '[1, 2]': 'the answer must be an object',
    '"\\ud800 lone"': 'the answer must be an object',
    '[' * 100000 + ']' * 100000: 'the answer is not JSON',
}

@pytest.mark.parametrize('answer', list(BAD_ANSWERS), ids=range(len(BAD_ANSWERS)))
def test_agentgym_malformed_answers_are_one_remote_env_error(answer):
    with HostileServer(agentgym(step=answer)) as srv:
        env = AgentGymClient(srv.url, step_timeout=5)
        env.reset(seed=0)
        with pytest.raises(RemoteEnvError, match=BAD_ANSWERS[answer]) as e: env.step({'tool': 'act', 'params': {'action': 'look()'}})
        assert str(e.value).startswith(f'AgentGym server {srv.url}: step'), str(e.value)

def test_agentgym_hostile_answer_ends_an_episode_in_collect():
    "Through `collect`: a server answering `done: \"false\"` gives a failed trajectory with the reason, not a success"
    with HostileServer(agentgym(step='{"observation": "x", "reward": 1, "done": "false"}')) as srv:
        trajs = collect(functools.partial(AgentGymClient, srv.url, step_timeout=5), RandomAgent, 1, progress=False)
    assert [(t.outcome.success, t.outcome.reason) for t in trajs] == [(False, 'error')]
    assert 'done must be true or false' in trajs[0].metadata['error']['message']

# --- OpenEnv: the same server speaks a minimal WebSocket on /ws and HTTP on /schema ----------------------------------
def ws_frame(payload:bytes|str, opcode=1, length=None)->bytes:
    payload = payload.encode() if isinstance(payload, str) else payload
    n = len(payload) if length is None else length
    head = bytes([0x80 | opcode]) + (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, 'big') if n < 65536 else bytes([127]) + n.to_bytes(8, 'big'))
    return head + payload

def ws_read(c)->bytes:
    h = recvn(c, 2); n = h[1] & 127
    if n == 126: n = int.from_bytes(recvn(c, 2), 'big')
    elif n == 127: n = int.from_bytes(recvn(c, 8), 'big')
    mask, data = recvn(c, 4), recvn(c, n)
    return bytes(b ^ mask[i % 4] for i, b in enumerate(data))

def openenv(message=None, schema=None):
    "An OpenEnv-protocol server: every WebSocket message is answered by `message` (a behaviour or a text); /schema by `schema`"
    def behave(srv, c, req):
        if req['path'] == '/schema':
            if callable(schema): schema(srv, c)
            else: srv.send(c, http_answer(schema or '{"action": {"properties": {"move": {"type": "string"}}}}'))
            return
        key = req['headers']['sec-websocket-key']
        accept = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest()).decode()
        srv.send(c, f'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n'.encode())
        c.settimeout(10)
        while True:
            ws_read(c)
            if callable(message): message(srv, c)
            else: srv.send(c, ws_frame(message))
    return behave

def test_openenv_schema_one_deadline_size_cap_and_json():
    for schema, connect_timeout, pattern in [(trickled(http_answer('{"action": {}}' + ' ' * 400)), 1.5, r'cannot read /schema: no answer within 1.5 s'),
                                             (endless_chunked, 20, r'cannot read /schema: the answer is over the 1048576-byte limit'),
                                             ('<html>oops</html>', 5, r'cannot read /schema: the answer is not JSON'),
                                             ('{"action": []}', 5, r'cannot read /schema: action must be an object')]:
        with HostileServer(openenv(schema=schema)) as srv:
            oe = OpenEnvClient(srv.url, connect_timeout=connect_timeout, max_response_bytes=MiB)
            t0 = time.monotonic()
            with pytest.raises(RemoteEnvError, match=pattern): _ = oe.tool_schemas
            assert time.monotonic() - t0 < connect_timeout + 1
        if schema is endless_chunked: assert srv.sent < 16 * MiB, srv.sent

def ws_trickle(srv, c):
    srv.send(c, ws_frame(b'', length=400)[:2] + (400).to_bytes(2, 'big')); srv.trickle(c, b' ' * 400)

def ws_huge(srv, c):
    srv.send(c, ws_frame(b'', length=1610612736))
    while True: srv.send(c, b' ' * 65536)

OPENENV_BAD = [
    (ws_trickle, r'reset: no answer within 1.5 s'),
    (ws_huge, r'reset: the answer is over the 1048576-byte limit'),
    ('{"type": "observation", "data": {"observation": {"text": "x"}, "reward": "nan", "done": false}}', 'reward must be a finite number'),
    ('{"type": "observation", "data": {"observation": {"text": "x"}, "reward": 0, "done": "false"}}', 'done must be true or false'),
    ('{"type": "observation", "data": {"observation": {"text": "x"}, "reward": Infinity, "done": false}}', 'Infinity is not a JSON number'),
    ('{"type": "observation", "data": {"observation": "x", "done": false}}', 'observation must be an object'),
    ('{"type": "observation", "data": [1]}', 'data must be an object'),
    ('not json at all', 'the answer is not JSON'),
    ('[1, 2]', 'the message must be an object'),
    ('{"type": "error", "data": "boom"}', 'reset failed: boom'),
]

@pytest.mark.parametrize('message,pattern', OPENENV_BAD, ids=range(len(OPENENV_BAD)))
def test_openenv_hostile_messages_are_one_remote_env_error(message, pattern):
    with HostileServer(openenv(message=message)) as srv:
        oe = OpenEnvClient(srv.url, step_timeout=1.5, connect_timeout=1.5, max_response_bytes=MiB)
        t0 = time.monotonic()
        with held_memory() as peak, pytest.raises(RemoteEnvError, match=pattern) as e: oe.reset(seed=0)
        assert time.monotonic() - t0 < 2.5 and str(e.value).startswith(f'OpenEnv server {srv.url}'), str(e.value)
        oe.close()
    assert peak() < 8 * MiB, peak()        # the 1.5 GiB message is refused at its header, what follows is discarded

def test_agentgym_malformed_expert_action_is_a_remote_env_error():
    with HostileServer(agentgym(reset='{"observation": "x", "info": {"oracle_action": "north"}}')) as srv:
        env = AgentGymClient(srv.url, step_timeout=5)
        env.reset(seed=0)
        with pytest.raises(RemoteEnvError, match=r"oracle_action must be \{'tool': str"): env.oracle_action()

# --- the server's answer to the agent's own action is the agent's outcome (an error observation), not a failed server ---
GOOD_OBS = '{"type": "observation", "data": {"observation": {"text": "x"}, "reward": 0, "done": false}}'

def answers(*texts):
    "A WebSocket behaviour sending `texts` in turn, one per message (then good observations)"
    it = iter(texts)
    return lambda srv, c: srv.send(c, ws_frame(next(it, GOOD_OBS)))

def ws_error(code): return json.dumps({'type': 'error', 'data': {'message': 'Invalid message', 'code': code, 'errors': [{'msg': 'move: bad value'}]}})

def test_openenv_refusals_of_the_agents_action_are_error_observations():
    with HostileServer(openenv(message=answers(GOOD_OBS, ws_error('VALIDATION_ERROR'), ws_error('EXECUTION_ERROR'), GOOD_OBS, ws_error('SESSION_ERROR')))) as srv:
        oe = OpenEnvClient(srv.url, step_timeout=5, connect_timeout=5)
        oe.reset(seed=0)
        a = {'tool': 'act', 'params': {'move': 'x'}}
        bad, crashed, fine = oe.step(a), oe.step(a), oe.step(a)
        assert bad.info['is_error'] and bad.info['invalid_action'] and not bad.done, bad
        assert bad.observation.startswith('Error: the server refused the action: Invalid message') and 'move: bad value' in bad.observation, bad.observation
        assert '(VALIDATION_ERROR)' in bad.observation and '(EXECUTION_ERROR)' in crashed.observation and not fine.info.get('is_error')
        with pytest.raises(RemoteEnvError, match=r'step act failed: Invalid message.*\(SESSION_ERROR\)'): oe.step(a)   # not the action's doing
        oe._drop()                                                     # a lost connection: the session (and its episode) is gone
        with pytest.raises(RemoteEnvError, match=r'step act: the session is gone .*; reset to open a new one'): oe.step(a)
        assert oe.reset(seed=0).observation == 'x'                    # the next reset reconnects
        oe.close()

"""The env servers against a hostile client (srv9): a reset's task never names a file on the server's disk, and a call
that waited while its session was closed runs nothing on the closed env. Servers in this process on 127.0.0.1."""
import json
import re
import threading
import time

import pytest
from helpers import answer_to, get_request, served, until

from knowlyr_lab.envs.serve import openenv_app
from knowlyr_lab.envs.sessions import SessionTable, UnknownSessionError
from knowlyr_lab.registry import make


def _ws_reset(url, data:dict)->dict:
    "One OpenEnv reset over a fresh WebSocket, as any client can send it; the server's answer"
    from websockets.sync.client import connect
    with connect(url.replace('http', 'ws', 1) + '/ws', open_timeout=60) as ws:
        ws.send(json.dumps({'type': 'reset', 'data': data}))
        return json.loads(ws.recv(timeout=120))

def test_openenv_reset_never_opens_a_file_the_client_names(tmp_path):
    "A coding env reads a '.yaml' task as a file: over the wire that opened any YAML file of the server's and quoted it in the error"
    secret = tmp_path / 'config.yaml'
    secret.write_text('id: x\ninstruction: "hunter2-SECRET\n')            # a YAML error quotes this line
    with served(openenv_app(lambda: make('knowlyr/sandbox'))) as url:
        for task in (str(secret), {'id': str(secret)}):
            r = _ws_reset(url, {'task': task})
            assert r['type'] == 'error' and 'SECRET' not in json.dumps(r), r
            assert "unknown coding task" in r['data']['message'], r       # looked up among the env's own tasks, like any id
        r = _ws_reset(url, {'task': ['a', 'list']})
        assert r['type'] == 'error' and "task must be a task id or an object with a string 'id', got list" in r["data"]["message"], r
        r = _ws_reset(url, {'task': {'id': 'py-binary-search-bound', 'hidden_tests': {'t.py': 'pass'}}})   # the client's own task content: only its id counts
        assert r['type'] == 'observation' and r['data']['observation']['task']['id'] == 'py-binary-search-bound', r
        assert r['data']['observation']['task']['n_tests'] == 6, r

def test_a_call_that_waited_while_its_session_was_closed_runs_nothing():
    "A step queued behind a running call, then the session closed (its env with it): the step used to run on the closed env"
    table, env = SessionTable(), make('knowlyr/maze-easy')
    sid = table.open('10.0.0.1'); table.ready(sid, env); s = table.rows[sid]
    ran, refused = [], []
    def step():
        try:
            with table.use(sid, '10.0.0.1') as got: ran.append(got.env.reset(seed=0))
        except UnknownSessionError as e: refused.append(str(e))
    with s.lock:                                                         # a call in progress
        th = threading.Thread(target=step); th.start()
        until(lambda: s.busy == 1, 30, 'the second call waiting')
        table.close(sid, '10.0.0.1').env.close()                         # the client closes the session meanwhile
    th.join(30)
    assert not ran and len(refused) == 1 and "not one of this client's sessions" in refused[0], (ran, refused)
    assert s.busy == 0 and not table.rows

@pytest.mark.parametrize('wait', [0.0, 0.05])
def test_a_call_that_got_its_session_first_still_runs(wait):
    "The check costs the ordinary case nothing: a call whose session is still open runs, after a wait for its lock or not"
    table = SessionTable(); sid = table.open('10.0.0.1'); table.ready(sid, make('knowlyr/maze-easy'))
    s, out = table.rows[sid], []
    with s.lock:
        th = threading.Thread(target=lambda: out.append(table._find(sid, '10.0.0.1') is s and _use(table, sid))); th.start()
        time.sleep(wait)
    th.join(30)
    assert out == [True]

def _use(table, sid):
    with table.use(sid, '10.0.0.1') as s: return s.env.reset(seed=0).observation.startswith('Find the goal')

def _closed_within(sock, seconds:float)->bytes:
    "What the server sent on `sock` until it closed it; fails when it is still open after `seconds`"
    sock.settimeout(seconds); got = b''
    while chunk := sock.recv(4096): got += chunk
    return got

def test_silent_and_trickling_connections_get_408_and_are_closed():
    "uvicorn waited forever for a request: idle connections (or one byte every few seconds) held the server's descriptors"
    import socket

    import httpx

    from knowlyr_lab.envs.serve import EnvServer
    with EnvServer('knowlyr/maze-easy', 'agentgym', request_timeout=1.5) as srv:
        silent = [socket.create_connection(('127.0.0.1', srv.port), timeout=30) for _ in range(20)]
        trickle = socket.create_connection(('127.0.0.1', srv.port), timeout=30)
        t0 = time.monotonic()
        for ch in b'POST /create HTTP/1.1\r\nHost: x\r\n':                 # a head that never ends, a byte at a time
            try: trickle.send(bytes([ch]))
            except OSError: break
            time.sleep(0.2)
            if time.monotonic() - t0 > 6: break
        assert all(_closed_within(s, 30) == b'' for s in silent)          # nothing asked, nothing answered: closed
        got = _closed_within(trickle, 30)
        assert got.startswith(b'HTTP/1.1 408') and b'within 1.5 s (request_timeout)' in got, got
        assert time.monotonic() - t0 < 20
        with httpx.Client(timeout=30) as c:                                 # a client that sends its request is served, and
            sid = c.post(srv.url + '/create').json()['id']                  # its keep-alive connection too, after a pause
            time.sleep(2.0)
            r = c.post(srv.url + '/reset', json={'id': sid, 'data_idx': 0}).json()
            assert r['observation'].startswith('Find the goal'), r

# srv10: AgentGym /step actions the parser should never see

def _agentgym_step(c, url, sid, action:str):
    "A /step with `action` as any client can send it (json.dumps writes a lone surrogate as its \\ud800 escape)"
    return c.post(url + '/step', content=json.dumps({'id': sid, 'action': action}).encode(),
                  headers={'content-type': 'application/json'})

def test_agentgym_an_action_with_a_lone_surrogate_is_a_400_naming_the_field():
    "On main it reached the parser and came back as HTTP 200 with {'error': 'UnicodeEncodeError ...'}"
    import httpx

    from knowlyr_lab.envs.serve import agentgym_app
    with served(agentgym_app(lambda: make('knowlyr/maze-easy'))) as url, httpx.Client(timeout=60) as c:
        sid = c.post(url + '/create').json()['id']
        c.post(url + '/reset', json={'id': sid})
        for action in ('\ud800', 'move(direction="\udc80")'):
            r = _agentgym_step(c, url, sid, action)
            assert r.status_code == 400, (r.status_code, r.text)
            assert r.json()['error'].startswith('action is not valid Unicode (a lone surrogate at character'), r.text
        r = _agentgym_step(c, url, sid, 'move(direction="north")')             # the session goes on
        assert r.status_code == 200 and 'error' not in r.json(), r.text

def test_agentgym_an_action_of_100000_parameters_is_refused_before_it_is_parsed():
    """`move(x=1, x=1, ...)` with 100,000 parameters took 4 s of CPU to parse (a 16 MB body about a minute, the parser's
    lock held meanwhile): 413 naming MAX_ACTION_VALUES. A long action of text (a file's content) is still parsed."""
    import httpx

    from knowlyr_lab.envs.serve import agentgym_app
    with served(agentgym_app(lambda: make('knowlyr/maze-easy'))) as url, httpx.Client(timeout=120) as c:
        sid = c.post(url + '/create').json()['id']
        c.post(url + '/reset', json={'id': sid})
        r = _agentgym_step(c, url, sid, 'move(' + 'x=1,' * 100_000 + ')')
        assert r.status_code == 413 and '(MAX_ACTION_VALUES)' in r.json()['error'], (r.status_code, r.text[:300])
        r = _agentgym_step(c, url, sid, 'a' * (2**20 + 1))
        assert r.status_code == 413 and '(MAX_ACTION_CHARS)' in r.json()['error'], (r.status_code, r.text[:300])
        r = _agentgym_step(c, url, sid, 'move(direction="' + 'north, (east), [west]; ' * 20_000 + '")')
        assert r.status_code == 200 and 'direction' in r.json()['observation'], r.text[:300]   # parsed: the env judged it

# srv15: uvicorn's h11 checks its 16 KiB only while a head is incomplete, so a head that arrived in one read (100 KB
# sent at once on loopback) was parsed whole and served; a longer one got a text/plain 400. The env servers now bound
# a head to max_head_bytes (16 KiB, as the model server) and answer 431 (414: the request line alone) in their JSON.

@pytest.mark.parametrize('protocol,path', [('agentgym', b'/'), ('openenv', b'/health')])
def test_env_servers_refuse_a_head_past_max_head_bytes_with_431_or_414_in_json(protocol, path):
    "main: a 100 KB head and a 20 KiB request line were served (200, 404); 6 MB of head got text/plain 400"
    from knowlyr_lab.envs.serve import EnvServer
    many = b''.join(b'X-%d: %s\r\n' % (k, b'y' * 1000) for k in range(100))
    with EnvServer('knowlyr/maze-easy', protocol) as srv:
        for pieces, status, says in [
                ([get_request(path, many)], 431, 'the request head (request line and headers) passes max_head_bytes (16,384 bytes)'),
                ([get_request(path, b'X-Big: ' + b'y' * 6_000_000 + b'\r\n')], 431, 'passes max_head_bytes (16,384 bytes)'),
                ([get_request(b'/' + b'a' * 20_000)], 414, 'the request line passes max_head_bytes (16,384 bytes)'),
                ([get_request(path, many)[:10_000], get_request(path, many)[10_000:]], 431, 'passes max_head_bytes')]:   # in two reads
            got, headers, body = answer_to(srv.port, pieces, pause=0.3)
            assert (got, headers.get('content-type'), headers.get('connection')) == (status, 'application/json', 'close'), (got, headers, body[:200])
            assert says in json.loads(body)['error'], body
        honest = b'Authorization: Bearer ' + b'k' * 4096 + b'\r\n' + b''.join(b'X-Stainless-%d: %s\r\n' % (k, b'v' * 40) for k in range(10))
        got, _, body = answer_to(srv.port, [get_request(path, honest)])
        assert got == 200, (got, body[:200])                  # an honest head with a long token is served

# srv23: a refused head (431, 414) and h11's own 400 closed the connection with the rest of the client's request unread,
# so the kernel reset it: a client still sending (a 4 KiB send buffer) got ConnectionResetError, never the answer (10 of
# 10 tries on main, each case). timed_h11 now ends the answer's stream and reads and drops what follows (up to
# 16 x max_head_bytes, by request_timeout) before it closes.

MANY_HEADERS = b''.join(b'X-%d: %s\r\n' % (k, b'y' * 100) for k in range(1000))   # 1000 headers, 100 KB

@pytest.mark.parametrize('protocol,path', [('agentgym', b'/'), ('openenv', b'/health')])
def test_env_servers_refuse_an_oversized_head_still_being_sent_without_a_reset(protocol, path):
    "main: ConnectionResetError on every try (in sendall or in the read); the server itself went on serving"
    from helpers import sent_still_sending

    from knowlyr_lab.envs.serve import EnvServer
    with EnvServer('knowlyr/maze-easy', protocol) as srv:
        for data, status, says in [
                (get_request(path, b'X-Big: ' + b'y' * 100_000 + b'\r\n'), 431, 'passes max_head_bytes (16,384 bytes)'),
                (get_request(path, MANY_HEADERS), 431, 'passes max_head_bytes (16,384 bytes)'),
                (b'HELLO THERE\r\n\r\n' + b'x' * 100_000, 400, 'Invalid HTTP request received.')]:   # h11's own 400
            for _ in range(3):                                    # a reset is not a one-off: every try is read whole
                head, _, body = sent_still_sending(srv.port, data).partition(b'\r\n\r\n')
                assert head.startswith(b'HTTP/1.1 %d ' % status) and b'content-type: application/json' in head, head
                assert says in json.loads(body)['error'], body
        got, _, body = answer_to(srv.port, [get_request(path)])
        assert got == 200, (got, body[:200])                     # and the next client is served

@pytest.mark.parametrize('chunked', [False, True])
def test_a_413_to_a_body_still_being_sent_on_a_connection_asked_closed_is_read_whole(chunked):
    """A body over MAX_BODY_BYTES with `Connection: close`: uvicorn's answer cycle closed the connection after the 413,
    the body unread, so the client still sending it got a reset (main: BrokenPipeError, every try). Now the close reads
    and drops the rest first (timed_h11's `_end`), as h11 does on a kept-alive connection."""
    from helpers import sent_still_sending

    from knowlyr_lab.envs.serve import MAX_BODY_BYTES, agentgym_app
    from knowlyr_lab.envs.sessions import timed_h11
    n = MAX_BODY_BYTES + 1_000_000
    head = b'POST /step HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n'
    data = head + (b'Transfer-Encoding: chunked\r\n\r\n%x\r\n' % n + b'x' * n + b'\r\n0\r\n\r\n' if chunked
                   else b'Content-Length: %d\r\n\r\n' % n + b'x' * n)
    with served(agentgym_app(lambda: make('knowlyr/maze-easy')), http=timed_h11()) as url:
        port = int(url.rsplit(':', 1)[1])
        for _ in range(2):
            answer, _, body = sent_still_sending(port, data, 2**16).partition(b'\r\n\r\n')   # 16 MB: still sending
            assert answer.startswith(b'HTTP/1.1 413 ') and 'request body over' in json.loads(body)['error'], (answer, body[:200])
        assert answer_to(port, [get_request(b'/')])[0] == 200

def test_max_head_bytes_is_an_env_server_setting_and_a_flag():
    """`EnvServer(max_head_bytes=...)` / `knowlyr-env-serve --max-head-bytes`: a 20 KB head is served under a 32 KiB bound,
    also when it comes in pieces (h11's own 16 KiB bound would answer 400), and refused past it. main: no such setting"""
    from knowlyr_lab.cli.env_serve import _env_serve_parser
    from knowlyr_lab.envs.serve import EnvServer
    p = _env_serve_parser()
    assert (p.parse_args(['x', '--max-head-bytes', '32768']).max_head_bytes, p.parse_args(['x']).max_head_bytes) == (32768, 16384)
    head = get_request(b'/', b'X-Big: ' + b'y' * 20_000 + b'\r\n')
    with EnvServer('knowlyr/maze-easy', 'agentgym', max_head_bytes=32_768) as srv:
        assert answer_to(srv.port, [head])[0] == 200
        assert answer_to(srv.port, [head[:17_000], head[17_000:]], pause=0.3)[0] == 200
        got, _, body = answer_to(srv.port, [get_request(b'/', b'X-Big: ' + b'y' * 40_000 + b'\r\n')])
        assert got == 431 and 'max_head_bytes (32,768 bytes)' in json.loads(body)['error'], (got, body)


def test_a_trickled_head_is_not_scanned_again_on_every_read_while_it_fits(monkeypatch):
    "head_past runs on each read of a head: below the limit it answers from the length, so a trickle costs no rescans"
    from knowlyr_lab.envs import sessions
    scans = []
    class Counting:
        def search(self, *a): scans.append(a); return sessions._BLANK_LINE_RE.search(*a)
    monkeypatch.setattr(sessions, '_BLANK_LINE_RE', sessions._BLANK_LINE, raising=False)
    monkeypatch.setattr(sessions, '_BLANK_LINE', Counting())
    head = b'GET / HTTP/1.1\r\n' + b'X: y\r\n' * 200
    assert all(sessions.head_past(head[:i], 16_384) is None for i in range(1, len(head) + 1))
    assert scans == []                                            # 1,216 reads of a head that fits: none scanned
    assert sessions.head_past(b'GET / HTTP/1.1\r\n' + b'X: y\r\n' * 3000, 16_384).status == 431
    assert len(scans) == 1                                        # past the limit: the one scan that decides

# srv17: a pipelined request is not timed while its handler runs

def _statuses(port:int, data:bytes)->list:
    "The statuses of the answers to `data`, sent at once on one connection, until the server closes it"
    import re
    import socket
    c = socket.create_connection(('127.0.0.1', port), timeout=30); c.sendall(data)
    got = _closed_within(c, 30); c.close()
    return [int(s) for s in re.findall(rb'HTTP/1\.1 (\d{3}) ', got)]

def test_a_request_that_is_in_gets_its_answer_however_long_its_handler_runs():
    """request_timeout 1 s, POST /create of an env that takes 3 s to make. main: 408 and closed while /create ran, when
    it came pipelined behind GET / (the deadline was set again after uvicorn had taken up the whole request) and when
    it said `Connection: close` (h11 calls such a request MUST_CLOSE once it is in, not DONE: the clock never stopped)"""
    from knowlyr_lab.envs.serve import agentgym_app
    from knowlyr_lab.envs.sessions import timed_h11
    def slow_env(): time.sleep(3); return make('knowlyr/maze-easy')
    hello = b'GET / HTTP/1.1\r\nHost: x\r\n\r\n'
    create = b'POST /create HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n'
    with served(agentgym_app(slow_env), http=timed_h11(1.0)) as url:
        port = int(url.rsplit(':', 1)[1])
        assert _statuses(port, create + b'Connection: close\r\n\r\n') == [200]
        assert _statuses(port, hello + create + b'\r\n') == [200, 200]     # kept alive, then closed 1 s after, unasked
        assert _statuses(port, hello + create + b'Connection: close\r\n\r\n') == [200, 200]
        assert _statuses(port, hello + create[:20]) == [200, 408]          # a second request that never ends: still 408
        early = b'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\na'   # answered before its body, which never ends
        assert _statuses(port, early) == [200]                             # closed at the deadline: no 408 after its answer

def test_env_serve_refuses_a_request_timeout_that_is_not_a_finite_number_above_0():
    "main: knowlyr-env-serve --request-timeout 0, -1 or inf served; EnvServer(request_timeout=0) started a server too"
    import subprocess
    import sys

    from knowlyr_lab.envs.serve import EnvServer
    for t in ('0', '-1', 'inf'):
        p = subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.env_serve', 'knowlyr/maze-easy', '--port', '0', '--request-timeout', t],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)   # main: it served until this timeout
        assert (p.returncode, p.stderr) == (2, f'knowlyr-env-serve: error: --request-timeout must be a finite number above 0, got {float(t)!r}\n')
    for t in (0, -1.0, float('nan')):
        with pytest.raises(ValueError, match=r'^request_timeout must be a finite number above 0, got '):
            EnvServer('knowlyr/maze-easy', 'agentgym', request_timeout=t, startup_timeout=30).close()

def test_env_server_refuses_a_max_head_bytes_that_is_not_a_positive_integer_before_it_starts():
    "main: EnvServer started its subprocess, which exited with the error, read back as a RuntimeError"
    from knowlyr_lab.envs.serve import EnvServer
    for bad in (0, -1, 2.5, float('nan'), True, '16384'):
        with pytest.raises(ValueError, match=rf'^max_head_bytes must be a positive integer, got {bad!r:.8}'):
            EnvServer('knowlyr/maze-easy', 'agentgym', max_head_bytes=bad, startup_timeout=30).close()

@pytest.mark.parametrize('limits,says', [
    ({'idle_timeout': 0}, r'SessionLimits\.idle_timeout \(None: never\) must be a finite number above 0, got 0'),
    ({'idle_timeout': float('inf')}, r'SessionLimits\.idle_timeout \(None: never\) must be a finite number above 0, got inf'),
    ({'max_sessions': 2.5}, r'SessionLimits\.max_sessions must be a positive integer, got 2\.5'),
    ({'max_sessions': 2, 'max_sessions_per_client': 3}, r'SessionLimits\.max_sessions_per_client \(3\) is above max_sessions'),
])
def test_env_server_checks_its_limits_before_it_starts(limits, says):
    "main: the subprocess started and exited with the error, read back as a RuntimeError (inf: NameError, limits were a repr)"
    from knowlyr_lab.envs.serve import EnvServer
    with pytest.raises(ValueError, match='^' + says):
        EnvServer('knowlyr/maze-easy', 'agentgym', limits=limits, startup_timeout=30).close()

def test_env_server_checks_limits_as_they_are_now_and_hands_good_ones_over_as_given():
    "A SessionLimits changed after it was made, an unknown field: refused here (main: RuntimeError from the child)"
    import httpx

    from knowlyr_lab.envs.serve import EnvServer
    from knowlyr_lab.envs.sessions import SessionLimits
    changed = SessionLimits(); changed.max_sessions = 0
    with pytest.raises(ValueError, match=r'^SessionLimits\.max_sessions must be a positive integer, got 0$'):
        EnvServer('knowlyr/maze-easy', 'agentgym', limits=changed, startup_timeout=30).close()
    with pytest.raises(TypeError, match="unexpected keyword argument 'idle'"):
        EnvServer('knowlyr/maze-easy', 'agentgym', limits={'idle': 5}, startup_timeout=30).close()
    with EnvServer('knowlyr/maze-easy', 'agentgym', limits={'idle_timeout': 12.5, 'max_sessions': 3}) as srv, \
         httpx.Client(base_url=srv.url, timeout=60) as h:
        sid = h.post('/create').json()['id']
        assert h.post('/reset', json={'id': sid, 'data_idx': 0}).json()['time_limits']['idle_timeout'] == 12.5

# srv20: EnvServer sends `env_kwargs` to its server process as JSON; a set, bytes or an object there failed in
# json.dumps with a bare TypeError ("Object of type set is not JSON serializable") naming neither env_kwargs nor the key.

@pytest.mark.parametrize('kw,says', [
    ({'tags': {'a', 'b'}}, "env_kwargs['tags'] is of type set"),
    ({'words': ['ok', b'raw']}, "env_kwargs['words'][1] is of type bytes"),
    ({'opts': {'seed': object()}}, "env_kwargs['opts']['seed'] is of type object"),
    ({(0, 1): 'wall'}, "env_kwargs has a key of type tuple ((0, 1))"),
])
def test_env_server_names_the_env_kwargs_value_json_cannot_carry(kw, says):
    "main: TypeError: Object of type set is not JSON serializable (or 'keys must be str, int, ...')"
    from knowlyr_lab.envs.serve import EnvServer
    with pytest.raises(ValueError, match=r'^' + re.escape(says) + r', which JSON cannot carry: '):   # the fix: srv22's test
        EnvServer('knowlyr/maze-easy', env_kwargs=kw)         # raised before the server process starts

# srv21: an integer past Python's digit limit lost its place ("the value: Exceeds the limit (4300 digits) for integer
# string conversion...") and one as a key gave that bare error alone (its repr raised inside the except).

@pytest.mark.parametrize('kw,says', [
    ({'opts': {'seed': 10**5000}}, "env_kwargs['opts']['seed'] holds an integer of 5001 digits"),
    ({'m': {10**5000: 1}}, "env_kwargs['m'] has a key that is an integer of 5001 digits"),
    ({'ids': [1, -10**4300]}, "env_kwargs['ids'][1] holds an integer of 4301 digits"),
])
def test_env_server_names_an_integer_past_the_digit_limit_in_env_kwargs(kw, says):
    "main: 'the value: Exceeds the limit (4300 digits) ...' or the bare ValueError: neither env_kwargs nor the key"
    from knowlyr_lab import errors
    from knowlyr_lab.envs.serve import EnvServer
    from knowlyr_lab.recorder import json_numbers
    with pytest.raises(ValueError, match=r'^' + re.escape(says + ", past Python's limit of ") + r'\d+, which JSON cannot'):
        EnvServer('knowlyr/maze-easy', env_kwargs=kw)
    assert json_numbers.past_digit_limit is errors.past_digit_limit      # one wording: page 00's, the recorder's too

# srv22: json_text's refusal ended with one fix for every cause, "send dicts, lists, strings, numbers, booleans or
# None": advice that does not fit an integer past the digit limit (a number already), a key, or a cycle.

@pytest.mark.parametrize('kw,says,fix', [
    ({'tags': {'a'}}, "env_kwargs['tags'] is of type set", 'send dicts, lists, strings, numbers, booleans or None'),
    ({'words': [b'raw']}, "env_kwargs['words'][0] is of type bytes", 'send dicts, lists, strings, numbers, booleans or None'),
    ({(0, 1): 'wall'}, 'env_kwargs has a key of type tuple ((0, 1))', 'use keys that are strings or numbers'),
    ({'seed': 10**5000}, "env_kwargs['seed'] holds an integer of 5001 digits, past Python's limit of 4300",
     'send a number within the limit, or its digits as a string'),
    ({'m': {-10**4300: 1}}, "env_kwargs['m'] has a key that is an integer of 4301 digits, past Python's limit of 4300",
     'use a shorter key, or its digits as a string'),
    ('cycle', "env_kwargs['self'] holds itself (a cycle)", 'send a copy without the cycle'),
])
def test_the_refusal_of_env_kwargs_json_cannot_carry_gives_the_fix_for_its_cause(kw, says, fix):
    "main: every cause ended with 'send dicts, lists, strings, numbers, booleans or None' (a 5000-digit int is a number)"
    import sys

    from knowlyr_lab.envs.serve import EnvServer
    if kw == 'cycle': kw = {}; kw['self'] = kw
    if sys.get_int_max_str_digits() != 4300: pytest.skip('the digit limit is not the default')
    with pytest.raises(ValueError) as e: EnvServer('knowlyr/maze-easy', env_kwargs=kw)   # raised before the server starts
    assert str(e.value) == f'{says}, which JSON cannot carry: {fix}', str(e.value)

def test_a_nan_in_env_kwargs_goes_as_python_writes_it_and_reads_back():
    "NaN is not refused: Python's JSON writes it as NaN and the server process, Python too, reads it back (a guard)"
    import json
    import math

    from knowlyr_lab.errors import json_text
    text = json_text({'env_kwargs': {'gamma': float('nan'), 'cap': float('inf')}})
    back = json.loads(text)['env_kwargs']
    assert text == '{"env_kwargs": {"gamma": NaN, "cap": Infinity}}' and math.isnan(back['gamma']) and back['cap'] == math.inf

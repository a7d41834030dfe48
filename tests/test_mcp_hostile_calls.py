"""The MCP server against a client that sends too much at once, gives up on a long call, or outlives the server.

Every tool call runs on a worker thread of one pool (anyio's 40) that all sessions share. A call queued on a busy
sandbox parked one of them until the sandbox was free: one session running `sleep` on its sandbox with 45 more calls
queued behind it made another session's `get_schema` wait for the whole sleep. Now a call on a busy sandbox is refused
at once, one session has at most `max_calls_per_client` calls running and all sessions together `max_calls` (one token
may open many sessions: five sessions of eight long calls each held all 40 threads and a sixth waited). A pipeline whose client has gone ends at its
next unit instead of writing on into the root; `max_tasks` has a cap. A terminated HTTP server waits at most a few
seconds for its calls in flight, and leaves no sandbox process behind. A sandbox cannot ask for a command timeout
past `max_wall_timeout`, and git and search keep to it. Driven by the MCP SDK's own clients."""
import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import mcp_data as _data
from helpers import mcp_err as _err
from helpers import mcp_session, served, until
from mcp import Client
from mcp.shared.exceptions import MCPError

from knowlyr_lab.mcp import build_server
from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.sandbox.protocol import create_sandbox

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the MCP server refuses to create sandboxes')
TOKEN = 'tok-' + os.urandom(8).hex()



def session(url): return mcp_session(url, TOKEN)

def shell(sid, command): return {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': command}}

@contextlib.contextmanager
def server_process(root:Path, *flags):
    "`knowlyr-lab-mcp --transport http` as a process of its own: (the process, its URL)"
    env = {**os.environ, 'KNOWLYR_MCP_TOKEN': TOKEN, 'PYTHONPATH': str(ROOT)}
    p = subprocess.Popen([sys.executable, '-m', 'knowlyr_lab.mcp', '--root', str(root), '--transport', 'http', '--port', '0',
                          *flags], env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = ''
        while 'MCP server on' not in line:
            line = p.stderr.readline()
            assert line or p.poll() is None, 'the server died at start'
        threading.Thread(target=p.stderr.read, daemon=True).start()     # its log never fills the pipe
        yield p, re.search(r'(http://\S+)', line)[1]
    finally:
        if p.poll() is None: p.kill(); p.wait()

def processes_running(marker:str)->list[int]:
    "Pids of the processes whose command line holds `marker`"
    found = []
    for d in Path('/proc').iterdir():
        try:
            if d.name.isdigit() and marker in (d/'cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace'):
                found.append(int(d.name))
        except OSError: pass
    return found

def test_calls_queued_on_a_busy_sandbox_are_refused_and_other_sessions_are_served(tmp_path):
    app, marker = build_server(tmp_path, token=TOKEN), f"sleep 15.{os.getpid() % 1000:03d}"
    with served(app.streamable_http_app(host='127.0.0.1')) as url:
        async def go():
            async with session(url + '/mcp') as a, session(url + '/mcp') as b:
                sid = _data(await a.call_tool('create_sandbox', {}))['sandbox_id']
                slow = asyncio.ensure_future(a.call_tool('execute_tool', shell(sid, f'{marker}; echo done')))
                await asyncio.to_thread(until, lambda: processes_running(marker), 60, 'the slow command to start')
                queued = [asyncio.ensure_future(a.call_tool('execute_tool', shell(sid, 'true'))) for _ in range(45)]
                await asyncio.sleep(1)
                t0 = time.monotonic(); schema = await b.call_tool('get_schema', {}); waited = time.monotonic() - t0
                return waited, schema, await asyncio.gather(*queued), await slow
        waited, schema, queued, slow = asyncio.run(go())
    assert not schema.is_error and waited < 8, waited                   # not behind A's sleep (main: 13 s or more)
    assert _data(slow)['output'] == 'done\n'
    assert all('has a call in flight' in _err(r) for r in queued), [r.content[0].text for r in queued[:2]]

def test_one_session_has_at_most_max_calls_per_client_running(tmp_path):
    app = build_server(tmp_path, token=TOKEN, max_sandboxes=4, max_sandboxes_per_client=3, max_calls_per_client=2)
    with served(app.streamable_http_app(host='127.0.0.1')) as url:
        async def go():
            async with session(url + '/mcp') as a, session(url + '/mcp') as b:
                sids = [_data(await a.call_tool('create_sandbox', {}))['sandbox_id'] for _ in range(3)]
                marks = [f"sleep 8.{k}{os.getpid() % 100:02d}" for k in (1, 2)]
                running = [asyncio.ensure_future(a.call_tool('execute_tool', shell(s, m))) for s, m in zip(sids, marks)]
                await asyncio.to_thread(until, lambda: all(processes_running(m) for m in marks), 60, 'both commands to start')
                third, other = await a.call_tool('execute_tool', shell(sids[2], 'true')), await b.call_tool('get_schema', {})
                await asyncio.gather(*running)
                after = await a.call_tool('execute_tool', shell(sids[2], 'echo free'))
                return _err(third), other, _data(after)
        third, other, after = asyncio.run(go())
    assert 'has 2 tool calls running' in third and 'max_calls_per_client=2' in third, third
    assert not other.is_error and after['output'] == 'free\n'           # another session, and later calls, are served

def cmdlines()->list[str]:
    "The command lines of every process, read once"
    out = []
    for d in Path('/proc').iterdir():
        try:
            if d.name.isdigit(): out.append((d/'cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace'))
        except OSError: pass
    return out

def test_sessions_of_one_token_cannot_take_every_worker_thread(tmp_path):
    "Five sessions with eight long calls each held all 40 worker threads: a sixth session waited for a thread"
    app, tag = build_server(tmp_path, token=TOKEN, max_sandboxes=48, max_sandboxes_per_client=8), os.getpid() % 100
    marks = [f"sleep 20.{k:03d}{tag:02d}" for k in range(40)]
    running = lambda: sum(any(m in c for c in cl) for cl in [cmdlines()] for m in marks)
    with served(app.streamable_http_app(host='127.0.0.1')) as url:
        async def go():
            async with contextlib.AsyncExitStack() as st:
                ss = [await st.enter_async_context(session(url + '/mcp')) for _ in range(6)]
                sids = [[_data(await s.call_tool('create_sandbox', {}))['sandbox_id'] for _ in range(8)] for s in ss]
                flood = [asyncio.ensure_future(s.call_tool('execute_tool', shell(sid, marks[8 * i + k])))
                         for i, s in enumerate(ss[:5]) for k, sid in enumerate(sids[i])]
                await asyncio.to_thread(until, lambda: running() >= 32, 90, '32 sandbox commands to start')
                await asyncio.sleep(1)
                n = running()
                t0 = time.monotonic()
                schema, call = await ss[5].call_tool('get_schema', {}), await ss[5].call_tool('execute_tool', shell(sids[5][0], 'true'))
                closed = await ss[5].call_tool('close_sandbox', {'sandbox_id': sids[5][1]})
                waited = time.monotonic() - t0
                return waited, n, schema, call, closed, await asyncio.gather(*flood)
        waited, n, schema, call, closed, flood = asyncio.run(go())
    assert waited < 8, waited                                          # main: 20 s, behind the sleeps
    assert n == 32, n                                                  # main: all 40 ran
    assert not schema.is_error and not closed.is_error
    assert 'the server has 32 tool calls running' in (msg := _err(call)) and 'max_calls=32' in msg, msg
    refused = [_err(r) for r in flood if r.is_error]
    assert len(refused) == 8 and all('max_calls=32' in r for r in refused), refused[:2]

def test_max_calls_flags_are_checked(tmp_path):
    bad = subprocess.run([sys.executable, '-m', 'knowlyr_lab.mcp', '--root', str(tmp_path), '--max-calls', '4',
                          '--max-calls-per-client', '9'], capture_output=True, text=True, env={**os.environ, 'PYTHONPATH': str(ROOT)})
    assert bad.returncode == 2 and '--max-calls-per-client' in bad.stderr and '--max-calls' in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr

def _units(root:Path)->int:
    d = root/'out'/'work'/'rollout'
    return sum(1 for _ in d.glob('u-*.json')) if d.exists() else 0

def test_a_pipeline_whose_client_left_stops_and_max_tasks_has_a_cap(tmp_path):
    with server_process(tmp_path) as (p, url):
        async def give_up():
            async with session(url) as s:
                with pytest.raises(MCPError, match='timed out'):    # the client gives up (and leaves, ending its session)
                    await s.call_tool('run_pipeline', {'output_dir': 'out', 'env_id': 'knowlyr/maze-easy', 'agent': 'random',
                                                       'max_tasks': 3, 'samples_per_task': 1024, 'max_episode_steps': 5},
                                      read_timeout_seconds=4)
        asyncio.run(give_up())
        def settled():                                     # no new unit for 3 s: the one in progress has ended
            n = _units(tmp_path); time.sleep(3); return n == _units(tmp_path)
        until(settled, 90, 'the pipeline to stop writing units')     # main: dozens more every second, to 3072
        assert 0 < _units(tmp_path) < 3072, _units(tmp_path)
        async def big():
            async with session(url) as s:
                return _err(await s.call_tool('run_pipeline', {'output_dir': 'big', 'env_id': 'knowlyr/maze-easy', 'max_tasks': 10**9}))
        assert 'max_tasks must be at most 10000, got 1000000000' in (msg := asyncio.run(big())), msg
        assert p.poll() is None

def test_a_terminated_http_server_exits_within_bounds_and_leaves_no_sandbox_process(tmp_path):
    marker, seen = f"sleep 61.{os.getpid() % 1000:03d}", {}
    with server_process(tmp_path) as (p, url):
        async def go():
            async with session(url) as s:
                sid = _data(await s.call_tool('create_sandbox', {}))['sandbox_id']
                call = asyncio.ensure_future(s.call_tool('execute_tool', shell(sid, marker)))
                await asyncio.to_thread(until, lambda: processes_running(marker), 60, 'the sandbox command to start')
                t0 = time.monotonic(); os.kill(p.pid, signal.SIGTERM)
                try: seen['code'] = await asyncio.to_thread(p.wait, 20)
                except subprocess.TimeoutExpired: seen['code'] = None
                seen['took'] = time.monotonic() - t0
                call.cancel()
        try: asyncio.run(go())
        except BaseException:
            if 'took' not in seen: raise      # failed before the server was stopped; later, the session's own
                                              # teardown talks to a server that is gone, and may say so
        assert seen['code'] is not None, 'the server was still running 20 s after SIGTERM'
        assert seen['took'] < 15, seen
    time.sleep(0.5)
    assert not processes_running(marker), processes_running(marker)

def test_a_sandbox_timeout_past_max_wall_timeout_is_refused(tmp_path):
    async def go():
        async with Client(build_server(tmp_path)) as c:
            return [await c.call_tool('create_sandbox', {'timeout': t}) for t in (1e308, 601.0)]
    huge, over = asyncio.run(go())
    assert 'timeout 1e+308 s is above max_wall_timeout' in _err(huge) and 'at most 600 s' in _err(huge)
    assert 'timeout 601 s is above max_wall_timeout' in _err(over)

def test_git_and_search_keep_to_max_wall_timeout(tmp_path):
    "A sandbox's default timeout past its cap (the Python API allows it) does not let a git hook outrun the cap"
    with create_sandbox('local', limits={'wall_timeout': 30, 'max_wall_timeout': 2}) as sb:
        sb.execute_tool('shell', {'command': 'git init -q . && git config user.email a@b && git config user.name a && '
                                             'printf "#!/bin/sh\\nsleep 6\\n" > .git/hooks/pre-commit && '
                                             'chmod +x .git/hooks/pre-commit && echo x > f && git add f'})
        t0 = time.monotonic(); r = sb.execute_tool('git', {'args': ['commit', '-q', '-m', 'm']}); took = time.monotonic() - t0
    assert r.is_error and took < 4.5, (took, r)          # main: the hook's whole 6 s

"""Issue 39 item 6 over MCP: each sandbox of `knowlyr-lab-mcp` belongs to the MCP session that created it.

Over streamable HTTP every client holds the same bearer token, so the token says nothing about who is calling: the
server tells clients apart by their MCP session (the `mcp-session-id` the SDK hands out at `initialize` and checks
on every request). Driven by the MCP SDK's own client (two sessions, one token): a second session that learns the
victim's sandbox id cannot read its files, write them, snapshot, restore, reset, replay or close it, and an error
never lists anyone's ids; each session may hold `max_sandboxes_per_client`, the server `max_sandboxes`; a sandbox
nobody used for `idle_timeout` seconds is closed (never one with a call in progress), and its owner is told so, while
anyone else learns nothing. Over stdio (one client) the same options come from the command line."""
import asyncio
import contextlib
import os
import sys
from pathlib import Path

import pytest
from helpers import mcp_data as _data
from helpers import mcp_err as _err
from helpers import mcp_session, served, until
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from knowlyr_lab.mcp import build_server
from knowlyr_lab.sandbox.local import bwrap_available

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the MCP server refuses to create sandboxes')
TOKEN = 'tok-' + os.urandom(8).hex()
SECRET = 'the victim secret 7f3c\n'



@contextlib.contextmanager
def http_server(tmp_path, stateless:bool=False, **kw):
    "`build_server(root, templates={'secret': ...}, token=TOKEN, **kw)` over streamable HTTP in this process: (url, its state)"
    root, tpl = tmp_path / 'root', tmp_path / 'tpl'
    root.mkdir(); tpl.mkdir(); (tpl / 'secret.txt').write_text(SECRET)
    app = build_server(root, {'secret': tpl}, token=TOKEN, **kw)
    with served(app.streamable_http_app(host='127.0.0.1', stateless_http=stateless)) as url: yield url + '/mcp', app._knowlyr_root

def session(url): return mcp_session(url, TOKEN)

def tool(s, name, **args): return s.call_tool(name, args)
def read(sid, path): return {'sandbox_id': sid, 'tool': 'file_read', 'params': {'path': path}}

def test_another_session_cannot_use_a_sandbox_it_did_not_create(tmp_path):
    with http_server(tmp_path) as (url, srv):
        async def go():
            async with session(url) as a, session(url) as b:
                victim = _data(await tool(a, 'create_sandbox', workspace='secret'))['sandbox_id']
                _data(await tool(a, 'execute_tool', sandbox_id=victim, tool='file_write', params={'path': 'notes.txt', 'content': 'mine\n'}))
                own = _data(await tool(b, 'create_sandbox'))['sandbox_id']
                _data(await tool(b, 'execute_tool', sandbox_id=own, tool='file_write', params={'path': 'secret.txt', 'content': 'planted\n'}))
                _data(await tool(b, 'sandbox_snapshot', sandbox_id=own, path='b.snap'))
                step = {'index': 0, 'thought': '', 'action': {'tool': 'file_read', 'params': {'path': 'secret.txt'}}, 'observation': {'content': ''}}
                theft = {
                    'read': await tool(b, 'execute_tool', **read(victim, 'secret.txt')),
                    'shell': await tool(b, 'execute_tool', sandbox_id=victim, tool='shell', params={'command': 'cat secret.txt'}),
                    'write': await tool(b, 'execute_tool', sandbox_id=victim, tool='file_write', params={'path': 'secret.txt', 'content': 'stolen\n'}),
                    'snapshot': await tool(b, 'sandbox_snapshot', sandbox_id=victim, path='stolen.snap'),
                    'restore': await tool(b, 'sandbox_snapshot', sandbox_id=victim, action='restore', path='b.snap'),
                    'reset': await tool(b, 'reset_sandbox', sandbox_id=victim),
                    'replay': await tool(b, 'replay_trajectory', sandbox_id=victim, trajectory={'task': {'id': 't'}, 'steps': [step]}),
                    'close': await tool(b, 'close_sandbox', sandbox_id=victim),
                }
                unknown = await tool(b, 'execute_tool', **read('no-such-id', 'x'))
                after = {p: _data(await tool(a, 'execute_tool', **read(victim, p)))['output'] for p in ('secret.txt', 'notes.txt')}
                mine = _data(await tool(b, 'execute_tool', **read(own, 'secret.txt')))['output']
                return victim, own, {k: _err(r) for k, r in theft.items()}, _err(unknown), after, mine
        victim, own, refused, unknown, after, mine = asyncio.run(go())
        assert after == {'secret.txt': SECRET, 'notes.txt': 'mine\n'}, after        # nothing written, restored, reset or closed
        assert mine == 'planted\n'                                                  # the thief's own sandbox works
        assert {k: "not one of this client's sandboxes" in m for k, m in refused.items()} == dict.fromkeys(refused, True), refused
        assert not [k for k, m in refused.items() if 'victim secret' in m], refused
        assert not (srv.root / 'stolen.snap').exists()
        assert victim not in unknown and own not in unknown, unknown               # an error lists nobody's sandboxes
        assert len(victim) >= 20 and victim != own                                  # ids are random, not counted

def test_each_session_holds_at_most_its_share_and_the_server_its_cap(tmp_path):
    with http_server(tmp_path, max_sandboxes=3, max_sandboxes_per_client=2) as (url, srv):
        async def go():
            async with session(url) as a, session(url) as b:
                got = [await tool(a, 'create_sandbox') for _ in range(3)]
                b1 = await tool(b, 'create_sandbox')
                b_full = await tool(b, 'create_sandbox')                           # 3 open: the server's cap
                _data(await tool(a, 'close_sandbox', sandbox_id=_data(got[0])['sandbox_id']))
                b2 = await tool(b, 'create_sandbox')                                # a place came free
                return [r.is_error for r in got], _err(got[2]), _data(b1), _err(b_full), _data(b2)
        errs, a_third, _, b_full, _ = asyncio.run(go())
        assert errs == [False, False, True]
        assert 'already holds 2 sandboxes, the per-client cap' in a_third, a_third
        assert 'holds 3 sandboxes, its cap' in b_full, b_full
        assert len(srv.table) == 3

def test_an_idle_sandbox_is_closed_and_its_owner_told(tmp_path):
    with http_server(tmp_path, idle_timeout=1.5) as (url, srv):
        async def go():
            async with session(url) as a, session(url) as b:
                sid = _data(await tool(a, 'create_sandbox', workspace='secret'))['sandbox_id']
                sb = srv.table.rows[sid].env
                slow = _data(await tool(a, 'execute_tool', sandbox_id=sid, tool='shell', params={'command': 'sleep 3; cat secret.txt'}))
                waited = await asyncio.to_thread(until, lambda: sid not in srv.table.rows, 30, 'the reap')
                owner = await tool(a, 'execute_tool', **read(sid, 'secret.txt'))
                other = await tool(b, 'execute_tool', **read(sid, 'secret.txt'))
                return slow, waited, sb.closed, _err(owner), _err(other)
        slow, waited, closed, owner, other = asyncio.run(go())
        assert slow['output'] == SECRET                     # a call longer than the idle timeout is not cut: the sandbox is busy
        assert closed and waited < 15, (closed, waited)
        assert 'expired: closed after 1.5 s idle' in owner and 'open a new one' in owner, owner
        assert 'expired' not in other and "not one of this client's sandboxes" in other, other

def test_stdio_takes_the_idle_timeout_and_caps_from_the_command_line(tmp_path):
    async def go():
        params = StdioServerParameters(command=sys.executable, env={**os.environ, 'PYTHONPATH': str(ROOT)},
                                       args=['-m', 'knowlyr_lab.mcp', '--root', str(tmp_path), '--max-sandboxes', '3',
                                             '--max-sandboxes-per-client', '1', '--idle-timeout', '1'])
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            sid = _data(await tool(s, 'create_sandbox'))['sandbox_id']
            second = await tool(s, 'create_sandbox')
            await asyncio.sleep(4)
            return _err(second), _err(await tool(s, 'execute_tool', **read(sid, 'x')))
    second, expired = asyncio.run(go())
    assert 'the per-client cap (max_sandboxes_per_client=1)' in second, second
    assert 'expired: closed after 1 s idle' in expired, expired

def test_a_request_without_a_session_cannot_own_a_sandbox(tmp_path):
    "A stateless server hands out no session id: nothing could tell the sandbox's owner from anyone else, so none is made"
    with http_server(tmp_path, stateless=True) as (url, srv):
        async def go():
            async with session(url) as a:
                return await tool(a, 'create_sandbox'), await tool(a, 'get_schema')
        made, schema = asyncio.run(go())
    assert 'this request has none (stateless HTTP)' in _err(made) and len(srv.table) == 0
    assert not schema.is_error                                                      # tools without sandboxes serve as before

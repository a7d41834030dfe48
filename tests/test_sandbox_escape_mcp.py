"""The issue-13 attacks over MCP, driven by the MCP SDK's own stdio client against `knowlyr-lab-mcp --root R`.

A model talking to the server controls every argument of every tool: path arguments must stay under the server's
root, templates come from the allow-list, concurrent calls on one sandbox are serialised, and the sandboxes it gets
hold the same containment as through the Python API."""
import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import mcp_data as _data
from helpers import mcp_err as _err
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from knowlyr_lab.sandbox.local import bwrap_available

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the MCP server refuses to create sandboxes')

async def _session(fn, *args, env=None):
    params = StdioServerParameters(command=sys.executable, args=['-m', 'knowlyr_lab.mcp', *args],
                                   env={**os.environ, 'PYTHONPATH': str(ROOT), **(env or {})})
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            return await fn(s)

def run(fn, *args, **kw): return asyncio.run(_session(fn, *args, **kw))

@pytest.fixture(scope='module')
def dirs(tmp_path_factory):
    t = tmp_path_factory.mktemp('mcp-escape')
    root = t/'root'; root.mkdir()
    host = t/'rootonly'; host.mkdir(); host.chmod(0o700)
    (host/'victim.txt').write_text('root only\n'); (host/'victim.txt').chmod(0o600)
    tpl = t/'tpl'; tpl.mkdir(); (tpl/'calc.py').write_text('x = 1\n')
    os.symlink(host, root/'link_out')
    return root, host, tpl, t

def _host_unchanged(host):
    assert sorted(p.name for p in host.iterdir()) == ['victim.txt'], list(host.iterdir())
    st = (host/'victim.txt').stat()
    assert (st.st_uid, st.st_mode & 0o7777, (host/'victim.txt').read_text()) == (0, 0o600, 'root only\n')

@pytest.fixture(scope='module', params=['local', pytest.param('docker', marks=pytest.mark.docker)])
def attacks(request, dirs):
    "Every attack below, in one session with one server (`--root R --template calc=...`), on each backend; each result or its exception"
    if request.param == 'docker': request.getfixturevalue('docker_host')
    root, host, tpl, t = dirs
    B = {'backend': request.param}
    async def paths(s):
        out = {}
        out['ws_host'] = await s.call_tool('create_sandbox', {**B, 'workspace': str(host)})
        out['ws_tpl_path'] = await s.call_tool('create_sandbox', {**B, 'workspace': str(tpl)})
        sid = _data(await s.call_tool('create_sandbox', {**B, 'workspace': 'calc'}))['sandbox_id']      # a template from the allow-list
        out['files'] = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'list_dir', 'params': {}}))
        out['save_abs'] = await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'path': str(t/'out.snap')})
        out['save_link'] = await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'path': 'link_out/x.snap'})
        out['save_dotdot'] = await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'path': '../out.snap'})
        out['save_ok'] = _data(await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'path': 'snaps/a.snap'}))
        out['restore_out'] = await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'action': 'restore', 'path': str(host/'victim.txt')})
        out['convert_out'] = await s.call_tool('convert_logs', {'paths': ['snaps'], 'output': str(t/'conv.jsonl')})
        out['convert_in'] = await s.call_tool('convert_logs', {'paths': [str(host)], 'output': 'conv.jsonl'})
        out['export_out'] = await s.call_tool('export_dataset', {'trajectories': 'snaps/a.snap', 'format': 'sft', 'output_dir': str(t/'exp')})
        out['score_in'] = await s.call_tool('score_trajectory', {'path': str(host/'victim.txt')})
        await s.call_tool('close_sandbox', {'sandbox_id': sid})
        return out
    async def race(s):
        "The issue's race: the server runs tool calls in threads, so a flipping loop and writes overlap unless serialised"
        sid = _data(await s.call_tool('create_sandbox', B))['sandbox_id']
        loop = s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {
            'command': f'end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do ln -sfn {host} x; rm -rf x; done', 'timeout': 10}})
        writes = [s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'file_write', 'params': {'path': 'x/pwned', 'content': 'p'}})
                  for _ in range(60)]
        res = await asyncio.gather(loop, *writes)
        await s.call_tool('close_sandbox', {'sandbox_id': sid})
        return res
    async def crafted(s):
        "A model builds the issue's links in its workspace, saves a snapshot under the root and restores it into a second sandbox"
        a = _data(await s.call_tool('create_sandbox', B))['sandbox_id']
        r = _data(await s.call_tool('execute_tool', {'sandbox_id': a, 'tool': 'shell', 'params': {
            'command': f'ln -s {host} dl && ln -s dl/victim.txt a && ln -P a b && cat /proc/1/cmdline | tr "\\0" " "'}}))
        _data(await s.call_tool('sandbox_snapshot', {'sandbox_id': a, 'path': 'evil.snap'}))
        b = _data(await s.call_tool('create_sandbox', B))['sandbox_id']
        res = await s.call_tool('sandbox_snapshot', {'sandbox_id': b, 'action': 'restore', 'path': 'evil.snap'})
        w = _data(await s.call_tool('execute_tool', {'sandbox_id': b, 'tool': 'file_write', 'params': {'path': 'b', 'content': 'pwned'}}))
        for x in (a, b): await s.call_tool('close_sandbox', {'sandbox_id': x})
        return r, res, w
    async def fifo(s):
        sid = _data(await s.call_tool('create_sandbox', B))['sandbox_id']
        await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'mkfifo p'}})
        w = _data(await asyncio.wait_for(s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'file_write',
                                                                      'params': {'path': 'p', 'content': 'x'}}), 20))
        await s.call_tool('close_sandbox', {'sandbox_id': sid})
        return w
    async def go(s):
        out = {}
        for name, fn in [('paths', paths), ('race', race), ('crafted', crafted), ('fifo', fifo)]:
            if name == 'paths' and B['backend'] == 'docker': continue     # path checks come before any sandbox: one backend is enough
            try: out[name] = await fn(s)
            except Exception as e: out[name] = e
        return out
    return run(go, '--root', str(root), '--template', f'calc={tpl}')

def result(attacks, name):
    r = attacks[name]
    if isinstance(r, Exception): raise r
    return r

def test_path_arguments_stay_under_root(attacks, dirs):
    root, host, tpl, t = dirs
    if 'paths' not in attacks: pytest.skip('path arguments are checked before any sandbox exists: run on the local backend')
    out = result(attacks, 'paths')
    for k in ('ws_host', 'ws_tpl_path', 'save_abs', 'save_link', 'save_dotdot', 'restore_out', 'convert_out', 'convert_in', 'export_out', 'score_in'):
        msg = _err(out[k])
        assert 'outside the server root' in msg or 'not an allowed template' in msg, (k, msg)
    assert out['files']['output'] == 'calc.py'
    assert (root/'snaps'/'a.snap').exists() and out['save_ok']['path'] == str(root/'snaps'/'a.snap')
    assert not (t/'out.snap').exists() and not (t/'conv.jsonl').exists() and not (t/'exp').exists()
    _host_unchanged(host)

def test_symlink_race_over_mcp(attacks, dirs):
    result(attacks, 'race')
    _host_unchanged(dirs[1])

def test_crafted_snapshot_over_mcp(attacks, dirs):
    r, res, w = result(attacks, 'crafted')
    assert not r['is_error'], r                            # the links exist in its workspace (and it sees host paths in /proc/1/cmdline)
    assert w['is_error']
    _host_unchanged(dirs[1])

def test_fifo_over_mcp(attacks):
    w = result(attacks, 'fifo')
    assert w['is_error'] and 'regular file' in w['output'], w

def test_default_root_is_a_fresh_temp_dir(tmp_path):
    async def go(s):
        sb = _data(await s.call_tool('create_sandbox', {}))
        return _data(await s.call_tool('sandbox_snapshot', {'sandbox_id': sb['sandbox_id'], 'path': 'a.snap'}))
    saved = Path(run(go)['path'])
    assert saved.name == 'a.snap' and 'knowlyr-mcp-' in str(saved.parent) and saved.parent != Path.cwd()

def test_no_bubblewrap_over_mcp(dirs, tmp_path):
    "Fail closed over MCP too: without bubblewrap on the server's PATH, create_sandbox is an error naming the fix"
    root = dirs[0]
    bin_ = tmp_path/'bin'; bin_.mkdir()
    for tool in ('prlimit', 'setpriv', 'bash', 'sh', 'tar', 'python3', 'mount', 'umount'):
        if shutil.which(tool): os.symlink(shutil.which(tool), bin_/tool)
    async def go(s): return await s.call_tool('create_sandbox', {})
    msg = _err(run(go, '--root', str(root), env={'PATH': str(bin_)}))
    assert 'bubblewrap' in msg, msg

def test_the_sandbox_cap_holds_against_concurrent_creates(dirs):
    "One client asks for many sandboxes at once (issue 39: 40 sandboxes in 4.5 s): no more than --max-sandboxes are ever open"
    async def go(s):
        res = await asyncio.gather(*[s.call_tool('create_sandbox', {}) for _ in range(8)])
        made = [r.structured_content['sandbox_id'] for r in res if not r.is_error]
        refused = [r.content[0].text for r in res if r.is_error]
        for sid in made[:1]: await s.call_tool('close_sandbox', {'sandbox_id': sid})
        again = await s.call_tool('create_sandbox', {})                      # a closed sandbox makes room
        return made, refused, again
    made, refused, again = run(go, '--root', str(dirs[0]), '--max-sandboxes', '2')
    assert len(made) == 2 and len(refused) == 6, (made, refused)
    assert all('already holds 2 sandboxes, the per-client cap (max_sandboxes_per_client=2): close one' in m for m in refused), refused
    assert not again.is_error, again.content[0].text

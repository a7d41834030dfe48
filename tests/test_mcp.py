"The MCP server over stdio and streamable HTTP, driven by the MCP SDK's own clients"
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / 'tests' / 'fixtures' / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
ENV = {**os.environ, 'PYTHONPATH': str(ROOT)}
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the server refuses to create sandboxes')

async def _session(fn, *args):
    # started under a umask that lets the group write, as on systems with a group per user: the server narrows it
    argv = ['-c', 'umask 002; exec "$@"', 'sh', sys.executable, '-m', 'knowlyr_lab.mcp', *args]
    async with stdio_client(StdioServerParameters(command='/bin/sh', args=argv, env=ENV)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            return await fn(s)

def _data(res):
    assert not res.is_error, res.content
    return res.structured_content if res.structured_content is not None else json.loads(res.content[0].text)

@pytest.fixture(scope='module')
def root(tmp_path_factory):
    "The server root: trajectories and a log inside it"
    d = tmp_path_factory.mktemp('mcp')
    tasks = [{'id': f"maze-easy-4x4-s{i}"} for i in range(3)]
    t = collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, progress=False) + collect('knowlyr/maze-easy', RandomAgent, tasks=tasks, max_episode_steps=5, progress=False)
    write_trajectories(t, d / 'trajs.jsonl')
    if LOG.exists(): shutil.copy(LOG, d / 'log.jsonl')
    return d

SCENARIOS = {}
def scenario(fn):
    "A coroutine run in the module's one stdio session (starting a server per test costs seconds)"
    SCENARIOS[fn.__name__] = fn; return fn

@pytest.fixture(scope='module')
def results(root):
    async def go(s):
        out = {}
        for name, fn in SCENARIOS.items():
            try: out[name] = await fn(s)
            except Exception as e: out[name] = e
        return out
    return asyncio.run(_session(go, '--root', str(root)))

def run(results, name):
    r = results[name]
    if isinstance(r, Exception): raise r
    return r

@scenario
async def tools(s): return (await s.list_tools()).tools

def test_tools_listed_with_described_inputs_and_output_schemas(results):
    tools = run(results, 'tools')
    names = {t.name for t in tools}
    assert names >= {'create_sandbox', 'execute_tool', 'reset_sandbox', 'replay_trajectory', 'sandbox_snapshot', 'convert_logs',
                     'validate_logs', 'get_schema', 'recorder_diff', 'score_trajectory', 'build_preferences', 'calibrate_reward',
                     'list_rubrics', 'reward_leaderboard', 'run_pipeline', 'export_dataset', 'process_log', 'process_logs_batch', 'pipeline_status'}
    ex = next(t for t in tools if t.name == 'export_dataset').input_schema
    assert ex['properties']['success_only']['type'] == 'boolean' and 'trajectories' in ex['required']
    params = [(t.name, k, v.get('description')) for t in tools for k, v in t.input_schema['properties'].items()]
    assert len(params) > 60 and [p for p in params if not p[2]] == []
    assert [t.name for t in tools if not t.output_schema] == []

def test_reward_tools_take_the_python_api_defaults_and_options(results):
    "#14: build_preferences hard-coded min_margin (and had no max_pairs_per_task); calibrate_reward had no threshold and no engine"
    import inspect

    from knowlyr_lab.reward.inputs import calibrate_engine
    from knowlyr_lab.reward.preferences import build_preferences
    sch = {t.name: t.input_schema['properties'] for t in run(results, 'tools')}
    for tool, fn, keys in [('build_preferences', build_preferences, ('level', 'min_margin', 'max_pairs_per_task')),
                           ('calibrate_reward', calibrate_engine, ('method', 'threshold', 'domain', 'engine'))]:
        sig = inspect.signature(fn).parameters
        assert {k: sch[tool][k].get('default') for k in keys} == {k: sig[k].default for k in keys}, tool

@scenario
async def convert_score_export(s):
    conv = _data(await s.call_tool('convert_logs', {'paths': ['log.jsonl'], 'output': 'conv.jsonl'}))
    score = _data(await s.call_tool('score_trajectory', {'path': 'trajs.jsonl', 'line': 1}))
    exp = _data(await s.call_tool('export_dataset', {'trajectories': 'trajs.jsonl', 'format': 'sft', 'output_dir': 'sft'}))
    bad = await s.call_tool('score_trajectory', {'path': 'missing.jsonl'})
    typo = await s.call_tool('export_dataset', {'trajectories': 'trajs.jsonl', 'format': 'csv', 'output_dir': 'x'})
    return conv, score, exp, bad, typo

def test_convert_score_export_over_stdio(results, root):
    if not LOG.exists(): pytest.skip(f"fixture {LOG} missing")
    conv, score, exp, bad, typo = run(results, 'convert_score_export')
    assert conv['trajectories'] >= 1 and conv['output'] == str(root / 'conv.jsonl')
    assert len(list(read_trajectories(root / 'conv.jsonl'))) == conv['trajectories']
    assert score['reward'] is not None and len(score['steps']) > 0 and 'rules' in score['steps'][0]['details']
    assert exp['total'] == 6 and Path(exp['paths']['train']).exists()
    assert bad.is_error and 'does not exist' in bad.content[0].text
    assert typo.is_error                                      # the enum in the input schema rejects it

@scenario
async def sandbox_tools(s):
    sb = _data(await s.call_tool('create_sandbox', {}))
    sid = sb['sandbox_id']
    w = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'file_write', 'params': {'path': 'a.txt', 'content': 'hi'}}))
    r = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'cat a.txt'}}))
    snap = _data(await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'path': 'snap.tar'}))
    await s.call_tool('reset_sandbox', {'sandbox_id': sid})
    gone = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'cat a.txt'}}))
    await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'action': 'restore', 'path': 'snap.tar'})
    back = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'cat a.txt'}}))
    nosb = await s.call_tool('execute_tool', {'sandbox_id': 'sb-nope', 'tool': 'shell', 'params': {'command': 'ls'}})
    _data(await s.call_tool('close_sandbox', {'sandbox_id': sid}))
    return sb, w, r, snap, gone, back, nosb

@needs_bwrap
def test_sandbox_tools_over_stdio(results, root):
    sb, w, r, snap, gone, back, nosb = run(results, 'sandbox_tools')
    assert sb['isolation'] == 'bubblewrap' and sb['containment']['uid'] == sb['uid']
    assert not w['is_error'] and r['output'].strip() == 'hi' and r['exit_code'] == 0
    assert snap['digest'] and snap['path'] == str(root / 'snap.tar') and gone['is_error'] and back['output'].strip() == 'hi'
    assert nosb.is_error and "the id 'sb-nope' is not one of this client's sandboxes" in nosb.content[0].text

@scenario
async def replay_nothing(s):
    sid = _data(await s.call_tool('create_sandbox', {}))['sandbox_id']
    maze = _data(await s.call_tool('replay_trajectory', {'sandbox_id': sid, 'path': 'trajs.jsonl'}))   # maze moves: no sandbox tool
    return maze

@needs_bwrap
def test_replay_of_nothing_is_not_ok(results, root):
    "#14: replay_trajectory said ok: true after replaying 0 steps"
    maze = run(results, 'replay_nothing')
    assert (maze['ok'], maze['replayed']) == (False, 0) and maze['skipped'] > 0 and 'nothing replayed' in maze['verdict'], maze

@scenario
async def pipeline_retry(s):
    bad = await s.call_tool('run_pipeline', {'output_dir': 'pipe', 'env_id': 'knowlyr/no-such-env', 'max_tasks': 2, 'export_formats': ['sft']})
    good = _data(await s.call_tool('run_pipeline', {'output_dir': 'pipe', 'env_id': 'knowlyr/maze-easy', 'max_tasks': 2, 'export_formats': ['sft']}))
    changed = await s.call_tool('run_pipeline', {'output_dir': 'pipe', 'env_id': 'knowlyr/maze-easy', 'max_tasks': 3, 'export_formats': ['sft']})
    return bad, good, changed

def test_failed_pipeline_call_leaves_no_settings(results, root):
    "#14: a failed call kept its bad settings, so the corrected retry was refused"
    bad, good, changed = run(results, 'pipeline_retry')
    assert bad.is_error and 'no-such-env' in bad.content[0].text
    assert good['units'] == 2
    assert changed.is_error and 'different config' in changed.content[0].text   # a real run's settings still bind its reruns

@scenario
async def reward_and_hub(s):
    prefs = _data(await s.call_tool('build_preferences', {'trajectories': 'trajs.jsonl', 'output': 'p.jsonl'}))
    dpo = _data(await s.call_tool('export_dataset', {'trajectories': 'trajs.jsonl', 'format': 'dpo', 'output_dir': 'dpo', 'preferences': 'p.jsonl'}))
    lb = _data(await s.call_tool('reward_leaderboard', {'trajectories': 'trajs.jsonl'}))
    rub = _data(await s.call_tool('list_rubrics', {'domain': 'coding'}))
    sch = _data(await s.call_tool('get_schema', {}))
    run_ = _data(await s.call_tool('run_pipeline', {'output_dir': 'pipe2', 'env_id': 'knowlyr/maze-easy', 'max_tasks': 2, 'export_formats': ['sft']}))
    st = _data(await s.call_tool('pipeline_status', {'output_dir': 'pipe2'}))
    diff = _data(await s.call_tool('recorder_diff', {'path_a': 'trajs.jsonl', 'path_b': 'trajs.jsonl', 'line_b': 4}))
    return prefs, dpo, lb, rub, sch, run_, st, diff

def test_reward_and_hub_tools_over_stdio(results, root):
    prefs, dpo, lb, rub, sch, run_, st, diff = run(results, 'reward_and_hub')
    assert prefs['pairs'] == 3 and dpo['total'] == 3
    lb = lb['result'] if isinstance(lb, dict) and 'result' in lb else lb
    assert {r['agent'] for r in lb} == {'expert', 'random'}
    rub = rub['result'] if isinstance(rub, dict) and 'result' in rub else rub
    assert len(rub) > 0 and 'properties' in sch
    assert run_['units'] == 2 and st['merged'] and st['exports'] == ['sft']
    modes = {oct(os.stat(d).st_mode & 0o777) for d in [root/'pipe2', *(root/'pipe2').rglob('*')] if d.is_dir()}
    assert modes == {'0o755'}, modes          # started under umask 002, the server made nothing the group may write in
    assert diff['identical'] is False

def test_module_and_command_entry_points(results):
    "#14: `python -m knowlyr_lab.mcp` exited at once; `knowlyr-lab-mcp --help` started the server"
    ep = "import sys; from importlib.metadata import entry_points; (e,) = entry_points(group='console_scripts', name='knowlyr-lab-mcp'); sys.argv[0] = e.name; sys.exit(e.load()())"
    for argv in (['-m', 'knowlyr_lab.mcp', '--help'], ['-c', ep, '--help']):
        r = subprocess.run([sys.executable, *argv], env=ENV, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode == 0 and r.stdout.startswith('usage: knowlyr-lab-mcp') and '--root' in r.stdout, (argv, r.stdout, r.stderr)
    assert len(run(results, 'tools')) == 20                 # the module's session is `python -m knowlyr_lab.mcp`: it serves

def _start_http(root, token):
    p = subprocess.Popen([sys.executable, '-m', 'knowlyr_lab.mcp', '--transport', 'http', '--port', '0', '--root', str(root)],
                         env={**ENV, 'KNOWLYR_MCP_TOKEN': token}, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    t0 = time.time()
    while time.time() - t0 < 60:
        line = p.stderr.readline()
        if 'MCP server on http://127.0.0.1:' in line: return p, line.split(' on ', 1)[1].strip()
        if not line and p.poll() is not None: break
    p.kill(); raise AssertionError(f"HTTP server did not start: {p.stderr.read()}")

@needs_bwrap
def test_streamable_http_with_bearer_token(root):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    token = 'tok-' + os.urandom(8).hex()
    p, url = _start_http(root, token)
    try:
        assert url.startswith('http://127.0.0.1:') and url.endswith('/mcp')
        async def go():
            async with httpx2.AsyncClient(headers={'Authorization': f'Bearer {token}'}, timeout=60) as http:
                async with streamable_http_client(url, http_client=http) as (r, w):
                    async with ClientSession(r, w) as s:
                        await s.initialize()
                        tools = (await s.list_tools()).tools
                        sid = _data(await s.call_tool('create_sandbox', {}))['sandbox_id']
                        out = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'echo over-http'}}))
                        outside = await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'path': '/tmp/out.snap'})
                        return len(tools), out, outside
        n, out, outside = asyncio.run(go())
        assert n == 20 and out['output'] == 'over-http\n' and outside.is_error and 'outside the server root' in outside.content[0].text
        body = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {},
                                                                             'clientInfo': {'name': 't', 'version': '0'}}}
        hdr = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json'}
        for auth in ({}, {'Authorization': 'Bearer wrong'}, {'Authorization': token}):
            assert httpx2.post(url, json=body, headers={**hdr, **auth}, timeout=10).status_code == 401, auth
    finally:
        p.terminate()                                      # SIGTERM: the server closes its sandboxes on the way out
        try: p.wait(timeout=20)
        except subprocess.TimeoutExpired: p.kill(); p.wait()

"The MCP server over stdio, driven by the MCP SDK's own client"
import asyncio, json, os, sys
from pathlib import Path
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client, StdioServerParameters
from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.hub.collect import collect
from knowlyr_lab.trajectory import write_trajectories, read_trajectories

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / 'tests' / 'fixtures' / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'

async def _session(fn):
    params = StdioServerParameters(command=sys.executable, args=['-c', 'from knowlyr_lab.mcp import main; main()'], env={**os.environ, 'PYTHONPATH': str(ROOT)})
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            return await fn(s)

def _data(res):
    assert not res.is_error, res.content
    return res.structured_content if res.structured_content is not None else json.loads(res.content[0].text)

@pytest.fixture(scope='module')
def trajs(tmp_path_factory):
    d = tmp_path_factory.mktemp('mcp')
    tasks = [{'id': f"maze-easy-4x4-s{i}"} for i in range(3)]
    t = collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, progress=False) + collect('knowlyr/maze-easy', RandomAgent, tasks=tasks, max_steps=5, progress=False)
    write_trajectories(t, d / 'trajs.jsonl')
    return d

def test_tools_listed_with_typed_schemas():
    tools = asyncio.run(_session(lambda s: s.list_tools())).tools
    names = {t.name for t in tools}
    assert names >= {'create_sandbox', 'execute_tool', 'reset_sandbox', 'replay_trajectory', 'sandbox_snapshot', 'convert_logs',
                     'validate_logs', 'get_schema', 'recorder_diff', 'score_trajectory', 'build_preferences', 'calibrate_reward',
                     'list_rubrics', 'reward_leaderboard', 'run_pipeline', 'export_dataset', 'process_log', 'process_logs_batch', 'pipeline_status'}
    ex = next(t for t in tools if t.name == 'export_dataset').input_schema
    assert ex['properties']['success_only']['type'] == 'boolean' and 'trajectories' in ex['required']

def test_convert_score_export_over_stdio(trajs, tmp_path):
    if not LOG.exists(): pytest.skip(f"fixture {LOG} missing")
    async def go(s):
        conv = _data(await s.call_tool('convert_logs', {'paths': [str(LOG)], 'output': str(tmp_path / 'conv.jsonl')}))
        score = _data(await s.call_tool('score_trajectory', {'path': str(trajs / 'trajs.jsonl'), 'line': 1}))
        exp = _data(await s.call_tool('export_dataset', {'trajectories': str(trajs / 'trajs.jsonl'), 'format': 'sft', 'output_dir': str(tmp_path / 'sft')}))
        bad = await s.call_tool('score_trajectory', {'path': str(tmp_path / 'missing.jsonl')})
        typo = await s.call_tool('export_dataset', {'trajectories': str(trajs / 'trajs.jsonl'), 'format': 'csv', 'output_dir': str(tmp_path / 'x')})
        return conv, score, exp, bad, typo
    conv, score, exp, bad, typo = asyncio.run(_session(go))
    assert conv['trajectories'] >= 1
    assert len(list(read_trajectories(tmp_path / 'conv.jsonl'))) == conv['trajectories']
    assert score['reward'] is not None and len(score['steps']) > 0 and 'rules' in score['steps'][0]['details']
    assert exp['total'] == 6 and Path(exp['paths']['train']).exists()
    assert bad.is_error and 'does not exist' in bad.content[0].text
    assert typo.is_error                                      # the enum in the input schema rejects it

def test_sandbox_tools_over_stdio(tmp_path):
    async def go(s):
        sb = _data(await s.call_tool('create_sandbox', {}))
        sid = sb['sandbox_id']
        w = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'file_write', 'params': {'path': 'a.txt', 'content': 'hi'}}))
        r = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'cat a.txt'}}))
        snap = _data(await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'path': str(tmp_path / 'snap.tar')}))
        await s.call_tool('reset_sandbox', {'sandbox_id': sid})
        gone = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'cat a.txt'}}))
        await s.call_tool('sandbox_snapshot', {'sandbox_id': sid, 'action': 'restore', 'path': str(tmp_path / 'snap.tar')})
        back = _data(await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'cat a.txt'}}))
        nosb = await s.call_tool('execute_tool', {'sandbox_id': 'sb-nope', 'tool': 'shell', 'params': {'command': 'ls'}})
        _data(await s.call_tool('close_sandbox', {'sandbox_id': sid}))
        return w, r, snap, gone, back, nosb
    w, r, snap, gone, back, nosb = asyncio.run(_session(go))
    assert not w['is_error'] and r['output'].strip() == 'hi' and r['exit_code'] == 0
    assert snap['digest'] and gone['is_error'] and back['output'].strip() == 'hi'
    assert nosb.is_error and "no sandbox 'sb-nope'" in nosb.content[0].text

def test_reward_and_hub_tools_over_stdio(trajs, tmp_path):
    async def go(s):
        prefs = _data(await s.call_tool('build_preferences', {'trajectories': str(trajs / 'trajs.jsonl'), 'output': str(tmp_path / 'p.jsonl')}))
        dpo = _data(await s.call_tool('export_dataset', {'trajectories': str(trajs / 'trajs.jsonl'), 'format': 'dpo', 'output_dir': str(tmp_path / 'dpo'),
                                                        'preferences': str(tmp_path / 'p.jsonl')}))
        lb = _data(await s.call_tool('reward_leaderboard', {'trajectories': str(trajs / 'trajs.jsonl')}))
        rub = _data(await s.call_tool('list_rubrics', {'domain': 'coding'}))
        sch = _data(await s.call_tool('get_schema', {}))
        run = _data(await s.call_tool('run_pipeline', {'output_dir': str(tmp_path / 'pipe'), 'env_id': 'knowlyr/maze-easy', 'max_tasks': 2, 'export_formats': ['sft']}))
        st = _data(await s.call_tool('pipeline_status', {'output_dir': str(tmp_path / 'pipe')}))
        diff = _data(await s.call_tool('recorder_diff', {'path_a': str(trajs / 'trajs.jsonl'), 'path_b': str(trajs / 'trajs.jsonl'), 'line_b': 4}))
        return prefs, dpo, lb, rub, sch, run, st, diff
    prefs, dpo, lb, rub, sch, run, st, diff = asyncio.run(_session(go))
    assert prefs['pairs'] == 3 and dpo['total'] == 3
    lb = lb['result'] if isinstance(lb, dict) and 'result' in lb else lb
    assert {r['agent'] for r in lb} == {'expert', 'random'}
    rub = rub['result'] if isinstance(rub, dict) and 'result' in rub else rub
    assert len(rub) > 0 and 'properties' in sch
    assert run['units'] == 2 and st['merged'] and st['exports'] == ['sft']
    assert diff['identical'] is False

"""The MCP `run_pipeline` tool takes the held-out split of `PipelineConfig`: `test_fraction` and `group_by`.

Before, the tool had neither parameter, so a client could not ask for a test split (the SDK refused the unknown
argument, or a run exported train only). Driven by the MCP SDK's own client, in process (`mcp.Client(app)`)."""
import asyncio
import json

from mcp import Client

from knowlyr_lab.mcp import build_server


def _go(app, coro):
    async def go():
        async with Client(app) as c: return await coro(c)
    return asyncio.run(go())

def test_run_pipeline_takes_test_fraction_and_group_by(tmp_path):
    app = build_server(tmp_path)
    async def calls(c):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool('run_pipeline', {'output_dir': 'pipe', 'env_id': 'knowlyr/maze-easy', 'max_tasks': 6,
                                               'export_formats': ['sft'], 'test_fraction': 0.5, 'group_by': 'domain'})
        return tools['run_pipeline'].input_schema['properties'], r
    props, r = _go(app, calls)
    assert {'test_fraction', 'group_by'} <= set(props) and props['group_by'].get('description'), props.keys()
    assert not r.is_error, r.content[0].text
    cfg = json.loads((tmp_path/'pipe'/'pipeline.json').read_text())
    assert (cfg['test_fraction'], cfg['group_by']) == (0.5, 'domain')
    exported = sorted(p.name for p in (tmp_path/'pipe').rglob('*.jsonl') if p.parent.name == 'sft')
    assert exported in (['train.jsonl'], ['test.jsonl']), exported     # one domain: one group, all on one side

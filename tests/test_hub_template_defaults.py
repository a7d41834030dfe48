"""`template_defaults` (the value of a chat template variable in rows served without it) reaches the export from every
way a researcher runs one: `DatasetExporter`, `knowlyr-hub export` and `run` (`--template-default KEY=JSON`),
`PipelineConfig` and the MCP tools; without it the export's refusal is an `ExportError` reported in one line"""
import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from knowlyr_lab.hub.export import DatasetExporter, ExportError
from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

ROOT = Path(__file__).resolve().parent.parent
TEST = ('t3', 't4', 't6')         # the test split of tasks t0..t9 at test_fraction=0.3
OFF = {'enable_thinking': False}


def _traj(task:int, k:int)->Trajectory:
    "Trajectory `k` of task `task`: the train split's served with thinking off, the test split's with no variables"
    kw = {} if f"t{task}" in TEST else {'template_kwargs': OFF}
    steps = [Step(index=i, thought=f"step {i} of {k}", action=ToolCall(tool='move', params={'direction': 'east'}),
                  observation=Observation(content=f"moved {i}"), reward=(k + i) / 10, metadata=kw) for i in range(2)]
    return Trajectory(task=Task(id=f"t{task}", instruction=f"Reach column {task}.", domain='maze', env_id='knowlyr/maze-easy'),
                      agent=AgentInfo(name='a', model='m'), steps=steps, outcome=Outcome(success=True, terminated=True))

TRAJS = [_traj(t, k) for t in range(10) for k in range(2)]


def _kwargs(path)->set:
    "The distinct `chat_template_kwargs` of a JSONL split file, as JSON"
    return {json.dumps(json.loads(x).get('chat_template_kwargs'), sort_keys=True) for x in open(path)}


def _hub(*args):
    "knowlyr-hub in a subprocess (the real entry point: exit code, stdout, stderr)"
    return subprocess.run([sys.executable, '-c', 'import sys; from knowlyr_lab.cli.hub import main; sys.exit(main())', *map(str, args)],
                          capture_output=True, text=True, timeout=300, env={'PYTHONPATH': str(ROOT), 'PATH': '/usr/bin:/bin'})


def _mcp(root:Path, tool:str, args:dict):
    "Call `tool` of the MCP server over `root` with the MCP SDK's client"
    from mcp import Client

    from knowlyr_lab.mcp import build_server
    async def go():
        async with Client(build_server(root)) as c: return await c.call_tool(tool, args)
    return asyncio.run(go())


def test_a_refused_mix_is_an_export_error_reported_in_one_line(tmp_path):
    """The refusal was a plain ValueError of page 41b (the MCP tool said 'ValueError: ...'); it is the hub's
    `ExportError`, which the CLI and the MCP server report in one line"""
    with pytest.raises(ExportError, match=r"test.jsonl:1: field 'chat_template_kwargs': no 'enable_thinking'"):
        DatasetExporter(TRAJS, test_fraction=0.3).export('sft', tmp_path / 'py')
    write_trajectories(TRAJS, tmp_path / 't.jsonl')
    r = _hub('export', '-f', 'sft', '-t', tmp_path / 't.jsonl', '-o', tmp_path / 'cli', '--test-fraction', '0.3')
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert "no 'enable_thinking'" in r.stderr, r.stderr
    root = tmp_path / 'root'; root.mkdir(); write_trajectories(TRAJS, root / 't.jsonl')
    m = _mcp(root, 'export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'o', 'test_fraction': 0.3})
    assert m.is_error and 'export_dataset: ExportError: ' in m.content[0].text and '\n' not in m.content[0].text, m.content

"""`group_by` wherever a split is made (`split_tasks`, the exporter, the pipeline, the MCP `export_dataset` tool, the
CLI) gives one split; a task without the field is its own group (its `task_key`), counted, in all of them alike."""
import asyncio
import json
import warnings
from pathlib import Path

import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
from knowlyr_lab.tasks import split_of, split_tasks, task_key
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

# 8 tasks of 4 repositories, 12 without a repo (converted logs that carry none)
TASKS = [Task(id=f'fix-{i}', instruction=f'Fix bug {i}', metadata={'repo': f'repo-{i % 4}'} if i < 8 else {})
         for i in range(20)]
TRAJS = [Trajectory(id=f'tr-{t.id}', task=t, outcome=Outcome(success=True),
                    steps=[Step(index=0, thought='t', action=ToolCall(tool='submit', params={'code': t.id}))])
         for t in TASKS]

def _sft_split(res)->dict:
    "trajectory id -> split of an SFT export"
    return {r['trajectory_id']: s for s, p in res.paths.items() for r in map(json.loads, open(p))}

def _held_out_ids(tasks=TASKS, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return {f'tr-{t.id}' for t in split_tasks(tasks, 0.5, group_by='repo', **kw)[1]}

def test_a_task_without_the_field_is_its_own_group_in_split_tasks_and_the_exporter_alike(tmp_path):
    "The 12 tasks without a repo were one group 'None': all of them landed in one split together"
    with pytest.warns(UserWarning, match=r"12 of 20 tasks have no 'repo'.*fix-8.*own group"):
        tr, te = split_tasks(TASKS, 0.5, group_by='repo')
    side = {t.id: 'test' if t in te else 'train' for t in tr + te}
    for t in TASKS[8:]: assert side[t.id] == split_of(task_key(t), 0.5), t.id        # as without group_by
    for t in TASKS[:8]: assert side[t.id] == split_of(t.metadata['repo'], 0.5), t.id  # grouped tasks: unchanged
    assert {side[t.id] for t in TASKS[8:]} == {'train', 'test'}                       # not one lump
    with pytest.warns(UserWarning, match="12 tasks have no 'repo'"):
        res = DatasetExporter(TRAJS, test_fraction=0.5, group_by='repo').export('sft', tmp_path)
    got = _sft_split(res)
    assert {i for i, s in got.items() if s == 'test'} == _held_out_ids() and len(got) == 20
    assert res.ungrouped == 12 and res.to_dict()['ungrouped'] == 12

def test_a_field_every_task_has_counts_nothing_and_a_callable_returning_none_is_the_same(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter('error')                                                    # no warning
        res = DatasetExporter(TRAJS[:8], test_fraction=0.5, group_by='repo').export('sft', tmp_path / 'a')
        assert split_tasks(TASKS[:8], 0.5, group_by='repo')[1]
    assert res.ungrouped == 0
    def repo(t): return t.metadata.get('repo')
    with pytest.warns(UserWarning, match='12 of 20 tasks'): assert split_tasks(TASKS, 0.5, group_by=repo) == split_tasks(TASKS, 0.5, group_by='repo')

def _logs(tmp_path)->Path:
    logs = tmp_path / 'logs'; logs.mkdir()
    write_trajectories(TRAJS, logs / 'a.jsonl')
    return logs

def test_a_pipeline_splits_by_group_by(tmp_path):
    "PipelineConfig had no group_by: a pipeline's test split held tasks of repositories that were in train"
    cfg = PipelineConfig(output_dir=str(tmp_path / 'out'), reward=False, export_formats=['sft'], test_fraction=0.5,
                         group_by='repo')
    out = Pipeline(cfg).run_batch(_logs(tmp_path))
    got = _sft_split(type('R', (), {'paths': out['exports']['sft']['paths']}))
    assert {i for i, s in got.items() if s == 'test'} == _held_out_ids() and out['exports']['sft']['ungrouped'] == 12
    assert json.loads((tmp_path / 'out' / 'pipeline.json').read_text())['group_by'] == 'repo'

def test_a_pipeline_folder_written_before_group_by_resumes(tmp_path):
    "A pipeline.json without the field (written before it existed) is a run with its default: it resumes"
    cfg = dict(output_dir=str(tmp_path / 'out'), reward=False, export_formats=['sft'], test_fraction=0.5)
    logs = _logs(tmp_path)
    first = Pipeline(cfg).run_batch(logs)
    p = tmp_path / 'out' / 'pipeline.json'
    old = json.loads(p.read_text()); assert old.pop('group_by') is None
    p.write_text(json.dumps(old))                                                          # as the older code wrote it
    assert Pipeline(cfg).run_batch(logs) == first
    from knowlyr_lab.hub.pipeline import PipelineError
    with pytest.raises(PipelineError, match=r"fields \['group_by'\]"): Pipeline({**cfg, 'group_by': 'repo'}).run_batch(logs)

def test_the_mcp_export_and_the_cli_run_take_group_by(tmp_path):
    "The MCP export_dataset tool had no group_by, nor `knowlyr-hub run` a --group-by"
    from mcp import Client

    from knowlyr_lab.cli.hub import main
    from knowlyr_lab.mcp import build_server
    root = tmp_path / 'root'; root.mkdir(); write_trajectories(TRAJS, root / 't.jsonl')
    async def go():
        async with Client(build_server(root)) as c:
            return await c.call_tool('export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'o',
                                                        'test_fraction': 0.5, 'group_by': 'repo'})
    r = asyncio.run(go())
    assert not r.is_error, r.content
    got = {json.loads(x)['trajectory_id'] for x in open(root / 'o' / 'test.jsonl')}
    assert got == _held_out_ids()
    assert main(['run', '-o', str(tmp_path / 'cli'), '--logs', str(_logs(tmp_path)), '--no-reward', '--format', 'sft',
                 '--test-fraction', '0.5', '--group-by', 'repo']) == 0
    assert {json.loads(x)['trajectory_id'] for x in open(tmp_path / 'cli' / 'exports' / 'sft' / 'test.jsonl')} == got

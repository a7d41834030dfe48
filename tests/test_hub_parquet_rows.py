"verl rows read back from Parquet as verl reads them: every tools_kwargs entry a dict, none null"
import pyarrow.parquet as pq

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory


def _t(tid, task, env, tool):
    return Trajectory(id=tid, task=Task(id=task, instruction=f'do {task}', env_id=env), outcome=Outcome(success=True),
                      steps=[Step(index=0, action=ToolCall(tool=tool, params={'path': 'x'}))])

def test_verl_tools_kwargs_have_no_null_entries(tmp_path):
    "Two tasks with different tools: Parquet made one struct of both names, the missing one read back as None"
    r = DatasetExporter([_t('tr-a', 't1', 'e1', 'read'), _t('tr-b', 't2', 'e2', 'write')]).export('verl', tmp_path / 'v')
    rows = pq.read_table(r.paths['train']).to_pylist()
    assert len(rows) == 2
    for row in rows:
        kw, ei = row['extra_info']['tools_kwargs'], row['extra_info']
        assert set(kw) == {'read', 'write'} and all(isinstance(v, dict) for v in kw.values())
        # what verl does with it: tools_kwargs.get(name, {}).get("create_kwargs", {})
        assert all(kw.get(n, {}).get('create_kwargs', {}) == {'env_id': ei['env_id'], 'task_id': ei['task_id']} for n in kw)


def _bare(task, env='knowlyr/none'):
    "A trajectory of an env without tools: the answer is text, no tool call"
    return Trajectory(task=Task(id=task, instruction=f'Compute {task}.', env_id=env), outcome=Outcome(success=True),
                      steps=[Step(index=0, thought='It is 5.', reward=1.0)])

def test_rows_of_an_env_without_tools_are_written(tmp_path):
    """An env without tools (`tools=[]`): verl's `extra_info.tools_kwargs` was an empty struct, which Parquet cannot
    write ("Cannot write struct type 'tools_kwargs' with no child field"), so the export failed. The row leaves the key
    out, which verl's RLHFDataset reads as `{}` (`extra_info.get("tools_kwargs", {})`; its own tool-less datasets,
    gsm8k's, have none), with `need_tools_kwargs` false and the single-turn agent loop. Read here as verl loads it
    (`datasets.load_dataset('parquet')`). SkyRL and hf exports of the same trajectories are written too, and a split
    mixing a tool-less task with one that has tools still gives every row every tool's kwargs"""
    import datasets
    trajs = [_bare(f'a{k}') for k in range(3)]
    r = DatasetExporter(trajs, tools=[]).export('verl', tmp_path / 'v')
    rows = list(datasets.load_dataset('parquet', data_files=r.paths['train'], split='train', cache_dir=str(tmp_path / 'c')))
    assert len(rows) == 3
    for row in rows:
        assert row['extra_info'].get('tools_kwargs', {}) == {} and row['extra_info']['need_tools_kwargs'] is False
        assert row['agent_name'] == 'single_turn_agent' and row['extra_info']['tools'] == '[]'
    s = DatasetExporter(trajs, tools=[]).export('skyrl', tmp_path / 's')
    assert [row['env_class'] for row in pq.read_table(s.paths['train']).to_pylist()] == ['knowlyr/none'] * 3
    h = DatasetExporter(trajs, tools=[]).export('hf', tmp_path / 'h')
    assert h.total == 3 and len(datasets.load_from_disk(h.paths['hf'])['train']) == 3
    mixed = DatasetExporter([_t('tr-a', 't1', 'e1', 'read'), _bare('a0')]).export('verl', tmp_path / 'm')
    for row in pq.read_table(mixed.paths['train']).to_pylist():
        ei = row['extra_info']
        assert ei['tools_kwargs'] == {'read': {'create_kwargs': {'env_id': ei['env_id'], 'task_id': ei['task_id']}}}

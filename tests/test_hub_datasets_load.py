"""Every export loads in `datasets` as it is written: as a dict of splits (`load_dataset(kind, data_files={'train': ...,
'test': ...})`, which types every split by the first file), one file at a time, and with `Dataset.from_parquet` for
Parquet, also when the test split holds keys the train split lacks (tools of another env, other chat template variables)"""
from pathlib import Path

import datasets
import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory

TEST = ('t3', 't4', 't6')         # the test split of tasks t0..t9 at test_fraction=0.3


def _fn(name:str, props:dict)->dict:
    return {'type': 'function', 'function': {'name': name, 'description': name,
            'parameters': {'type': 'object', 'properties': props, 'required': list(props)}}}

TOOLS = {'knowlyr/a': [_fn('move', {'direction': {'type': 'string'}})],
         'knowlyr/b': [_fn('look', {'x': {'type': 'integer'}, 'y': {'type': 'integer'}})]}


def _traj(task:int, k:int, kw:dict|None=None, n:int=2)->Trajectory:
    "Trajectory `k` of task `task` (env b for the test split's tasks), every step served with `kw` (None: none)"
    env = 'knowlyr/b' if f"t{task}" in TEST else 'knowlyr/a'
    steps = [Step(index=i, thought=f"step {i} of {k}", action=ToolCall(tool='move', params={'direction': 'east'}),
                  observation=Observation(content=f"moved {i}"), reward=(k + i) / 10,
                  metadata={'template_kwargs': kw} if kw is not None else {}) for i in range(n)]
    return Trajectory(task=Task(id=f"t{task}", instruction=f"Reach column {task}.", domain='maze', env_id=env),
                      agent=AgentInfo(name='a', model='m'), steps=steps, outcome=Outcome(success=k % 2 == 0, terminated=True))


def _load(paths:dict, cache:Path)->dict:
    "{how: {split: rows}} of an export's split files, read by `datasets` each way it reads them"
    kind = 'parquet' if str(next(iter(paths.values()))).endswith('.parquet') else 'json'
    c = str(cache)
    got = {'dict': {s: list(d) for s, d in datasets.load_dataset(kind, data_files=dict(paths), cache_dir=c).items()},
           'each': {s: list(datasets.load_dataset(kind, data_files=p, split='train', cache_dir=c)) for s, p in paths.items()}}
    if kind == 'parquet': got['from_parquet'] = {s: list(datasets.Dataset.from_parquet(p, cache_dir=c)) for s, p in paths.items()}
    return got


@pytest.mark.parametrize('fmt', ['verl', 'skyrl'])
def test_parquet_splits_with_other_tools_load_as_one_dataset(tmp_path, fmt):
    """The test split's tasks use env b's tools, the train split's env a's: every verl row's `extra_info.tools_kwargs`
    names both (on main each split named its own, and `load_dataset('parquet', data_files={...})` failed to cast
    the test split's struct to the train split's)"""
    res = DatasetExporter([_traj(t, k) for t in range(10) for k in range(2)], test_fraction=0.3, tools=TOOLS).export(fmt, tmp_path / fmt)
    assert sorted(res.paths) == ['test', 'train']
    got = _load(res.paths, tmp_path / 'c')
    for how, rows in got.items():
        assert {r['extra_info']['task_id'] for r in rows['test']} == set(TEST), how
        assert sum(map(len, rows.values())) == 10, how
        if fmt == 'verl':
            assert all(sorted(r['extra_info']['tools_kwargs']) == ['look', 'move'] for s in rows for r in rows[s]), how
            assert all(r['extra_info']['tools_kwargs'][n]['create_kwargs']['task_id'] == r['extra_info']['task_id']
                       for s in rows for r in rows[s] for n in ('look', 'move')), how

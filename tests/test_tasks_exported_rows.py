"Rows the dataset exporter wrote, read back from JSONL, name the same tasks as the trajectories they came from"
import json
import warnings

import pandas as pd
import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.tasks import check_held_out, filter_tasks, split_tasks, suite_tasks, task_id, task_key

TEXT_FORMATS = ('benchmark', 'sft-agent', 'dpo-seed')   # rows whose `metadata` is a JSON string; all name `task_id`


def _attempt(n:int, task:dict, ok:bool)->dict:
    "Attempt `n` at `task` as a trajectory record: one submit step, a success when `ok`"
    step = {'index': 0, 'thought': 'add', 'action': {'tool': 'submit', 'params': {'answer': str(n)}},
            'observation': {'content': 'checked'}, 'reward': float(ok)}
    return {'id': f"{task['id']}-{n}", 'task': task, 'agent': {'name': 'a', 'model': f'm{n}'}, 'steps': [step],
            'outcome': {'success': ok, 'score': float(ok)}}

@pytest.fixture(scope='module')
def text_tasks():
    "Tasks no env names (converted logs, say): keyed by their text; their metadata names a repo"
    return [{'id': f'q{k}', 'instruction': f'Compute {k}+1', 'metadata': {'repo': f'r{k % 2}', 'level': k}} for k in range(6)]

def _read(path, reader:str)->list[dict]:
    if reader == 'json': return [json.loads(line) for line in open(path)]
    return pd.read_json(path, lines=True, dtype=False).to_dict('records')

@pytest.fixture(scope='module')
def exported(text_tasks, tmp_path_factory):
    "format -> the train rows the exporter wrote for two attempts (one success) per task"
    d, trajs = tmp_path_factory.mktemp('rows'), [_attempt(n, t, n == 0) for t in text_tasks for n in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')          # the exporter's notes on a tiny set (no tools given, few pairs)
        return {f: DatasetExporter(trajs, tools=[]).export(f, d / f).paths['train'] for f in TEXT_FORMATS}

@pytest.mark.parametrize('reader', ['json', 'pandas'])
@pytest.mark.parametrize('fmt', TEXT_FORMATS)
def test_an_exported_row_has_its_task_s_key_and_id(exported, text_tasks, fmt, reader):
    rows = _read(exported[fmt], reader)
    assert rows and all(isinstance(r['metadata'], str) for r in rows)     # as the exporter writes it
    by_id = {t['id']: t for t in text_tasks}
    assert [task_id(r) for r in rows] == [r['task_id'] for r in rows]
    assert [task_key(r) for r in rows] == [task_key(by_id[r['task_id']]) for r in rows]   # dpo-seed: with its repo

@pytest.mark.parametrize('reader', ['json', 'pandas'])
def test_filter_and_split_read_a_benchmark_row_s_metadata(exported, text_tasks, reader):
    "The benchmark row's `metadata` is the task's metadata as JSON: a filter or a split by a field of it agrees"
    rows = _read(exported['benchmark'], reader)
    assert [r['task_id'] for r in filter_tasks(rows, repo='r0', level=[0, 1, 2])] == ['q0', 'q2']
    assert [t['id'] for t in filter_tasks(text_tasks, repo='r0', level=[0, 1, 2])] == ['q0', 'q2']
    sides = lambda split: [[task_id(t) for t in side] for side in split]
    assert sides(split_tasks(rows, 0.5, group_by='repo')) == sides(split_tasks(text_tasks, 0.5, group_by='repo'))

def test_held_out_checks_of_exported_rows_find_their_training_tasks(exported, text_tasks):
    for fmt in TEXT_FORMATS:
        rows = _read(exported[fmt], 'json')
        mine = sorted({task_key(r) for r in rows if r['task_id'] in ('q0', 'q1')})
        assert check_held_out(text_tasks[:2], rows).shared == mine, fmt
        assert check_held_out(rows, text_tasks[:2]).shared == sorted({task_key(t) for t in text_tasks[:2]}), fmt

def test_an_env_task_s_benchmark_row_is_found_by_its_id_in_its_env(tmp_path):
    "A benchmark row carries `env_id` and `task_id` (no fingerprint): check_held_out looks the id up in the env"
    tasks = [{k: t[k] for k in ('id', 'instruction', 'env_id', 'fingerprint')} for t in suite_tasks('knowlyr/maze-easy', range(3))]
    trajs = [_attempt(n, t, n == 0) for t in tasks for n in range(2)]
    rows = _read(DatasetExporter(trajs, tools=[]).export('benchmark', tmp_path / 'b').paths['train'], 'json')
    assert sorted(task_key(r) for r in rows) == sorted(t['id'] for t in tasks)     # an env's task: keyed by its id
    rep = check_held_out(tasks, rows)
    assert rep.shared == sorted({t['fingerprint'] for t in tasks}) and len(rep.shared) == 3 and rep.by_id == [] and rep.basis['id'] == 0

def test_a_metadata_string_that_is_not_a_json_object_is_refused_by_field():
    for bad in ('{"repo": "r0"', 'fixed by hand', '[1, 2]'):
        with pytest.raises(ValueError, match=r"task 'q0': field 'metadata'"):
            filter_tasks([{'task_id': 'q0', 'instruction': 'Compute 0+1', 'metadata': bad}], repo='r0')
    row = {'task_id': 'q0', 'instruction': 'Compute 0+1', 'metadata': 'fixed by hand', 'fingerprint': 'fp'}
    assert task_key(row) == 'fp'                 # a field the row has itself never reads its metadata

def test_rows_of_an_env_not_installed_are_said_to_be_compared_by_id(tmp_path):
    "No fingerprint and no env to look the id up in: the rows' keys are their ids, and the report says so"
    tasks = [{'id': f'p{k}', 'instruction': 'Solve the puzzle', 'env_id': 'plugin/not-installed'} for k in range(2)]
    rows = _read(DatasetExporter([_attempt(0, t, True) for t in tasks], tools=[]).export('benchmark', tmp_path / 'b').paths['train'], 'json')
    with pytest.warns(UserWarning, match='compared by id alone'): rep = check_held_out(tasks, rows)
    assert (rep.shared, rep.by_id, rep.basis['id']) == (['p0', 'p1'], ['p0', 'p1'], 4)

"""Tasks with one generic instruction are told apart by their content fields (repo, test...), read from the task, its
metadata, or an exported row's metadata / task_metadata (sft-agent and dpo-seed rows carry them whole: a row keys as its
task); a row that lost them (written before) is matched on its text"""
import hashlib
import json
import warnings

import pandas as pd
import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.tasks import TaskOverlapError, check_held_out, distinct_tasks, split_tasks, task_id, task_key
from knowlyr_lab.trajectory import Trajectory

GENERIC = 'Fix the failing test.'
FORMATS = ('benchmark', 'sft-agent', 'dpo-seed')


def _task(repo:str, tid:str|None=None, **more)->dict:
    return {'id': tid or f'fix-{repo}', 'instruction': GENERIC,
            'metadata': {'repo': repo, 'test': f'tests/test_{repo}.py', 'lang': 'py', **more}}

def _attempt(n:int, task:dict, ok:bool)->dict:
    step = {'index': 0, 'thought': 'edit', 'action': {'tool': 'submit', 'params': {'patch': 'p'}},
            'observation': {'content': 'ran'}, 'reward': float(ok)}
    return {'id': f"{task['id']}-{n}", 'task': task, 'agent': {'name': 'a', 'model': f'm{n}'}, 'steps': [step],
            'outcome': {'success': ok, 'score': float(ok)}}

def _rows(tasks, fmt, tmp_path)->dict:
    "task id -> the first row the exporter wrote for it in `fmt`, read back from JSONL"
    trajs = [_attempt(n, t, n == 0) for t in tasks for n in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        paths = DatasetExporter(trajs, tools=[], test_fraction=0.0).export(fmt, tmp_path / fmt).paths
    rows = [json.loads(line) for line in open(paths['train'])]
    return {r['task_id']: r for r in reversed(rows)}

def test_two_generic_tasks_of_two_repositories_are_held_out_from_each_other():
    httpx, attrs = _task('httpx'), _task('attrs')
    assert task_key(httpx) != task_key(attrs) and distinct_tasks([httpx, attrs]) == 2
    rep = check_held_out([httpx], [attrs], strict=True)          # on main: 1 shared, and strict refused
    assert rep.shared == [] and rep.disjoint
    assert check_held_out([Trajectory(task=httpx)], [Trajectory(task=attrs)], strict=True).shared == []

def test_the_same_generic_task_under_another_id_is_shared():
    httpx = _task('httpx')
    again = {'id': 'sess-9', 'instruction': ' Fix the failing\n  test.', 'repo': 'httpx', 'test': 'tests/test_httpx.py'}
    assert check_held_out([httpx], [again]).shared == [task_key(again)]
    with pytest.raises(TaskOverlapError, match='not held out'): check_held_out([httpx, _task('attrs')], [again], strict=True)
    same = {'id': 'sess-9', 'instruction': GENERIC, 'metadata': {'test': 'tests/test_httpx.py', 'repo': 'httpx'}}
    assert task_key(same) == task_key(httpx)                      # other fields (lang) are no content

def test_a_task_without_content_fields_keys_as_before():
    for t in ({'id': 'q', 'instruction': GENERIC}, {'id': 'q', 'instruction': GENERIC, 'metadata': {'lang': 'py', 'answer': '4'}},
              {'id': 'q', 'instruction': GENERIC, 'metadata': {'message_id': 'm1', 'timestamp': '2026-01-01'}}):
        assert task_key(t) == 'text:' + hashlib.sha1(GENERIC.encode()).hexdigest()
    # a split of such tasks is where it was
    tasks = [{'id': f'q{k}', 'instruction': f'Compute {k}+1'} for k in range(8)]
    assert [task_key(t) for t in tasks] == ['text:' + hashlib.sha1(f'Compute {k}+1'.encode()).hexdigest() for k in range(8)]

@pytest.mark.parametrize('fmt', FORMATS)
def test_an_exported_row_of_each_format_keys_as_its_task(fmt, tmp_path):
    httpx, attrs = _task('httpx'), _task('attrs')
    rows = _rows([httpx, attrs], fmt, tmp_path)
    # the repo and test travel in the row's metadata (sft-agent, dpo-seed: its task_metadata)
    assert [task_key(rows[t['id']]) for t in (httpx, attrs)] == [task_key(httpx), task_key(attrs)]   # dpo-seed: text's
    assert check_held_out([httpx], [rows['fix-attrs']], strict=True).shared == []
    assert check_held_out([rows['fix-httpx']], [attrs], strict=True).shared == []
    assert check_held_out([httpx], [rows['fix-httpx']]).shared == [task_key(rows['fix-httpx'])]   # its own task
    assert check_held_out([rows['fix-httpx']], [httpx]).shared == [task_key(httpx)]

def test_a_row_that_lost_a_structured_content_field_still_finds_its_task():
    "An sft-agent row written before rows kept `files` (only the task's strings and numbers): the fields both carry decide"
    httpx, attrs = _task('httpx', files={'src/a.py': 'x = 1'}), _task('attrs', files={'src/a.py': 'x = 1'})
    old = lambda t: {'task_id': t['id'], 'instruction': GENERIC, 'input': '',
                     'metadata': json.dumps({'task_metadata': {k: v for k, v in t['metadata'].items() if k != 'files'}})}
    assert task_key(old(httpx)) != task_key(httpx)
    assert check_held_out([httpx], [old(httpx)]).shared == [task_key(old(httpx))]
    assert check_held_out([httpx], [old(attrs)], strict=True).shared == []

@pytest.mark.parametrize('fmt', ('sft-agent', 'dpo-seed'))
def test_a_row_of_a_task_with_structured_content_keys_and_splits_as_its_task(fmt, tmp_path):
    "sft-agent rows dropped `files` (a dict), dpo-seed rows every content field: their key was not their task's"
    tasks = [_task(f'repo{k}', files={'src/a.py': 'x = 1', 'tests': [k % 2]}) for k in range(12)]
    rows = _rows(tasks, fmt, tmp_path)
    assert [task_key(rows[t['id']]) for t in tasks] == [task_key(t) for t in tasks]   # on main: none equal
    assert len({task_key(r) for r in rows.values()}) == 12                             # dpo-seed on main: one key
    side = lambda split: [sorted(task_id(t) for t in s) for s in split]
    assert side(split_tasks(list(rows.values()), 0.5, seed=3)) == side(split_tasks(tasks, 0.5, seed=3))   # re-split
    read = pd.read_json(tmp_path / fmt / 'train.jsonl', lines=True, dtype=False).to_dict('records')      # as pandas reads it
    assert {r['task_id']: task_key(r) for r in read} == {t['id']: task_key(t) for t in tasks}

def test_an_empty_metadata_cell_of_a_frame_is_no_metadata():
    "A frame with metadata on some rows fills the others' cell with NaN: they carry no metadata, not a bad one"
    frame = pd.DataFrame([_task('httpx'), {'id': 'q1', 'instruction': 'Compute 1+1'}, {'id': 'q2', 'instruction': 'Compute 2+2'}])
    rows = frame.to_dict('records')
    assert pd.isna(rows[1]['metadata'])
    assert [task_key(r) for r in rows] == [task_key(_task('httpx'))] + [task_key({'id': f'q{k}', 'instruction': f'Compute {k}+{k}'})
                                                                         for k in (1, 2)]   # on main: ValueError
    assert check_held_out(rows[:2], rows[1:]).shared == [task_key(rows[1])]
    assert sum(map(len, split_tasks(rows, 0.5))) == 3
    assert [r.id for r in frame.itertuples() if task_key(r).startswith('text:')] == ['fix-httpx', 'q1', 'q2']

def test_splits_keep_two_repositories_generic_tasks_apart():
    tasks = [_task(f'repo{k}') for k in range(40)]
    train, test = split_tasks(tasks, 0.5, seed=0)                # on main: one key, so all on one side (and a warning)
    assert train and test

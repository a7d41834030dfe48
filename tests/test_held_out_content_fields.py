"""Tasks with one generic instruction are told apart by their content fields (repo, test...), read from the task, its
metadata, or an exported row's metadata / task_metadata; a row that lost them (dpo-seed) is matched on its text"""
import hashlib
import json
import warnings

import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.tasks import TaskOverlapError, check_held_out, distinct_tasks, split_tasks, task_key
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
    if fmt == 'dpo-seed':        # the row keeps only the prompt: its key is its text's, and it matches on its text
        assert task_key(rows['fix-httpx']) == task_key({'id': 'fix-httpx', 'instruction': GENERIC})
        assert check_held_out([httpx], [rows['fix-attrs']]).shared == [task_key(rows['fix-attrs'])]
    else:                        # the repo and test travel in the row's metadata (sft-agent: its task_metadata)
        assert [task_key(rows[t['id']]) for t in (httpx, attrs)] == [task_key(httpx), task_key(attrs)]
        assert check_held_out([httpx], [rows['fix-attrs']], strict=True).shared == []   # on main: shared
        assert check_held_out([rows['fix-httpx']], [attrs], strict=True).shared == []
    assert check_held_out([httpx], [rows['fix-httpx']]).shared == [task_key(rows['fix-httpx'])]   # its own task
    assert check_held_out([rows['fix-httpx']], [httpx]).shared == [task_key(httpx)]

def test_an_sft_agent_row_that_lost_a_structured_content_field_still_finds_its_task(tmp_path):
    "sft-agent rows keep only the task's string and number metadata: the fields both carry decide"
    httpx, attrs = _task('httpx', files={'src/a.py': 'x = 1'}), _task('attrs', files={'src/a.py': 'x = 1'})
    rows = _rows([httpx, attrs], 'sft-agent', tmp_path)
    assert 'files' not in json.loads(rows['fix-httpx']['metadata'])['task_metadata']
    assert check_held_out([httpx], [rows['fix-httpx']]).shared == [task_key(rows['fix-httpx'])]
    assert check_held_out([httpx], [rows['fix-attrs']], strict=True).shared == []

def test_splits_keep_two_repositories_generic_tasks_apart():
    tasks = [_task(f'repo{k}') for k in range(40)]
    train, test = split_tasks(tasks, 0.5, seed=0)                # on main: one key, so all on one side (and a warning)
    assert train and test

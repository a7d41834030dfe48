"""`split_tasks` and `TaskSplitter` ask each task's `group_by` once.

Before, `split_tasks` asked every task's `group_by` value twice (in `group_key`, then again to count the tasks without
one), and `TaskSplitter` twice for each new key: a `group_by` function that is slow (a lookup) or not pure (a counter,
a random choice) cost double or split one way and counted the other. The splits themselves do not change: the digests
below are of the splits the code gave before the change."""
import hashlib
import json
import warnings

from knowlyr_lab.tasks import TaskSplitter, split_tasks
from knowlyr_lab.trajectory import Task


def _tasks(n=300):
    "Dicts and `Task`s, most with a repo (top-level or in metadata), every seventh without"
    ts = []
    for i in range(n):
        repo = None if i % 7 == 0 else f"repo-{i % 23}"
        if i % 2: ts.append({'id': f'd{i}', 'instruction': f'fix bug {i}', **({'repo': repo} if repo else {})})
        else: ts.append(Task(id=f't{i}', instruction=f'fix bug {i}', metadata={'repo': repo} if repo else {}))
    return ts

def _ids(ts): return [t['id'] if isinstance(t, dict) else t.id for t in ts]

def _digest(*parts): return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]

class _Counting:
    "A `group_by` function that counts its calls"
    def __init__(self): self.calls, self.__name__ = 0, 'repo_of'
    def __call__(self, t):
        self.calls += 1
        return (t.get('repo') if isinstance(t, dict) else t.metadata.get('repo'))

def test_split_tasks_asks_each_task_once():
    ts, by = _tasks(), _Counting()
    with warnings.catch_warnings(record=True): split_tasks(ts, 0.3, group_by=by)
    assert by.calls == len(ts)

def test_task_splitter_asks_each_task_once():
    ts, by = _tasks(), _Counting()
    sp = TaskSplitter(0.3, group_by=by)
    for t in ts: sp(t)
    assert by.calls == len(ts)

def test_splits_are_as_before():
    "With the field (all tasks have it), without it for some, and by a function: the same sides and counts"
    ts = _tasks()
    grouped = [t for t in ts if (t.get('repo') if isinstance(t, dict) else t.metadata.get('repo'))]
    assert len(grouped) > 200
    with warnings.catch_warnings(record=True) as w:
        a = split_tasks(grouped, 0.3, seed=1, group_by='repo')
        b = split_tasks(ts, 0.3, group_by='repo')
        c = split_tasks(ts, 0.5, seed=2, group_by=_Counting())
    assert len(w) == 2 and 'have no' in str(w[0].message)      # b and c: 43 tasks without a repo
    sp = TaskSplitter(0.3, group_by='repo'); sides = [sp(t) for t in ts]
    got = _digest(*(_ids(s) for s in (*a, *b, *c)), sides, sorted(sp.ungrouped), str(w[0].message))
    assert got == '73bb732bf648cd5d'

"Grouped exports never mix task content keys: a group (GRPO, DPO, benchmark, verl, SkyRL) is wholly in one split, the split SFT gives its trajectories"
import json

import pyarrow.parquet as pq
import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.hub.export_filter import export_split
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory


def _traj(i, fp, ok, n):
    "A trajectory of task id HumanEval/0 in its version `fp` (same id and instruction, another fingerprint)"
    return Trajectory(id=f'tr-{i}', task=Task(id='HumanEval/0', instruction='Write f', fingerprint=fp),
                      steps=[Step(index=k, thought='t', action=ToolCall(tool='submit', params={'code': f'v{i}{k}'}))
                             for k in range(n)],
                      outcome=Outcome(success=ok))

TRAJS = [_traj(1, 'fpB', False, 2), _traj(0, 'fpA', True, 1), _traj(2, 'fpA', False, 3), _traj(3, 'fpB', True, 1)]
FP = {t.id: t.task.fingerprint for t in TRAJS}

def _rows(res):
    out = {}
    for split, p in res.paths.items():
        out[split] = pq.read_table(p).to_pylist() if p.endswith('.parquet') else [json.loads(x) for x in open(p)]
    return out

@pytest.fixture(scope='module')
def exports(tmp_path_factory):
    d = tmp_path_factory.mktemp('groups')
    want = {t.id: export_split(t, 0.5, 0) for t in TRAJS}
    assert set(want.values()) == {'train', 'test'}, want      # the two versions fall in different splits
    ex = DatasetExporter(TRAJS, test_fraction=0.5)
    return want, {f: _rows(ex.export(f, d/f)) for f in ('sft', 'grpo', 'dpo', 'dpo-seed', 'benchmark', 'verl', 'skyrl')}

def test_sft_rows_go_by_content_key(exports):
    want, rows = exports
    got = {r['trajectory_id']: split for split, rs in rows['sft'].items() for r in rs}
    assert got == want

def test_a_grpo_group_holds_one_version_in_the_split_sft_gives_it(exports):
    want, rows = exports
    for split, rs in rows['grpo'].items():
        for r in rs:
            assert r['task_id'] == 'HumanEval/0'                  # the row keeps the task id
            assert {FP[i] for i in r['trajectory_ids']} in ({'fpA'}, {'fpB'}), r['trajectory_ids']
            assert {want[i] for i in r['trajectory_ids']} == {split}
    assert sorted(len(r['trajectory_ids']) for rs in rows['grpo'].values() for r in rs) == [2, 2]

def test_dpo_pairs_never_cross_versions_or_splits(exports):
    want, rows = exports
    for f in ('dpo', 'dpo-seed'):
        pairs = [(split, r) for split, rs in rows[f].items() for r in rs]
        assert pairs, f
        for split, r in pairs:
            ids = [r.get('chosen_id'), r.get('rejected_id')] if 'chosen_id' in r else None
            if ids is None: continue                              # dpo-seed rows name no ids
            assert FP[ids[0]] == FP[ids[1]] and want[ids[0]] == want[ids[1]] == split, (f, split, r)
        assert len(pairs) == 2 and {s for s, _ in pairs} == {'train', 'test'}, f

def test_task_rows_are_one_per_version_each_in_its_split(exports):
    _, rows = exports
    for f in ('benchmark', 'verl', 'skyrl'):
        assert {s: len(rs) for s, rs in rows[f].items()} == {'train': 1, 'test': 1}, (f, rows[f])
    for rs in rows['benchmark'].values():
        assert rs[0]['task_id'] == 'HumanEval/0' and rs[0]['n_attempts'] == 2 and rs[0]['success_rate'] == 0.5

def test_one_prompt_under_many_session_ids_lands_in_one_split(tmp_path):
    "Converted logs carry no fingerprint: 20 sessions of 4 prompts, each prompt's sessions all in one split"
    prompts = [f'Fix issue #{k} in the parser' for k in range(4)]
    ts = [Trajectory(id=f'sess-{i}', task=Task(id=f'sess-{i}', instruction=prompts[i % 4]),
                     steps=[Step(index=0, thought='t', action=ToolCall(tool='submit', params={'code': str(i)}))],
                     outcome=Outcome(success=True)) for i in range(20)]
    res = DatasetExporter(ts, test_fraction=0.5, split_seed=3).export('sft', tmp_path)
    got = {r['trajectory_id']: split for split, p in res.paths.items() for r in map(json.loads, open(p))}
    assert len(got) == 20
    by_prompt = {}
    for t in ts: by_prompt.setdefault(t.task.instruction, set()).add(got[t.id])
    assert all(len(s) == 1 for s in by_prompt.values()), by_prompt          # split by id, they were mixed
    assert set(got.values()) == {'train', 'test'}                           # and the split still splits

def test_group_by_keeps_a_repositorys_tasks_in_the_split_split_tasks_gives_it(tmp_path):
    """Text-only tasks of 4 repositories (3 tasks each, 2 trajectories per task): with group_by='repo' every SFT row,
    GRPO group and DPO pair of a repository is in one split, the split `split_tasks(..., group_by='repo')` holds it
    out in. The exporter had no group_by: it split by task, so held-out repositories' tasks were trained on."""
    from knowlyr_lab.tasks import split_tasks
    tasks = [Task(id=f'fix-{i}', instruction=f'Fix bug {i}', metadata={'repo': f'repo-{i % 4}'}) for i in range(12)]
    ts = [Trajectory(id=f'tr-{i}-{k}', task=t, outcome=Outcome(success=k == 0),
                     steps=[Step(index=j, thought='t', action=ToolCall(tool='submit', params={'code': f'{i}{k}{j}'}))
                            for j in range(k + 1)]) for i, t in enumerate(tasks) for k in range(2)]
    repo = {t.id: t.task.metadata['repo'] for t in ts}
    held_out = {t.metadata['repo'] for t in split_tasks(tasks, 0.5, seed=1, group_by='repo')[1]}
    assert 0 < len(held_out) < 4
    ex = DatasetExporter(ts, test_fraction=0.5, split_seed=1, group_by='repo')
    rows = {f: _rows(ex.export(f, tmp_path / f)) for f in ('sft', 'grpo', 'dpo')}
    ids = {'sft': lambda r: [r['trajectory_id']], 'grpo': lambda r: r['trajectory_ids'],
           'dpo': lambda r: [r['chosen_id'], r['rejected_id']]}
    for f, rs in rows.items():
        got = {repo[i]: split for split, r_ in rs.items() for r in r_ for i in ids[f](r)}
        assert got == {r: 'test' if r in held_out else 'train' for r in got} and len(got) == 4, (f, got)
    assert sum(len(r_) for r_ in rows['sft'].values()) == 24 and sum(len(r_) for r_ in rows['dpo'].values()) == 12
    from knowlyr_lab.cli.hub import main  # knowlyr-hub export --group-by repo: the same rows
    from knowlyr_lab.trajectory_io import write_trajectories
    write_trajectories(ts, tmp_path / 't.jsonl')
    args = ['-t', tmp_path / 't.jsonl', '-o', tmp_path / 'cli', '--test-fraction', '0.5', '--group-by', 'repo']
    assert main(['export', '-f', 'sft', *map(str, args)]) == 0
    api = DatasetExporter(ts, test_fraction=0.5, group_by='repo').export('sft', tmp_path / 'api')
    for split in ('train', 'test'):
        assert (tmp_path / 'cli' / f'{split}.jsonl').read_bytes() == open(api.paths[split], 'rb').read()

"compare_runs / arm_comparisons: what the pairing leaves out is in the record, the means are over the estimate's cells, seeds"
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from knowlyr_lab.eval.evaluate import EPISODE_COLUMNS, EvalResult, arm_comparisons, compare_runs

ROOT = Path(__file__).resolve().parents[1]
T = [f't{i}' for i in range(12)]


def ev(name, rows):
    "An evaluation from rows (task, seed, success, valid)"
    recs = [dict(agent=name, task_id=t, task_key=t, attempt=0, seed=s, success=bool(y), verified=True, reward=float(y), steps=2,
                 tool_errors=0, cost=0.0, tokens=0, duration=1.0, reason='', valid=ok, invalid=None if ok else 'lost',
                 trajectory_id=f'{name}{i}') for i, (t, s, y, ok) in enumerate(rows)]
    return EvalResult(name, pd.DataFrame(recs, columns=EPISODE_COLUMNS))


def lost_run():
    "review22 pairing.py: run 0 of the control lost 10 of its 12 tasks to infrastructure failures"
    a = [ev('m0', [(t, 0, 1, True) for t in T])] + [ev(f'm{r}', [(t, r, int(i < 3), True) for i, t in enumerate(T)]) for r in (1, 2)]
    b = [ev('c0', [(t, 0, 0, i < 2) for i, t in enumerate(T)])] + [ev(f'c{r}', [(t, r, 0, True) for t in T]) for r in (1, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return arm_comparisons({'m': a, 'c': b}, [('m', 'c')])['m vs c']


def test_the_pairs_a_run_lost_are_counted_in_the_record():
    "They were only a warning: the record's notes did not say that run 0 compared 2 of 12 tasks"
    rec = lost_run()
    assert "run 0 (m0 vs c0): 2 tasks paired; 10 invalid episode(s) of c0 left out; 10 of m0's 12 tasks unpaired" in rec['notes']
    assert '10 of 36 run x task cells have no data: the estimate averages the other 26' in rec['notes']
    assert (rec['n_tasks'], rec['n_cells'], [r['n_tasks'] for r in rec['runs']]) == (12, 26, [2, 12, 12])
    json.dumps(rec)


def test_the_record_means_are_over_the_cells_of_the_estimate():
    "mean_a - mean_b was 0.500 (means of per-run means over other task sets) while the estimate was 0.308"
    rec = lost_run()
    assert rec['mean_a'] - rec['mean_b'] == pytest.approx(rec['estimate'], abs=1e-12)
    assert (rec['mean_a'], rec['mean_b']) == pytest.approx((8 / 26, 0.0))


def test_runs_on_other_seeds_are_paired_and_noted():
    "Greedy results do not depend on the seed: other seeds (or a second attempt) still pair, and the record says so"
    same = compare_runs([ev(f'm{r}', [(t, r, i % 2, True) for i, t in enumerate(T)]) for r in range(3)],
                        [ev(f'c{r}', [(t, r, 0, True) for t in T]) for r in range(3)])
    assert not any('seeds differ' in n for n in same['crossed'].notes)
    with pytest.warns(UserWarning, match='episode seeds differ'):
        other = compare_runs([ev(f'm{r}', [(t, r, 1, True) for t in T]) for r in range(3)],
                             [ev(f'c{r}', [(t, 100 + r, 0, True) for t in T]) for r in range(3)])
    assert other['crossed'].n_tasks == 12 and other['crossed'].mean == 1.0
    assert [n for n in other['crossed'].notes if 'seeds differ' in n][0].startswith('run 0 (m0 vs c0): episode seeds differ (1 vs 1, 0 shared)')
    with pytest.warns(UserWarning, match=r'episode seeds differ \(2 vs 1, 1 shared\)'):
        two = compare_runs([ev('m', [(t, s, 1, True) for t in T for s in (0, 1)]) for _ in range(2)],
                           [ev('c', [(t, 0, 0, True) for t in T]) for _ in range(2)])
    assert 'mcnemar_exact' not in set(two['runs'].test)   # two attempts against one: per-task means, not one 0/1 each


def test_committed_results_files_still_load_and_mean_what_they_said():
    "A new record adds only n_cells; every committed record has the other keys, and there every run paired every task"
    new, seen = set(lost_run()), 0
    for path in sorted((ROOT / 'experiments' / 'results').glob('*/results.json')):
        for rec in json.loads(path.read_text()).get('comparisons', {}).values():
            seen += 1
            assert new - set(rec) == {'n_cells'}, path
            assert {r['n_tasks'] for r in rec['runs']} == {rec['n_tasks']}, path
            assert rec['mean_a'] - rec['mean_b'] == pytest.approx(rec['estimate'], abs=1e-12), path
    assert seen >= 20


def test_a_side_that_recorded_no_seeds_is_said_to_have_none_recorded():
    "review27 seed_unknown.py: seeds None on one side read 'episode seeds differ (1 vs 0, 0 shared)'"
    with pytest.warns(UserWarning, match=r'episode seeds differ \(1 vs not recorded\): '):
        r = compare_runs([ev(f'm{i}', [(t, 0, 1, True) for t in T]) for i in range(2)],
                         [ev(f'c{i}', [(t, None, 0, True) for t in T]) for i in range(2)])
    assert [n for n in r['crossed'].notes if 'seeds' in n][0].startswith('run 0 (m0 vs c0): episode seeds differ (1 vs not recorded)')


def test_seeds_recorded_for_some_episodes_only_are_said_to_be_partly_unrecorded():
    """One side recorded seed 0 on half its episodes and no seed on the rest, the other seed 0 on all: the seed note
    compared the recorded seeds only ({0} and {0}) and said nothing, as if both sides had run the same seeds"""
    m = [ev(f'm{i}', [(t, 0 if j % 2 else None, 1, True) for j, t in enumerate(T)]) for i in range(2)]
    with pytest.warns(UserWarning, match=r"run 0 \(m0 vs c0\): episode seeds not all recorded \(6 of m0's 12 episodes "
                                         r"recorded none\): each task's attempts are averaged"):
        r = compare_runs(m, [ev(f'c{i}', [(t, 0, 0, True) for t in T]) for i in range(2)])
    assert len([n for n in r['crossed'].notes if 'seeds' in n]) == 2
    with pytest.warns(UserWarning, match=r"episode seeds differ \(1 vs 1, 0 shared; 6 of m0's 12 episodes recorded none\)"):
        compare_runs(m, [ev(f'c{i}', [(t, 1, 0, True) for t in T]) for i in range(2)])
    with warnings.catch_warnings():                                   # none recorded on either side: nothing to say
        warnings.simplefilter('error')
        r = compare_runs([ev(f'm{i}', [(t, None, 1, True) for t in T]) for i in range(2)],
                         [ev(f'c{i}', [(t, None, 0, True) for t in T]) for i in range(2)])
    assert not [n for n in r['crossed'].notes if 'seeds' in n]

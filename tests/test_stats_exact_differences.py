"""Spread is judged where the scores are, by what rounding they can carry (stats21).
Paired whole scores near 1e16 differ exactly, so their differences' spread is real (main: no interval, 'every pair differs by
+2'); the replicate planners judge rounding in the scores (`replicate_variance`), not by a fixed 1e-12 on a standard
deviation, so they plan alike in any unit (main: rounding of token counts near 1e7 planned from, spread near 1e-14 refused)."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from knowlyr_lab.eval.evaluate import EPISODE_COLUMNS, EvalResult, compare_agents, compare_runs
from knowlyr_lab.eval.noise import compare_checkpoints, measure_noise, plan_replicates
from knowlyr_lab.replicates import noise_floor, paired_mde, replicate_variance, replicates_needed, tasks_needed
from knowlyr_lab.stats import compare_many, compare_samples

STEPS = np.r_[2., 4, 0, 6, 2, 0]   # whole differences, spread by 6: three float64 steps of 1e16


def _result(agent, rewards, attempts=None):
    "An evaluation of one reward per episode; `attempts` numbers the replicate runs of a task (default: one each)"
    attempts = attempts or [0] * len(rewards)
    task = [f't{i // (max(attempts) + 1)}' for i in range(len(rewards))]
    rows = [{'agent': agent, 'task_id': t, 'task_key': t, 'attempt': k, 'seed': k, 'success': True, 'verified': True,
             'reward': v, 'steps': 3, 'tool_errors': 0, 'cost': 0.0, 'tokens': 0, 'duration': 1.0, 'reason': '', 'valid': True,
             'invalid': None, 'trajectory_id': f'{agent}{i}'} for i, (t, k, v) in enumerate(zip(task, attempts, rewards))]
    return EvalResult(agent, pd.DataFrame(rows, columns=EPISODE_COLUMNS))


@pytest.mark.parametrize('base', [1e16, -1e16, 2. ** 53])
def test_paired_whole_scores_get_the_interval_of_their_exact_differences(base):
    a, b = base + STEPS, np.full(len(STEPS), base)
    assert (a - b == STEPS).all()   # float64 holds them exactly
    c, small = compare_samples(a, b, paired=True), compare_samples(STEPS, np.zeros(len(STEPS)), paired=True)
    assert (c.ci_method, c.notes) == ('bootstrap', []), (c.diff_ci, c.notes)   # main: 'none', 'every pair differs by +2'
    assert c.diff_ci == small.diff_ci and c.diff_ci[0] < c.diff < c.diff_ci[1]
    assert c.effect_size == small.effect_size and math.isfinite(c.effect_size)   # main: NaN
    assert c.diff == small.diff == STEPS.mean()   # main: 2.0, mean(a) - mean(b) with each mean rounded to a step of 2
    assert c.p_value == small.p_value and c.tests['permutation'] == small.tests['permutation']   # main: statistic 2.0


def test_equal_exact_differences_are_still_flat():
    with pytest.warns(UserWarning, match='every pair differs by -5e\\+12'):
        c = compare_samples([1., 2, 3], [1 + 5e12, 2 + 5e12, 3 + 5e12], paired=True)
    assert c.ci_method == 'none' and np.isnan(c.diff_ci).all() and np.isnan(c.effect_size)


def test_callers_pass_the_interval_on():
    "compare_many of task-keyed dicts and compare_agents on shared tasks pair the scores and give the same interval"
    a, b = 1e16 + STEPS, np.full(len(STEPS), 1e16)
    want = compare_samples(a, b, paired=True).diff_ci
    df = compare_many({'a': dict(enumerate(a)), 'b': dict(enumerate(b))}, reference='a', paired=True)
    assert (df.diff_low[0], df.diff_high[0]) == (-want[1], -want[0])
    c = compare_agents(_result('a', a.tolist()), _result('b', b.tolist()), metric='reward')
    assert c.paired and c.ci_method == 'bootstrap' and c.diff_ci == want, (c.diff_ci, c.notes)


def test_compare_runs_crossed_interval_on_exact_differences():
    "compare_runs passes the runs' scores: cells 2, 4, 0, 6 .. above 1e16 less 1e16 are spread (main: 'every cell differs by +2')"
    runs_a = [_result('a', (1e16 + STEPS).tolist()), _result('a', (1e16 + STEPS[::-1]).tolist())]
    runs_b = [_result('b', [1e16] * len(STEPS))] * 2
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        crossed = compare_runs(runs_a, runs_b, metric='reward')['crossed']
    assert crossed.ci[0] < crossed.mean < crossed.ci[1] and not any('every cell' in n for n in crossed.notes), crossed
    assert all(r['ci'][0] < r['mean'] < r['ci'][1] for r in crossed.per_run)


TASK_RUNS = np.r_[1., 3, 2, 2.5, 4, 1, 0, 2]   # four tasks, two replicate runs each
TASKS = list('aabbccdd')


def test_replicates_a_rounding_step_apart_have_no_spread_in_large_units():
    "Token counts near 1e7 whose replicates differ by one float64 step: main planned from the step's square (3.5e-18)"
    tokens = 1e7 + np.r_[0, np.spacing(1e7), 5, 5, 9, 9, 2, 2]
    w = replicate_variance(tokens, TASKS)
    assert w == 0.0   # main: 8.7e-19
    assert noise_floor(3, 2, w) == math.inf and math.isnan(paired_mde(40, 1, w))   # main: 2.6e-9 and 3e-9
    with pytest.raises(ValueError, match='no spread measured'): replicates_needed(1.0, 40, w)   # main: 1 replicate
    report = measure_noise(_result('big', tokens.tolist(), [0, 1] * 4), metric='reward')
    assert report.within_var == 0.0 and math.isnan(report.noise_floor(40))


@pytest.mark.parametrize('unit', [1e-14, 1e-9, 1e7])
def test_the_planners_answer_alike_in_any_unit(unit):
    "The same runs in units of 1e-14 (main: 'no spread measured', floor NaN) plan as in units of 1"
    w1, w = replicate_variance(TASK_RUNS, TASKS), replicate_variance(TASK_RUNS * unit, TASKS)
    assert w == pytest.approx(w1 * unit ** 2, rel=1e-12)
    assert noise_floor(40, 2, w) == pytest.approx(noise_floor(40, 2, w1) * unit, rel=1e-9)
    assert paired_mde(40, 2, w) == pytest.approx(paired_mde(40, 2, w1) * unit, rel=1e-9)
    assert replicates_needed(.5 * unit, 40, w) == replicates_needed(.5, 40, w1)
    assert tasks_needed(.5 * unit, 1, w) == tasks_needed(.5, 1, w1)
    report = measure_noise(_result('u', (TASK_RUNS * unit).tolist(), [0, 1] * 4), metric='reward')
    assert report.noise_floor(40, 2) == pytest.approx(noise_floor(40, 2, w1) * unit, rel=1e-9)


@pytest.mark.parametrize('unit', [1e-14, 1e7])
def test_plan_replicates_plans_alike_in_any_unit(unit):
    "plan_replicates warned 'runs agree on every task' below a variance of 1e-24 (units of 1e-14) while the planners planned"
    report = measure_noise(_result('u', (TASK_RUNS * unit).tolist(), [0, 1] * 4), metric='reward')
    want = plan_replicates(measure_noise(_result('u', TASK_RUNS.tolist(), [0, 1] * 4), metric='reward'), (.5, 1.), 40)
    with warnings.catch_warnings():
        warnings.simplefilter('error')   # main: 'no noise measured' for units of 1e-14
        plan = plan_replicates(report, (.5 * unit, unit), 40)
    assert plan.replicates.tolist() == want.replicates.tolist() == [4, 1]
    assert plan.tasks_at_1_run.tolist() == want.tasks_at_1_run.tolist()


def test_compare_checkpoints_reads_no_noise_from_differences_alike_to_rounding():
    "Per-task differences of token counts near 1e7 a float64 step apart: main gave a noise floor near 1e-9, the gap 'outside' it"
    step = np.spacing(1e7)
    a = _result('a', (1e7 + step * np.tile([0, 1, 1, 0, 0, 0, 1, 1], 2)).tolist(), [0, 1] * 8)   # 8 tasks, 2 seeds
    b = _result('b', [1e7 + 5] * 16, [0, 1] * 8)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        c = compare_checkpoints(a, b, metric='reward')
    assert c.comparison.ci_method == 'none'   # compare_samples: every pair differs by -5, to rounding
    assert c.sd_diff == 0.0 and math.isnan(c.noise_floor) and math.isnan(c.mde) and c.inside_noise is None, c

"Samples with no spread: no interval, power or noise verdict guessed from them, and exact p-values computed, not drawn"
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from knowlyr_lab.eval.evaluate import EPISODE_COLUMNS, EvalResult, leaderboard
from knowlyr_lab.eval.noise import compare_checkpoints, measure_noise, plan_replicates
from knowlyr_lab.replicates import paired_power, replicates_needed, tasks_needed
from knowlyr_lab.stats import bootstrap_ci, compare_samples, task_bootstrap_ci, wilson_ci, wilson_ci_ess


def _agent(name, value, attempts=2, tasks=3, metric='success'):
    "An evaluation whose every episode has the same `metric` value (3 tasks x 2 attempts by default)"
    base = dict(success=True, verified=True, reward=1.0, steps=3, tool_errors=0, cost=0.0)
    rows = [{**base, 'agent': name, 'task_id': f't{t}', 'task_key': f't{t}', 'attempt': a, 'seed': a, 'tokens': 0,
             'duration': 1.0, 'reason': '', 'valid': True, 'invalid': None, 'trajectory_id': f'{name}{t}-{a}',
             metric: value} for t in range(tasks) for a in range(attempts)]
    return EvalResult(name, pd.DataFrame(rows, columns=EPISODE_COLUMNS))


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return f(*args, **kwargs)


@pytest.mark.parametrize('what, values', [('mean steps, 1 each', [1.0] * 20), ('tool errors, none', [0.0] * 20),
                                          ('reward in [-1, 1], all 0', [0.0] * 20)])
def test_a_constant_sample_that_is_not_a_rate_gets_no_wilson_interval(what, values):
    "The reviewer's cases: steps all 1 got (0.84, 1.0), tool errors all 0 and a reward all 0 got (0, 0.16)"
    with pytest.warns(UserWarning, match='no spread'):
        assert all(math.isnan(x) for x in bootstrap_ci(values))
    tasks = [f't{i}' for i in range(len(values))]
    assert all(math.isnan(x) for x in _quiet(task_bootstrap_ci, values, tasks))


def test_a_constant_rate_gets_wilson_when_the_caller_says_it_is_one():
    assert bootstrap_ci([1.0] * 20, binary=True) == wilson_ci(20, 20)
    assert task_bootstrap_ci(np.zeros(40), np.repeat(list('abcd'), 10), binary=True) == wilson_ci(0, 4)
    with pytest.raises(ValueError, match='binary=True, but every value is 2'):
        bootstrap_ci([2.0] * 5, binary=True)


@pytest.mark.parametrize('metric, value', [('steps', 1), ('tool_errors', 0), ('reward', 0.0)])
def test_evaluate_reports_no_interval_for_a_constant_non_rate(metric, value):
    "evaluate's summary (mean reward) and the leaderboard (steps, tool_errors) read constant 0/1 values as a rate"
    r = _agent('a', value, metric=metric)
    lb = _quiet(leaderboard, [r, _agent('b', value + 1, metric=metric)], metric=metric)
    assert lb['low'].isna().all() and lb['high'].isna().all()
    if metric == 'reward':
        s = _quiet(r.summary)
        assert math.isnan(s['reward_low']) and math.isnan(s['reward_high'])
        assert not math.isnan(s['success_low'])   # success is a rate: Wilson's interval, as before


@pytest.mark.parametrize('n, paired, p', [(2000, False, np.finfo(float).tiny), (200, False, 2 / math.comb(400, 200)),
                                          (200, True, 2 / 2 ** 200), (12, False, 2 / math.comb(24, 12))])
def test_constant_samples_get_the_exact_p_counted(n, paired, p):
    "Two constant samples: 100,000 drawn relabellings (8 s at n = 2000) bounded p by 2e-5; the exact p is counted"
    c = _quiet(compare_samples, np.full(n, 0.7), np.full(n, 0.3), paired=paired)
    assert c.primary == 'permutation' and c.tests['permutation']['exact'] and c.p_value == p


@pytest.mark.parametrize('a, b, paired', [(np.full(3, .7), np.full(2, .2), False), (np.full(2, 5.), np.full(4, 1.), False),
                                          (np.array([.9, .7, .5, .4]), np.array([.7, .5, .3, .2]), True)])
def test_the_counted_p_is_what_scipy_counts(a, b, paired):
    scipy = stats.permutation_test((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis),
                                   permutation_type='samples' if paired else 'independent')
    assert _quiet(compare_samples, a, b, paired=paired).tests['permutation']['pvalue'] == pytest.approx(scipy.pvalue, abs=1e-12)


def test_plan_replicates_on_a_pilot_whose_runs_all_agree():
    "paired_power was 1.0 for any effect and tasks_needed divided by 0: plan_replicates said 1.0, then crashed"
    pilot = measure_noise(_agent('agrees', True, attempts=3, tasks=10))
    assert pilot.within_var == 0
    with pytest.warns(UserWarning, match='no noise measured'):
        plan = plan_replicates(pilot)
    assert plan.power_at_1_run.isna().all() and (plan.power_at_1_run != 1.0).all()
    assert plan.replicates.isna().all() and plan.tasks_at_1_run.isna().all()
    assert math.isnan(paired_power(0.1, 10, 1, 0.0))
    for plan_one in (lambda: tasks_needed(0.1, 1, 0.0), lambda: replicates_needed(0.1, 10, 0.0)):
        with pytest.raises(ValueError, match='no spread measured'):
            plan_one()


def test_inside_noise_is_unknown_where_no_noise_was_measured():
    "8 tasks whose runs all agree: the floor is NaN, and inside_noise said False ('outside the noise')"
    lb = _quiet(leaderboard, [_agent('x', True, tasks=8), _agent('y', False, tasks=8)])
    assert math.isnan(lb.noise_floor[1]) and pd.isna(lb.inside_noise[1]) and lb.inside_noise[0] is np.False_
    cmp = _quiet(compare_checkpoints, _agent('x', True, tasks=8), _agent('y', False, tasks=8))
    assert math.isnan(cmp.noise_floor) and cmp.inside_noise is None
    assert 'noise not measured' in cmp.summary() and 'nan' not in cmp.summary()
    assert 'noise not measured' in measure_noise(_agent('x', True, tasks=8))._repr_markdown_()


def test_wilson_at_zero_and_all_successes_is_exact():
    "wilson_ci_ess(0, 3) was (5.55e-17, ...): the leaderboard showed a constant agent's low as 5.55e-17"
    for n in [*range(1, 200), 2.5, 17.3]:
        assert wilson_ci_ess(0.0, n)[0] == 0.0 and wilson_ci_ess(1.0, n)[1] == 1.0
        if n == int(n): assert wilson_ci(0, int(n))[0] == 0.0 and wilson_ci(int(n), int(n))[1] == 1.0
    lb = _quiet(leaderboard, [_agent('x', True), _agent('y', False)])
    assert lb.set_index('agent')['low']['y'] == 0.0 and lb.set_index('agent')['high']['x'] == 1.0


def test_wilcoxon_of_pairs_that_are_all_equal_says_its_p_is_exact():
    "review23 exactkey.py: every pair equal gave {'statistic': 0.0, 'pvalue': 1.0} with no 'exact', so the table showed NaN"
    from knowlyr_lab.stats import _paired_tests
    assert _paired_tests(np.array([.2, .5, .7]), np.array([.2, .5, .7]), False)['wilcoxon'] == {'statistic': 0.0, 'pvalue': 1.0, 'exact': True}
    t = compare_samples([.2, .5, .7], [.2, .5, .7], paired=True).table()
    assert t.loc['wilcoxon', 'exact'] is True   # on main: NaN, as for the t tests


@pytest.mark.parametrize('v,n,m', [(.2, 3, 2), (.1, 7, 5), (.3, 11, 6), (.7, 20, 9)])
def test_identical_constant_samples_get_no_evidence_of_a_difference_from_welch(v, n, m):
    "n and m copies of one score: float64's means differ in the last bit, so Welch's t was finite: p 0.0003 for 20 x 0.7 against 9 x 0.7"
    c = _quiet(compare_samples, [v] * n, [v] * m)
    assert c.primary == 'welch_t' and c.tests['welch_t']['pvalue'] == 1.0 and math.isnan(c.tests['welch_t']['statistic']), c.tests
    assert _quiet(compare_samples, [1.0] * n, [1.0] * m).tests['welch_t']['pvalue'] == 1.0   # as scipy's 0/0 for 1.0 gives
    assert c.tests.get('permutation', {'pvalue': 1.0})['pvalue'] == 1.0   # counted where C(n + m, n) <= 100,000


def test_paired_t_reads_pairs_one_ulp_apart_as_written_as_the_permutation_test_does():
    "3 pairs each one ulp up (1e-16 as written): no_spread called the means equal, so paired_t said p = 1 where the permutation test of the scores as written says 0.25"
    from knowlyr_lab.permutation import permutation
    b = np.array([.5, .6, .7]); a = np.nextafter(b, 1)   # 0.5000000000000001 ...: every pair up by 1e-16 as written
    c = _quiet(compare_samples, a, b, paired=True)
    assert math.isnan(c.tests['paired_t']['pvalue']) and c.primary == 'permutation', c.tests   # main: paired_t p 1.0, primary
    assert c.p_value == permutation(a, b, True)['pvalue'] == 0.25
    b = np.array([.1, .7, .3]); a = np.nextafter(b, 1)   # up by 2e-17, 1e-16, 4e-17 as written: spread
    c = _quiet(compare_samples, a, b, paired=True)
    assert c.primary == 'paired_t' and c.p_value == stats.ttest_rel(a, b).pvalue < 0.25, c.tests   # main: p 1.0

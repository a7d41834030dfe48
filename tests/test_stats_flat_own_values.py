"Unpaired samples are flat for the difference's interval only on their own values (float64's rounding of themselves), never because of the gap between them"
import warnings

import numpy as np
import pandas as pd
import pytest

from knowlyr_lab.eval.evaluate import EPISODE_COLUMNS, EvalResult, compare_agents
from knowlyr_lab.stats import compare_many, compare_samples

FAR = {   # samples with spread, far from each other: on main (8d4aab2c) no_spread(a - mean(b)) called them constant
    '1, 2, 3 vs 5e12': ([1., 2, 3], [5e12] * 3),
    '0.1 .. 0.4 vs 1e12': ([.1, .2, .3, .4], [1e12] * 4),
    '0.1 .. 0.4 vs 1e12, 1e12 + 1e-3': ([.1, .2, .3, .4], [1e12, 1e12 + 1e-3, 1e12, 1e12]),
    '1e-13, 2e-13, 3e-13 vs 0': ([1e-13, 2e-13, 3e-13], [0.] * 3),   # tiny, and its own: not rounding beside 1
}
ROUNDING = {   # 8d4aab2c's cases: constant up to one float64 step of their own values
    '0.1 x 5 vs 0.1 + 0.2, 0.3 x 4': ([.1] * 5, [.1 + .2, .3, .3, .3, .3]),
    '1 x 3 vs 1 + 2**-52, 1, 1': ([1., 1, 1], [1 + 2 ** -52, 1, 1]),
}


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return f(*args, **kwargs)


@pytest.mark.parametrize('name', list(FAR))
def test_spread_beside_a_gap_keeps_its_bootstrap_interval(name):
    a, b = FAR[name]
    c = compare_samples(a, b)
    assert (c.ci_method, c.notes) == ('bootstrap', []), (c.diff_ci, c.notes)
    assert c.diff_ci[0] < c.diff < c.diff_ci[1]


def test_the_reviews_interval_is_the_one_before_the_regression():
    "8d4aab2c^ gave (-4999999999999.0, -4999999999997.0); 8d4aab2c (nan, nan), method 'none', 'both samples are constant'"
    assert compare_samples([1., 2, 3], [5e12] * 3).diff_ci == (-4999999999999.0, -4999999999997.0)


@pytest.mark.parametrize('name', list(ROUNDING))
def test_samples_flat_to_their_own_rounding_get_no_interval(name):
    a, b = ROUNDING[name]
    with pytest.warns(UserWarning, match='both samples are constant'): c = compare_samples(a, b)
    assert c.ci_method == 'none' and np.isnan(c.diff_ci).all() and c.notes[0].startswith('both samples are constant')


def test_spread_of_four_steps_is_spread():
    "1e16 + 2, + 10, + 6 spread by 8, four float64 steps of 2: an interval, as on main"
    c = compare_samples(np.r_[1e16 + 2, 1e16 + 10, 1e16 + 6], np.r_[1e16, 1e16 + 4, 1e16])
    assert (c.ci_method, c.notes) == ('bootstrap', []) and c.diff_ci[0] < c.diff < c.diff_ci[1]


def test_paired_differences_are_judged_as_differences():
    "Paired, a - b is what the bootstrap resamples: equal differences get no interval however far apart the samples"
    flat = _quiet(compare_samples, [1., 2, 3], [1 + 5e12, 2 + 5e12, 3 + 5e12], paired=True)
    assert flat.ci_method == 'none' and flat.notes[-1].startswith('every pair differs by')
    step = _quiet(compare_samples, [.1 + .2, .3, .3], [0., 0, 0], paired=True)   # differences one float64 step apart
    assert step.ci_method == 'none' and np.isnan(step.diff_ci).all()
    spread = compare_samples([.1, .5, .2, .9], [1e3] * 4, paired=True)
    assert spread.ci_method == 'bootstrap' and spread.diff_ci[0] < spread.diff < spread.diff_ci[1]


def test_callers_report_the_interval():
    "compare_many and compare_agents (unpaired, no shared tasks) pass the interval on"
    df = compare_many({'big': [5e12] * 3, 'small': [1., 2, 3]}, reference='big')
    assert (df.diff_low[0], df.diff_high[0]) == (-4999999999999.0, -4999999999997.0)
    rows = lambda agent, values, tag: [{'agent': agent, 'task_id': f'{tag}{t}', 'task_key': f'{tag}{t}', 'attempt': 0, 'seed': 0,
                                        'success': True, 'verified': True, 'reward': v, 'steps': 3, 'tool_errors': 0,
                                        'cost': 0.0, 'tokens': 0, 'duration': 1.0, 'reason': '', 'valid': True,
                                        'invalid': None, 'trajectory_id': f'{agent}{t}'} for t, v in enumerate(values)]
    a, b = (EvalResult(n, pd.DataFrame(rows(n, v, n), columns=EPISODE_COLUMNS)) for n, v in (('a', [1., 2, 3]), ('b', [5e12] * 3)))
    c = _quiet(compare_agents, a, b, metric='reward')
    assert not c.paired and c.ci_method == 'bootstrap' and c.diff_ci == (-4999999999999.0, -4999999999997.0), (c.diff_ci, c.notes)


# stats20: one rule, no_spread (page 08b) -- three float64 steps of the magnitude the values were computed from
def test_exactly_written_spread_near_5e12_gets_a_bootstrap_interval():
    "1e-12 x 5e12 is 5: no_spread called 5e12 + 1, + 2, + 3 flat, so bootstrap_ci gave (nan, nan)"
    from knowlyr_lab.intervals import bootstrap_ci
    lo, hi = bootstrap_ci([5e12 + 1, 5e12 + 2, 5e12 + 3])
    assert 5e12 + 1 <= lo < 5e12 + 2 < hi <= 5e12 + 3, (lo, hi)


def test_paired_differences_spread_by_3_beside_5e12_are_spread():
    "Differences 1 - 5e12, 2 - 5e12, 4 - 5e12 spread by 3, within 1e-12 of 5e12: CI (nan, nan), method 'none', d_z NaN"
    c = compare_samples([1., 2, 4], [5e12] * 3, paired=True)
    assert (c.ci_method, c.notes) == ('bootstrap', []) and c.diff_ci[0] < c.diff < c.diff_ci[1], (c.diff_ci, c.notes)
    assert np.isfinite(c.effect_size) and c.effect_size < 0


def test_cohens_d_of_a_sample_spread_near_5e12_is_defined():
    c = compare_samples([5e12 + 1, 5e12 + 2, 5e12 + 3], [0., 0, 0])
    assert c.ci_method == 'bootstrap' and np.isfinite(c.effect_size) and c.effect_size > 0, (c.diff_ci, c.effect_size)


def test_paired_differences_equal_to_the_rounding_of_their_scores_are_flat():
    "1.3 - 1.1, 0.9 - 0.7, 0.7 - 0.5 differ by half a float64 step of 1.3 (four of 0.2): no interval, no d_z"
    c = _quiet(compare_samples, [1.3, .9, .7], [1.1, .7, .5], paired=True)
    assert c.ci_method == 'none' and np.isnan(c.diff_ci).all() and np.isnan(c.effect_size)


def test_flat_samples_past_int64_reads_differences_beside_their_scores():
    "Scores _written_ints cannot hold (17 decimals beside 1000 or 5e12) are judged in float64 by the same rule"
    from knowlyr_lab.permutation import _written_ints, flat_samples
    a, b = np.r_[.1 + .2, 1000.7], np.r_[.1, 1000.5]   # differences 4e-14 apart: rounding of 1000.7
    assert _written_ints(np.r_[a, b]) is None and flat_samples(a, b, True) == (True, False)
    a, b = np.r_[1, 2, .1 + .2], np.full(3, 5e12)   # differences spread by 1.7, within 1e-12 of 5e12
    assert _written_ints(np.r_[a, b]) is None and flat_samples(a, b, True) == (False, False)
    assert flat_samples(np.r_[.1 + .2, 1e5], np.r_[.3, 1e5], False) == (False, True)   # means equal to rounding of 1e5
    assert flat_samples(np.r_[.1 + .2, 1e5], np.r_[.3, 2e5], False) == (False, False)


def _result(agent, rewards):
    rows = [{'agent': agent, 'task_id': f't{t}', 'task_key': f't{t}', 'attempt': 0, 'seed': 0, 'success': True, 'verified': True,
             'reward': v, 'steps': 3, 'tool_errors': 0, 'cost': 0.0, 'tokens': 0, 'duration': 1.0, 'reason': '', 'valid': True,
             'invalid': None, 'trajectory_id': f'{agent}{t}'} for t, v in enumerate(rewards)]
    return EvalResult(agent, pd.DataFrame(rows, columns=EPISODE_COLUMNS))


def test_compare_runs_judges_cells_beside_the_scores_they_come_from():
    "compare_runs passes the runs' scores to crossed_bootstrap: 1.3 - 1.1, 0.9 - 0.7, 0.7 - 0.5 are alike (no CI); 1, 2, 4 less 5e12 are not"
    from knowlyr_lab.eval.evaluate import compare_runs
    same = _quiet(compare_runs, [_result('a', [1.3, .9, .7])] * 2, [_result('b', [1.1, .7, .5])] * 2, metric='reward')['crossed']
    assert np.isnan(same.ci).all() and same.notes[0].startswith('every cell differs by +0.2'), (same.ci, same.notes)
    far = _quiet(compare_runs, [_result('a', [1., 2, 4]), _result('a', [2., 4, 1])], [_result('b', [5e12] * 3)] * 2,
                 metric='reward')['crossed']   # main: 'every cell differs by -5e+12', CI (nan, nan)
    assert far.ci[0] < far.mean < far.ci[1] and not any('every cell' in n for n in far.notes), (far.ci, far.notes)

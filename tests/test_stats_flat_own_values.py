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

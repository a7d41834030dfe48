"Intervals of a paired difference: a score interval where the bootstrap has no spread, the bootstrap unchanged where it has"
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from knowlyr_lab.intervals import newcombe_paired_ci
from knowlyr_lab.replicates import crossed_bootstrap
from knowlyr_lab.stats import bootstrap_ci, compare_samples, task_bootstrap_ci, wilson_ci

ROOT = Path(__file__).resolve().parents[1]

# Newcombe (1998), Statistics in Medicine 17:2635-2650, Table II, method 10: (both, A only, B only, neither) -> 95% CI
NEWCOMBE_TABLE_II = {(36, 12, 2, 0): (0.0569, 0.3404), (18, 12, 2, 18): (0.0562, 0.3290),
                     (53, 0, 0, 1): (-0.0729, 0.0729), (0, 30, 0, 0): (0.8395, 1.0)}

@pytest.mark.parametrize('cells,ci', NEWCOMBE_TABLE_II.items())
def test_newcombe_paired_matches_published_table(cells, ci):
    assert newcombe_paired_ci(*cells) == pytest.approx(ci, abs=6e-5)

def test_readme_example_is_not_certain():
    "README's expert vs random on 20 tasks printed `95% CI +1.000 to +1.000` and `effect size inf`"
    c = compare_samples([1] * 20, [0] * 20, paired=True, name_a='expert', name_b='random', metric='success')
    assert c.diff_ci == pytest.approx((0.7721, 1.0), abs=1e-4) and c.diff_ci == newcombe_paired_ci(0, 20, 0, 0)
    assert math.isnan(c.effect_size) and 'CI +0.772 to +1.000' in c.summary() and 'effect size undefined' in c.summary()
    assert c.p_value == pytest.approx(2 * 0.5 ** 20)                       # the test was right all along

def test_nothing_solved_on_either_side_is_not_certain():
    "0/40 vs 0/40 printed `diff +0.000 (95% CI +0.000 to +0.000)`"
    c = compare_samples([0] * 40, [0] * 40, paired=True)
    assert c.diff_ci == pytest.approx((-0.0876, 0.0876), abs=1e-4) and math.isnan(c.effect_size)
    u = compare_samples([0] * 40, [0] * 40)                              # unpaired: Newcombe's method 10 for independent rates
    assert u.diff_ci[0] < -0.05 and u.diff_ci[1] > 0.05 and 'Newcombe' in u.notes[-1]

def test_equal_continuous_differences_get_no_interval_and_a_warning():
    with pytest.warns(UserWarning, match='no spread'):
        c = compare_samples([0.5, 0.7, 0.9], [0.3, 0.5, 0.7], paired=True, metric='reward')
    assert all(math.isnan(x) for x in c.diff_ci) and '(no CI)' in c.summary() and 'zero-width' in c.notes[-1]
    with pytest.warns(UserWarning, match='no spread'):
        flat = crossed_bootstrap(np.full((3, 10), 0.2))
    assert all(math.isnan(x) for x in flat.ci) and flat.pvalue == pytest.approx(2 * 0.5 ** 10)

def test_crossed_bootstrap_of_a_constant_binary_table():
    "All +1 over 3 runs x 20 tasks: the tasks are the unit, not the 60 cells; p is the sign test over the tasks"
    r = crossed_bootstrap(np.ones((3, 20)), binary=True)
    assert r.ci == newcombe_paired_ci(0, 20, 0, 0) and r.pvalue == pytest.approx(2 * 0.5 ** 20)
    z = crossed_bootstrap(np.zeros((3, 54)), binary=True)   # the both-solved / both-failed split is unknown: the widest
    assert z.ci == pytest.approx((-0.0729, 0.0729), abs=6e-5) and z.pvalue == 1.0

def _exp05_tables():
    "Experiment 05's per-task success of each arm and warm start, from its committed episodes.csv"
    e = pd.read_csv(ROOT / 'experiments/results/05_real_model/episodes.csv')
    def vals(part, ev): x = e[(e.part == part) & (e.evaluation == ev)]; return dict(zip(x.fingerprint, x.success.astype(float)))
    return {'grpo vs shuffled': ([vals(f'grpo-{i}', 'after') for i in range(3)], [vals(f'shuffled-{i}', 'after') for i in range(3)]),
            'grpo vs warm start': ([vals(f'grpo-{i}', 'after') for i in range(3)], [vals(f'grpo-{i}', 'before') for i in range(3)])}

@pytest.mark.parametrize('name,quoted', [('grpo vs shuffled', '+82.5% (+73.7% to +89.8%;'),
                                         ('grpo vs warm start', '+37.2% (+26.0% to +50.5%;')])
def test_committed_intervals_do_not_move(name, quoted):
    "Non-degenerate intervals are the bootstrap's as before: experiment 05's, recomputed from its raw outcomes"
    res = json.loads((ROOT / 'experiments/results/05_real_model/results.json').read_text())['comparisons'][name]
    va, vb = _exp05_tables()[name]
    tasks = sorted(set().union(*(set(x) & set(y) for x, y in zip(va, vb))))
    diff = np.array([[x[t] - y[t] for t in tasks] for x, y in zip(va, vb)])
    c = crossed_bootstrap(diff, binary=True)
    assert list(c.ci) == res['ci'] and c.pvalue == res['p_bootstrap'] and c.mean == pytest.approx(res['estimate'], abs=1e-12)
    for run, x, y in zip(res['runs'], va, vb):   # per-run intervals are now Newcombe's (results.json kept the bootstrap's)
        a, b = np.array([x[t] for t in tasks]), np.array([y[t] for t in tasks])
        cells = [int(((a == i) & (b == j)).sum()) for i, j in ((1, 1), (1, 0), (0, 1), (0, 0))]
        assert compare_samples(a, b, paired=True).diff_ci == newcombe_paired_ci(*cells)
        assert compare_samples(a, b, paired=True).diff == pytest.approx(run['diff'], abs=1e-12)
    assert quoted in (ROOT / 'README.md').read_text()

def test_sleep_data_interval_unchanged():
    "The statistics page's paired bootstrap interval (Cushny & Peebles), as printed before"
    drug1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
    drug2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]
    c = compare_samples(drug1, drug2, paired=True)
    assert np.round(c.diff_ci, 3).tolist() == [-2.61, -1.07] and c.effect_size == pytest.approx(-1.2845, abs=1e-4)


def test_nineteen_of_twenty_discordant_gets_newcombe_not_the_bootstrap():
    "19 of 20 pairs won by A alone: the percentile bootstrap said +0.75 to +1.00 (it cannot pass the observed 0.95's resamples)"
    from statsmodels.stats.proportion import confint_proportions_2indep
    c = compare_samples([1] * 19 + [0], [0] * 20, paired=True)
    lo19, hi19 = wilson_ci(19, 20); hi0 = wilson_ci(0, 20)[1]
    by_hand = (0.95 - math.sqrt((0.95 - lo19) ** 2 + hi0 ** 2), hi19)        # Newcombe's method 10 with phi = 0
    assert c.diff_ci == pytest.approx(by_hand, abs=1e-12) and c.diff_ci == pytest.approx((0.7038, 0.9911), abs=1e-4)
    assert c.diff_ci == pytest.approx(confint_proportions_2indep(19, 20, 0, 20, method='newcomb'), abs=1e-12)
    assert c.diff_ci[0] < c.diff - 0.2 and c.diff_ci[1] < 1 and c.ci_method == 'newcombe_paired'
    m = compare_samples([1] * 9 + [0] + [1] * 5 + [0] * 5, [0] * 9 + [1] + [1] * 5 + [0] * 5, paired=True)
    assert m.diff_ci == newcombe_paired_ci(5, 9, 1, 5) and m.ci_method == 'newcombe_paired'   # every paired 0/1 comparison
    r = crossed_bootstrap(np.array([[1.] * 19 + [0]] * 2 + [[1.] * 18 + [0, -1]]), binary=True)
    assert r.per_run[0]['ci'][0] < 0.71 and r.per_run[0]['ci'][1] < 1     # each run's own interval too

def test_constant_binary_sample_gets_wilson_not_a_point():
    "bootstrap_ci([1] * 20) was (1.0, 1.0): certainty from 20 episodes (a 0/1 rate, as the caller says: binary=True)"
    assert bootstrap_ci([1.0] * 20, binary=True) == wilson_ci(20, 20) and bootstrap_ci([0] * 40, binary=True) == wilson_ci(0, 40)
    assert bootstrap_ci([1.0] * 20, binary=True)[0] == pytest.approx(0.8389, abs=1e-4)
    with pytest.warns(UserWarning, match='no spread'):
        assert all(math.isnan(x) for x in bootstrap_ci([0.5] * 3))
    assert task_bootstrap_ci(np.ones(100), np.repeat(list('abcde'), 20), binary=True) == wilson_ci(5, 5)   # 5 tasks, not 100


def test_two_constant_tasks_a_side_get_no_p_of_zero():
    "2 tasks vs 2, all solved vs none (per-task means, not 0/1 outcomes): Welch's t was infinite and its p 0 -- certainty from 4 numbers"
    with pytest.warns(UserWarning, match='no spread'):
        c = compare_samples([1.0, 1.0], [0.0, 0.0], binary=False)
    assert c.p_value >= 1 / 6 and c.p_value == pytest.approx(1 / 3) and c.primary == 'permutation'   # 2 of 6 splits
    assert not any(t['pvalue'] == 0 or math.isinf(t['statistic']) for t in c.tests.values()) and math.isnan(c.effect_size)
    with pytest.warns(UserWarning, match='no spread'):   # paired: every pair +0.2, to rounding (the t was 7e15, d_z 5e15)
        p = compare_samples([0.5, 0.7], [0.3, 0.5], paired=True)
    assert p.p_value == pytest.approx(0.5) and math.isnan(p.tests['paired_t']['statistic']) and math.isnan(p.effect_size)


def test_compare_agents_on_two_tasks_a_side_gives_no_p_of_zero():
    "compare_agents(paired=False), 2 tasks x 3 attempts a side, all solved vs none: 'welch_t p=0' (page 71's example)"
    from knowlyr_lab.eval.evaluate import EPISODE_COLUMNS, EvalResult
    def agent(name, ok):
        rows = [dict(agent=name, task_id=f'{name}{t}', task_key=f'{name}{t}', attempt=a, seed=a, success=ok, verified=True,
                     reward=float(ok), steps=3, tool_errors=0, cost=0.0, tokens=0, duration=1.0, reason='', valid=True,
                     invalid=None, trajectory_id=f'{name}{t}-{a}') for t in range(2) for a in range(3)]
        return EvalResult(name, pd.DataFrame(rows, columns=EPISODE_COLUMNS))
    from knowlyr_lab.eval.evaluate import compare_agents
    with pytest.warns(UserWarning):
        c = compare_agents(agent('x', True), agent('y', False))
    assert (c.n_a, c.n_b, c.paired) == (2, 2, False) and c.p_value == pytest.approx(1 / 3) and 'p=0.333' in c.summary()

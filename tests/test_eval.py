"Evaluation statistics checked against scipy/statsmodels and brute force, and evaluate_agent on a real env"
import math
import warnings
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.eval.evaluate import EPISODE_COLUMNS, EvalResult, compare_agents, compare_runs, evaluate_agent, leaderboard
from knowlyr_lab.intervals import newcombe_paired_ci
from knowlyr_lab.stats import adjust_pvalues, bootstrap_ci, compare_samples, pass_at_k, wilson_ci

RNG = np.random.default_rng(2024)
VECTORS = [(RNG.normal(0, 1, n), RNG.normal(d, s, m)) for n, m, d, s in [(5, 7, 0.5, 1), (20, 20, 0.3, 2), (40, 33, 0, 1), (3, 3, 2, 0.5)]]

@pytest.mark.parametrize('a,b', VECTORS)
def test_unpaired_tests_match_scipy(a, b):
    c = compare_samples(a, b)
    t = stats.ttest_ind(a, b, equal_var=False)
    assert c.tests['welch_t']['statistic'] == pytest.approx(t.statistic) and c.tests['welch_t']['pvalue'] == pytest.approx(t.pvalue)
    u = stats.mannwhitneyu(a, b, alternative='two-sided', method='exact')   # untied: counted exactly at any size
    assert c.tests['mann_whitney_u']['pvalue'] == pytest.approx(u.pvalue, rel=1e-12) and c.tests['mann_whitney_u']['exact']
    assert c.primary == 'welch_t' and c.p_value == pytest.approx(t.pvalue)

def test_three_vs_three_is_not_significant():
    "The seed's |t| bucketing called this p<0.05; the exact Welch p is far larger"
    c = compare_samples([0.9, 0.8, 0.7], [0.7, 0.6, 0.65])
    t = stats.ttest_ind([0.9, 0.8, 0.7], [0.7, 0.6, 0.65], equal_var=False)
    assert c.p_value == pytest.approx(t.pvalue) and c.p_value > 0.05

@pytest.mark.parametrize('a,b', [(x, x + RNG.normal(0.2, 0.5, len(x))) for x, _ in VECTORS])
def test_paired_tests_match_scipy(a, b):
    c = compare_samples(a, b, paired=True)
    assert c.tests['paired_t']['pvalue'] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert c.tests['wilcoxon']['pvalue'] == pytest.approx(stats.wilcoxon(a, b).pvalue)
    d = a - b
    assert c.effect_size == pytest.approx(d.mean() / d.std(ddof=1))

def test_binary_tests():
    a = np.array([1] * 12 + [0] * 8); b = np.array([1] * 4 + [0] * 16)
    c = compare_samples(a, b)
    assert c.primary == 'fisher_exact' and c.p_value == pytest.approx(stats.fisher_exact([[12, 8], [4, 16]]).pvalue)
    # paired: discordant pairs a-only=8, b-only=0 -> exact McNemar = two-sided binomial(0; 8, 1/2) = 2/256
    p = compare_samples(a, np.array([1] * 4 + [0] * 16), paired=True)
    assert p.primary == 'mcnemar_exact' and p.p_value == pytest.approx(2 / 256)

def test_welch_textbook():
    "R ?t.test sleep data: Welch t = -1.8608, df = 17.776, p = 0.07939; paired t = -4.0621, p = 0.002833"
    x = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]; y = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]
    c = compare_samples(x, y, paired=True)
    assert c.tests['welch_t']['statistic'] == pytest.approx(-1.8608, abs=1e-4) and c.tests['welch_t']['df'] == pytest.approx(17.776, abs=1e-3)
    assert c.tests['welch_t']['pvalue'] == pytest.approx(0.07939, abs=1e-5)
    assert c.tests['paired_t']['statistic'] == pytest.approx(-4.0621, abs=1e-4) and c.p_value == pytest.approx(0.002833, abs=1e-6)
    # Welch's own example on Wikipedia ("Welch's t-test", example 1): t = -2.46, df = 25.0, p = 0.021 (moved from page 09)
    a1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    a2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    w = compare_samples(a1, a2).tests['welch_t']
    assert (w['statistic'], w['df'], w['pvalue']) == (pytest.approx(-2.46, abs=5e-3), pytest.approx(25.0, abs=0.05), pytest.approx(0.021, abs=5e-4))

def test_wilson_known_values():
    assert wilson_ci(81, 263) == pytest.approx((0.2553, 0.3662), abs=6e-5)
    assert wilson_ci(0, 20) == pytest.approx((0.0, 0.1611), abs=6e-5)
    from statsmodels.stats.proportion import proportion_confint
    for k, n in [(3, 7), (10, 10), (55, 120)]: assert wilson_ci(k, n) == pytest.approx(proportion_confint(k, n, method='wilson'))

@pytest.mark.parametrize('n', range(1, 9))
def test_pass_at_k_brute_force(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            subsets = list(combinations([1] * c + [0] * (n - c), k))
            assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)

def test_holm_matches_statsmodels_and_dominates_raw():
    from statsmodels.stats.multitest import multipletests
    p = RNG.uniform(0, 0.1, 7)
    for m in ('holm', 'bonferroni', 'fdr_bh'):
        adj, rej = adjust_pvalues(p, m)
        ref = multipletests(p, method=m)
        assert np.allclose(adj, ref[1]) and (rej == ref[0]).all() and (adj >= p - 1e-15).all()

def test_bootstrap_interval_covers_mean():
    x = RNG.exponential(1, 300)
    lo, hi = bootstrap_ci(x)
    assert lo < x.mean() < hi

@pytest.fixture(scope='module')
def evals():
    e = evaluate_agent(ExpertAgent(), 'knowlyr/maze-medium', n_tasks=12)
    r = evaluate_agent(RandomAgent(), 'knowlyr/maze-medium', n_tasks=12, max_episode_steps=25)
    return e, r

def test_evaluate_and_compare(evals):
    e, r = evals
    assert e.summary()['success_rate'] == 1.0 and r.summary()['success_rate'] < 0.5
    c = compare_agents(e, r)
    assert c.paired and c.primary == 'mcnemar_exact'
    k = c.tests['mcnemar_exact']['a_only']
    assert c.p_value == pytest.approx(stats.binomtest(c.tests['mcnemar_exact']['b_only'], k + c.tests['mcnemar_exact']['b_only'], 0.5).pvalue)
    board = leaderboard([r, e])
    assert list(board.agent) == ['expert', 'random'] and board.sig[0] == 'best'

def test_unverified_episodes_are_reported():
    "An env without a verdict: success is unknown, not failure"
    from knowlyr_lab.core import AgentEnv, TimeStep, tool_schema
    class NoVerdict(AgentEnv):
        @property
        def tool_schemas(self): return [tool_schema('finish')]
        def list_tasks(self): return [{'id': f't{i}'} for i in range(3)]
        def _reset(self, task=None, seed=None): return TimeStep('go', info={'task': {'id': (task or {}).get('id', 't0')}})
        def _step(self, tool, params): return TimeStep('done', 0.5, terminated=True)
    class Finisher:
        name = 'finisher'
        def __call__(self, obs, history): return {'tool': 'finish', 'params': {}}
    res = evaluate_agent(Finisher(), NoVerdict, n_tasks=3)
    s = res.summary()
    assert s['n_unverified'] == 3 and math.isnan(s['success_rate']) and s['mean_reward'] == 0.25   # trajectory_score: 0 + 0.5 * 0.5


def _repeated(agent='A'):
    "5 distinct tasks x 20 attempts, each task's outcome and reward the same on every attempt"
    import pandas as pd
    rows = [dict(agent=agent, task_id=f't{t}', task_key=f't{t}', attempt=a, seed=a, success=bool(ok), verified=True, reward=r,
                 steps=3, tool_errors=0, cost=0.0, tokens=0, duration=1.0, reason='', valid=True, invalid=None,
                 trajectory_id=f'{t}-{a}')
            for t, (ok, r) in enumerate([(0, .0), (0, .2), (1, 1.1), (1, 1.3), (1, 1.5)]) for a in range(20)]
    return EvalResult(agent, pd.DataFrame(rows, columns=EPISODE_COLUMNS))

def test_reward_interval_resamples_tasks_not_attempts():
    "The reward interval of repeated attempts is as wide as 5 task means make it, like the success interval (ESS 5)"
    r = _repeated(); s = r.summary()
    task_means = r.episodes.groupby('task_key').reward.mean()
    plo, phi = bootstrap_ci(r.episodes.reward)                        # per episode: 100 'independent' values
    assert s['ess'] == pytest.approx(5.0)
    assert s['reward_high'] - s['reward_low'] > 3 * (phi - plo)
    assert s['reward_low'] < task_means.mean() < s['reward_high']
    lb = leaderboard([r], metric='reward')
    assert (lb['high'] - lb['low']).iloc[0] == pytest.approx(s['reward_high'] - s['reward_low'])

def test_a_constant_reward_warns_once_in_the_words_of_the_summary():
    "Reward 1 on every task warned on every summary() and display, with a hint (binary=True) that summary() cannot take"
    r = _repeated(); r.episodes['reward'] = 1.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        s = r.summary(); r.summary(); repr(r); r._repr_markdown_(); lb = leaderboard([r], metric='reward')
    assert [str(w.message) for w in caught] == ["A: all 100 reward values are 1: no spread, so no CI (NaN); "
                                                "the 0/1 success's CI is success_low to success_high"]
    assert math.isnan(s['reward_low']) and math.isnan(s['reward_high']) and lb['low'].isna().all()
    with pytest.warns(UserWarning, match='^A: all 100 steps values are 3: no spread, so no CI \\(NaN\\)$') as steps:
        assert all(math.isnan(x) for _ in range(2) for x in r.mean_ci('steps'))   # another column: its own warning, once
    assert len(steps) == 1

def test_compare_agents_unpaired_counts_tasks_not_attempts():
    "compare_agents(paired=False) on 5 tasks x 20 identical attempts took 100 episodes per agent as independent: the CI was too narrow"
    a, b = _repeated('a'), _repeated('b'); b.episodes['success'] = b.episodes.task_key.isin(['t0', 't1'])
    with pytest.warns(UserWarning, match='repeat tasks'):
        c = compare_agents(a, b, paired=False)
    naive = compare_samples(a.episodes.success.astype(float), b.episodes.success.astype(float))   # attempts as episodes
    assert c.diff == pytest.approx(naive.diff) and (c.diff_ci[1] - c.diff_ci[0]) > 2 * (naive.diff_ci[1] - naive.diff_ci[0])
    per_task = compare_samples(list(a.task_values('success').values()), list(b.task_values('success').values()), binary=False)
    assert (c.n_a, c.n_b, c.diff_ci, c.primary) == (5, 5, per_task.diff_ci, 'welch_t')   # 5 tasks each, not 100 episodes

def test_unpaired_with_one_task_on_a_side_says_one_thing_about_repeats():
    "x ran 1 task 3 times, y 4 tasks 3 times: the notes said x's attempts are compared as independent AND, for each side, that each task's mean attempt is one value"
    x, y = _repeated('x'), _repeated('y')
    x.episodes = x.episodes[x.episodes.task_key == 't2'].head(3).reset_index(drop=True)
    y.episodes = y.episodes[y.episodes.attempt < 3].head(12).reset_index(drop=True)
    with pytest.warns(UserWarning, match='repeat tasks'):
        c = compare_agents(x, y, metric='reward', paired=False)
    assert (c.n_a, c.n_b) == (3, 12)   # every episode is a value: x has no second task to take a mean over
    assert [n for n in c.notes if 'repeat' in n or 'independent' in n] == [
        "x's 3 episodes repeat tasks: effective sample size 1.0; y's 12 episodes repeat tasks: effective sample size 4.0; "
        "x ran fewer than 2 tasks: each episode counts as independent; the test speaks for those tasks only"]


def test_held_out_check_compares_text_tasks_by_content_not_id():
    "Tasks with no fingerprint and no env were compared by id: the training task's text under another id was called held out"
    from knowlyr_lab.tasks import check_held_out, task_key
    train = [{'id': 'train-1', 'instruction': 'Write add(a, b) that returns a + b.'}]
    ev = [{'id': 'eval-1', 'instruction': 'Write add(a, b) that returns a + b.'}, {'id': 'eval-2', 'instruction': 'Write mul(a, b).'}]
    rep = check_held_out(train, ev)
    assert rep.shared == [task_key(train[0])] and not rep.disjoint     # the key the evaluation pairs tasks by
    assert check_held_out(['a', 'b'], ['b', 'c']).shared == ['b']      # bare ids are still compared as ids

def test_arm_comparisons_names_the_per_run_test_it_adjusted():
    "The record said 'per-run exact McNemar' whatever the runs were tested with (a reward, or repeated attempts: paired t)"
    from knowlyr_lab.eval.evaluate import arm_comparisons
    rec = arm_comparisons({'a': [_repeated('a1'), _repeated('a2')], 'b': [_repeated('b1'), _repeated('b2')]}, [('a', 'b')],
                          metric='reward')['a vs b']
    assert {r['test'] for r in rec['runs']} == {'paired_t'}
    assert 'paired_t' in rec['p_adjustment'] and 'McNemar' not in rec['p_adjustment']

def test_an_interval_of_one_value_is_unknown_not_a_point():
    "bootstrap_ci of one value was (v, v): a zero-width interval; one value has no spread to measure"
    assert all(math.isnan(x) for x in bootstrap_ci([0.7])) and all(math.isnan(x) for x in bootstrap_ci([]))
    r = _repeated(); one = EvalResult('A', r.episodes.iloc[:1].reset_index(drop=True))
    s = one.summary()
    assert s['mean_reward'] == 0.0 and math.isnan(s['reward_low']) and math.isnan(s['reward_high'])
    assert not math.isnan(s['success_low'])                                    # Wilson's interval of 1 attempt is wide
    lb = leaderboard([one], metric='steps')
    assert lb['low'].isna().all() and lb['high'].isna().all()

def test_compare_runs_passes_binary_success():
    "Every run solves every task the control fails: a score interval over the tasks, not `+1.000 to +1.000`"
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        ex = evaluate_agent(ExpertAgent(), 'knowlyr/maze-easy', n_tasks=6, max_episode_steps=12)
        rnd = evaluate_agent(RandomAgent(seed=0), 'knowlyr/maze-easy', tasks=list(ex.episodes.task_id), max_episode_steps=2)
        r = compare_runs([ex, ex], [rnd, rnd])
    assert r['crossed'].n_tasks == 6 and r['crossed'].mean == 1.0
    assert r['crossed'].ci == newcombe_paired_ci(0, 6, 0, 0) and (r['runs'].diff_low < 1).all()
    assert compare_agents(ex, rnd).diff_ci == newcombe_paired_ci(0, 6, 0, 0)


def test_episodes_a_remote_server_refused_do_not_crash_the_held_out_check():
    """A remote env server refuses sessions past its per-client cap (429). With no wait for a session
    (session_wait=0) those episodes never reset, so their tasks hold an id only, while the others carry the server's
    fingerprints. evaluate_agent raised ValueError ('task id(s) without a fingerprint ...') from its held-out check
    and lost the whole evaluation; they are invalid episodes. With the default wait, every episode gets a session."""
    import functools

    from knowlyr_lab.envs.remote import AgentGymClient
    from knowlyr_lab.envs.serve import EnvServer, SessionLimits
    with EnvServer('knowlyr/maze-easy', 'agentgym', limits=SessionLimits(max_sessions=4, max_sessions_per_client=2)) as srv:
        remote = functools.partial(AgentGymClient, srv.url, name='maze', step_timeout=30)
        run = functools.partial(evaluate_agent, RandomAgent, remote, tasks=[f'maze-s{s}' for s in range(6)],
                                max_episode_steps=2, progress=False, batch_size=6)
        res, waited = run(session_wait=0), run()
    s = res.summary()
    assert s['n_episodes'] == 6 and s['n_invalid'] >= 1, s          # refused sessions: invalid, not a crash
    assert res.held_out is not None and res.held_out.n_eval == 6 - s['n_invalid'], res.held_out
    w = waited.summary()
    assert (w['n_episodes'], w['n_invalid'], waited.held_out.n_eval) == (6, 0, 6), (w, waited.held_out)

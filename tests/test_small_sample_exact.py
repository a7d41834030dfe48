"Few tasks: rank tests exact wherever they can be counted, and no noise floor or MDE of 0 from runs with no spread"
import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from knowlyr_lab.eval.evaluate import EPISODE_COLUMNS, EvalResult, compare_agents, leaderboard
from knowlyr_lab.eval.noise import compare_checkpoints
from knowlyr_lab.permutation import rank_test
from knowlyr_lab.stats import compare_samples


@pytest.mark.parametrize('n,exact', [(3, 2 / 20), (2, 2 / 6), (4, 2 / 70)])
def test_mann_whitney_of_constant_samples_is_the_exact_p(n, exact):
    "n tasks vs n, all solved vs none: scipy's auto method is asymptotic with ties (3 vs 3: p = 0.047, a false significance)"
    for binary in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)   # the note that the bootstrap has no spread
            c = compare_samples([1.0] * n, [0.0] * n, binary=binary)
        assert c.tests['mann_whitney_u']['pvalue'] == pytest.approx(exact, abs=1e-9)
    assert c.tests['mann_whitney_u']['statistic'] == n * n


def test_mann_whitney_with_some_ties_matches_counting_every_split():
    "8 vs 9 with ties: the exact p is the share of the C(17, 8) splits with U at least as far from its mean"
    from itertools import combinations
    a, b = np.array([3., 3, 2, 2, 1, 1, 1, 1]), np.array([1., 1, 0, 0, 0, 0, 0, 0, 2])
    pooled, n = np.concatenate([a, b]), len(a)
    ranks = stats.rankdata(pooled)
    u = np.array([ranks[list(i)].sum() for i in combinations(range(len(pooled)), n)]) - n * (n + 1) / 2
    u0, mid = ranks[:n].sum() - n * (n + 1) / 2, n * len(b) / 2
    brute = min(1.0, 2 * min((u >= u0 - 1e-9).mean(), (u <= u0 + 1e-9).mean()))
    assert abs(u0 - mid) > 0 and rank_test(a, b, False)['pvalue'] == pytest.approx(brute, abs=1e-12)


def test_wilcoxon_with_ties_on_15_pairs_is_exact():
    "12 pairs up by 1, 2 down, 1 zero: scipy's auto is asymptotic above 13 pairs (p = 0.0075); exact over 2^15 flips: 0.0129"
    a, b = np.array([1.] * 12 + [-1] * 2 + [0]) + 0.5, np.full(15, 0.5)
    c = compare_samples(a, b, paired=True)
    assert c.tests['wilcoxon']['pvalue'] == pytest.approx(0.012939453125, abs=1e-12)
    assert stats.wilcoxon(a, b).pvalue < 0.008   # what scipy's auto method gives



def _re_ranked_p(a, b, paired):
    "The exact p by re-ranking every relabelling (scipy's permutation test of U, or of W+ over the sign flips)"
    if paired:
        def w(x, y, axis=-1):
            d = x - y; r = stats.rankdata(np.where(d == 0, np.nan, np.abs(d)), axis=axis, nan_policy='omit')
            return np.nansum(np.where(d > 0, r, 0), axis=axis)
        return stats.permutation_test((a, b), w, permutation_type='samples', n_resamples=np.inf).pvalue
    u = lambda x, y, axis=-1: stats.rankdata(np.concatenate([x, y], axis=-1), axis=-1)[..., :x.shape[-1]].sum(axis=-1)
    return stats.permutation_test((a, b), u, permutation_type='independent', n_resamples=np.inf).pvalue


def test_rank_test_with_ties_counts_as_re_ranking_every_relabelling():
    "Random small samples with ties: the p from fixed mid-ranks is the p from re-ranking each relabelling, to the bit"
    rng, seen = np.random.default_rng(7), 0
    for _ in range(80):
        na, nb, top = rng.integers(2, 7), rng.integers(2, 7), rng.integers(2, 5)
        a, b = rng.integers(0, top, na).astype(float), rng.integers(0, top, nb).astype(float)
        r = rank_test(a, b, False)
        if r.get('exact'): seen += 1; assert r['pvalue'] == _re_ranked_p(a, b, False), (a, b)
        m = rng.integers(2, 10)
        a, b = rng.integers(0, 4, m).astype(float), rng.integers(0, 4, m).astype(float)
        r = rank_test(a, b, True) if np.any(a != b) else {}   # no pair differs: scipy's Wilcoxon is undefined
        if r.get('exact'): seen += 1; assert r['pvalue'] == _re_ranked_p(a, b, True), (a, b)
    assert seen > 120


def test_exact_rank_counts_match_scipys_exact_tests_without_ties():
    "Untied samples, where scipy counts exactly itself: Mann-Whitney's and Wilcoxon's exact p from the fixed ranks"
    from knowlyr_lab.permutation import _sign_p, _split_sums, _two_sided_p
    rng = np.random.default_rng(3)
    for _ in range(60):
        na, nb = rng.integers(1, 9), rng.integers(1, 9)
        x = rng.permutation(na + nb).astype(float)
        exact = stats.mannwhitneyu(x[:na], x[na:], method='exact').pvalue
        assert _two_sided_p(*_split_sums(x[:na], x[na:])) == pytest.approx(exact, abs=1e-12)
        n = rng.integers(1, 51); d = rng.permutation(np.arange(1., n + 1)) * rng.choice([-1, 1], n)
        assert _sign_p(d, np.zeros(n)) == pytest.approx(stats.wilcoxon(d, method='exact').pvalue, rel=1e-12)


@pytest.mark.parametrize('a,b,exact', [(np.ones(2), np.r_[np.ones(40), np.zeros(400)], 2 * math.comb(42, 2) / math.comb(442, 2)),
                                       (np.ones(1), np.zeros(5), 2 / 6)])
def test_rank_test_of_a_small_sample_against_many_tied_values(a, b, exact):
    "2 vs 440 (97,461 splits; re-ranking each took 5 s): the hypergeometric p. 1 vs 5 raised scipy's 'two or more'"
    for x, y in ((a, b), (b, a)):
        r = rank_test(x, y, False)
        assert r['exact'] and r['pvalue'] == pytest.approx(exact, abs=1e-15)


def _agent(name, ok, attempts=2, tasks=3):
    rows = [dict(agent=name, task_id=f't{t}', task_key=f't{t}', attempt=a, seed=a, success=ok, verified=True,
                 reward=float(ok), steps=3, tool_errors=0, cost=0.0, tokens=0, duration=1.0, reason='', valid=True,
                 invalid=None, trajectory_id=f'{name}{t}-{a}') for t in range(tasks) for a in range(attempts)]
    return EvalResult(name, pd.DataFrame(rows, columns=EPISODE_COLUMNS))


@pytest.mark.parametrize('metric', ['success', 'reward'])
def test_leaderboard_of_constant_agents_on_3_tasks_has_no_zero_noise_floor(metric):
    "Two agents whose runs all agree, 3 tasks x 2 attempts: the floor and MDE were 0.0 (every gap outside the noise)"
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        lb = leaderboard([_agent('x', True), _agent('y', False)], metric=metric)
    row = lb.iloc[1]
    assert row.noise_floor != 0 and row.mde != 0 and not (row.noise_floor < 1e-9 or row.mde < 1e-9)
    assert math.isinf(row.noise_floor) and math.isinf(row.mde) and bool(row.inside_noise)   # exact p >= 2/2^3 > 0.05
    assert row.p_vs_best == pytest.approx(0.25) and row.sig == ''


def test_leaderboard_of_constant_agents_on_8_tasks_leaves_the_floor_unmeasured():
    "8 tasks: an exact test can reach 0.05 (2/2^8), but runs that all agree measure no noise: NaN, not 0"
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        lb = leaderboard([_agent('x', True, tasks=8), _agent('y', False, tasks=8)])
    assert math.isnan(lb.noise_floor[1]) and math.isnan(lb.mde[1]) and lb.p_vs_best[1] == pytest.approx(2 / 2 ** 8)


def test_checkpoints_whose_differences_are_all_equal_get_no_zero_floor():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        cmp = compare_checkpoints(_agent('x', True), _agent('y', False))
    assert math.isinf(cmp.noise_floor) and math.isinf(cmp.mde) and math.isinf(cmp.rerun_floor) and cmp.inside_noise


def _listed_p(a, b):
    "The exact p by listing every choice of the smaller sample's size among the fixed doubled mid-ranks"
    from itertools import combinations
    if len(a) > len(b): a, b = b, a
    r = np.rint(2 * stats.rankdata(np.concatenate([a, b]))).astype(int)
    sums = np.array([sum(c) for c in combinations(r.tolist(), len(a))]); obs = r[:len(a)].sum()
    return min(1.0, min((sums <= obs).sum(), (sums >= obs).sum()) / len(sums) * 2)


def test_counted_rank_sums_equal_listing_every_split_on_random_tied_samples():
    "The rank sums counted by tie group give the p of listing all C(N, m) splits, to the bit, on 400 random tied samples"
    rng, tied = np.random.default_rng(11), 0
    for _ in range(400):
        na, nb, top = rng.integers(1, 7), rng.integers(1, 9), rng.integers(2, 6)
        a, b = rng.integers(0, top, na) / 2, rng.integers(0, top, nb) / 2
        r = rank_test(a, b, False)
        if len(np.unique(np.r_[a, b])) < na + nb:
            tied += 1; assert r['exact'] and r['pvalue'] == _listed_p(a, b), (a, b)
    assert tied > 350


def _grouped_p(a, b):
    "The exact p from the tie groups' compositions: m values drawn j_g from group g, in prod C(t_g, j_g) ways"
    from collections import Counter
    from itertools import combinations_with_replacement
    if len(a) > len(b): a, b = b, a
    r = np.rint(2 * stats.rankdata(np.concatenate([a, b]))).astype(int); obs = int(r[:len(a)].sum())
    v, t = np.unique(r, return_counts=True); le = ge = total = 0
    for pick in combinations_with_replacement(range(len(v)), len(a)):
        ways = math.prod(math.comb(int(t[g]), j) for g, j in Counter(pick).items())
        s = int(sum(v[g] for g in pick)); total += ways; le += ways * (s <= obs); ge += ways * (s >= obs)
    assert total == math.comb(len(r), len(a))
    return min(1.0, min(le, ge) / total * 2)


@pytest.mark.parametrize('a', [np.ones(3), np.array([.9, .9, .8]), np.array([.5, .3, .7]), np.array([.6, .6])])
def test_three_seeds_against_a_thousand_tied_runs_is_exact(a):
    "3 (or 2) values against 1,000 graded runs: C(1003, 3) = 1.7e8 splits was past listing, so scipy's approximation"
    b = np.random.default_rng(0).binomial(10, .5, 1000) / 10
    for x, y in ((a, b), (b, a)):
        r = rank_test(x, y, False)
        assert r.get('exact') and r['pvalue'] == pytest.approx(_grouped_p(a, b), rel=1e-12)


def test_three_solved_seeds_against_300_of_1000_is_not_significant():
    "All 3 seeds solve, 300 of 1,000 runs do: exact p = 2 C(303, 3)/C(1003, 3) = 0.055; scipy's approximation said 0.0084"
    a, b = np.ones(3), np.r_[np.ones(300), np.zeros(700)]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        c = compare_samples(a, b)
    mw = c.tests['mann_whitney_u']
    assert mw['exact'] and mw['pvalue'] == pytest.approx(2 * math.comb(303, 3) / math.comb(1003, 3), rel=1e-12)
    assert mw['pvalue'] > 0.05 > stats.mannwhitneyu(a, b).pvalue


def test_compare_agents_of_3_tasks_against_1000_gets_the_exact_rank_p():
    "Unpaired agents (no shared task), 3 tasks all solved against 1,000 with 50 solved: the hypergeometric p, exact"
    x = _agent('new', True, attempts=1)
    rows = [dict(agent='pool', task_id=f'p{t}', task_key=f'p{t}', attempt=0, seed=0, success=t < 50, verified=True,
                 reward=float(t < 50), steps=3, tool_errors=0, cost=0.0, tokens=0, duration=1.0, reason='', valid=True,
                 invalid=None, trajectory_id=f'pool{t}') for t in range(1000)]
    pool = EvalResult('pool', pd.DataFrame(rows, columns=EPISODE_COLUMNS))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        c = compare_agents(x, pool)
    mw = c.tests['mann_whitney_u']
    assert not c.paired and mw['exact'] and mw['pvalue'] == pytest.approx(2 * math.comb(53, 3) / math.comb(1003, 3), rel=1e-12)


@pytest.mark.parametrize('m,n', [(1, 40), (3, 200), (5, 60), (2, 500), (8, 30)])
def test_counted_rank_sums_match_scipys_exact_mann_whitney_small_against_large(m, n):
    "Untied, where scipy counts exactly itself (a sample of at most 8): the same p from the counts"
    from knowlyr_lab.permutation import _split_sums, _two_sided_p
    x = np.random.default_rng(m * n).permutation(m + n).astype(float)
    assert _two_sided_p(*_split_sums(x[:m], x[m:])) == pytest.approx(stats.mannwhitneyu(x[:m], x[m:], method='exact').pvalue, rel=1e-12)


def test_past_the_budget_the_rank_test_says_it_is_scipys():
    "300 vs 300 tied values (1.5e10 cells charged) and 2,000 pairs tied in twos (2.1e9): scipy's p, no 'exact' flag"
    rng = np.random.default_rng(0); a, b = np.round(rng.normal(0, 1, 300), 1), np.round(rng.normal(0, 1, 300), 1)
    assert rank_test(a, b, False) == {'statistic': stats.mannwhitneyu(a, b).statistic, 'pvalue': stats.mannwhitneyu(a, b).pvalue,
                                      'exact': False}
    d = np.repeat(np.arange(1., 1001), 2) * np.tile([1, -1], 1000)
    assert rank_test(d, np.zeros(2000), True) == {'statistic': stats.wilcoxon(d).statistic, 'pvalue': stats.wilcoxon(d).pvalue,
                                                  'exact': False}


def _listed_sign_p(d):
    "The exact p by listing every sign flip of the doubled ranks of the nonzero differences' sizes"
    d = d[d != 0]; r = np.rint(2 * stats.rankdata(np.abs(d))).astype(int)
    sums = ((np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1) @ r; obs = r[d > 0].sum()
    return min(1.0, min((sums <= obs).sum(), (sums >= obs).sum()) / len(sums) * 2)


def test_signed_rank_counts_equal_listing_every_flip_on_random_samples():
    "The flips counted by W+ give the p of listing all 2^n flips, to the bit, on 400 random samples (tied, zeros, untied)"
    from knowlyr_lab.permutation import _sign_p
    rng, tied = np.random.default_rng(13), 0
    for i in range(400):
        n = int(rng.integers(1, 15))
        d = rng.integers(-3, 4, n) / 2 if i % 4 else rng.permutation(np.arange(1., n + 1)) * rng.choice([-1, 1], n)
        tied += len(np.unique(np.abs(d[d != 0]))) < n; assert _sign_p(d, np.zeros(n)) == _listed_sign_p(d), d
        if i % 5 < 2 and np.any(d != 0):   # through rank_test too: untied (scipy's exact p) and tied (the count)
            r = rank_test(d, np.zeros(n), True); assert r['pvalue'] == pytest.approx(_listed_sign_p(d), rel=1e-12), d
            assert r['exact']
    assert tied > 250


def _int_count_sign_p(d):
    "The exact p from every flip counted in Python integers over the whole range of W+ (both tails summed)"
    from fractions import Fraction
    d = d[d != 0]; r = np.rint(2 * stats.rankdata(np.abs(d))).astype(int).tolist(); obs = sum(x for x, v in zip(r, d) if v > 0)
    c = np.zeros(sum(r) + 1, object); c[0] = 1
    for x in r: c[x:] = c[x:] + c[:len(c) - x]
    return min(Fraction(1), Fraction(2 * min(sum(c[:obs + 1]), sum(c[obs:])), 2 ** len(r)))


@pytest.mark.parametrize('n,shift,digits', [(17, .5, 0), (70, .3, 1), (150, .4, 1), (150, 1.5, 1), (120, .2, 3)])
def test_wilcoxon_past_16_pairs_is_counted_exactly(n, shift, digits):
    "Past 16 pairs the flips were only listed, so scipy's normal approximation; counted now, equal to Python-int counting"
    d = np.round(np.random.default_rng(n).normal(shift, 1, n), digits)
    r, exact = rank_test(d, np.zeros(n), True), _int_count_sign_p(d)
    assert r.get('exact') and r['pvalue'] == pytest.approx(float(exact), rel=1e-12, abs=0)
    assert r['statistic'] == stats.wilcoxon(d).statistic


def test_wilcoxon_of_1000_pairs_of_plus_minus_one_is_the_binomial_p():
    "Differences that all tie in size: W+ counts the positive ones, so the p is the two-sided sign test's, to 1e-12"
    d = np.r_[np.ones(540), -np.ones(460), np.zeros(30)]
    r = rank_test(d, np.zeros(len(d)), True)
    assert r['exact'] and r['pvalue'] == pytest.approx(stats.binomtest(540, 1000).pvalue, rel=1e-12)


def test_the_cell_count_bounds_the_work_of_counting():
    "_count_cells is an upper bound of the cells the counting adds, each addition charged 1,000"
    from knowlyr_lab.permutation import _count_cells
    rng = np.random.default_rng(5)
    for _ in range(100):
        r = np.rint(2 * stats.rankdata(rng.integers(0, rng.integers(2, 40), rng.integers(2, 120)))).astype(int)
        m = int(rng.integers(1, len(r) // 2 + 1)); v, n = np.unique(r, return_counts=True)
        S, work = int(np.sort(r)[len(r) - m:].sum()) + 1, 0
        for x, t in zip(v.tolist(), n.tolist()):
            for k in range(1, m + 1):
                for j in range(1, min(t, k, (S - 1) // x) + 1): work += min((k - j) * x + 1, S - j * x) + 1000
        assert work <= _count_cells(v, n, m) + 1e-6 * work


def test_eight_tied_values_against_1000_past_int64_are_counted_exactly():
    "C(1008, 8) > 2^63 was refused (scipy's 1.2e-6); counted in float64 now: the Python-int p of the groups, to 1e-12"
    b = np.random.default_rng(0).binomial(10, .5, 1000) / 10; a = np.array([.9, .9, .8, .9, .9, .8, .9, 1])
    for x, y in ((a, b), (b, a)):
        r = rank_test(x, y, False)
        assert r.get('exact') and r['pvalue'] == pytest.approx(_grouped_p(a, b), rel=1e-12) and r['pvalue'] < 1e-12


@pytest.mark.parametrize('m,n', [(9, 1000), (13, 1000), (30, 30), (20, 300), (60, 60)])
def test_untied_samples_past_8_a_side_are_counted_as_scipys_exact_p(m, n):
    "Untied, scipy's auto is exact only up to 8 a side (9 vs 1,000 got its normal approximation): scipy's method='exact' now"
    x = np.random.default_rng(m * n).permutation(m + n).astype(float); x[:m] += m + .5   # a shift (p not near 1), no ties
    r, exact = rank_test(x[:m], x[m:], False), stats.mannwhitneyu(x[:m], x[m:], method='exact').pvalue
    assert r.get('exact') and r['pvalue'] == pytest.approx(exact, rel=1e-12) and r['statistic'] == stats.mannwhitneyu(x[:m], x[m:]).statistic


@pytest.mark.parametrize('n', [51, 120, 400])
def test_untied_pairs_past_50_are_counted_as_scipys_exact_p(n):
    "Untied, scipy's auto Wilcoxon is exact only up to 50 pairs: past them scipy's method='exact' now"
    d = np.random.default_rng(n).permutation(np.arange(1., n + 1)) * np.random.default_rng(n + 1).choice([-1, 1], n, p=[.4, .6])
    r = rank_test(d, np.zeros(n), True)
    assert r.get('exact') and r['pvalue'] == pytest.approx(stats.wilcoxon(d, method='exact').pvalue, rel=1e-12)


def _partitions_up_to(s, parts):
    "How many partitions of each u <= s into at most `parts` parts (parts of size at most `parts`, by conjugation), in Python ints"
    c = [1] + [0] * s
    for k in range(1, parts + 1):
        for u in range(k, s + 1): c[u] += c[u - k]
    return c


def test_scipys_own_exact_p_is_kept_for_pairs_and_counted_for_splits():
    "Where scipy's auto method counts exactly itself: <= 50 untied pairs keep its p; <= 8 a side are counted by U, its p to 1e-12"
    x, y = np.arange(8.) + .5, np.arange(1000.); d = np.arange(1., 51) * np.r_[np.ones(30), -np.ones(20)]
    assert rank_test(x, y, False) == {'statistic': stats.mannwhitneyu(x, y).statistic, 'exact': True,
                                      'pvalue': 2 * sum(_partitions_up_to(36, 8)) / math.comb(1008, 8)}   # U = 1 + ... + 8
    assert rank_test(x, y, False)['pvalue'] == pytest.approx(stats.mannwhitneyu(x, y, method='exact').pvalue, rel=1e-12)
    assert rank_test(d, np.zeros(50), True) == {'statistic': stats.wilcoxon(d).statistic, 'exact': True,
                                                'pvalue': stats.wilcoxon(d, method='exact').pvalue}


@pytest.mark.parametrize('n', [100_000, 1_000_000])
def test_one_value_against_many_is_its_rank_share_at_any_size(n):
    "1 value vs 100,000 with one tie was charged past the budget (scipy's 0.083 for an exact 1.4e-4); its rank's share now"
    rng = np.random.default_rng(n)
    for a, b in ((np.r_[5.], np.arange(float(n))), (np.r_[.7], rng.binomial(10, .5, n) / 10)):
        pooled = np.r_[a, b]; exact = 2 * min((pooled <= a[0]).sum(), (pooled >= a[0]).sum()) / len(pooled)
        for x, y in ((a, b), (b, a)):
            r = rank_test(x, y, False)
            assert r.get('exact') and r['pvalue'] == pytest.approx(exact, rel=1e-12)


def test_float_counts_past_2_63_stay_within_the_stated_bound():
    "Past 2^63 splits the counts are float64: each within the page's relative 3N*2^-53 of the Python-int count"
    from fractions import Fraction
    from itertools import product

    from knowlyr_lab.permutation import _subset_sums
    rng = np.random.default_rng(17)
    for _ in range(6):
        v = np.sort(rng.choice(np.arange(1, 40), 3, replace=False)); t = rng.integers(60, 200, 3); m = int(rng.integers(30, 60))
        c = _subset_sums(np.repeat(v, t), m); exact = {}
        for j in product(*(range(min(int(k), m) + 1) for k in t)):
            if sum(j) == m:
                s = int(np.dot(j, v)); exact[s] = exact.get(s, 0) + math.prod(math.comb(int(k), i) for k, i in zip(t, j))
        assert c.dtype == float and math.comb(int(t.sum()), m) >= 2 ** 63
        assert set(np.flatnonzero(c).tolist()) == set(exact)
        assert max(abs(Fraction(float(c[s])) - n) / n for s, n in exact.items()) <= 3 * int(t.sum()) * Fraction(1, 2 ** 53)


def test_counted_rank_sums_equal_listing_every_split_on_random_untied_samples():
    "Untied splits, counted (as rank_test does past 8 a side): the p of listing all C(N, m) splits, to the bit, 300 samples"
    from knowlyr_lab.permutation import _split_p
    rng = np.random.default_rng(19)
    for _ in range(300):
        na, nb = int(rng.integers(1, 9)), int(rng.integers(1, 12)); x = rng.permutation(na + nb) + rng.random()
        assert _split_p(x[:na], x[na:]) == _listed_p(x[:na], x[na:]), x

def test_a_nan_difference_is_never_counted_as_exact():
    "A pair scored +inf by both agents differs by NaN; its rank became INT64_MIN, every rank 1 after the gcd, and the p (1e-16, 30x the exact 3.5e-18 of the other 59 pairs) was flagged exact"
    a = np.r_[np.inf, np.arange(1, 60.)]; b = np.r_[np.inf, 0.5 - np.arange(59) * 1e-3]
    with np.errstate(invalid='ignore'), warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        for x, y, paired in [(np.r_[np.nan, a[1:]], np.r_[0., b[1:]], True), (np.r_[np.nan, 1., 1., 2.], np.r_[3., 4., 4., 5.], False)]:
            assert rank_test(x, y, paired)['exact'] is False, (x, y, paired)
        for f in (lambda: rank_test(a, b, True), lambda: compare_samples(a, b, paired=True)):   # inf: refused since
            with pytest.raises(ValueError, match='position 0 is inf'):                             # read_scores (08b)
                f()


def test_an_empty_sample_is_left_to_scipy_unflagged():
    "rank_test([], [0, 1]) returned p 1.0 flagged exact with statistic nan (the empty count's share): no splits to count"
    with np.errstate(invalid='ignore'), warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        for x, y in [(np.array([]), np.r_[0., 1.]), (np.r_[0., 1.], np.array([])), (np.array([]), np.r_[1., 1.])]:
            r = rank_test(x, y, False)
            assert r['exact'] is False and np.isnan(r['pvalue']), (x, y, r)
        assert rank_test(np.array([]), np.array([]), True)['exact'] is False

def test_untied_few_against_many_are_counted_by_u_not_left_to_scipys_recursion():
    "5 or 8 untied runs vs thousands: scipy's auto chose its method='exact', a U^2 Python loop (3 s at 5 vs 10,000, U mid-way); counted by U"
    from knowlyr_lab.permutation import _scipy_exact
    x5, y10k = np.arange(5.) + 9_997.5, np.arange(10_000.)   # U 3 short of its top: 1 + 1 + 2 + 3 choices as far out
    assert not _scipy_exact(x5, y10k, False) and not _scipy_exact(y10k[::-1], x5, False)   # the method: the count
    for x, y in ((x5, y10k), (y10k, x5)):
        assert rank_test(x, y, False) == {'statistic': stats.mannwhitneyu(x, y).statistic, 'exact': True,
                                          'pvalue': 2 * 7 / math.comb(10_005, 5)}
    x8, y = np.arange(8.) + 3.5, np.arange(100_000.)   # U = 4 + ... + 11 = 60 from its bottom; C(100008, 8) > 2^63
    r = rank_test(x8, y, False)
    assert r['exact'] and r['pvalue'] == 2 * sum(_partitions_up_to(60, 8)) / math.comb(100_008, 8)
    x, y = np.random.default_rng(8).permutation(2008)[:8] + .5, np.arange(2000.)   # U mid-way: scipy's exact p
    assert rank_test(x, y, False)['pvalue'] == pytest.approx(stats.mannwhitneyu(x, y, method='exact').pvalue, rel=1e-12)


def test_two_valued_samples_of_any_size_get_the_exact_hypergeometric_p():
    "200 vs 200 solved-or-not (120 and 100 solved) passed the budget check to scipy's normal p, unflagged: 0.045, exact 0.056"
    from fractions import Fraction
    a, b = np.r_[np.ones(120), np.zeros(80)], np.r_[np.ones(100), np.zeros(100)]
    exact = Fraction(2 * sum(math.comb(220, k) * math.comb(180, 200 - k) for k in range(120, 201)), math.comb(400, 200))
    for x, y in ((a, b), (b, a)):
        r = rank_test(x, y, False)
        assert r.get('exact') and r['pvalue'] == float(exact), (len(x), r)   # the exact fraction, rounded once
        assert r['statistic'] == stats.mannwhitneyu(x, y).statistic
    assert stats.mannwhitneyu(a, b).pvalue < 0.05 < r['pvalue']
    for m, n, k, K in [(5000, 20_000, 1400, 5000), (30, 100_000, 12, 20_000), (40_000, 40_000, 20_300, 40_000)]:
        x, y = np.r_[np.ones(k), np.zeros(m - k)], np.r_[np.ones(K - k), np.zeros(n - K + k)]
        h = stats.hypergeom(m + n, K, m); r = rank_test(x, y, False)
        assert r.get('exact') and r['pvalue'] == pytest.approx(min(1, 2 * min(h.cdf(k), h.sf(k - 1))), rel=1e-9), (m, n, k, K)


def test_two_valued_counts_equal_listing_every_split_and_scipys_permutation_test():
    "Random 0/1 samples of 2 to 8: the p by k is the p of listing all C(N, m) splits and of scipy's exact permutation test, to the bit"
    rng, seen = np.random.default_rng(23), 0
    for _ in range(150):
        na, nb = int(rng.integers(2, 8)), int(rng.integers(2, 9)); a, b = rng.integers(0, 2, na) * 1., rng.integers(0, 2, nb) * 1.
        r = rank_test(a, b, False); seen += len(np.unique(np.r_[a, b])) == 2
        assert r['exact'] and r['pvalue'] == _listed_p(a, b) == _re_ranked_p(a, b, False), (a, b)
    assert seen > 120


def test_two_valued_float_counts_stay_within_the_stated_bound():
    "Past RANK_SUM_CELLS bits the counts by k are float64: the p within (12n + 1) 2^-53 of the Python-int p; below 1e-300 none"
    from fractions import Fraction

    from knowlyr_lab.permutation import RANK_SUM_CELLS, _hypergeom_p, _two_values_p
    rng = np.random.default_rng(29)
    for _ in range(6):
        m, n = int(rng.integers(8000, 12_000)), int(rng.integers(12_000, 16_000)); N = m + n; K = int(rng.integers(m, n))
        lo, hi = max(0, m + K - N), min(m, K); sd = math.sqrt(m * K / N * (1 - K / N) * n / (N - 1))
        k = int(m * K / N + rng.uniform(-6, 6) * sd)   # p from about 1e-9 to 1
        assert (hi - lo + 1) * N > RANK_SUM_CELLS   # the float64 count
        t = [math.comb(K, lo) * math.comb(N - K, m - lo)]   # the exact counts, each from the one before (exact division)
        for j in range(lo, hi): t.append(t[-1] * (K - j) * (m - j) // ((j + 1) * (N - K - m + j + 1)))
        assert sum(t) == math.comb(N, m)
        exact = min(Fraction(1), Fraction(2 * min(sum(t[:k - lo + 1]), sum(t[k - lo:])), math.comb(N, m)))
        p = _hypergeom_p(k, K, N, m)
        assert p is not None and abs(Fraction(p) - exact) <= exact * (12 * len(t) + 1) * Fraction(1, 2 ** 53), (m, n, K, k)
    a, b = np.ones(2000), np.zeros(2000)   # 2/C(4000, 2000) = 1e-1203: below float64, so scipy's p, unflagged
    assert _two_values_p(a, b) is None
    assert rank_test(a, b, False) == {'statistic': 4e6, 'pvalue': stats.mannwhitneyu(a, b).pvalue, 'exact': False}


def test_a_rank_sum_p_below_float64_is_not_flagged_exact():
    "600 vs 600 untied and apart: 2/C(1200, 600) = 1e-360 was divided to 0.0 and flagged exact (by _untied_p); scipy's p now"
    a, b = np.arange(600.), np.arange(600.) + 1000
    for x, y in ((a, b), (b, a)):
        assert rank_test(x, y, False) == {'statistic': stats.mannwhitneyu(x, y).statistic, 'pvalue': stats.mannwhitneyu(x, y).pvalue,
                                          'exact': False}
    x, y = np.arange(150.), np.arange(150.) + 1000   # 2/C(300, 150) = 2.1e-89: counted
    assert rank_test(x, y, False) == {'statistic': 0.0, 'pvalue': 2 / math.comb(300, 150), 'exact': True}


def test_a_binomial_past_the_budget_is_charged_before_it_is_computed():
    "C(N, m) of many bits costs more than its size: _draws(49, 2e6, 1e6) took 38 s in Python ints (charged 50·N, within the budget), an untied 1e6 vs 1e6 rank_test 44 s"
    from knowlyr_lab.permutation import _draws, _hypergeom_p, _untied_counts
    assert _draws(49, 400_000, 200_000).dtype == float   # main: Python ints, charged 50·400,000 only
    h = stats.hypergeom(400_000, 49, 200_000); ref = 2 * min(h.cdf(20), h.sf(19))
    assert _hypergeom_p(20, 49, 400_000, 200_000) == pytest.approx(ref, rel=1e-9)
    assert _untied_counts(200_000, 200_000, 1) is None   # U = 1 of 200,000 vs 200,000: C(400,000, 200,000) past the budget
    assert _untied_counts(3, 3_800_000, 5_000_000) is not None and _untied_counts(100, 136, 6_800) is not None   # still counted


def test_two_valued_halves_get_the_same_p_either_way_round():
    "Past the integer budget the float counts gave equal sizes p one ulp apart by argument order (k or K - k counted)"
    from knowlyr_lab.permutation import _hypergeom_p
    for k in (5_400, 5_450, 5_500):
        assert _hypergeom_p(k, 11_000, 24_000, 12_000) == _hypergeom_p(11_000 - k, 11_000, 24_000, 12_000), k
    a, b = np.r_[np.ones(5_400), np.zeros(6_600)], np.r_[np.ones(5_600), np.zeros(6_400)]
    assert rank_test(a, b, False)['pvalue'] == rank_test(b, a, False)['pvalue'] and rank_test(a, b, False)['exact']


def test_three_valued_samples_past_the_tie_budget_get_the_exact_p():
    "200 vs 200 scored 0, .5 or 1 passed the tie groups' budget and got scipy's normal p unflagged: 0.548 where the exact p is 0.572"
    from fractions import Fraction
    rng = np.random.default_rng(5)
    for m in (40, 100, 200):
        x = rng.integers(0, 3, 2 * m) * .5; a, b = x[:m], x[m:]; g = np.unique(x, return_counts=True)[1].tolist()
        mid = [2 * sum(g[:i]) + g[i] + 1 for i in range(3)]; obs = int(np.rint(2 * stats.rankdata(x)[:m]).sum()); le = ge = 0
        for j1 in range(min(g[0], m) + 1):   # every split, by how many of each value it draws
            for j2 in range(min(g[1], m - j1) + 1):
                if m - j1 - j2 > g[2]: continue
                w = math.comb(g[0], j1) * math.comb(g[1], j2) * math.comb(g[2], m - j1 - j2)
                s = j1 * mid[0] + j2 * mid[1] + (m - j1 - j2) * mid[2]; le += w * (s <= obs); ge += w * (s >= obs)
        exact = float(min(Fraction(1), Fraction(2 * min(le, ge), math.comb(2 * m, m))))
        r = rank_test(a, b, False)
        assert r.get('exact') and r['pvalue'] == pytest.approx(exact, rel=1e-9), (m, r, exact)


def test_four_values_past_the_tie_budget_say_their_p_is_scipys_approximation():
    "100 vs 100 scored 0, 1/3, 2/3 or 1 are not counted: scipy's normal p, 0.282 (exact 0.277), came with no 'exact' key at all"
    x = np.random.default_rng(4).integers(0, 4, 200) / 3; a, b = x[:100], x[100:]
    for y, z in ((a, b), (b, a)):
        u = stats.mannwhitneyu(y, z)
        assert rank_test(y, z, False) == {'statistic': u.statistic, 'pvalue': u.pvalue, 'exact': False}
    c = compare_samples(a, b); table = c.table()   # the flag reaches the comparison's table of tests (main: no column)
    assert str(table.loc['mann_whitney_u', 'exact']) == 'False' and c.primary == 'welch_t'   # the primary is Welch's t


def _within(p:float, num:int, den:int, rtol)->bool:
    "|p - num/den| <= rtol * num/den, in integers (a Fraction of 200,000-bit terms spends seconds in gcd)"
    a, b = p.as_integer_ratio(); r = Fraction(rtol)
    return abs(a * den - num * b) * r.denominator <= num * b * r.numerator


def test_two_valued_p_past_200000_bits_of_the_binomial_keeps_the_stated_bound():
    "Past ~200,000 bits of C(N, m) the counts by k are float64 however few they are: each p within the page's bound of the exact fraction, flagged down to (6n^2 + 1) 2^-1074 / RANK_P_RTOL (the page said 'about 1e-300')"
    from knowlyr_lab.permutation import RANK_P_RTOL, _draws, _hypergeom_p
    N, m = 200_000, 100_000; t = [math.comb(N - 20, m)]   # 20 marked: 21 counts, each from the one before (exact division)
    for k in range(20): t.append(t[-1] * (20 - k) * (m - k) // ((k + 1) * (N - 20 - m + k + 1)))
    C = sum(t); assert _draws(20, N, m).dtype == float and C == math.comb(N, m)   # floats: the binomial's charge decides
    for k in range(21):
        num = min(C, 2 * min(sum(t[:k + 1]), sum(t[k:])))
        assert _within(_hypergeom_p(k, 20, N, m), num, C, (12 * 21 + 1) * Fraction(1, 2 ** 53)), k
    N, m = 201_000, 100_500; C, top = math.comb(N, m), math.comb(N - 1020, m)   # k = 0 of K marked: 2 C(N - K, m) / C(N, m)
    for K, flagged in ((1015, True), (1020, False)):   # 4.3e-307 and 1.3e-308, either side of 3.1e-308
        below = top * math.prod(range(N - 1019, N - K + 1)) // math.prod(range(N - 1019 - m, N - K - m + 1))   # C(N - K, m)
        p, n = _hypergeom_p(0, K, N, m), K + 1; cut = (6 * n * n + 1) * 2.0 ** -1074 / RANK_P_RTOL
        assert (2 * below > Fraction(cut) * C) == flagged and (p is not None) == flagged, K
        if flagged: assert _within(p, 2 * below, C, (12 * n + 1) * Fraction(1, 2 ** 53) + (6 * n * n + 1) * Fraction(1, 2 ** 1074) / Fraction(p))


def _doubled_midranks(x:list)->list:
    "Mid-ranks of exact values, doubled to integers"
    return [2 * sum(w < v for w in x) + sum(w == v for w in x) + 1 for v in x]


def _written_p(a, b, paired:bool)->Fraction:
    "Exact two-sided rank p of the scores as written (decimals, not float64), from every relabelling"
    from itertools import combinations, product
    A, B = [Fraction(str(v)) for v in a], [Fraction(str(v)) for v in b]
    if paired:
        d = [u - v for u, v in zip(A, B) if u != v]; r = _doubled_midranks([abs(v) for v in d])
        obs = sum(ri for ri, v in zip(r, d) if v > 0); null = [sum(ri for ri, s in zip(r, f) if s) for f in product((0, 1), repeat=len(d))]
    else:
        r = _doubled_midranks(A + B); obs = sum(r[:len(A)]); null = [sum(c) for c in combinations(r, len(A))]
    return min(Fraction(1), Fraction(2 * min(sum(s <= obs for s in null), sum(s >= obs for s in null)), len(null)))


def test_every_flagged_rank_p_is_the_exact_p_of_the_scores_as_written():
    "Scores to 0.1: 0.3 - 0.2 and 0.2 - 0.1 are 1 ulp apart in float64, so pairs differing by 0.1 ranked apart and the flagged p was another data set's (0.375 for 0.5)"
    from knowlyr_lab.permutation import RANK_P_RTOL
    rng, seen = np.random.default_rng(2), 0
    for _ in range(60):
        v = np.array([.1, .2, .3, .7]) if rng.random() < .7 else np.array([-1., 0, .5, 2])
        na, nb = int(rng.integers(1, 9)), int(rng.integers(1, 9)); a, b, c = rng.choice(v, na), rng.choice(v, nb), rng.choice(v, na)
        for x, y, paired in ((a, b, False), (b, a, False), (a, c, True), (c, a, True)):
            r = rank_test(x, y, paired) if not paired or np.any(x != y) else {}
            if r.get('exact'):
                seen += 1; exact = _written_p(x, y, paired)
                assert abs(Fraction(r['pvalue']) - exact) <= RANK_P_RTOL * exact, (x.tolist(), y.tolist(), paired, r, float(exact))
    assert seen > 200


def test_a_permutation_p_flagged_exact_is_the_exact_p_of_the_scores_as_written():
    "scipy ties null values within 100 ulps of the observed mean difference, no room near 0: [.1, .7, .7, .3] vs [.7, .2] (equal means) got 0.933 for 1"
    from itertools import combinations, product

    from knowlyr_lab.permutation import RANK_P_RTOL, permutation
    assert permutation(np.array([.1, .7, .7, .3]), np.array([.7, .2]), False)['pvalue'] == 1.0
    rng, seen = np.random.default_rng(3), 0
    for _ in range(40):   # scores in tenths: as integers, the relabellings' statistics compare exactly
        na, nb = int(rng.integers(2, 9)), int(rng.integers(2, 9)); a, b, c = (rng.choice([1, 2, 3, 7], n) for n in (na, nb, na))
        for x, y, paired in ((a, b, False), (b, a, False), (a, c, True), (c, a, True)):
            if paired: obs, null = int((x - y).sum()), [int(np.dot(s, x - y)) for s in product((1, -1), repeat=len(x))]
            else: obs, null = int(x.sum()), [sum(s) for s in combinations(np.r_[x, y].tolist(), len(x))]   # sum of x: as the mean difference
            exact = min(Fraction(1), Fraction(2 * min(sum(s <= obs for s in null), sum(s >= obs for s in null)), len(null)))
            r = permutation(x / 10, y / 10, paired); seen += r['exact']
            assert r['exact'] and abs(Fraction(r['pvalue']) - exact) <= RANK_P_RTOL * exact, (x.tolist(), y.tolist(), paired, r, exact)
    assert seen == 160


def test_paired_sizes_are_snapped_within_their_own_pairs_ulps():
    "One pair's score of 1e6 set the snap tolerance for all (4 ulps of 1e6, 4.7e-10): differences of 3e-12 to 5e-12 on scores near 1e-11 became 0"
    a, b = np.r_[1e6, 3e-12, 5e-12, 4e-12], np.r_[1e6 - 1, 0, 0, 0]   # four pairs up: 2 of the 16 flips as far out
    assert rank_test(a, b, True) == {'statistic': 0.0, 'pvalue': 0.125, 'exact': True}


def _written_perm_p(a, b, paired:bool)->Fraction:
    "Exact two-sided permutation p of the mean difference of the scores as written, from every relabelling"
    from itertools import combinations, product
    A, B = [Fraction(repr(float(v))) for v in a], [Fraction(repr(float(v))) for v in b]
    md = lambda x, y: sum(x) / len(x) - sum(y) / len(y)   # noqa: E731
    if paired: null = [md(*zip(*[(v, u) if f else (u, v) for u, v, f in zip(A, B, fl)])) for fl in product((0, 1), repeat=len(A))]
    else: P = A + B; null = [md([P[i] for i in c], [P[i] for i in range(len(P)) if i not in c]) for c in combinations(range(len(P)), len(A))]
    obs = md(A, B)
    return min(Fraction(1), Fraction(2 * min(sum(s <= obs for s in null), sum(s >= obs for s in null)), len(null)))


_MIXED_PAIRS = {   # review23 snap.py: differences that the ulp snapping tied or zeroed
    '1e-17 beside a pair equal at 0.5': ([1e-17, 2e-17, 3e-17, .5, .1, .2], [0, 0, 0, .5, .3, .6]),
    'integers near 1e16': ([1e16 + 10, 1e16 + 16, 1e16, 1e16 + 28, 1e16 + 34], [1e16, 1e16, 1e16 + 22, 1e16, 1e16]),
    'integers near -1e16': ([-1e16 - 10, -1e16 - 16, -1e16, -1e16 - 28, -1e16 - 34], [-1e16, -1e16, -1e16 - 22, -1e16, -1e16]),
    '1e6 with 1e-10': ([1e6 + 5 * 2.0 ** -33, 4e-10, 3e-10, 2e-10, 1e-9], [1e6, 0, 0, 0, 0]),
}


@pytest.mark.parametrize('case', list(_MIXED_PAIRS))
def test_paired_rank_ties_are_exact_equalities_of_the_scores_as_written(case):
    "The ulp snapping tied sizes run-long and let another pair's 0 pull a difference to 0: 1e-17 dropped, 10..34 near 1e16 all tied"
    a, b = (np.array(v) for v in _MIXED_PAIRS[case])
    for x, y in ((a, b), (b, a)):
        r = rank_test(x, y, True); exact = _written_p(x, y, True)
        assert r['exact'] and abs(Fraction(r['pvalue']) - exact) <= 1e-9 * exact, (case, r, float(exact))


_PERM_CASES = [   # review23 perm_compare.sh and perm.py: the shift by the largest score, and no_spread's rounding near 1e16
    ([1e16 + 4, 1e16 + 8, 1e16 + 2, 1e16 + 2, 1e16 + 10, 1e16 + 6], [1e16 + 2, 1e16 + 2, 1e16, 1e16, 1e16 + 4, 1e16 + 4], True),
    ([1e16 + 2, 1e16 + 10, 1e16, 1e16 + 8], [1e16 + 10, 1e16, 1e16 + 2, 1e16 + 2], False),
    ([1000002.0, 3e-11, 3e-11], [3e-11, 1e6, 1e-11], False),
    ([1e-17, 2e-17, .5, .5], [0, 0, .5, .5 + 1e-16], False),
    ([1e6, 1e-10, 3e-10, 2e-10], [1e6, 0, 1e-10, 1e-10], True),
]


@pytest.mark.parametrize('a,b,paired', _PERM_CASES)
def test_permutation_counts_the_scores_as_written_at_any_scale(a, b, paired):
    "scipy's 100-ulp window, made absolute by the shift (2.2e-14 of 1e16 is 220), tied sums 2 apart: p 1 for 0.03125"
    from knowlyr_lab.permutation import permutation
    a, b = np.array(a), np.array(b)
    for x, y in ((a, b), (b, a)):
        r = permutation(x, y, paired); exact = _written_perm_p(x, y, paired)
        assert r['exact'] and abs(Fraction(r['pvalue']) - exact) <= 1e-9 * exact, (x.tolist(), y.tolist(), r, float(exact))


def test_rank_test_and_permutation_tie_mixed_scale_scores_by_one_rule():
    "Both read ties from the scores as written (_written): 1e-17 with 0.5, integers near 1e16, 1e6 with 1e-10, each way, paired and not"
    from knowlyr_lab.permutation import permutation
    rng, seen = np.random.default_rng(13), 0
    scales = [np.array([0, 1e-17, 2e-17, .5]), 1e16 + 2 * np.arange(6.), np.array([1e6, 1e6 + 1, 0, 1e-10, 2e-10])]
    for _ in range(30):
        v = scales[int(rng.integers(0, 3))]; n, m = int(rng.integers(2, 6)), int(rng.integers(2, 5))
        a, b, c = rng.choice(v, n), rng.choice(v, m), rng.choice(v, n)
        for x, y, paired in ((a, b, False), (b, a, False), (a, c, True), (c, a, True)):
            r = rank_test(x, y, paired) if not paired or np.any(x != y) else {}
            if r.get('exact'):
                seen += 1; e = _written_p(x, y, paired); assert abs(Fraction(r['pvalue']) - e) <= 1e-9 * e, (x, y, paired, r, e)
            r = permutation(x, y, paired)
            if r['exact']:
                seen += 1; e = _written_perm_p(x, y, paired); assert abs(Fraction(r['pvalue']) - e) <= 1e-9 * e, (x, y, paired, r, e)
    assert seen > 150


def test_paired_ranks_read_as_written_only_the_sizes_that_crowd(monkeypatch):
    "84188a1 read all 200,000 scores of 100,000 full-precision pairs as written (repr, Decimal: 0.97 s, 0.05 s before); sizes far apart in float64 are ordered already"
    import knowlyr_lab.permutation as perm
    read, written = [], perm._written
    monkeypatch.setattr(perm, '_written', lambda x: read.append(np.size(x)) or written(x))   # counts, then reads as before
    rng = np.random.default_rng(14); a, b = rng.random(100_000), rng.random(100_000)
    r = rank_test(a, b, True)
    assert sum(read) < 1000, sum(read)   # main: 400,000 (each score twice)
    ranks = stats.rankdata(np.abs(a - b)); assert r['statistic'] == min(ranks[a > b].sum(), ranks[a < b].sum())   # untied: float64's order


_SIZE_GENERATORS = [   # scores whose float64 sizes crowd (tenths, 1e6 + ulps beside 1e-10) or not, at every scale
    lambda rng, n: rng.random(n), lambda rng, n: np.round(rng.random(n), 1), lambda rng, n: 1e6 + rng.integers(0, 50, n) * 2.0 ** -33,
    lambda rng, n: rng.choice([1e-300, 1e300, 0., -0., 1., .1, .2, .3, np.inf, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308], n),
    lambda rng, n: rng.normal(size=n) * 10.0 ** rng.integers(-20, 20, n), lambda rng, n: np.r_[rng.random(n // 2), np.round(rng.random(n - n // 2), 3)],
    lambda rng, n: rng.integers(-3, 4, n) * 1e-10 + rng.choice([0, 1e6], n),
    lambda rng, n: np.where(rng.random(n) < .05, 1.2345678901234567e20 + rng.integers(0, 5, n) * 16384., rng.random(n) * 1e6),
]   # the last: sizes of 1.2e20's pairs are off by up to 8,192 as written (16384 is 20000), beside exact sizes of small scores


@pytest.mark.parametrize('g', range(len(_SIZE_GENERATORS)))
def test_paired_sizes_ranked_from_float64_runs_are_the_ranks_as_written(g):
    "_written_sizes orders the float64 runs and reads as written only runs of two or more: the same ranks as reading every pair"
    from knowlyr_lab.permutation import _written_size_ranks, _written_sizes
    rng = np.random.default_rng(g)
    for n in (1, 2, 5, 40, 700, 3000):
        for _ in range(3):
            a, b = _SIZE_GENERATORS[g](rng, n), _SIZE_GENERATORS[g](rng, n)
            with np.errstate(all='ignore'): keep = ~np.isnan(a - b)   # inf - inf has no size
            a, b = a[keep], b[keep]
            if not len(a): continue
            with warnings.catch_warnings():
                warnings.simplefilter('error')   # no overflow warning from 1e308 - -1e308 or spacing(inf)
                got = _written_sizes(a, b)
            assert np.array_equal(got, ((a > b).astype(int) - (a < b)) * (_written_size_ranks(a, b) + (a != b).all())), (g, n, a.tolist(), b.tolist())
    a2, a1 = 1.234567890123457e20, 1.2345678901234568e20   # 16384 apart in float64, 20000 as written
    x, y = np.r_[a2, 17000., 18000., 1e9 * np.arange(1., 11)], np.r_[a1, 0., 0., np.zeros(10)]
    assert _written_sizes(x, y)[:3].tolist() == [3, 1, 2]   # 20000 above 17000 and 18000, though 16384 is below them


def _window_perm_p(a, b, paired:bool, rtol:Fraction)->Fraction:
    "Two-sided permutation p of the mean difference from every relabelling of the scores as written, ties within rtol of the observed"
    from itertools import combinations, product
    A, B = [Fraction(repr(float(v))) for v in a], [Fraction(repr(float(v))) for v in b]
    md = lambda x, y: sum(x) / len(x) - sum(y) / len(y)   # noqa: E731
    if paired: null = [md(*zip(*[(v, u) if f else (u, v) for u, v, f in zip(A, B, fl)])) for fl in product((0, 1), repeat=len(A))]
    else: P = A + B; null = [md([P[i] for i in c], [P[i] for i in range(len(P)) if i not in c]) for c in combinations(range(len(P)), len(A))]
    obs = md(A, B); tol = rtol * abs(obs)
    assert all(abs(s - obs) < abs(obs) / 10 ** 14 or abs(s - obs) > abs(obs) / 10 ** 6 for s in null)   # no relabelling near the window's edge
    return min(Fraction(1), Fraction(2 * min(sum(s <= obs + tol for s in null), sum(s >= obs - tol for s in null)), len(null)))


@pytest.mark.parametrize('a,b,paired', [
    ([1e6, 3e-14, 7, 2e6], [5, 1e-14, 11, 3e6, 13], False),   # 126 splits
    ([1e6, 1e-14, 7, 2e6, 4, 9, 1, 8], [5, 3e-14, 11, 3e6, 13, 2, 6, 3], True),   # 256 sign flips
])
def test_permutation_of_scores_spanning_more_than_19_digits_ties_within_scipys_window(a, b, paired):
    "The fallback where _written_ints cannot hold the scores (3e6 with 1e-14: 3e20 scaled, past 2^63) counts relabellings within 100 ulps of the observed one as ties, as page 08c says"
    from knowlyr_lab.permutation import _written_ints, permutation
    a, b = np.array(a), np.array(b)
    for x, y in ((a, b), (b, a)):
        assert _written_ints(np.r_[x, y]) is None   # the float path: scipy's comparison of float64 mean differences
        r = permutation(x, y, paired)
        window, strict = _window_perm_p(x, y, paired, Fraction(1, 10 ** 12)), _window_perm_p(x, y, paired, Fraction(0))
        assert r['exact'] and abs(Fraction(r['pvalue']) - window) <= 1e-12 * window, (r, float(window))
        assert window > strict   # moving 1e-14 to the other side is a tie here, a relabelling further in as written



@pytest.mark.parametrize('a,b,paired', [
    ([1e18, 2e18, 4e18, 0.], [0., 5e17, 1e18, 7e17], False),   # no relabelling near the observed one: main's p, 0.2857
    ([1e18, 2e18, 4e18, 0.], [0., 5e17, 1e18, 7e17], True),    # main's p, 0.25
    ([1e18, 1e18, 3.], [0., 2., 1e18], False),                 # main: p 1.0 (2 of 20 splits within 100 ulps), exact 0.4
    ([1e18, 3e17, 2e17, 5.], [0., 1e17, 4e17, 7.], False),     # main: p 0.457, exact 0.4
])
def test_whole_number_scores_are_not_scaled_by_ten_so_0_to_1e18_is_counted_exactly(a, b, paired):
    "'1.0' is written with one decimal, so _written_ints scaled [0, 1e18] by 10 (1e19, past 2^63) and permutation fell to float64's 100-ulp ties"
    from knowlyr_lab.permutation import _written_ints, permutation
    assert _written_ints(np.r_[0., 1e18]).tolist() == [0, 10 ** 18] and _written_ints([2., 5., 1e3]).tolist() == [0, 3, 998]
    assert _written_ints([2.5, 1e3]).tolist() == [0, 9975]   # a decimal scales every score, as before
    x, y = np.array(a), np.array(b)
    assert _written_ints(np.r_[x, y]) is not None   # main: None, the float path
    r = permutation(x, y, paired)
    assert r['exact'] and r['pvalue'] == float(_window_perm_p(x, y, paired, Fraction(0))), r   # every relabelling, as written

@pytest.mark.parametrize('dtype', [np.float32, np.float16])
def test_narrow_float_scores_are_compared_as_written(dtype):
    "float32 scores were read as their float64 expansions (0.3 as 0.30000001192092896), so ties as written broke: Wilcoxon 0.4375 where float64's is 0.5"
    p8, q8 = [.3, .2, .3, .2, .1, .3, .2, .7], [.1, .7, .3, .3, .2, .3, .3, .7]   # differences of 0.1 as written tie
    for paired in (True, False):
        want, got = compare_samples(p8, q8, paired=paired), compare_samples(np.array(p8, dtype), np.array(q8, dtype), paired=paired)
        for k in ('wilcoxon', 'mann_whitney_u', 'permutation', 'welch_t', 'paired_t'):
            assert got.tests.get(k) == want.tests.get(k), (dtype, paired, k, got.tests.get(k), want.tests.get(k))
        assert (got.mean_a, got.mean_b) == (want.mean_a, want.mean_b)
    assert compare_samples(p8, q8, paired=True).tests['wilcoxon'] == {'statistic': 4.0, 'pvalue': 0.5, 'exact': True}



@pytest.mark.parametrize('dtype', [np.float32, np.float16])
def test_every_entry_point_reads_narrow_floats_as_written(dtype):
    "rank_test and permutation called directly read float32 as its float64 expansion (0.3 as 0.30000001192092896): Wilcoxon 0.4375 where 0.5"
    from knowlyr_lab.intervals import bootstrap_ci
    from knowlyr_lab.permutation import permutation
    from knowlyr_lab.stats import effective_sample_size, task_bootstrap_ci
    p8, q8 = [.3, .2, .3, .2, .1, .3, .2, .7], [.1, .7, .3, .3, .2, .3, .3, .7]   # differences of 0.1 as written tie
    n = lambda x: np.array(x, dtype)   # noqa: E731
    for paired in (True, False):
        assert rank_test(n(p8), n(q8), paired) == rank_test(np.array(p8), np.array(q8), paired), (dtype, paired)
        assert permutation(n(p8), n(q8), paired) == permutation(np.array(p8), np.array(q8), paired), (dtype, paired)
    assert rank_test(n(p8), n(q8), True)['pvalue'] == 0.5   # float32's expansions: 0.4375
    tasks = list('aabbccdd')
    assert bootstrap_ci(n(p8)) == bootstrap_ci(p8) and task_bootstrap_ci(n(p8), tasks) == task_bootstrap_ci(p8, tasks)
    assert effective_sample_size(n(p8), tasks) == effective_sample_size(p8, tasks)

@pytest.mark.parametrize('a,b,paired,where', [
    ([np.inf, 1, 2], [np.inf, 0, 1], True, 'a: the score at position 0 is inf'),   # 0b1b8280: permutation p NaN, not refused
    ([1, 2, 3], [2, 5, np.inf], False, 'b: the score at position 2 is inf'),
    ([np.inf, np.inf], [1, 2], False, 'a: the score at position 0 is inf'),       # compare_samples: Welch p 1, CI +inf to +inf
    ([1, 2, 3], [-np.inf, 0, 1], False, 'b: the score at position 0 is -inf'),
])
def test_an_infinite_score_is_refused_by_every_entry_point_naming_sample_and_position(a, b, paired, where):
    "compare_samples took infinite scores (Welch p 1 with a CI +inf to +inf; a NaN primary p noted 'both samples are constant'), rank_test ranked them, permutation gave no p: one rule, refused"
    from knowlyr_lab.intervals import bootstrap_ci
    from knowlyr_lab.permutation import permutation
    a32, b32 = np.array(a, np.float32), np.array(b, np.float32)   # float32's inf too
    for f in (lambda: rank_test(np.array(a, float), np.array(b, float), paired), lambda: permutation(a32, b32, paired)):
        with pytest.raises(ValueError, match='sample ' + where):
            f()
    for policy in ('raise', 'omit'):   # not a missing score: never omitted
        with pytest.raises(ValueError, match='reward for ' + ('A' if where[0] == 'a' else 'B') + where[1:]):
            compare_samples(a, b, paired=paired, metric='reward', nan_policy=policy)
    with pytest.raises(ValueError, match='bootstrap_ci values' + where[1:]):
        bootstrap_ci(a if where[0] == 'a' else b)
    nan = permutation(np.r_[np.nan, 1, 2], np.r_[3., 0, 1], paired)   # NaN, a missing score: no p, as before
    assert math.isnan(nan['pvalue']) and nan['exact'] is False

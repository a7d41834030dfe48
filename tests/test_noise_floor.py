"The noise-floor tools against simulation: paired replicate evaluations with a planted effect, fixed seeds"
import numpy as np
import pytest
from scipy import stats

from knowlyr_lab.replicates import flip_rate, noise_floor, paired_mde, replicate_variance, replicates_needed

ALPHA, POWER, SIMS = 0.05, 0.8, 4000

def _tasks(n, seed=0):
    "Per-task success rates of checkpoint B, spread over the range where a policy is neither solved nor hopeless"
    return np.random.default_rng(seed).uniform(0.2, 0.65, n)

def _within(p_b, effect):
    "True replicate variance of one run, averaged over the two checkpoints (p_A = p_B + effect on every task)"
    p_a = p_b + effect
    return float(np.mean((p_a * (1 - p_a) + p_b * (1 - p_b)) / 2))

def _simulated_power(p_b, effect, r, sims=SIMS, seed=1):
    "Share of simulated paired evaluations (n tasks x r replicates per checkpoint) whose paired t test rejects at ALPHA"
    rng = np.random.default_rng(seed)
    n = len(p_b)
    a = rng.binomial(r, np.broadcast_to(p_b + effect, (sims, n))) / r     # per-task mean success over r replicate runs
    b = rng.binomial(r, np.broadcast_to(p_b, (sims, n))) / r
    d = a - b
    sd = d.std(axis=1, ddof=1)
    t = np.where(sd > 0, d.mean(axis=1) / np.where(sd > 0, sd, 1) * np.sqrt(n), 0.0)
    return float((np.abs(t) > stats.t.ppf(1 - ALPHA / 2, n - 1)).mean())

def _mde(p_b, r):
    "paired_mde with the replicate variance at the effect it returns (the variance depends on the effect)"
    m = 0.1
    for _ in range(20): m = paired_mde(len(p_b), r, _within(p_b, m), alpha=ALPHA, power=POWER)
    return m

@pytest.mark.parametrize('n,r', [(60, 1), (30, 3), (20, 8)])
def test_mde_is_where_simulated_power_crosses_the_target(n, r):
    p_b = _tasks(n)
    mde = _mde(p_b, r)
    grid = mde * np.array([0.6, 0.8, 1.0, 1.2, 1.4])
    power = np.array([_simulated_power(p_b, e, r) for e in grid])
    assert np.all(np.diff(power) > 0), power
    crossing = float(np.interp(POWER, power, grid))          # where simulated power reaches the target
    assert abs(crossing - mde) / mde < 0.08, (mde, crossing, power)
    assert abs(power[2] - POWER) < 0.04, power[2]
    assert power[0] < POWER - 0.15 and power[-1] > POWER + 0.08  # the check can tell a wrong MDE from a right one

def test_mde_ignoring_replicates_would_fail():
    "The same check rejects an MDE that forgets replicates average the noise away (the formula with r=1 at r=4)"
    p_b, r = _tasks(100), 4
    wrong = _mde(p_b, 1)
    assert abs(_simulated_power(p_b, _mde(p_b, r), r) - POWER) < 0.04
    assert _simulated_power(p_b, wrong, r) > POWER + 0.15

@pytest.mark.parametrize('effect,n', [(0.08, 40), (0.12, 20)])
def test_replicate_planner_achieves_the_target_power(effect, n):
    p_b = _tasks(n, seed=2)
    r = replicates_needed(effect, n, _within(p_b, effect), alpha=ALPHA, power=POWER)
    assert r >= 2                                             # so that the minimality check below has a smaller count
    assert _simulated_power(p_b, effect, r) >= POWER - 0.03
    assert _simulated_power(p_b, effect, r - 1) < POWER + 0.02  # and fewer replicates are not (reliably) enough

def test_noise_floor_is_exceeded_by_identical_runs_at_rate_alpha():
    "Two single runs of ONE sampled policy on 100 tasks: the gap exceeds the noise floor in about alpha of reruns"
    rng, n = np.random.default_rng(3), 100
    p = _tasks(n, seed=4)
    floor = noise_floor(n, 1, float(np.mean(p * (1 - p))), alpha=ALPHA)
    gaps = rng.binomial(1, np.broadcast_to(p, (SIMS, n))).mean(1) - rng.binomial(1, np.broadcast_to(p, (SIMS, n))).mean(1)
    assert abs((np.abs(gaps) > floor).mean() - ALPHA) < 0.015
    assert 0.08 < floor < 0.15                                # the tau2-bench anchor: single runs must differ by 5.5-11+ points

def test_flip_rate_and_replicate_variance_estimate_the_truth():
    rng, n, r = np.random.default_rng(5), 400, 3
    p = _tasks(n, seed=6)
    runs = rng.binomial(1, np.repeat(p, r)); task = np.repeat(np.arange(n), r)
    truth = float(np.mean(2 * p * (1 - p)))
    assert abs(flip_rate(runs, task) - truth) < 0.03
    assert abs(replicate_variance(runs, task) - truth / 2) < 0.015

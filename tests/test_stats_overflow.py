"Finite scores whose difference, sum or square overflows float64 (1e308 against -1e308) are refused by every entry point, naming the sample and place"
import numpy as np
import pytest

from knowlyr_lab.intervals import bootstrap_ci
from knowlyr_lab.permutation import permutation, rank_test
from knowlyr_lab.replicates import crossed_bootstrap
from knowlyr_lab.stats import compare_samples, effective_sample_size, task_bootstrap_ci

BIG, NEG = np.r_[1e308, 1e308, 5e307], np.r_[-1e308, -1e308, -5e307]   # finite: 1e308 - -1e308 is inf

CALLS = {   # entry point -> (call, the sample and place its error names); on main each gave inf, NaN or a wrong p silently
    'compare_samples': (lambda: compare_samples(BIG, NEG, metric='reward', name_a='new'), 'reward for new: the score at position 0'),
    'compare_samples paired': (lambda: compare_samples(NEG[::-1], BIG, paired=True), 'value for A: the score at position 0'),
    'permutation': (lambda: permutation(BIG, NEG, False), 'permutation sample a: the score at position 0'),
    'permutation paired': (lambda: permutation(np.r_[1., 2, 3], NEG, True), 'permutation sample b: the score at position 0'),
    'rank_test paired': (lambda: rank_test(BIG, NEG, True), 'rank_test sample a: the score at position 0'),
    'bootstrap_ci': (lambda: bootstrap_ci([1., 1.5e308, 1.7e308]), 'bootstrap_ci values: the score at position 1'),
    'task_bootstrap_ci': (lambda: task_bootstrap_ci(np.r_[BIG, NEG], list('aabbcc')), 'task_bootstrap_ci values: the score at position 0'),
    'effective_sample_size': (lambda: effective_sample_size([1e200, 2e200, 3e200, 2.5e200], list('aabb')),
                              'effective_sample_size values: the score at position 0'),
    'crossed_bootstrap': (lambda: crossed_bootstrap([[1., 2, 3], [4, 1e308, -1e308]]), 'crossed_bootstrap diff: the score at run 1, task 1'),
}

@pytest.mark.parametrize('name', list(CALLS))
def test_overflowing_scores_are_refused_naming_the_place(name):
    call, place = CALLS[name]
    with pytest.raises(ValueError) as e: call()
    assert str(e.value).startswith(place) and 'overflows float64' in str(e.value), str(e.value)

def test_scores_past_the_bound_were_a_silent_wrong_welch_p():
    "Their variance (or its square, in Welch's df) overflowed: p 0.126 at 1e100, p 1 at 1e200, for 0.0025; below the bound the p is the same"
    a, b = np.r_[1., 2, 3, 2.5], np.r_[4., 5, 6, 5.5]
    for s in (1e100, 1e200):   # p 0.126 (Welch's df squares an overflowing variance) and p 1, for 0.0025
        with pytest.raises(ValueError, match='at most 1e\\+75 '): compare_samples(a * s, b * s)
    assert compare_samples(a, b).p_value < 0.01 and compare_samples(a * 1e74, b * 1e74).p_value == pytest.approx(compare_samples(a, b).p_value)

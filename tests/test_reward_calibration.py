"Calibrator agreement: held out (cross-validated) agreement does not reward fitting noise, and finds a real miscalibration."
import numpy as np
import pytest

from knowlyr_lab.reward.calibration import Calibrator


def _noise(seed, n=90):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, n), rng.uniform(0, 1, n).round(2), np.repeat(np.arange(n // 3), 3)

@pytest.mark.parametrize('method', ['isotonic', 'logistic'])
def test_held_out_after_does_not_beat_before_on_noise(method):
    "Human scores independent of the automatic ones: in sample the fitted map 'improves' kappa, held out it does not"
    gain_in, gain_out = [], []
    for seed in range(20):
        a, h, g = _noise(seed)
        r = Calibrator(method).fit(a, h, groups=g).report
        gain_in.append(r['after_in_sample']['kappa'] - r['before']['kappa'])
        gain_out.append(r['after_held_out']['kappa'] - r['before']['kappa'])
        assert r['held_out'].startswith('5-fold cross-validation')
    assert np.mean(gain_out) < 0.03 and np.mean(gain_out) < np.mean(gain_in) - 0.03, (np.mean(gain_in), np.mean(gain_out))

def test_held_out_after_finds_a_miscalibrated_scorer():
    "Automatic scores on the wrong scale (human = auto ** 3): the held-out map agrees far better than the raw scores"
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, 120); h = np.clip(a ** 3 + rng.normal(0, 0.05, 120), 0, 1)
    r = Calibrator('isotonic').fit(a, h).report
    assert r['after_held_out']['kappa'] > r['before']['kappa'] + 0.3 and r['after_held_out']['mae'] < r['before']['mae'] / 2

def test_too_few_groups_to_hold_out_says_so():
    r = Calibrator('isotonic').fit([0.1, 0.5, 0.9], [0.2, 0.4, 0.8], groups=['t', 't', 't']).report
    assert r['after_held_out'] is None and 'in sample only' in r['held_out'] and r['after_in_sample']['n'] == 3

"""Ray's local node start on a busy machine: a start that times out is retried (a real ray.init would need a machine
slow enough to miss Ray's 30-second raylet wait, so the timeout is planted in front of the real function)."""
import pytest

from knowlyr_lab.rollout import ray_workers as C

ray = pytest.importorskip('ray')
TIMEOUT = Exception("The current node timed out during startup. This could happen because some of the raylet failed to "
                    "startup or the GCS has become overloaded.")

def _planted(monkeypatch, fails, exc=TIMEOUT):
    calls = []
    def init(**kw):
        calls.append(kw)
        if sum(c != 'shutdown' for c in calls) <= fails: raise exc
        return 'started'
    monkeypatch.setattr(ray, 'init', init); monkeypatch.setattr(ray, 'is_initialized', lambda: False)
    monkeypatch.setattr(ray, 'shutdown', lambda: calls.append('shutdown'))
    return calls

def test_a_local_start_that_times_out_is_retried(monkeypatch, tmp_path):
    monkeypatch.setenv('KNOWLYR_RAY_TMP', str(tmp_path))
    calls = _planted(monkeypatch, fails=2)
    with pytest.warns(UserWarning, match='attempt 2 of 3'):
        assert C._ray_init(None, pause=0) == 'started'
    assert [c for c in calls if c == 'shutdown'] == ['shutdown', 'shutdown'] and len(calls) == 5   # 3 starts, 2 shut-downs

def test_it_gives_up_after_the_last_attempt_with_rays_error(monkeypatch, tmp_path):
    monkeypatch.setenv('KNOWLYR_RAY_TMP', str(tmp_path))
    calls = _planted(monkeypatch, fails=5)
    with pytest.warns(UserWarning), pytest.raises(Exception, match='timed out during startup'): C._ray_init(None, attempts=3, pause=0)
    assert len([c for c in calls if c != 'shutdown']) == 3

def test_other_errors_and_cluster_addresses_are_not_retried(monkeypatch):
    calls = _planted(monkeypatch, fails=1, exc=ValueError('bad num_cpus'))
    with pytest.raises(ValueError, match='bad num_cpus'): C._ray_init(None, pause=0)
    assert len(calls) == 1
    calls = _planted(monkeypatch, fails=1)
    with pytest.raises(Exception, match='timed out'): C._ray_init('ray://127.0.0.1:1', pause=0)
    assert len(calls) == 1

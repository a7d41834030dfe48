"The reward function inside real rollouts: RewardWrapper via the hub's collector (threads and processes)."
import pickle
import pytest
from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.hub.collect import collect
from knowlyr_lab.registry import list_envs
from knowlyr_lab.reward.engine import make_reward_fn, RewardEngine

def _check(trajs):
    eng = RewardEngine('generic')
    assert trajs and all(t.steps for t in trajs)
    for t in trajs:
        offline = eng.score(t)
        assert [round(s.reward, 12) for s in t.steps] == [round(s.reward, 12) for s in offline.steps], t.id
        assert all('rules' in s.reward_details for s in t.steps)

def test_collect_threads_share_one_reward_fn():
    list_envs()   # registry discovery is not thread-safe yet (registry.discover_envs sets its flag before importing)
    fn = make_reward_fn('generic')
    trajs = collect('knowlyr/maze-easy', RandomAgent, 6, reward_fn=fn, n_workers=3, backend='thread', max_steps=25, progress=False)
    _check(trajs)
    assert len({t.task.id for t in trajs}) > 1

@pytest.mark.slow
def test_collect_processes_pickled_reward_fn():
    fn = make_reward_fn('generic')
    assert pickle.loads(pickle.dumps(fn)).engine.config() == fn.engine.config()
    trajs = collect('knowlyr/maze-easy', ExpertAgent, 4, reward_fn=fn, n_workers=2, backend='process', progress=False)
    _check(trajs)
    assert all(t.outcome.success for t in trajs)

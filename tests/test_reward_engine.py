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

def test_preference_records_feed_the_hub_dpo_export(tmp_path):
    import json
    from knowlyr_lab.hub.export import DatasetExporter
    from knowlyr_lab.reward.engine import score_trajectory
    from knowlyr_lab.reward.preferences import build_preferences
    from knowlyr_lab.reward.quality import record_episode
    eng = RewardEngine('generic')
    trajs = [score_trajectory(record_episode('knowlyr/maze-easy', s, eps, name), eng) for s in range(3) for name, eps in [('expert', 0.0), ('mixed', 0.5), ('random', 1.0)]]
    prefs = build_preferences(trajs, level='both', max_pairs_per_task=2)
    recs = [p.to_record() for p in prefs]
    assert {r['level'] for r in recs} == {'trajectory', 'step'} and any(r['level'] == 'step' and r['step'] for r in recs)
    res = DatasetExporter(trajs, preferences=recs).export('dpo', tmp_path / 'dpo')
    rows = [json.loads(l) for f in sorted((tmp_path / 'dpo').glob('*.jsonl')) if f.name != 'quarantine.jsonl' for l in open(f)]
    assert len(rows) == len(recs), res
    for row, rec in zip(rows, recs):
        assert row['chosen'] and row['rejected'] and row['chosen'] != row['rejected']
        assert abs(row['margin'] - rec['margin']) < 1e-9 and row['task_id'] == rec['task_id']
        assert row['chosen'][0]['role'] == 'assistant' and row['prompt'][0]['role'] in ('system', 'user')
        if rec['level'] == 'step' and rec['step']:     # the shared prefix is in the prompt, not in chosen/rejected
            assert len(row['prompt']) > 2 and len(row['chosen']) <= 2 and len(row['rejected']) <= 2

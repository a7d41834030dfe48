"The reward function inside real rollouts: the recorder's step_reward_fn via the hub's collector (threads and processes)."
import pickle

import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.registry import list_envs
from knowlyr_lab.reward.engine import RewardEngine, make_reward_fn
from knowlyr_lab.rollout.collect import collect


def _check(trajs):
    eng = RewardEngine('generic')
    assert trajs and all(t.steps for t in trajs)
    for t in trajs:
        offline = eng.score(t)
        assert [round(s.reward, 12) for s in t.steps] == [round(s.reward, 12) for s in offline.steps], t.id
        assert all('rules' in s.reward_details for s in t.steps)

def test_collect_threads_share_one_step_reward_fn():
    list_envs()   # registry discovery is not thread-safe yet (registry.discover_envs sets its flag before importing)
    fn = make_reward_fn('generic')
    trajs = collect('knowlyr/maze-easy', RandomAgent, 6, step_reward_fn=fn, n_workers=3, backend='thread', max_episode_steps=25, progress=False)
    _check(trajs)
    assert len({t.task.id for t in trajs}) > 1

@pytest.mark.slow
def test_collect_processes_pickled_step_reward_fn():
    fn = make_reward_fn('generic')
    assert pickle.loads(pickle.dumps(fn)).engine.config() == fn.engine.config()
    trajs = collect('knowlyr/maze-easy', ExpertAgent, 4, step_reward_fn=fn, n_workers=2, backend='process', progress=False)
    _check(trajs)
    assert all(t.outcome.success for t in trajs)

def test_preference_records_feed_the_hub_dpo_export(tmp_path):
    import json

    from knowlyr_lab.hub.export import DatasetExporter
    from knowlyr_lab.reward.engine import score_trajectory
    from knowlyr_lab.reward.preferences import build_preferences
    eng = RewardEngine('generic')
    trajs = [score_trajectory(t, eng) for agent in (ExpertAgent, lambda: ExpertAgent(noise=0.5, name='mixed'), RandomAgent)
             for t in collect('knowlyr/maze-easy', agent, 3, progress=False)]
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

def test_rule_patterns_are_read_from_the_env_class():
    "An env declares `reward_patterns`; the engine applies them to that env's trajectories (no engine-side table needed)"
    from knowlyr_lab.core import AgentEnv, TimeStep, Verdict, tool_schema
    from knowlyr_lab.registry import register
    from knowlyr_lab.reward.patterns import rule_patterns
    class Rooms(AgentEnv):
        domain = 'generic'
        reward_patterns = {'state_pattern': r"in room \d+"}
        tool_schemas = [tool_schema('go', 'go somewhere', {'to': {'type': 'string'}}, ['to'])]
        def _reset(self, task=None, seed=None):
            self.room, self.n = 0, 0
            return TimeStep('in room 0', info={'task': {'id': 'rooms-0', 'instruction': 'walk'}})
        def _step(self, tool, params):
            self.room, self.n = {'a': 1, 'b': 2, 'home': 0}[params['to']], self.n + 1
            return TimeStep(f"step {self.n}: in room {self.room}", terminated=self.n == 4,
                            verdict=Verdict(success=True) if self.n == 4 else None)
    register('test/rooms', Rooms, overwrite=True)
    assert rule_patterns('test/rooms') == {'state_pattern': r"in room \d+"}
    from knowlyr_lab.agents import ScriptedAgent
    t = collect('test/rooms', lambda: ScriptedAgent([{'tool': 'go', 'params': {'to': x}} for x in ('a', 'b', 'a', 'home')]), 1, progress=False)[0]
    regression = [s.rules['regression'].score for s in RewardEngine('generic').score(t).steps]
    # back in room 1 is a revisit although every observation differs; so is going home, the state the reset showed
    assert regression == [1.0, 1.0, 0.0, 0.0]

def test_bundled_envs_declare_their_rule_patterns():
    "The engine used to hard-code the maze's and wordle's patterns by env id; the envs declare them now"
    from knowlyr_lab.envs.maze import MazeEnv
    from knowlyr_lab.envs.wordle import WordleEnv
    from knowlyr_lab.reward.patterns import RULE_PATTERNS, rule_patterns
    assert not [k for k in RULE_PATTERNS if k.startswith('knowlyr/')]
    assert rule_patterns('knowlyr/maze-easy') == MazeEnv.reward_patterns and 'state_pattern' in MazeEnv.reward_patterns
    assert rule_patterns('knowlyr/wordle-hard') == WordleEnv.reward_patterns and 'result_pattern' in WordleEnv.reward_patterns

def test_reward_is_one_quantity_collected_or_rescored():
    "The same episode has the same `Trajectory.reward` whether written while collecting or by re-scoring its steps"
    from knowlyr_lab.reward.engine import score_trajectory
    from knowlyr_lab.trajectory import trajectory_score
    trajs = collect('knowlyr/maze-easy', ExpertAgent(), 3, step_reward_fn=make_reward_fn('generic'), max_episode_steps=25, progress=False)
    for t in trajs:
        rescored = score_trajectory(t, RewardEngine('generic'))
        assert t.reward is not None and rescored.reward == pytest.approx(t.reward), (t.reward, rescored.reward)
        assert rescored.reward == pytest.approx(trajectory_score(rescored))
        assert t.outcome.success and t.reward > 1.0          # verified outcome first, process reward within it

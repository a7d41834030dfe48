"A caller's step budget is a layer (issue #26): `collect`/`run_episodes` wrap each env in `StepBudgetWrapper` and never write the env's `max_episode_steps`."
import pytest

from knowlyr_lab.agents import RandomAgent
from knowlyr_lab.budgets import StepBudgetWrapper
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.recipes import online_grpo
from knowlyr_lab.registry import make
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.rollout.engine import run_episodes
from knowlyr_lab.rollout.spec import RolloutSpec
from knowlyr_lab.trainer.grpo import GRPOTrainer
from knowlyr_lab.trainer.grpo_groups import GRPOConfig
from knowlyr_lab.widgets import EnvSession
from knowlyr_lab.wrappers import RecorderWrapper

WRITES = []

class WatchedMaze(MazeEnv):
    "An easy maze that records every write of its step budget after it is built"
    def __init__(self):
        super().__init__('easy')
        self._watch = True
    @property
    def max_episode_steps(self): return self._own_budget
    @max_episode_steps.setter
    def max_episode_steps(self, v):
        if getattr(self, '_watch', False): WRITES.append(v)
        self._own_budget = v

class Look:
    "Looks forever: only a step budget ends its episodes"
    name = 'look'
    def __call__(self, observation, history): return {'tool': 'look'}

def flag_truncation(step, ctx):
    "A step reward that shows what the reward layer saw of the budget"
    return (1.0 if ctx.timestep.truncated else 0.1), {'truncated_by': ctx.timestep.info.get('truncated_by')}

def records(trajs):
    "Trajectories as dicts, without wall-clock times"
    out = []
    for t in trajs:
        d = t.model_dump(mode='json')
        for s in d['steps']: s.pop('t_start'); s.pop('t_end')
        out.append(d)
    return out

def test_collect_never_writes_the_envs_budget():
    WRITES.clear()
    trajs = collect(WatchedMaze, Look, 3, seed=1, max_episode_steps=4, progress=False)
    env = WatchedMaze()
    again = run_episodes([env], [Look()], [(0, None, 7)], RolloutSpec(max_episode_steps=2))
    assert WRITES == []                                   # neither collect nor run_episodes set (or restored) it
    assert env.max_episode_steps == 100                   # the maze's own budget (4 x 5 x 5)
    for t in trajs:
        o, last = t.outcome, t.steps[-1]
        assert (len(t.steps), o.truncated, o.terminated, o.success, o.score, o.reason) == (4, True, False, False, 0.0, 'max_episode_steps')
        assert last.metadata['truncated_by'] == 'max_episode_steps'
    assert (len(again[0].steps), again[0].outcome.reason) == (2, 'max_episode_steps')

def test_wrapper_budget_records_what_the_envs_own_budget_records():
    "The same episodes cut by collect's budget (the wrapper) and by the env's own (`make`): identical records, rewards included"
    kw = dict(seed=3, step_reward_fn=flag_truncation, progress=False)
    by_call = collect(lambda: make('knowlyr/maze-easy'), RandomAgent, 10, max_episode_steps=4, **kw)
    by_env = collect(lambda: make('knowlyr/maze-easy', max_episode_steps=4), RandomAgent, 10, **kw)
    assert records(by_call) == records(by_env)
    cut = [t for t in by_call if t.outcome.truncated]
    assert cut and all(len(t.steps) == 4 and t.outcome.reason == 'max_episode_steps' for t in cut)
    assert all(t.steps[-1].reward == 1.0 and t.steps[-1].reward_details['truncated_by'] == 'max_episode_steps' for t in cut)  # the reward layer saw it
    assert all(len(t.steps) <= 4 for t in by_call)

def test_the_envs_own_smaller_budget_still_holds():
    "The wrapper sits on top of the budget `AgentEnv.step` enforces: a call can shorten episodes, not lengthen them"
    t, = collect(lambda: make('knowlyr/maze-easy', max_episode_steps=3), Look, 1, max_episode_steps=10, progress=False)
    assert (len(t.steps), t.outcome.reason) == (3, 'max_episode_steps')
    w = StepBudgetWrapper(make('knowlyr/maze-easy', max_episode_steps=3), 10)
    assert (w.budget, w.max_episode_steps) == (10, 3)

def test_wrapper_counts_resets_and_refuses_a_new_budget():
    env = RecorderWrapper(StepBudgetWrapper(MazeEnv('easy'), 2), step_reward_fn=flag_truncation)
    for seed in (0, 1):                                   # reset clears the count
        env.reset(seed=seed)
        a, b = env.step({'tool': 'look'}), env.step({'tool': 'look'})
        assert (a.truncated, b.truncated, b.info['max_episode_steps'], b.reward) == (False, True, 2, 1.0)
    with pytest.raises(AttributeError, match='fixed at 2'): env.max_episode_steps = 5   # forwarded down to the wrapper
    with pytest.raises(ValueError, match='max_episode_steps must be an int >= 1'): StepBudgetWrapper(MazeEnv('easy'), True)

def test_old_reward_fn_name_fails(tmp_path):
    "One name per contract: `step_reward_fn` (per step), `episode_reward_fn` (per trajectory); the old name is a TypeError"
    old = {'reward_fn': lambda *a: 0.0}
    calls = [lambda: collect('knowlyr/maze-easy', Look, 1, progress=False, **old),
             lambda: run_episodes([MazeEnv('easy')], [Look()], [(0, None, 0)], **old),
             lambda: evaluate_agent(Look(), 'knowlyr/maze-easy', n_tasks=1, **old),
             lambda: RecorderWrapper(MazeEnv('easy'), **old),
             lambda: EnvSession('knowlyr/maze-easy', **old),
             lambda: GRPOTrainer(GRPOConfig(output_dir=str(tmp_path)), **old),
             lambda: online_grpo(**old)]
    for call in calls:
        with pytest.raises(TypeError, match="unexpected keyword argument 'reward_fn'"): call()

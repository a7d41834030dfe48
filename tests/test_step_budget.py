"""One step budget attribute (issue #14): `max_episode_steps`, set by the env class, its spec or `make`, enforced by `AgentEnv.step`;
a caller's budget for one run is a `StepBudgetWrapper` on top (issue #26, tests/test_step_budget_wrapper.py)."""
import inspect

import pytest

import knowlyr_lab
import knowlyr_lab.budgets
import knowlyr_lab.wrappers
from knowlyr_lab.core import Verdict
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.registry import env_spec, list_envs, make, register
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.rollout.engine import run_episodes
from knowlyr_lab.rollout.spec import RolloutSpec
from knowlyr_lab.wrappers import EnvWrapper, RecorderWrapper


def test_make_sets_the_budget_and_the_core_enforces_it():
    env = RecorderWrapper(make('knowlyr/maze-easy', max_episode_steps=3))
    env.reset(seed=0)
    steps = [env.step('not a tool call'), env.step({'tool': 'look'}), env.step({'tool': 'look'})]   # an invalid action counts
    assert [t.truncated for t in steps] == [False, False, True]
    last = steps[-1].info
    assert (last['truncated_by'], last['max_episode_steps'], steps[-1].verdict.success) == ('max_episode_steps', 3, False)
    o = env.get_trajectory().outcome
    assert (o.truncated, o.success, o.reason) == (True, False, 'max_episode_steps')

def test_spec_budget_and_override():
    assert all(hasattr(env_spec(e), 'max_episode_steps') for e in list_envs())
    from knowlyr_lab.envs.maze import MazeEnv
    from knowlyr_lab.registry import ENVS
    register('test/maze-short', MazeEnv, max_episode_steps=4, overwrite=True)
    try:
        assert env_spec('test/maze-short').max_episode_steps == 4
        assert make('test/maze-short').max_episode_steps == 4                     # the spec's
        assert make('test/maze-short', max_episode_steps=7).max_episode_steps == 7  # make's override
    finally: ENVS.unregister('test/maze-short')
    assert make('knowlyr/maze-easy').max_episode_steps == 100                # neither: the env's own default (4 x 5 x 5)

@pytest.mark.parametrize('env_id', list_envs())
def test_every_env_has_one_budget_attribute(env_id):
    env = make(env_id)
    try:
        assert hasattr(env, 'max_episode_steps') and not hasattr(env, 'max_steps')
        assert 'max_steps' not in inspect.signature(type(env).__init__).parameters
        assert make(env_id, max_episode_steps=2).max_episode_steps == 2
    finally: env.close()

def test_one_step_budget_wrapper():
    assert not hasattr(knowlyr_lab.wrappers, 'MaxStepsWrapper')
    assert 'MaxStepsWrapper' not in dir(knowlyr_lab)
    assert not any('Step' in n for n in knowlyr_lab.wrappers.__all__)
    assert [n for n in knowlyr_lab.budgets.__all__ if 'Step' in n] == ['StepBudgetWrapper']

class Look:
    "Looks forever: only a step budget ends its episodes"
    name = 'look'
    def __call__(self, observation, history): return {'tool': 'look'}

def test_collect_run_episodes_and_evaluate_set_the_same_budget():
    for t in collect('knowlyr/maze-easy', Look, 3, seed=1, max_episode_steps=2, progress=False):
        assert (len(t.steps), t.outcome.truncated, t.steps[-1].metadata['truncated_by']) == (2, True, 'max_episode_steps')
    from knowlyr_lab.envs.maze import MazeEnv
    envs = [EnvWrapper(MazeEnv('easy')) for _ in range(2)]   # set through a wrapper
    trajs = run_episodes(envs, [Look(), Look()], [(0, None, 0), (1, None, 1)], RolloutSpec(max_episode_steps=3))
    assert [len(t.steps) for t in trajs] == [3, 3] and all(e.unwrapped.max_episode_steps == 100 for e in envs)  # this call's budget did not stick
    with pytest.raises(ValueError, match='max_episode_steps must be an int >= 1'): collect('knowlyr/maze-easy', Look, 1, max_episode_steps=0, progress=False)
    class Unbounded(MazeEnv): max_episode_steps = None
    env = Unbounded('easy'); env.max_episode_steps = None                              # an env with no budget of its own...
    assert len(run_episodes([env], [Look()], [(0, None, 0)])[0].steps) == 30           # ...still never runs unbounded
    r = evaluate_agent(Look(), 'knowlyr/maze-easy', n_tasks=3, max_episode_steps=2)
    assert set(r.episodes.reason) == {'max_episode_steps'} and set(r.episodes.steps) == {2}

ACTIONS = {'knowlyr/maze-easy': {'tool': 'look'}, 'knowlyr/wordle': {'tool': 'guess', 'params': {'word': 'qqqqq'}},
           'knowlyr/conversation': {'tool': 'think', 'params': {'thought': 'hm'}}, 'knowlyr/sandbox': {'tool': 'list_dir', 'params': {}}}

@pytest.mark.parametrize('env_id', list(ACTIONS))
def test_envs_do_not_count_steps_themselves(env_id):
    "With the cap lifted no env truncates on its own; with it, each truncates through the core, as one"
    env = make(env_id)
    try:
        default = env.max_episode_steps
        env.max_episode_steps = None; env.reset(seed=0)
        for _ in range(default + 5): assert not env.step(ACTIONS[env_id]).done
        env.max_episode_steps = 2; env.reset(seed=0)
        a, b = env.step(ACTIONS[env_id]), env.step(ACTIONS[env_id])
        assert (a.done, b.truncated, b.info['truncated_by'], b.verdict) == \
               (False, True, 'max_episode_steps', Verdict(success=False, score=0.0, reason='max_episode_steps'))
    finally: env.close()

def test_default_budgets_kept():
    assert {e: make(e).max_episode_steps for e in ('knowlyr/maze-easy', 'knowlyr/maze-hard', 'knowlyr/sandbox', 'knowlyr/conversation',
                                                   'knowlyr/humaneval', 'knowlyr/textarena/Sudoku')} == \
           {'knowlyr/maze-easy': 100, 'knowlyr/maze-hard': 144, 'knowlyr/sandbox': 30, 'knowlyr/conversation': 20,
            'knowlyr/humaneval': 20, 'knowlyr/textarena/Sudoku': 200}
    w = make('knowlyr/wordle-hard')
    assert w.max_episode_steps == 3 * w.max_guesses

def test_target_steps_is_the_efficiency_target_not_a_step_budget():
    "The efficiency rule's target is `target_steps` (profile, scorer, engine, task metadata); `step_budget` only still loads from old data"
    from knowlyr_lab.domains import DomainProfile, get_domain
    from knowlyr_lab.reward.engine import RewardEngine
    from knowlyr_lab.reward.scorer import RuleScorer
    assert 'target_steps' in DomainProfile.model_fields and 'step_budget' not in DomainProfile.model_fields
    assert DomainProfile.model_validate({'domain': 'x', 'step_budget': 7}).target_steps == 7    # a YAML profile from before the rename
    with pytest.raises(TypeError): RuleScorer('generic', step_budget=3)
    with pytest.raises(TypeError): RewardEngine('generic', step_budget=3)
    target = lambda md, **kw: RuleScorer('generic', rules=['efficiency'], **kw).reset({'id': 't', 'metadata': md}).ctx.target_steps
    assert target({}) == get_domain('generic').target_steps == 20
    assert (target({'target_steps': 6, 'step_budget': 5}), target({'step_budget': 5, 'optimal_steps': 4}), target({'optimal_steps': 4})) == (6, 5, 4)
    assert target({'target_steps': 6}, target_steps=2) == 2
    eng = RewardEngine('coding', target_steps=4)
    assert eng.config()['target_steps'] == 4 and 'step_budget' not in eng.config()
    old = {k: v for k, v in eng.config().items() if k != 'target_steps'} | {'step_budget': 4}     # an engine.json saved before the rename
    assert RewardEngine.from_config(old).config() == eng.config()

def test_target_steps_does_not_truncate():
    "A target below the episode's length scales the efficiency score; only `max_episode_steps` ends the episode"
    from knowlyr_lab.reward.engine import make_reward_fn
    env = RecorderWrapper(make('knowlyr/maze-easy', max_episode_steps=5), step_reward_fn=make_reward_fn('generic', target_steps=1))
    env.reset(seed=0)
    steps = [env.step({'tool': 'look'}) for _ in range(5)]
    assert [t.truncated for t in steps] == [False] * 4 + [True]

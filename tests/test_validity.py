"Infrastructure failures are not reward 0: collection marks them invalid; GRPO baselines, preference pairs and success rates leave them out and count them"
import os
import signal
import time

import pytest
import torch

from knowlyr_lab.agents import Agent, ExpertAgent, ScriptedAgent
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.eval.evaluate import EvalResult, compare_agents, leaderboard
from knowlyr_lab.reward.preferences import build_preferences, reward_leaderboard
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.rollout.engine import episode_seed
from knowlyr_lab.sandbox.base import SandboxBackendError
from knowlyr_lab.trainer.losses import grpo_advantages, invalid_counts

TASK = MazeEnv('easy').list_tasks()[0]
DOOMED = {episode_seed(0, i) for i in (2, 7)}          # 2 of 10 episodes: 20% planted infrastructure failures

class DoomedMaze(MazeEnv):
    "A maze whose sandbox dies at the second step of the episodes seeded in DOOMED"
    def __init__(self): super().__init__('easy')
    def _reset(self, task=None, seed=None): self.k, self.doomed = 0, seed in DOOMED; return super()._reset(task, seed)
    def _step(self, tool, params):
        self.k += 1
        if self.doomed and self.k == 2: raise SandboxBackendError("sandbox container exited (OOM-killed)")
        return super()._step(tool, params)

@pytest.fixture(scope='module')
def group():
    "One GRPO group: 10 rollouts of a noisy expert on one maze, 2 of them killed by the infrastructure"
    return collect(DoomedMaze, ExpertAgent(noise=0.3, name="noisy"), 10, tasks=[TASK] * 10, max_episode_steps=10, progress=False)

def test_collection_marks_the_planted_failures_invalid(group):
    assert [i for i, t in enumerate(group) if not t.valid] == [2, 7]
    assert all(t.outcome.invalid == 'SandboxBackendError: sandbox container exited (OOM-killed)' for t in (group[2], group[7]))
    assert all(t.outcome.success is False and t.outcome.reason == 'error' for t in (group[2], group[7]))   # still not a success

def test_grpo_advantages_of_valid_members_equal_the_group_without_the_failures(group):
    R = torch.tensor([t.reward for t in group])
    valid = torch.tensor([t.valid for t in group])
    assert len({round(r, 6) for r in R[valid].tolist()}) > 1                # the valid members disagree: advantages are not all 0
    for scale in ('group', 'batch', 'none'):
        A = grpo_advantages(R, 10, scale=scale, valid=valid)
        torch.testing.assert_close(A[valid], grpo_advantages(R[valid], 8, scale=scale))
        assert A[~valid].tolist() == [0.0, 0.0]
    assert not torch.allclose(grpo_advantages(R, 10)[valid], grpo_advantages(R[valid], 8))   # the fake zeros would shift them
    assert invalid_counts(valid, 10) == {'n_invalid': 2, 'groups_with_invalid': 1, 'groups_without_valid': 0}
    # two groups of different sizes, the failures in the first: each group normalised by its own valid members
    R2, v2 = torch.cat([R, R[:4]]), torch.cat([valid, torch.ones(4, dtype=torch.bool)])
    A2 = grpo_advantages(R2, [10, 4], valid=v2)
    torch.testing.assert_close(A2[v2], grpo_advantages(R2[v2], [8, 4]))
    assert invalid_counts(v2, [10, 4])['n_invalid'] == 2

def test_success_rates_and_comparisons_leave_invalid_episodes_out_and_count_them(group):
    res = EvalResult.from_trajectories(group, 'noisy')
    s = res.summary()
    valid = [t for t in group if t.valid]
    assert (s['n_episodes'], s['n_invalid']) == (10, 2)
    assert s['success_rate'] == sum(t.outcome.success for t in valid) / 8
    assert res.per_task().loc[TASK['id'], 'invalid'] == 2
    clean = EvalResult.from_trajectories(valid, 'clean')
    c = compare_agents(res, clean)
    assert c.diff == 0 and any('left out 2 invalid' in n for n in c.notes)
    assert leaderboard([res, clean]).set_index('agent').n_invalid.to_dict() == {'noisy': 2, 'clean': 0}

def test_preference_pairs_never_use_an_invalid_episode(group):
    rep = build_preferences(group, max_pairs_per_task=10)
    bad = {group[2].id, group[7].id}
    assert rep.counts['invalid'] == 2 and len(rep) > 0
    assert not any(p.chosen.id in bad or p.rejected.id in bad for p in rep)
    assert rep.to_frame().equals(build_preferences([t for t in group if t.valid], max_pairs_per_task=10).to_frame())
    lb = reward_leaderboard(group)
    assert (lb.n[0], lb.invalid[0]) == (8, 2)

class SandboxKiller(ExpertAgent):
    "The expert, but before its second action the env's sandbox dies (closed under it)"
    name = 'killer'
    def __init__(self): super().__init__(); self.n = 0
    def __call__(self, obs, history):
        self.n += 1
        if self.n == 2: self.env.unwrapped.sandbox.close()
        return super().__call__(obs, history)

def test_a_real_sandbox_dying_mid_episode_gives_an_invalid_episode():
    died, = collect('knowlyr/sandbox', SandboxKiller, 1, progress=False)
    assert (died.valid, len(died.steps)) == (False, 1)
    assert died.outcome.invalid.startswith('SandboxBackendError:') and 'closed' in died.outcome.invalid
    ok, = collect('knowlyr/sandbox', ExpertAgent, 1, progress=False)
    assert (ok.valid, ok.outcome.success) == (True, True)

class ServerKiller(Agent):
    "Plays the expert's moves; before its third action it kills the remote env's server"
    name = 'server-killer'
    def __init__(self, pid): self.pid, self.n, self.env = pid, 0, None
    def bind_env(self, env): self.env = env
    def __call__(self, obs, history):
        self.n += 1
        if self.n == 3: os.killpg(self.pid, signal.SIGKILL)
        return self.env.unwrapped.oracle_action()

def test_a_remote_env_server_dying_mid_episode_gives_an_invalid_episode():
    from knowlyr_lab.envs.remote import AgentGymClient
    from knowlyr_lab.envs.serve import EnvServer
    srv = EnvServer('knowlyr/maze-easy', 'agentgym', expose_oracle=True)
    try:
        ok, = collect(lambda: AgentGymClient(srv.url, name='maze', step_timeout=60), ExpertAgent, 1, progress=False)
        dead, = collect(lambda: AgentGymClient(srv.url, name='maze', step_timeout=60), lambda: ServerKiller(srv.proc.pid), 1, progress=False)
    finally: srv.kill()
    assert ok.valid and ok.outcome.success
    assert not dead.valid and dead.outcome.invalid.startswith('RemoteEnvError: AgentGym server') and len(dead.steps) == 2

class SlowMaze(MazeEnv):
    def __init__(self): super().__init__('easy')
    def _step(self, tool, params): time.sleep(0.3); return super()._step(tool, params)

def test_harness_timeout_and_a_failed_judge_are_invalid_but_bad_actions_are_not():
    timed, = collect(SlowMaze, ExpertAgent, 1, step_timeout=0.05, progress=False)
    assert (timed.valid, timed.outcome.truncated) == (False, True) and timed.outcome.invalid.startswith('harness timeout')
    def judge(step, ctx): raise ConnectionRefusedError("judge endpoint 127.0.0.1:9 refused")
    judged, = collect('knowlyr/maze-easy', ExpertAgent, 1, step_reward_fn=judge, progress=False)
    assert not judged.valid and 'reward function failed' in judged.outcome.invalid
    bad, = collect('knowlyr/maze-easy', lambda: ScriptedAgent([{'tool': 'fly', 'params': {}}, 'gibberish', {'tool': 'submit', 'params': {}}]), 1,
                   progress=False)
    assert (bad.valid, bad.outcome.success) == (True, False)       # unknown tool, unparsable text, wrong submit: the policy's
    ran_out, = collect('knowlyr/maze-easy', lambda: ScriptedAgent([{'tool': 'look', 'params': {}}]), 1, progress=False)
    assert (ran_out.valid, ran_out.outcome.reason) == (True, 'error')   # an agent out of script failed by itself

"Rollouts across backends: same seed -> same trajectories; LLM agents through the real SDKs against FakeLLMServer"
import os

import pytest

from knowlyr_lab.agents import AnthropicAgent, ExpertAgent, OpenAIAgent, RandomAgent
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.rollout.collect import collect, iter_collect
from knowlyr_lab.testing import FakeLLMServer, Reply


def _ids(trajs): return [t.id for t in trajs]

def test_expert_solves_every_easy_maze():
    tr = collect('knowlyr/maze-easy', ExpertAgent, 10, seed=7, progress=False)
    assert sum(t.outcome.success for t in tr) == 10
    assert all(t.steps[-1].action.tool == 'submit' for t in tr)

def test_noisy_expert_success_rate_is_reproducible():
    a = collect('knowlyr/maze-medium', ExpertAgent(noise=0.2), 8, seed=3, max_episode_steps=40, progress=False)
    b = collect('knowlyr/maze-medium', ExpertAgent(noise=0.2), 8, seed=3, max_episode_steps=40, n_workers=2, progress=False)
    assert _ids(a) == _ids(b)
    assert 0 < sum(bool(t.outcome.success) for t in a) < 8   # random actions include early submits

@pytest.mark.slow
def test_same_seed_same_trajectories_threads_and_processes():
    base = collect('knowlyr/maze-easy', RandomAgent, 8, seed=11, max_episode_steps=10, progress=False)
    thr = collect('knowlyr/maze-easy', RandomAgent, 8, seed=11, max_episode_steps=10, n_workers=2, progress=False)
    prc = collect('knowlyr/maze-easy', RandomAgent, 8, seed=11, max_episode_steps=10, n_workers=2, backend='process', progress=False)
    assert _ids(base) == _ids(thr) == _ids(prc)
    assert len(set(_ids(base))) == 8
    other = collect('knowlyr/maze-easy', RandomAgent, 8, seed=12, max_episode_steps=10, progress=False)
    assert _ids(other) != _ids(base)

@pytest.fixture(scope='module')
def local_ray():
    "One local Ray for this file's Ray tests (starting one is slow on a busy machine), shut down after them"
    import shutil
    import tempfile

    import ray
    tmp = tempfile.mkdtemp(prefix='kr-')          # short path: Ray's socket paths must stay under 107 bytes
    os.environ['KNOWLYR_RAY_TMP'] = tmp
    try: yield
    finally: ray.shutdown(); os.environ.pop('KNOWLYR_RAY_TMP', None); shutil.rmtree(tmp, ignore_errors=True)

@pytest.mark.ray
def test_ray_backend_matches_threads(local_ray):
    base = collect('knowlyr/maze-easy', RandomAgent, 6, seed=5, max_episode_steps=10, progress=False)
    ry = collect('knowlyr/maze-easy', RandomAgent, 6, seed=5, max_episode_steps=10, n_workers=2, backend='ray', progress=False)
    assert _ids(ry) == _ids(base)

@pytest.mark.ray
def test_ray_workers_close_their_envs(local_ray, tmp_path):
    "Ray actors were killed with their envs open: a sandbox env's temporary folders and uid leases outlived the run"
    import uuid
    marks = tmp_path
    class MarkedMaze(MazeEnv):
        "A maze that leaves a file while it is open, and one per episode started"
        def __init__(self): super().__init__('easy'); self._mark = marks / f'open-{uuid.uuid4().hex}'; self._mark.touch()
        def close(self): self._mark.unlink(missing_ok=True); super().close()
        def _reset(self, task=None, seed=None): (marks / f'reset-{uuid.uuid4().hex}').touch(); return super()._reset(task, seed)
    ts = collect(MarkedMaze, ExpertAgent, 4, n_workers=2, backend='ray', progress=False)
    assert [t.outcome.success for t in ts] == [True] * 4 and len(list(marks.glob('reset-*'))) == 4
    assert not list(marks.glob('open-*'))                        # every actor's env closed
    for f in marks.iterdir(): f.unlink()
    it = iter_collect(MarkedMaze, ExpertAgent, 40, n_workers=2, backend='ray', progress=False)
    next(it); it.close()                                         # the caller stops after one episode
    assert not list(marks.glob('open-*'))                        # closed then too
    assert len(list(marks.glob('reset-*'))) < 40                 # and the episodes not started never ran
    class BadClose(MazeEnv):
        "A maze whose teardown fails"
        def close(self): raise RuntimeError('sandbox teardown failed')
    with pytest.warns(UserWarning, match='BadClose.close.. failed: RuntimeError: sandbox teardown failed'):
        ts = collect(BadClose, ExpertAgent, 4, env_kwargs={'difficulty': 'easy'}, n_workers=2, backend='ray', progress=False)
    assert [t.outcome.success for t in ts] == [True] * 4         # a failed teardown costs a warning, not the episodes

@pytest.mark.ray
def test_a_dead_ray_actor_loses_only_its_own_episodes(local_ray):
    "An actor whose process died mid-run (OOM kill, os._exit) lost the whole run: collect raised RayActorError"
    from knowlyr_lab.rollout.engine import episode_seed
    driver, die = os.getpid(), episode_seed(0, 2)
    class KilledMaze(MazeEnv):
        "A maze whose actor process dies (as if OOM-killed) in episode 2"
        def __init__(self): super().__init__('easy')
        def _reset(self, task=None, seed=None):
            if seed == die and os.getpid() != driver: os._exit(137)
            return super()._reset(task, seed)
    clean = collect(KilledMaze, ExpertAgent, 5, progress=False)            # in this process, nothing dies
    ts = collect(KilledMaze, ExpertAgent, 5, n_workers=2, backend='ray', progress=False)
    assert [t.metadata['episode'] for t in ts] == list(range(5))          # every episode asked for comes back
    assert [t.valid for t in ts] == [True, True, False, True, True]       # the one that killed its actor: invalid
    dead = ts[2]
    assert dead.outcome.invalid.startswith('worker died: Ray actor') and dead.outcome.success is False, dead.outcome.invalid
    assert dead.metadata['seed'] == die and dead.metadata['error']['type'] == 'WorkerDied'
    assert [t.id for k, t in enumerate(ts) if k != 2] == [t.id for k, t in enumerate(clean) if k != 2]  # the rest as a clean run

@pytest.mark.ray
def test_a_dead_ray_actor_costs_only_the_episode_that_killed_it_with_a_batch_agent(local_ray):
    "With a batch agent, the episode that killed its actor failed its whole chunk: 3 episodes lost for 1"
    from knowlyr_lab.rollout.engine import episode_seed
    driver, die = os.getpid(), episode_seed(0, 4)
    class KilledMaze(MazeEnv):
        "A maze whose actor process dies (as if OOM-killed) in episode 4"
        def __init__(self): super().__init__('easy')
        def _reset(self, task=None, seed=None):
            if seed == die and os.getpid() != driver: os._exit(137)
            return super()._reset(task, seed)
    class BatchLooker:
        "A batch agent: one call acts for every episode of its chunk (looks, then submits)"
        def act_batch(self, observations, histories):
            return [{'tool': 'submit' if len(h) > 2 else 'look', 'params': {}} for h in histories]
    clean = collect(KilledMaze, BatchLooker, 6, batch_size=3, progress=False)     # in this process, nothing dies
    ts = collect(KilledMaze, BatchLooker, 6, n_workers=2, batch_size=3, backend='ray', progress=False)
    assert [t.metadata['episode'] for t in ts] == list(range(6))
    assert [t.valid for t in ts] == [True] * 4 + [False, True]                # only the killer is lost
    assert ts[4].outcome.invalid.startswith('worker died: Ray actor') and ts[4].metadata['seed'] == die
    assert [t.id for k, t in enumerate(ts) if k != 4] == [t.id for k, t in enumerate(clean) if k != 4]

@pytest.mark.ray
def test_ray_actors_that_cannot_be_built_end_the_run(local_ray, monkeypatch):
    "Restarts are bounded: actors that die being built (their plan cannot be rebuilt there) end the run with the reason"
    from knowlyr_lab.rollout import workers as W
    driver = os.getpid()
    def refuse(pid):
        if os.getpid() != pid: raise RuntimeError('this handle cannot be rebuilt in another process')
        return Handle()
    class Handle:
        "An env argument that only this process can rebuild (a local resource's handle)"
        def __reduce__(self): return (refuse, (driver,))
    monkeypatch.setattr(W, 'POOL_RESTARTS', 0)
    with pytest.raises(RuntimeError, match='Ray actors died 2 times in a row before running a chunk'):
        collect(MazeEnv, ExpertAgent, 3, env_kwargs={'difficulty': 'easy', 'h': Handle()}, n_workers=1, backend='ray', progress=False)

@pytest.mark.ray
def test_an_early_stop_closes_the_envs_of_busy_ray_actors(local_ray, tmp_path, monkeypatch):
    "A caller that stopped early while actors were mid-episode: they were killed after the grace (STOP_GRACE) with their envs open"
    import time
    import uuid
    import warnings

    from knowlyr_lab.rollout import workers as W
    from knowlyr_lab.rollout.engine import episode_seed
    marks, fast = tmp_path, episode_seed(0, 0)
    class SlowMaze(MazeEnv):
        "A maze that leaves a file while it is open; its steps take 0.2 s, but in episode 0"
        def __init__(self): super().__init__('easy'); self._mark = marks / f'open-{uuid.uuid4().hex}'; self._mark.touch()
        def close(self): self._mark.unlink(missing_ok=True); super().close()
        def _reset(self, task=None, seed=None): self._slow = seed != fast; return super()._reset(task, seed)
        def _step(self, tool, params):
            if self._slow: time.sleep(0.2)
            return super()._step(tool, params)
    def looker(obs, history): return {'tool': 'look', 'params': {}}
    monkeypatch.setattr(W, 'STOP_GRACE', 4.0)      # the busy actors' episodes take 6 s
    it = iter_collect(SlowMaze, looker, 6, n_workers=2, backend='ray', max_episode_steps=30, progress=False)
    assert next(it).metadata['episode'] == 0
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter('always'); it.close()         # the caller stops: the other actor is mid-episode
    assert not list(marks.glob('open-*')), [str(w.message) for w in ws]   # every actor closed its envs
    assert not [w for w in ws if 'Ray' in str(w.message)]

def _maze_responder(req, api):
    msgs = req['messages']
    n = sum(1 for m in msgs if m['role'] == 'tool') + sum(1 for m in msgs if isinstance(m.get('content'), list) and any(b.get('type') == 'tool_result' for b in m['content']))
    if n == 0: return Reply(text='Look first.', tool_calls=[{'name': 'look', 'arguments': {}}], input_tokens=20, output_tokens=4)
    return Reply(tool_calls=[{'name': 'submit', 'arguments': {}}], input_tokens=30, output_tokens=2)

@pytest.mark.parametrize('kind', ['openai', 'anthropic'])
def test_llm_agent_rollouts_record_usage_and_history(kind):
    with FakeLLMServer(_maze_responder) as srv:
        agent = (OpenAIAgent('fake', base_url=srv.openai_base_url) if kind == 'openai'
                 else AnthropicAgent('fake', base_url=srv.anthropic_base_url))
        tr = collect('knowlyr/maze-easy', agent, 3, seed=0, n_workers=2, progress=False)
        n_req = len(srv.requests)
    assert n_req == 6
    for t in tr:
        assert [s.action.tool for s in t.steps] == ['look', 'submit']
        assert t.steps[0].thought == 'Look first.'
        assert (t.steps[0].usage.input, t.steps[1].usage.output) == (20, 2)
        assert t.agent.name == kind and t.agent.model == 'fake'
        assert t.outcome.success is False    # submitting at the start is wrong

def test_failing_endpoint_gives_failed_trajectories_not_lost():
    with FakeLLMServer(faults=['500'] * 20) as srv:
        tr = collect('knowlyr/maze-easy', OpenAIAgent('fake', base_url=srv.openai_base_url, max_retries=0), 3, progress=False)
    assert len(tr) == 3
    assert all(t.outcome.reason == 'error' and t.outcome.success is False for t in tr)
    assert all('InternalServerError' == t.metadata['error']['type'] for t in tr)

def test_failed_reset_keeps_the_task_as_as_task_reads_it():
    "#14 A3: an episode whose reset raised kept only the task's id and instruction (its metadata and domain were dropped)"
    from knowlyr_lab.core import AgentEnv
    from knowlyr_lab.rollout.engine import run_episode
    from knowlyr_lab.trajectory import as_task
    class Broken(AgentEnv):
        domain, env_id, tool_schemas = 'coding', 'test/broken', []
        def _reset(self, task=None, seed=None): raise RuntimeError('no workspace')
        def _step(self, tool, params): raise AssertionError('never stepped')
    task = {'id': 't1', 'instruction': 'fix it', 'seed': 4, 'metadata': {'optimal_steps': 3}}
    tr = run_episode(Broken(), ExpertAgent(), task=task, seed=4)
    assert tr.outcome.success is False and tr.metadata['error']['type'] == 'RuntimeError'
    assert tr.task == as_task(task, domain='coding', env_id='test/broken')
    assert tr.task.metadata == {'optimal_steps': 3, 'seed': 4} and tr.task.domain == 'coding'

def test_llm_agent_episodes_run_in_lock_step_with_concurrent_requests():
    "#15: an OpenAI-compatible agent's episodes share turns (act_batch): requests of different episodes are in flight together"
    import threading
    import time
    flight, lock = {'now': 0, 'most': 0}, threading.Lock()
    def slow(req, api):
        with lock: flight['now'] += 1; flight['most'] = max(flight['most'], flight['now'])
        time.sleep(0.2)
        with lock: flight['now'] -= 1
        return _maze_responder(req, api)
    with FakeLLMServer(slow) as srv:
        tr = collect('knowlyr/maze-easy', OpenAIAgent('fake', base_url=srv.openai_base_url), 4, seed=0, progress=False)
        n_req = len(srv.requests)
    assert n_req == 8 and flight['most'] == 4          # 2 turns x 4 episodes, each turn's 4 requests in flight at once
    assert all([s.action.tool for s in t.steps] == ['look', 'submit'] for t in tr)
    assert all((t.steps[0].usage.input, t.steps[1].usage.output) == (20, 2) for t in tr)

def test_one_failed_request_fails_its_episode_only():
    "#15: in a lock-step turn, a request that fails after retries fails that episode; the others go on"
    with FakeLLMServer(_maze_responder, faults=['500']) as srv:
        tr = collect('knowlyr/maze-easy', OpenAIAgent('fake', base_url=srv.openai_base_url, max_retries=0), 3, seed=0, progress=False)
    assert len(tr) == 3
    failed = [t for t in tr if t.outcome.reason == 'error']
    assert len(failed) == 1 and failed[0].metadata['error']['type'] == 'InternalServerError'
    assert all([s.action.tool for s in t.steps] == ['look', 'submit'] for t in tr if t not in failed)

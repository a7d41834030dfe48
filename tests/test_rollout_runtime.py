"""One rollout runtime (issue 38 item 1): one module builds the wrapper stack, every caller takes a `RolloutSpec`, and whether an
episode is an infrastructure failure does not depend on what else the interpreter imported."""
import ast
import inspect
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import knowlyr_lab
from knowlyr_lab.agents import ScriptedAgent
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.hub.pipeline import PipelineConfig
from knowlyr_lab.rollout.collect import collect, iter_collect
from knowlyr_lab.rollout.engine import run_episode, run_episodes
from knowlyr_lab.rollout.spec import RolloutSpec, Workers
from knowlyr_lab.widgets import EnvSession, EnvStepper

PKG = Path(knowlyr_lab.__file__).parent
LAYERS = {'StepBudgetWrapper', 'MaxInvalidActionsWrapper', 'TimeoutWrapper', 'RecorderWrapper'}

def _builds(path:Path)->list[str]:
    "Where a module constructs a wrapper layer: `file:line name`"
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in LAYERS: out.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {name}")
    return out

def test_one_module_builds_the_wrapper_stack():
    builds = [b for p in sorted(PKG.rglob('*.py')) if p.name != '_modidx.py' for b in _builds(p)]
    assert builds and all(b.startswith('knowlyr_lab/rollout/spec.py:') for b in builds), builds
    assert {b.split()[-1] for b in builds} == LAYERS                  # ... and it builds every layer

def test_every_caller_takes_a_spec():
    for f in (collect, iter_collect, evaluate_agent):
        ps = inspect.signature(f).parameters
        assert {'spec', 'workers'} <= set(ps) and not {'max_episode_steps', 'step_reward_fn', 'n_workers', 'backend'} & set(ps), f
    for f in (run_episodes, run_episode, EnvSession, EnvStepper):
        ps = inspect.signature(f).parameters
        assert 'spec' in ps and not {'max_episode_steps', 'step_reward_fn'} & set(ps), f
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    from knowlyr_lab.trainer.sft import oracle_trajectories
    assert 'spec' in inspect.signature(oracle_trajectories).parameters
    assert GRPOConfig(max_episode_steps=3, max_invalid_actions=1).rollout == RolloutSpec(max_episode_steps=3, max_invalid_actions=1)
    assert PipelineConfig('out', max_episode_steps=3).rollout == RolloutSpec(max_episode_steps=3)

class Slips:
    "Looks once, then sends calls the maze cannot run"
    name = 'slips'
    def __init__(self): self.n = 0
    def __call__(self, observation, history):
        self.n += 1
        return {'tool': 'look'} if self.n == 1 else {'tool': 'jump'}

def _cut(t): return len(t.steps), t.outcome.reason, t.steps[-1].metadata.get('truncated_by')

def test_one_spec_means_the_same_episode_everywhere():
    "The same spec through collect, evaluate_agent, the engine and the stepper session: the same cut"
    spec = RolloutSpec(max_episode_steps=5, max_invalid_actions=2)
    want = (3, 'truncated', 'max_invalid_actions')
    task = MazeEnv('easy').list_tasks()[0]
    t, = collect('knowlyr/maze-easy', Slips, 1, tasks=[task], spec=spec, progress=False)
    assert _cut(t) == want
    r = evaluate_agent(Slips, 'knowlyr/maze-easy', tasks=[task], spec=spec, workers=Workers(1), progress=False)
    assert list(r.episodes.steps) == [3] and list(r.episodes.reason) == ['truncated']
    assert _cut(run_episode(MazeEnv('easy'), Slips(), task, 0, spec=spec)) == want
    s = EnvSession('knowlyr/maze-easy', Slips(), spec)
    s.reset(task=task['id'], seed=0); s.run()
    assert _cut(s.trajectory) == want
    t, = collect('knowlyr/maze-easy', ScriptedAgent([{'tool': 'look'}] * 9), 1, tasks=[task], spec=spec, progress=False)
    assert _cut(t) == (5, 'max_episode_steps', 'max_episode_steps')     # the budget, the same spec

def test_settings_as_keywords_build_the_same_spec():
    task = MazeEnv('easy').list_tasks()[0]
    a, = collect('knowlyr/maze-easy', Slips, 1, tasks=[task], max_episode_steps=5, max_invalid_actions=2, progress=False)
    b, = collect('knowlyr/maze-easy', Slips, 1, tasks=[task], spec=RolloutSpec(max_episode_steps=5, max_invalid_actions=2), progress=False)
    assert a.id == b.id
    with pytest.raises(TypeError, match='not both'): collect('knowlyr/maze-easy', Slips, 1, spec=RolloutSpec(), max_episode_steps=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_steps'"): evaluate_agent(Slips, 'knowlyr/maze-easy', n_tasks=1, max_steps=3)

# --- the infrastructure verdict, in fresh interpreters that import more and more
PROBE = textwrap.dedent('''
    import importlib, json, pkgutil, sys
    how = sys.argv[1]
    if how == 'everything':                      # every module of the package that imports here (optional extras may be missing)
        import knowlyr_lab
        for m in pkgutil.walk_packages(knowlyr_lab.__path__, 'knowlyr_lab.'):
            if m.name.endswith('__main__'): continue
            try: importlib.import_module(m.name)
            except ImportError: pass
    from knowlyr_lab.core import AgentEnv, InfrastructureError, TimeStep, tool_schema
    from knowlyr_lab.envs.conversation import UserSimulatorError
    from knowlyr_lab.envs.remote import RemoteEnvError
    from knowlyr_lab.sandbox.base import SandboxBackendError, SandboxError, SandboxUnavailableError
    from knowlyr_lab.wrappers import RecorderWrapper

    class JudgeDown(InfrastructureError): "a page's own infrastructure failure"
    def chained():
        try: raise RemoteEnvError('server gone')
        except RemoteEnvError as e: raise ValueError('could not parse the reply') from e
    ERRORS = {'sandbox died': lambda: SandboxBackendError('container exited'), 'no sandbox': lambda: SandboxUnavailableError('no bwrap'),
              'remote dropped': lambda: RemoteEnvError('connection lost'), 'user simulator': lambda: UserSimulatorError('model failed'),
              'connection': lambda: ConnectionError('refused'), 'timeout': lambda: TimeoutError('slow'), 'own subclass': lambda: JudgeDown('judge down'),
              'workspace error': lambda: SandboxError('permission denied'), 'env bug': lambda: KeyError('k'), 'chained': chained}

    class Dying(AgentEnv):
        "Raises `err` at its second step"
        def __init__(self, err): self.err = err
        @property
        def tool_schemas(self): return [tool_schema('look'), tool_schema('submit')]
        def _reset(self, task=None, seed=None): self.k = 0; return TimeStep('look twice', info={'task': {'id': 'dying'}})
        def _step(self, tool, params):
            self.k += 1
            if self.k == 2: raise self.err()
            return TimeStep('nothing')

    def by_recorder(err):
        rec = RecorderWrapper(Dying(err))
        rec.reset(seed=0)
        try:
            for _ in range(3): rec.step({'tool': 'look'})
        except Exception: pass
        return rec.get_trajectory().outcome.invalid

    def by_engine(err):
        from knowlyr_lab.agents import ScriptedAgent
        from knowlyr_lab.rollout.engine import run_episode
        return run_episode(Dying(err), ScriptedAgent([{'tool': 'look'}] * 3), seed=0).outcome.invalid

    run = by_recorder if how == 'fresh' else by_engine
    print(json.dumps({name: run(err) for name, err in ERRORS.items()}))
''')

def test_the_infrastructure_verdict_is_the_same_whatever_was_imported():
    def probe(how):
        r = subprocess.run([sys.executable, '-c', PROBE, how], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    runs = {how: probe(how) for how in ('fresh', 'engine', 'everything')}
    assert runs['fresh'] == runs['engine'] == runs['everything'], runs
    assert runs['fresh'] == {
        'sandbox died': 'SandboxBackendError: container exited', 'no sandbox': 'SandboxUnavailableError: no bwrap',
        'remote dropped': 'RemoteEnvError: connection lost', 'user simulator': 'UserSimulatorError: model failed',
        'connection': 'ConnectionError: refused', 'timeout': 'TimeoutError: slow', 'own subclass': 'JudgeDown: judge down',
        'workspace error': None, 'env bug': None, 'chained': 'RemoteEnvError: server gone'}


MARKED_MAZE = '''
import os, uuid
from pathlib import Path
from knowlyr_lab.envs.maze import MazeEnv
DIR = Path(os.environ['KNOWLYR_TEST_MARKS'])
class MarkedMaze(MazeEnv):
    "A maze that leaves a file while it is open, and one per episode started"
    def __init__(self):
        super().__init__('easy'); self._mark = DIR / f'open-{uuid.uuid4().hex}'; self._mark.touch()
    def close(self): self._mark.unlink(missing_ok=True); super().close()
    def _reset(self, task=None, seed=None):
        (DIR / f'reset-{uuid.uuid4().hex}').touch(); return super()._reset(task, seed)
'''

def test_process_workers_close_their_envs(tmp_path, monkeypatch):
    "A process pool's workers left every env open at exit, and closing the iterator early waited for every episode"
    from knowlyr_lab.agents import ExpertAgent
    (tmp_path / 'marked_maze.py').write_text(MARKED_MAZE)
    marks = tmp_path / 'marks'; marks.mkdir()
    monkeypatch.setenv('KNOWLYR_TEST_MARKS', str(marks)); monkeypatch.syspath_prepend(str(tmp_path))
    from marked_maze import MarkedMaze
    ts = collect(MarkedMaze, ExpertAgent, 4, n_workers=2, backend='process', progress=False)
    assert [t.outcome.success for t in ts] == [True] * 4
    assert not list(marks.glob('open-*')) and len(list(marks.glob('reset-*'))) == 4
    for f in marks.iterdir(): f.unlink()
    it = iter_collect(MarkedMaze, ExpertAgent, 40, n_workers=2, backend='process', progress=False)
    next(it); it.close()                                         # the caller stops after one episode
    assert not list(marks.glob('open-*'))                        # every worker's env closed
    assert len(list(marks.glob('reset-*'))) < 40                 # and the episodes not started never ran

SLOW_MAZE = MARKED_MAZE + '''
import time
class SlowMaze(MarkedMaze):
    "A marked maze whose steps take 0.2 s, but in the episode seeded KNOWLYR_TEST_FAST_SEED; it counts its slow steps"
    def __init__(self): super().__init__(); self._n = 0
    def close(self):                # the slow steps this env took, then the mark removed
        self._mark.with_name('steps' + self._mark.name[4:]).write_text(str(self._n)); super().close()
    def _reset(self, task=None, seed=None):
        self._slow = str(seed) != os.environ.get('KNOWLYR_TEST_FAST_SEED'); return super()._reset(task, seed)
    def _step(self, tool, params):
        if self._slow: time.sleep(0.2); self._n += 1
        return super()._step(tool, params)
def looker(obs, history): return {'tool': 'look', 'params': {}}
'''

@pytest.mark.parametrize('backend', ['thread', 'process'])
def test_an_early_stop_ends_busy_workers_and_closes_their_envs(backend, tmp_path, monkeypatch):
    "A caller that stopped early waited for each busy worker to end its episode (30 steps of 0.2 s) before its env closed"
    from knowlyr_lab.rollout.engine import episode_seed
    (tmp_path / 'slow_maze.py').write_text(SLOW_MAZE)
    marks = tmp_path / 'marks'; marks.mkdir()
    monkeypatch.setenv('KNOWLYR_TEST_MARKS', str(marks)); monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv('KNOWLYR_TEST_FAST_SEED', str(episode_seed(0, 0)))   # episode 0 ends at once, the others take 6 s
    from slow_maze import SlowMaze, looker
    it = iter_collect(SlowMaze, looker, 6, n_workers=2, backend=backend, max_episode_steps=30, progress=False)
    first = next(it)
    it.close()                                                       # the caller stops: both workers are mid-episode
    assert first.metadata['episode'] == 0 and len(first) == 30
    assert not list(marks.glob('open-*'))                            # every env was closed
    slow = sum(int(p.read_text()) for p in marks.glob('steps-*'))
    assert slow < 60, f"{slow} slow steps: the busy workers played their episodes to the end"   # they ended at a turn

HUNG_MAZE = MARKED_MAZE + '''
import threading, time
RELEASE = threading.Event()
class HungMaze(MarkedMaze):
    "A marked maze whose first step in the episode seeded KNOWLYR_TEST_HANG_SEED hangs (30 s, or until RELEASE is set)"
    def _reset(self, task=None, seed=None):
        self._hang = str(seed) == os.environ.get('KNOWLYR_TEST_HANG_SEED'); return super()._reset(task, seed)
    def _step(self, tool, params):
        if self._hang:
            self._hang = False; (DIR / f'hung-{os.getpid()}').touch()
            RELEASE.wait(30); (DIR / 'woke').touch()
        return super()._step(tool, params)
def looker(obs, history): return {'tool': 'look', 'params': {}}
'''

@pytest.mark.parametrize('backend', ['thread', 'process'])
def test_a_step_that_hangs_does_not_hold_up_a_stopped_run(backend, tmp_path, monkeypatch):
    "After a stop, threads and processes waited without limit for a step that hangs (no step_timeout): close never returned"
    import os

    from knowlyr_lab.rollout import workers as W
    from knowlyr_lab.rollout.engine import episode_seed
    (tmp_path / 'hung_maze.py').write_text(HUNG_MAZE)
    marks = tmp_path / 'marks'; marks.mkdir()
    monkeypatch.setenv('KNOWLYR_TEST_MARKS', str(marks)); monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv('KNOWLYR_TEST_HANG_SEED', str(episode_seed(0, 1)))    # episode 1's first step hangs
    monkeypatch.setattr(W, 'STOP_GRACE', 3.0)
    from hung_maze import RELEASE, HungMaze, looker
    it = iter_collect(HungMaze, looker, 4, n_workers=2, backend=backend, max_episode_steps=2, progress=False)
    try:
        assert sorted(next(it).metadata['episode'] for _ in range(3)) == [0, 2, 3]   # the other worker ran the rest
        for _ in range(600):                                             # until episode 1's step has hung
            if hung := list(marks.glob('hung-*')): break
            time.sleep(0.05)
        with pytest.warns(UserWarning, match=r"episode 1 was still running 3 s after the run stopped"):
            it.close()                                                   # the caller stops
        assert not (marks / 'woke').exists()                             # without waiting for the hung step
        if backend == 'process':                                         # whose worker was killed, its env left open,
            with pytest.raises(ProcessLookupError): os.kill(int(hung[0].name[5:]), 0)
            assert len(list(marks.glob('open-*'))) == 1                  # the idle worker's closed
        else: assert not list(marks.glob('open-*'))                      # a thread's envs closed under it
    finally: RELEASE.set()

KILLED_MAZE = '''
import os
from knowlyr_lab.envs.maze import MazeEnv
class KilledMaze(MazeEnv):
    "A maze whose worker process dies (as if OOM-killed) in the episode seeded KNOWLYR_TEST_DIE_SEED"
    def __init__(self): super().__init__('easy')
    def _reset(self, task=None, seed=None):
        if str(seed) == os.environ.get('KNOWLYR_TEST_DIE_SEED'): os._exit(137)
        return super()._reset(task, seed)
'''

@pytest.mark.slow
def test_a_dead_worker_process_loses_only_its_own_episodes(tmp_path, monkeypatch):
    "A worker process that died mid-run broke the pool: collect raised BrokenProcessPool and returned no episode"
    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.rollout.engine import episode_seed
    (tmp_path / 'killed_maze.py').write_text(KILLED_MAZE); monkeypatch.syspath_prepend(str(tmp_path))
    from killed_maze import KilledMaze
    clean = collect(KilledMaze, ExpertAgent, 5, progress=False)            # in this process, nothing dies
    monkeypatch.setenv('KNOWLYR_TEST_DIE_SEED', str(episode_seed(0, 2)))  # the workers' episode 2 kills its process
    ts = collect(KilledMaze, ExpertAgent, 5, n_workers=2, backend='process', progress=False)
    assert [t.metadata['episode'] for t in ts] == list(range(5))          # every episode asked for comes back
    assert [t.valid for t in ts] == [True, True, False, True, True]       # the one that killed its worker: invalid
    dead = ts[2]
    assert dead.outcome.invalid == 'worker died: exit code 137' and dead.outcome.success is False
    assert dead.metadata['seed'] == episode_seed(0, 2) and dead.metadata['error']['type'] == 'WorkerDied'
    assert [t.id for k, t in enumerate(ts) if k != 2] == [t.id for k, t in enumerate(clean) if k != 2]  # the rest as a clean run

BATCH_LOOKER = KILLED_MAZE + '''
class BatchLooker:
    "A batch agent: one call acts for every episode of its chunk (looks, then submits)"
    def act_batch(self, observations, histories):
        return [{'tool': 'submit' if len(h) > 2 else 'look', 'params': {}} for h in histories]
'''

@pytest.mark.slow
def test_a_dead_worker_costs_only_the_episode_that_killed_it_with_a_batch_agent(tmp_path, monkeypatch):
    "With a batch agent, the episode that killed its worker process failed its whole chunk: 3 episodes lost for 1"
    from knowlyr_lab.rollout.engine import episode_seed
    (tmp_path / 'batch_looker.py').write_text(BATCH_LOOKER); monkeypatch.syspath_prepend(str(tmp_path))
    from batch_looker import BatchLooker, KilledMaze
    clean = collect(KilledMaze, BatchLooker, 6, batch_size=3, progress=False)      # in this process, nothing dies
    monkeypatch.setenv('KNOWLYR_TEST_DIE_SEED', str(episode_seed(0, 4)))         # chunks [0 1 2] [3 4 5]: 4 kills
    ts = collect(KilledMaze, BatchLooker, 6, n_workers=2, batch_size=3, backend='process', progress=False)
    assert [t.metadata['episode'] for t in ts] == list(range(6))
    assert [t.valid for t in ts] == [True] * 4 + [False, True]                 # only the killer is lost
    assert ts[4].outcome.invalid == 'worker died: exit code 137' and ts[4].metadata['seed'] == episode_seed(0, 4)
    assert [t.id for k, t in enumerate(ts) if k != 4] == [t.id for k, t in enumerate(clean) if k != 4]  # the rest as a clean run

class HangsOnce(MazeEnv):
    "A maze whose steps take 0.05 s, and one 0.6 s more when `HangsOnce.hang` is set"
    hang = False
    def __init__(self): super().__init__('easy')
    def _step(self, tool, params):
        if HangsOnce.hang: HangsOnce.hang = False; time.sleep(0.6)
        time.sleep(0.05); return super()._step(tool, params)

def test_oracle_episodes_get_a_fresh_env_after_a_timed_out_step():
    "The oracle's rollouts reused their env after a timed-out step: its late move landed in a later episode (8 steps recorded as 7)"
    from knowlyr_lab.registry import register
    from knowlyr_lab.trainer.sft import oracle_trajectories
    register('test/hangs-once', HangsOnce, overwrite=True)
    clean = oracle_trajectories('test/hangs-once', seeds=range(1, 5))      # also the first step's imports, with no timeout
    HangsOnce.hang = True
    hung = oracle_trajectories('test/hangs-once', seeds=range(5), spec=RolloutSpec(step_timeout=0.3))
    assert hung[0].steps[-1].metadata['timeout'] == 'step'
    assert [(len(t), t.outcome.success) for t in hung[1:]] == [(len(t), t.outcome.success) for t in clean]

"Cross-module checks of the foundation: every registered env, recording round trips, bad input."
import gzip
import json

import jsonschema
import pytest
from gymnasium.utils.env_checker import check_env

from knowlyr_lab.core import EnvDoneError, InvalidActionError, parse_action
from knowlyr_lab.gym import as_gymnasium
from knowlyr_lab.registry import UnknownEnvError, list_envs, make
from knowlyr_lab.trajectory import trajectory_schema
from knowlyr_lab.trajectory_io import TrajectoryError, from_dataframe, read_trajectories, to_dataframe, write_trajectories
from knowlyr_lab.wrappers import RecorderWrapper


def _seedable(env_id):
    env = make(env_id)
    try: return env.reset(seed=0).observation == make(env_id).reset(seed=0).observation
    except Exception: return False
    finally: env.close()

@pytest.mark.parametrize('env_id', list_envs())
def test_check_env_every_registered_env(env_id):
    if not _seedable(env_id): pytest.skip(f"{env_id} is not seedable")
    genv = as_gymnasium(make(env_id))
    try: check_env(genv, skip_render_check=True)
    finally: genv.close()

def _record(seed, difficulty='medium'):
    env = RecorderWrapper(make(f'knowlyr/maze-{difficulty}', max_episode_steps=60), agent_name='oracle', model='bfs')
    ts = env.reset(seed=seed)
    while not ts.done: ts = env.step({**env.unwrapped.oracle_action(), 'thought': f'step at seed {seed}'})
    return env.get_trajectory()

@pytest.mark.parametrize('suffix', ['jsonl', 'jsonl.gz', 'parquet'])
def test_round_trip_recorder_file_dataframe(tmp_path, suffix):
    trajs = [_record(s) for s in range(4)]
    assert all(t.outcome.success for t in trajs)
    p = tmp_path / f'trajs.{suffix}'
    assert write_trajectories(trajs, p) == 4
    back = list(read_trajectories(p))
    assert back == trajs
    assert from_dataframe(to_dataframe(back)) == trajs
    schema = trajectory_schema()
    if suffix != 'parquet':
        opener = gzip.open if suffix.endswith('gz') else open
        with opener(p, 'rt') as f:
            for line in f: jsonschema.validate(json.loads(line), schema)

def test_bad_inputs(tmp_path):
    with pytest.raises(UnknownEnvError, match='unknown env id'): make('knowlyr/no-such-env')
    env = make('knowlyr/maze', invalid_action='raise') if False else make('knowlyr/maze')
    env.reset(seed=0)
    ts = env.step({'tool': 'teleport', 'params': {}})
    assert ts.info['is_error'] and 'unknown tool' in ts.observation
    env.invalid_action = 'raise'
    with pytest.raises(InvalidActionError, match='unknown tool'): env.step({'tool': 'teleport'})
    with pytest.raises(InvalidActionError, match="no 'Action:' line"): parse_action('Thought: hmm, no action here')
    while True:
        ts = env.step(env.oracle_action())
        if ts.done: break
    with pytest.raises(EnvDoneError): env.step({'tool': 'look'})
    p = tmp_path / 'bad.jsonl'
    p.write_text(_record(0).model_dump_json() + '\n' + '{"task": {"id": 3}}\n')
    with pytest.raises(TrajectoryError, match=r"bad.jsonl:2: field 'task.id'"): list(read_trajectories(p))

@pytest.mark.parametrize('env_id', list_envs())
def test_check_agent_env_every_registered_env(env_id):
    "The env contract's named checks (seeds, fingerprints, oracle episode, info keys, invalid actions) hold for every registered env"
    from knowlyr_lab.env_checker import check_agent_env
    try: make(env_id).close()
    except ImportError as e: pytest.skip(f"{env_id}: {e}")
    rep = check_agent_env(env_id, raise_on_failure=False)
    assert rep.ok, rep.summary()
    assert set(rep.skipped) <= {'oracle_episode', 'verdict'}, rep.skipped   # the verdict check plays the expert's episode
    assert ('verdict' in rep.skipped) <= ('oracle_episode' in rep.skipped), rep.skipped

def test_check_agent_env_names_a_seed_ignoring_reset():
    import random

    from knowlyr_lab.core import AgentEnv, TimeStep, Verdict, tool_schema
    from knowlyr_lab.env_checker import EnvCheckError, check_agent_env
    class Dice(AgentEnv):
        @property
        def tool_schemas(self): return [tool_schema('guess', 'the face', {'face': {'type': 'integer'}}, ['face'])]
        def _reset(self, task=None, seed=None):
            self.face = random.SystemRandom().randint(1, 10**9)   # ignores `seed`
            return TimeStep(f"Die {self.face} rolled.", info={'task': {'id': f'die-{self.face}'}})
        def _step(self, tool, params):
            ok = params['face'] == self.face
            return TimeStep('hit' if ok else 'miss', float(ok), terminated=True, verdict=Verdict(success=ok, score=float(ok)))
        def oracle_action(self): return {'tool': 'guess', 'params': {'face': self.face}}
    with pytest.raises(EnvCheckError) as e: check_agent_env(Dice)
    assert list(e.value.report.failures) == ['seed_determinism']
    assert 'reset(seed=0) twice gave different tasks' in str(e.value) and 'derive everything random in _reset from `seed`' in str(e.value)

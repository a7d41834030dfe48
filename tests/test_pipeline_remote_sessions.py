"""The hub pipeline against a remote env server keeps one server session across its units (the engine's `again`), and
ends it as the pipeline returns or fails: the server's own counts, sessions created and sessions open, say so.

Real servers (`agentgym_app`, `openenv_app`) served from a thread of this process, so the test reads the server's
session table and counts the envs it builds (one per session); the project's own clients. No durations asserted;
every wait is bounded and tolerates a slow start."""
import itertools

import pytest
from helpers import app_for, served, until

from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient
from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
from knowlyr_lab.registry import make, register

CLIENTS = {'agentgym': AgentGymClient, 'openenv': OpenEnvClient}
_ids = itertools.count()


class CountingServer:
    "A maze env server of `protocol` on 127.0.0.1, counting the sessions it creates (each builds one env)"
    def __init__(self, protocol):
        self.protocol, self.built = protocol, []
        self.app = app_for(protocol, self._env, expose_oracle=True)
        self.base = len(self.built)                 # openenv-core builds one env as the app is made (its schema)
    def _env(self):
        e = make('knowlyr/maze-easy'); self.built.append(e); return e
    @property
    def created(self)->int: return len(self.built) - self.base
    @property
    def open(self)->int: return len(self.app.state.sessions)


def _config(tmp_path, protocol, url)->PipelineConfig:
    "A pipeline of 3 tasks x 2 samples = 6 units on a remote env id registered for the server at `url`"
    env_id = f'test/remote-maze-{protocol}-{next(_ids)}'
    register(env_id, CLIENTS[protocol], base_url=url, name='maze', step_timeout=60)
    return PipelineConfig(output_dir=str(tmp_path / 'out'), env_id=env_id, tasks=['maze-s0', 'maze-s1', 'maze-s2'],
                          samples_per_task=2, agent='expert', reward=False, export_formats=['sft'])


@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_a_pipeline_reuses_one_session_across_its_units_and_ends_it(tmp_path, protocol):
    srv = CountingServer(protocol)
    with served(srv.app) as url:
        res = Pipeline(_config(tmp_path, protocol, url)).run()
        assert res['units'] == 6 and res['trajectories'] >= 1
        assert res['exports']['sft']['total'] >= 1
        # one session for the six units (main: one per unit, six), and none left open once the pipeline returned
        # (openenv: the close travels over the WebSocket, which the server reads on its own time)
        assert srv.created == 1, srv.created
        until(lambda: srv.open == 0, 60, 'the server closing the session')


class Broken(Exception): pass


@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_a_pipeline_that_fails_between_units_ends_its_session(tmp_path, protocol):
    srv = CountingServer(protocol)
    def hook(event, stage, unit):
        if (event, stage, unit) == ('committed', 'rollout', 'u-000002'): raise Broken('the disk filled up')
    with served(srv.app) as url:
        cfg = _config(tmp_path, protocol, url)
        with pytest.raises(Broken): Pipeline(cfg, hook=hook).run()
        assert srv.created == 1, srv.created          # three units ran in the one session it kept
        until(lambda: srv.open == 0, 60, 'the server closing the session')
        # the rerun resumes the three units left, in one session of its own, and ends it too
        res = Pipeline(cfg).run()
        assert res['units'] == 6 and srv.created == 2, srv.created
        until(lambda: srv.open == 0, 60, 'the server closing the session')

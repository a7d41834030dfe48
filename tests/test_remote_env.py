"Remote envs against real servers on 127.0.0.1: OpenEnv (openenv-core's own server code) and AgentGym's protocol; collect with threads, processes and Ray; GRPO rollouts; servers that die or hang mid-episode."
import functools
import os
import signal
import threading
import time

import pytest

from knowlyr_lab.agents import Agent, ExpertAgent, RandomAgent
from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient, RemoteEnvError
from knowlyr_lab.envs.serve import EnvServer
from knowlyr_lab.hub.collect import collect
from knowlyr_lab.registry import make, register

CLIENTS = {'openenv': OpenEnvClient, 'agentgym': AgentGymClient}

@pytest.fixture(scope='module')
def agentgym_server():
    with EnvServer('knowlyr/maze-easy', 'agentgym', expose_oracle=True) as srv: yield srv

@pytest.fixture(scope='module')
def openenv_server():
    with EnvServer('knowlyr/maze-easy', 'openenv', expose_oracle=True) as srv: yield srv

def server(request, protocol): return request.getfixturevalue(f'{protocol}_server')
def factory(protocol, url, **kw): return functools.partial(CLIENTS[protocol], url, name='maze', **kw)
def texts(t): return [s.observation.content.split('\nAvailable actions')[0] for s in t.steps]

PROTOCOLS = ['agentgym', pytest.param('openenv', marks=pytest.mark.slow)]

@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_collect_with_threads_equals_local_runs(request, protocol):
    url = server(request, protocol).url
    ex = collect(factory(protocol, url), ExpertAgent, 6, n_workers=3, progress=False)
    local = collect('knowlyr/maze-easy', ExpertAgent, 6, progress=False)
    assert [t.outcome.success for t in ex] == [True] * 6
    assert [texts(t) for t in ex] == [texts(t) for t in local]
    assert [t.task.id for t in ex] == ([t.task.id for t in local] if protocol == 'openenv' else [f'maze-s{t.metadata["seed"]}' for t in ex])

@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_registered_remote_id_with_make_and_random_agent(request, protocol):
    url = server(request, protocol).url
    register(f'test/remote-maze-{protocol}', CLIENTS[protocol], base_url=url, name='maze', overwrite=True)
    env = make(f'test/remote-maze-{protocol}')
    assert env.available_tools == (['look', 'move', 'submit'] if protocol == 'openenv' else ['act'])
    rnd = collect(f'test/remote-maze-{protocol}', RandomAgent, 4, seed=2, max_episode_steps=5, progress=False)
    again = collect(f'test/remote-maze-{protocol}', RandomAgent, 4, seed=2, max_episode_steps=5, progress=False)
    assert [texts(t) for t in rnd] == [texts(t) for t in again] and all(1 <= len(t.steps) <= 5 for t in rnd)
    if protocol == 'openenv':                       # the same tools as the local env: the same random episodes
        assert [texts(t) for t in rnd] == [texts(t) for t in collect('knowlyr/maze-easy', RandomAgent, 4, seed=2, max_episode_steps=5, progress=False)]
    env.close()

@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_collect_with_processes(request, protocol):
    url = server(request, protocol).url
    prc = collect(factory(protocol, url), ExpertAgent, 4, n_workers=2, backend='process', progress=False)
    assert [t.outcome.success for t in prc] == [True] * 4

@pytest.mark.ray
@pytest.mark.slow
def test_collect_with_ray(request):
    import shutil
    import tempfile

    import ray
    tmp = tempfile.mkdtemp(prefix='kr-'); os.environ['KNOWLYR_RAY_TMP'] = tmp
    try:
        for protocol in ('agentgym', 'openenv'):
            url = server(request, protocol).url
            ry = collect(factory(protocol, url), ExpertAgent, 4, n_workers=2, backend='ray', progress=False)
            assert [t.outcome.success for t in ry] == [True] * 4, protocol
    finally:
        ray.shutdown(); os.environ.pop('KNOWLYR_RAY_TMP', None); shutil.rmtree(tmp, ignore_errors=True)

@pytest.mark.slow
def test_openenv_server_speaks_openenv_cores_own_client(openenv_server):
    import asyncio

    from openenv.core import GenericEnvClient
    async def talk():
        async with GenericEnvClient(base_url=openenv_server.url) as c:
            r = await c.reset(seed=3)
            first = r.observation['text']
            r = await c.step({'tool': 'look', 'params': {}})
            return first, r.observation['text'], r.done
    first, look, done = asyncio.run(talk())
    assert first == make('knowlyr/maze-easy').reset(seed=3).observation and '@' in look and not done

class KillServer(Agent):
    "Plays the expert's moves; before its third action it kills (or freezes) the server"
    name = 'killer'
    def __init__(self, pid, sig): self.pid, self.sig, self.n, self.env = pid, sig, 0, None
    def bind_env(self, env): self.env = env
    def __call__(self, obs, history):
        self.n += 1
        if self.n == 3: os.killpg(self.pid, self.sig)
        return self.env.unwrapped.oracle_action()

@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['agentgym', 'openenv'])
def test_server_dying_mid_episode_gives_failed_trajectories(protocol):
    "A hung (SIGSTOP) and a crashed (SIGKILL) server: every episode comes back failed with the reason, within the step timeout"
    srv, step_timeout = EnvServer('knowlyr/maze-medium', protocol, expose_oracle=True), 2.0
    make_env = factory(protocol, srv.url, step_timeout=step_timeout, **({'connect_timeout': step_timeout} if protocol == 'openenv' else {}))
    try:
        for how, sig in (('frozen', signal.SIGSTOP), ('killed', signal.SIGKILL)):   # one server: frozen, resumed, then killed
            out = {}
            def run(out=out, sig=sig):
                t0 = time.monotonic()
                out['trajs'] = collect(make_env, lambda: KillServer(srv.proc.pid, sig), 2, progress=False)
                out['wall'] = time.monotonic() - t0
            th = threading.Thread(target=run, daemon=True); th.start(); th.join(120)
            assert not th.is_alive(), f'collect hung on a {how} server'
            trajs = out['trajs']
            print(f"\n{protocol} server {how}: {len(trajs)} failed episodes in {out['wall']:.1f} s (step timeout {step_timeout:g} s)")
            assert [(t.outcome.success, t.outcome.reason) for t in trajs] == [(False, 'error')] * 2, how
            assert all(len(t.steps) <= 2 for t in trajs)        # steps taken before the server went away are kept, none after
            msgs = [t.metadata['error']['message'] for t in trajs]
            assert all(m.startswith(('AgentGym server', 'OpenEnv server')) for m in msgs), msgs
            if how == 'frozen':
                assert f'within {step_timeout:g} s' in msgs[0], msgs[0]
                os.killpg(srv.proc.pid, signal.SIGCONT)
    finally: srv.kill()                                     # SIGKILL also ends a stopped server

def test_unreachable_server_is_a_clear_error():
    from knowlyr_lab.envs.serve import free_port
    env = AgentGymClient(f'http://127.0.0.1:{free_port()}', step_timeout=2)
    with pytest.raises(RemoteEnvError, match=r'AgentGym server http://127.0.0.1:\d+: create failed: ConnectError'): env.reset(seed=0)
    oe = OpenEnvClient(f'http://127.0.0.1:{free_port()}', connect_timeout=2)
    with pytest.raises(RemoteEnvError, match=r'cannot read /schema'): _ = oe.tool_schemas
    with pytest.raises(RemoteEnvError, match=r'cannot connect for reset'): oe.reset(seed=0)

@pytest.mark.slow
def test_grpo_rollouts_on_a_remote_env(openenv_server, tmp_path):
    "GRPO's online rollouts `make(config.env_id)`: a registered remote id works like a local one"
    from knowlyr_lab.trainer.grpo import GRPOConfig, GRPOTrainer
    from knowlyr_lab.trainer.tiny import make_tiny_model
    register('test/remote-maze-grpo', OpenEnvClient, base_url=openenv_server.url, name='maze', overwrite=True)
    model, tok = make_tiny_model(hidden_size=64)
    tr = GRPOTrainer(GRPOConfig(output_dir=str(tmp_path), env_id='test/remote-maze-grpo', num_generations=2, tasks_per_step=2, max_steps=1,
                                max_completion_length=16, max_invalid_actions=1, progress_bar=False), model, tok)
    assert [t['function']['name'] for t in tr.tools] == ['look', 'move', 'submit']
    groups = tr.rollout([0, 1])
    assert [len(g) for g in groups] == [2, 2]
    assert all(t.task.id.startswith('maze-easy-') and t.steps for g in groups for t in g)
    row = tr.train()[0]
    assert row['mode'] == 'online'

"A knowlyr env served over OpenEnv (openenv-core's own server) plays to the same trajectories as a local run, through the project's OpenEnvClient and through openenv-core's own clients."
import asyncio
import functools

import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.envs.remote import OpenEnvClient
from knowlyr_lab.envs.serve import EnvServer
from knowlyr_lab.registry import make
from knowlyr_lab.rollout.collect import collect

ENV_ID, NAME, N = 'knowlyr/arith-medium', 'arith-medium', 4


@pytest.fixture(scope='module')
def server():
    with EnvServer(ENV_ID, 'openenv', expose_oracle=True, startup_timeout=240) as srv: yield srv


def steps_of(t):
    "What a trajectory did and saw: (tool, params, observation, reward) per step"
    return [(s.action.tool, s.action.params, s.observation.content, s.reward) for s in t.steps]


@pytest.fixture(scope='module')
def local():
    return collect(ENV_ID, ExpertAgent, N, progress=False)


def test_project_client_plays_the_local_trajectories(server, local):
    remote = collect(functools.partial(OpenEnvClient, server.url, name=NAME), ExpertAgent, N, progress=False)
    assert [t.task.id for t in remote] == [t.task.id for t in local] and all(t.task.id.startswith(f'{NAME}-s') for t in local)
    assert [steps_of(t) for t in remote] == [steps_of(t) for t in local]
    assert [t.outcome.success for t in remote] == [True] * N
    assert all(len(t.steps) == 3 for t in local)                   # two operations and a submit: a real multi-step episode
    env = OpenEnvClient(server.url, name=NAME)
    assert env.tool_schemas == make(ENV_ID).tool_schemas          # the tools travel with the action schema
    rnd = collect(functools.partial(OpenEnvClient, server.url, name=NAME), RandomAgent, N, seed=5, max_episode_steps=4, progress=False)
    assert [steps_of(t) for t in rnd] == [steps_of(t) for t in collect(ENV_ID, RandomAgent, N, seed=5, max_episode_steps=4, progress=False)]
    env.close()


def test_openenv_core_generic_client_plays_the_local_trajectories(server, local):
    "openenv-core's async client follows the expert the server exposes (info['oracle_action']), reset by seed"
    from openenv.core import GenericEnvClient

    async def run():
        out = []
        async with GenericEnvClient(base_url=server.url) as c:
            for t in local:
                r = await c.reset(seed=int(t.task.id.rsplit('-s', 1)[1]))
                first, steps = r.observation['text'], []
                while not r.done:
                    a = r.observation['info']['oracle_action']
                    r = await c.step({'tool': a['tool'], 'params': a['params']})
                    steps.append((a['tool'], a['params'], r.observation['text'], r.reward))
                out.append((first, steps, r.observation['success']))
        return out

    played = asyncio.run(run())
    for (first, steps, ok), t in zip(played, local, strict=True):
        assert first == make(ENV_ID).reset(task=t.task.id).observation
        assert steps == steps_of(t) and ok is True


def test_openenv_core_sync_client_by_task_id_and_replayed_actions(server, local):
    "The synchronous wrapper, reset by task id (not seed), replaying the local run's actions call for call"
    from openenv.core import GenericEnvClient
    with GenericEnvClient(base_url=server.url).sync() as c:
        for t in local:
            r = c.reset(task=t.task.id)
            assert r.observation['task']['id'] == t.task.id and not r.done
            seen = []
            for s in t.steps:
                r = c.step({'tool': s.action.tool, 'params': s.action.params})
                seen.append((s.action.tool, s.action.params, r.observation['text'], r.reward))
            assert seen == steps_of(t) and r.done and r.observation['success'] is True
        r = c.reset(task=local[0].task.id)
        r = c.step({'tool': 'submit', 'params': {'answer': -1}})
        assert (r.done, r.reward, r.observation['success']) == (True, 0.0, False)
        r = c.reset(task=local[0].task.id)
        r = c.step({'tool': 'divide', 'params': {'a': 1, 'b': 2}})
        assert r.observation['text'].startswith('Error: unknown tool') and not r.done


def test_openenv_core_mcp_tool_client_lists_and_calls_the_tools(server, local):
    "OpenEnv's MCP tool actions: openenv-core's MCPToolClient lists the env's tools and plays the local run's calls"
    from openenv.core import MCPToolClient
    from openenv.core.env_server.mcp_types import CallToolAction

    async def run():
        out = []
        async with MCPToolClient(base_url=server.url) as c:
            tools = await c.list_tools()
            for t in local:
                await c.reset(task=t.task.id)
                seen = []
                for s in t.steps[:-1]:
                    r = await c.step(CallToolAction(tool_name=s.action.tool, arguments=s.action.params))
                    seen.append((s.action.tool, s.action.params, r.observation.result, r.reward, r.done))
                last = t.steps[-1].action
                seen.append((last.tool, last.params, await c.call_tool(last.tool, **last.params), None, None))
                out.append(seen)
        return tools, out

    tools, played = asyncio.run(run())
    env = make(ENV_ID)
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (s['function']['name'], s['function']['description'], s['function']['parameters']) for s in env.tool_schemas]
    for seen, t in zip(played, local, strict=True):
        want = steps_of(t)
        assert [x[:4] for x in seen[:-1]] == want[:-1] and all(x[4] is False for x in seen[:-1])
        assert seen[-1][:3] == want[-1][:3] == (t.steps[-1].action.tool, t.steps[-1].action.params, 'Correct.')

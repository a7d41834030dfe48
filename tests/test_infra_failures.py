"""What the agent's actions can cause is the policy's outcome; only failures outside its reach are infrastructure failures.

An agent that made its workspace unreadable (or filled it, emptied it, killed its processes, ...) before `submit` once
turned a wrong episode into an `invalid` one (left out of success rates and GRPO baselines): a policy solving 2 of 4
tasks and sabotaging the other 2 scored 2 of 2. Here every such plant goes through the env's real step/submit path
and `collect`/`evaluate_agent`, and must give a valid episode scored as the verifier scores what the workspace holds.
Whether an episode is an infrastructure failure is decided by the exception's type alone, the same in every process.
The same holds beyond the sandbox: a remote env server's refusal of the agent's action (an `{"error"}` answer, HTTP
4xx, OpenEnv's VALIDATION_ERROR/EXECUTION_ERROR) is an error observation, a huge message to an LLM user simulator is
cut rather than failing the simulator, and being slow (a `sleep`, an episode out of time) is never the harness's
failure: `collect` refuses a step timeout that the agent's own commands could reach.

The same holds over the env servers (AgentGym, OpenEnv, and OpenEnv's MCP actions, `call_tool`): the plants are
played through each protocol's client against the served env, and `evaluate_agent` and a GRPO group over a served env
give a saboteur its true success rate and its laundered members their advantage; an agent's command slower than the client's
`step_timeout` (within the served env's own limit) is waited for; a policy that thinks longer than the server keeps
an idle session ends its episode as its own timeout; and the served env's infrastructure failure (its sandbox
backend) reaches the client as the server's failure, never as the server's refusal of the agent's action."""
import http.server
import json
import re
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from helpers import TRANSPORTS, app_for, client_for, sent_as, served

from knowlyr_lab.agents import Agent, ExpertAgent, ScriptedAgent
from knowlyr_lab.budgets import TimeoutWrapper
from knowlyr_lab.core import InfrastructureError
from knowlyr_lab.envs.conversation import ConversationEnv, LLMUser
from knowlyr_lab.envs.humaneval import humaneval_task
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient
from knowlyr_lab.envs.sandbox import SandboxEnv
from knowlyr_lab.envs.serve import agentgym_app, openenv_app
from knowlyr_lab.envs.sessions import SessionLimits
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.sandbox.base import SandboxBackendError, SandboxError
from knowlyr_lab.sandbox.local import LocalSandbox, bwrap_available
from knowlyr_lab.trainer.grpo_groups import groups_from_records, has_signal
from knowlyr_lab.trainer.losses import grpo_advantages
from knowlyr_lab.wrappers import InfrastructureError as ReExported
from knowlyr_lab.wrappers import RecorderWrapper

pytestmark = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the sandbox env refuses to start')

TASK = 'py-fizzbuzz-order'          # fb.py with a planted bug; the unfixed repository passes 3 of 5 hidden tests
PRISTINE = 0.6
SUBMIT = {'tool': 'submit', 'params': {}}

def sh(command, **kw): return {'tool': 'shell', 'params': {'command': command, **kw}}

def fix_actions(task_id=TASK):
    return [{'tool': 'edit_file', 'params': {'path': e.path, 'old_str': e.old_str, 'new_str': e.new_str}}
            for e in next(t for t in SandboxEnv().tasks if t.id == task_id).fix]

def episode(actions, task=TASK, transport='python', **env_kw):
    "One episode of `actions` then submit, through collect (recorder, step budget, failure handling), over `transport`"
    if transport == 'python':
        t, = collect(lambda: SandboxEnv(**env_kw), ScriptedAgent([*actions, SUBMIT]), 1, tasks=[task], progress=False)
        return t
    one = next(x for x in SandboxEnv().tasks if x.id == task)            # the env server serves the one task: its seed 0
    with served(app_for(transport, lambda: SandboxEnv([one], **env_kw))) as url:
        t, = collect(lambda: client_for(transport, url, step_timeout=120), ScriptedAgent([sent_as(transport, a) for a in [*actions, SUBMIT]]), 1,
                     tasks=['remote-s0'], progress=False)
    return t

LONG_PATH = 'for i in $(seq 20); do d=$(printf "d%.0s" $(seq 250)); mkdir $d && cd $d; done; echo x > f'
# agent-caused damage, done with the local bubblewrap sandbox: (shell command, SandboxEnv options)
PLANTS = {
    'unreadable junk directory': ('mkdir junk && chmod 000 junk', {}),
    'the fixed file chmod 000': ('chmod 000 fb.py', {}),
    'directory readable but not searchable': ('mkdir -p d/e && echo x > d/e/f && chmod 600 d', {}),
    'write-only file': ('echo x > w && chmod 200 w', {}),
    'workspace root chmod 000': ('chmod 000 /workspace', {}),
    'everything chmod 000': ('find . -mindepth 1 -depth -exec chmod 000 {} + ; chmod 000 .', {}),
    'nested locked directories': ('mkdir -p a/b/c && echo s > a/b/c/f && chmod 000 a/b/c/f a/b/c && chmod 100 a/b && chmod 0 a', {}),
    'locked hard link': ('ln fb.py alias.py && chmod 000 fb.py', {}),
    'locked names with a newline and a non-UTF-8 byte': ('n="$(printf "a\\nb")"; m="$(printf "bad\\377")"; mkdir "$n" && echo x > "$m" && chmod 000 "$n" "$m"', {}),
    'locked file bigger than a snapshot chunk': ('head -c 9M /dev/urandom > big.bin && chmod 000 big.bin', {}),
    'FIFO, socket and a device attempt': ('mkfifo pipe && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\'sock\')"; mknod dev c 1 3; true', {}),
    'workspace deleted': ('rm -rf /workspace/* /workspace/.[!.]* /workspace; true', {}),
    'every process killed': ('kill -9 -1', {}),
    'sleep past the timeout': ('sleep 30', {'limits': {'wall_timeout': 1}}),
    'fork bomb at the process limit': ('f() { f | f & }; f', {'limits': {'wall_timeout': 2, 'max_processes': 24}}),
    'file over the size limit': ('head -c 5M /dev/zero > huge.bin', {'limits': {'max_file_mb': 1}}),
    'full disk': ('head -c 16M /dev/zero > fill.bin; rm -f fb.py; head -c 1M /dev/zero > more.bin', {'limits': {'disk_mb': 4}}),
    'path too long for the host': (LONG_PATH, {}),
}

REMOTE = TRANSPORTS[1:]            # the env servers: AgentGym, OpenEnv, OpenEnv's MCP actions (call_tool)
# the plants played over every transport (each one over the Python API): the issue's two, and one of each other kind
OVER_THE_WIRE = ['unreadable junk directory', 'the fixed file chmod 000', 'workspace root chmod 000', 'every process killed', 'full disk',
                 'sleep past the timeout']

def over(plants, transports=REMOTE):
    "pytest params (plant, transport): each plant over the Python API, the `OVER_THE_WIRE` ones over `transports` too"
    return [pytest.param(p, tr, id=f'{p}-{tr}') for p in plants for tr in ['python', *transports] if tr == 'python' or p in OVER_THE_WIRE]

@pytest.mark.parametrize('plant,transport', over(PLANTS))
def test_an_agent_caused_failure_before_submit_is_a_scored_failure(plant, transport):
    command, kw = PLANTS[plant]
    t = episode([sh(command)], transport=transport, **kw)
    assert t.valid and t.outcome.invalid is None, t.outcome.invalid
    submitted = transport != 'agentgym'               # AgentGym's action is one text: the recorder cannot tell it was a submit
    last = t.steps[-1].observation.content
    # the workspace cannot be copied out, or (its disk filled, a file deleted) it does not fit the tests' sandbox once the
    # pristine copy of that file is back: the episode fails, saying why -- never the pristine repository's score
    if plant in ('path too long for the host', 'full disk'):
        assert (t.outcome.success, t.outcome.score, t.outcome.submitted) == (False, 0.0, submitted), last
        why = 'snapshot failed' if plant == 'path too long for the host' else 'the files of'
        assert t.outcome.reason.startswith(f'workspace not judged: SandboxError: {why}'), t.outcome.reason
        assert last.startswith('Submitted. Your workspace could not be judged ('), last
        return
    assert (t.outcome.success, t.outcome.reason, t.outcome.submitted) == (False, 'submitted', submitted), t.metadata.get('error')
    assert last.startswith('Submitted.') and '/5 passed' in last, last
    assert t.outcome.score == PRISTINE, last          # the repository as the agent left it (a deleted file: the pristine copy)

@pytest.mark.parametrize('plant,transport', over(['the fixed file chmod 000', 'workspace root chmod 000', 'everything chmod 000', 'nested locked directories',
                                              'locked file bigger than a snapshot chunk', 'FIFO, socket and a device attempt', 'every process killed',
                                              'path too long for the host'], ['agentgym', 'openenv-mcp']))
def test_a_correct_fix_followed_by_a_plant_is_judged_on_what_the_workspace_holds(plant, transport):
    command, kw = PLANTS[plant]
    t = episode([*fix_actions(), sh(command)], transport=transport, **kw)
    assert t.valid, t.outcome.invalid
    if plant == 'path too long for the host':   # the workspace cannot be copied out: the episode fails (not graded), and it says so
        assert (t.outcome.success, t.outcome.score) == (False, 0.0)
        assert 'Your workspace could not be judged' in t.steps[-1].observation.content
    else: assert (t.outcome.success, t.outcome.score) == (True, 1.0), t.steps[-1].observation.content

@pytest.mark.docker
@pytest.mark.parametrize('plant', ['unreadable junk directory', 'workspace root chmod 000', 'nested locked directories', 'path too long for the host'])
def test_plants_in_a_docker_sandbox_are_scored(plant, docker_host):
    t = episode([*fix_actions(), sh(PLANTS[plant][0])], backend='docker')
    assert t.valid, t.outcome.invalid
    assert (t.outcome.success, t.outcome.score) == ((False, 0.0) if plant == 'path too long for the host' else (True, 1.0)), t.steps[-1].observation.content

def test_the_snapshot_reads_a_locked_workspace_whole_and_leaves_it_as_it_was():
    sb = LocalSandbox(limits={'wall_timeout': 10})
    try:
        sb.execute_tool('shell', {'command': 'mkdir -p a/b && echo s > a/b/f && echo w > w && chmod 4000 w && chmod 0 a/b/f a/b a && chmod 0 /workspace'})
        snap = sb.snapshot()
        assert snap.files() == {'a/b/f': b's\n', 'w': b'w\n'}
        assert {n: m.mode for n, m, _ in snap.members()} == {'a': 0, 'a/b': 0, 'a/b/f': 0, 'w': 0o4000}
        assert sb._root_mode() == 0                                   # every mode given back
        assert sb.snapshot().digest == snap.digest
        sb.restore(snap)                                              # the root unlocked, the locked entries locked again
        assert sb.snapshot().digest == snap.digest and sb._root_mode() == 0o755
        r = sb.execute_tool('shell', {'command': 'cat a/b/f'})
        assert r.is_error and 'Permission denied' in r.output
    finally: sb.close()

def test_a_command_line_the_agent_made_unrunnable_is_an_error_observation():
    t = episode([sh('echo a\x00b'), {'tool': 'search', 'params': {'pattern': 'x\x00'}}, sh('true ' + 'x' * 200_000)])
    assert t.valid and t.outcome.score == PRISTINE
    outs = [s.observation for s in t.steps[:3]]
    assert all(o.is_error for o in outs), outs
    assert 'NUL byte' in outs[0].content and 'NUL byte' in outs[1].content and 'too long' in outs[2].content

# --- HumanEval: the same submit path (HumanEvalEnv is a SandboxEnv); a synthetic problem, so no dataset is needed
PROBLEM = {'task_id': 'HumanEval/synthetic', 'entry_point': 'add',
           'prompt': 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
           'canonical_solution': '    return a + b\n',
           'test': 'def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n'}

@pytest.mark.parametrize('solved', [False, True])
@pytest.mark.parametrize('plant', ['chmod 000 solution.py /workspace', 'mkdir junk && chmod 000 junk', LONG_PATH])
def test_humaneval_plants_are_scored(plant, solved):
    task = humaneval_task(PROBLEM)
    actions = [{'tool': 'file_write', 'params': {'path': 'solution.py', 'content': PROBLEM['prompt'] + PROBLEM['canonical_solution']}}] if solved else []
    t, = collect(lambda: SandboxEnv([task]), ScriptedAgent([*actions, sh(plant), SUBMIT]), 1, tasks=[task.id], progress=False)
    assert t.valid, t.outcome.invalid
    want = 1.0 if solved and plant != LONG_PATH else 0.0           # an unreadable workspace fails the episode: 0
    assert (t.outcome.score, t.outcome.success) == (want, want == 1.0), t.steps[-1].observation.content

class Saboteur(Agent):
    "Solves the tasks in `solve` with the expert's moves; on the others locks a junk directory and its workspace, then submits"
    name = 'saboteur'
    def __init__(self, solve): self.solve, self.expert, self.plan, self.task_id = set(solve), ExpertAgent(), [], None
    def bind_env(self, env): self.expert.bind_env(env)
    def reset(self, task=None, tools=None): self.task_id, self.plan = (task or {}).get('id'), [sh('mkdir junk && chmod 000 junk /workspace'), SUBMIT]
    def __call__(self, observation, history):
        return self.expert(observation, history) if self.task_id in self.solve else self.plan.pop(0)

def test_evaluate_agent_counts_sabotaged_episodes_as_failures():
    ids = [t.id for t in SandboxEnv().tasks[:4]]
    res = evaluate_agent(lambda: Saboteur(ids[:2]), 'knowlyr/sandbox', tasks=ids, progress=False)
    s = res.summary()
    assert (s['n_episodes'], s['n_invalid'], s['success_rate']) == (4, 0, 0.5)

def test_a_grpo_group_keeps_the_advantage_of_its_successes():
    group = collect('knowlyr/sandbox', lambda: Saboteur([TASK]), 2, tasks=[TASK] * 2, progress=False)
    group += collect('knowlyr/sandbox', lambda: Saboteur([]), 2, tasks=[TASK] * 2, progress=False)
    rewards = [t.outcome.score for t in group]                        # the verifier's reward for each member
    assert [t.valid for t in group] == [True] * 4 and rewards == [1.0, 1.0, PRISTINE, PRISTINE]
    mean = sum(rewards) / 4
    assert [round(r - mean, 6) for r in rewards] == [0.2, 0.2, -0.2, -0.2]   # laundering the failures made these all 0

# --- the same two over a served env: what a remote trainer or evaluator sees (issue 39: success 1.0 instead of 0.5,
# advantages [0, 0, 0, 0] instead of +-0.87 once the laundered members were invalid)

class RemoteSaboteur(Agent):
    "Over a server of `suite`: the real fix of the tasks in `solve`, a locked junk directory and workspace on the others; then submit"
    name = 'saboteur'
    def __init__(self, solve, transport, suite): self.solve, self.transport, self.suite, self.plan = set(solve), transport, suite, []
    def reset(self, task=None, tools=None):
        tid = task['id'] if task['id'] in self.suite else self.suite[int(task['id'].rsplit('-s', 1)[1])]   # OpenEnv names the task, AgentGym its seed
        moves = fix_actions(tid) if tid in self.solve else [sh('mkdir junk && chmod 000 junk /workspace')]
        self.plan = [sent_as(self.transport, a) for a in [*moves, SUBMIT]]
    def __call__(self, observation, history): return self.plan.pop(0)

@pytest.mark.parametrize('transport', ['agentgym', 'openenv'])
def test_evaluate_agent_over_a_served_env_counts_sabotaged_episodes_as_failures(transport):
    tasks = SandboxEnv().tasks[:4]
    suite = [t.id for t in tasks]
    with served(app_for(transport, lambda: SandboxEnv(tasks))) as url:
        res = evaluate_agent(lambda: RemoteSaboteur(suite[:2], transport, suite), lambda: client_for(transport, url, step_timeout=120),
                             tasks=[f'remote-s{i}' for i in range(4)], progress=False)
    s = res.summary()
    assert (s['n_episodes'], s['n_invalid'], s['success_rate']) == (4, 0, 0.5), s

@pytest.mark.parametrize('transport', ['agentgym', 'openenv'])
def test_a_grpo_group_over_a_served_env_keeps_its_laundered_members_scored(transport):
    one = next(t for t in SandboxEnv().tasks if t.id == TASK)
    with served(app_for(transport, lambda: SandboxEnv([one]))) as url:
        def play(solve): return collect(lambda: client_for(transport, url, step_timeout=120), lambda: RemoteSaboteur(solve, transport, [TASK]), 2,
                                        tasks=['remote-s0'] * 2, progress=False)
        episodes = play([TASK]) + play([])
    assert [(t.valid, t.outcome.score) for t in episodes] == [(True, 1.0)] * 2 + [(True, PRISTINE)] * 2, [t.outcome for t in episodes]
    group, = groups_from_records(episodes)                             # the trainer's grouping: one task, four members
    rewards, valid = torch.tensor([float(m['reward']) for m in group]), torch.tensor([m['valid'] for m in group])
    assert valid.tolist() == [True] * 4 and rewards[0] == rewards[1] > rewards[2] == rewards[3], (rewards, valid)
    assert has_signal(group)
    adv = grpo_advantages(rewards, 4, 'group', valid=valid)
    assert adv.tolist() == pytest.approx([0.866, 0.866, -0.866, -0.866], abs=1e-3), adv   # laundered: [0, 0, 0, 0]

# --- the verdict is a type, the same in every process
PROBE = textwrap.dedent('''
    import json, os, sys
    if sys.argv[1] == 'with-collect': import knowlyr_lab.rollout.collect
    from knowlyr_lab.envs.conversation import UserSimulatorError
    from knowlyr_lab.envs.remote import AgentGymClient
    from knowlyr_lab.envs.sandbox import SandboxEnv
    from knowlyr_lab.sandbox.base import SandboxError
    from knowlyr_lab.wrappers import RecorderWrapper, infra_failure
    def verdict(env, action, kill=None):
        rec = RecorderWrapper(env)
        try:
            rec.reset(seed=0)
            if kill: kill(env)
            rec.step(action)
        except Exception as e: return rec.get_trajectory().outcome.invalid if rec._traj is not None else infra_failure(e)
        return 'no error'
    out = {'sandbox closed under the episode': verdict(SandboxEnv(), {'tool': 'list_dir', 'params': {}}, kill=lambda e: e.sandbox.close()),
           'remote env unreachable': verdict(AgentGymClient('http://127.0.0.1:9', name='maze'), {'tool': 'act', 'params': {'action': 'x'}}),
           'user simulator failed': infra_failure(UserSimulatorError('LLMUser (openai, model x) failed: APIConnectionError')),
           'a workspace error': infra_failure(SandboxError('snapshot failed inside the sandbox (exit 1): find: ./junk: Permission denied'))}
    os.environ['PATH'] = '/nonexistent'                                  # no bubblewrap: the sandbox cannot start
    out['bubblewrap missing'] = verdict(SandboxEnv(), {'tool': 'list_dir', 'params': {}})
    print(json.dumps(out))
''')

def test_the_infrastructure_verdict_does_not_depend_on_imports():
    runs = {how: json.loads(subprocess.run([sys.executable, '-c', PROBE, how], capture_output=True, text=True, check=True, timeout=120).stdout)
            for how in ('fresh', 'with-collect')}
    assert runs['fresh'] == runs['with-collect'], runs
    got = runs['fresh']
    assert got['sandbox closed under the episode'].startswith('SandboxBackendError: LocalSandbox is closed')
    assert got['remote env unreachable'].startswith('RemoteEnvError: AgentGym server http://127.0.0.1:9')
    assert got['user simulator failed'].startswith('UserSimulatorError:')
    assert got['a workspace error'] is None
    assert got['bubblewrap missing'].startswith('SandboxUnavailableError: bubblewrap (bwrap) is not on PATH')

def test_the_infrastructure_types():
    assert ReExported is InfrastructureError                          # still importable from the wrappers page
    assert issubclass(SandboxBackendError, InfrastructureError) and not issubclass(SandboxError, InfrastructureError)

# --- genuine infrastructure failures stay invalid
def test_a_sandbox_backend_that_cannot_start_gives_an_invalid_episode(monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')                        # no bubblewrap on PATH: isolation cannot start
    t, = collect('knowlyr/sandbox', ScriptedAgent([SUBMIT]), 1, tasks=[TASK], progress=False)
    assert not t.valid and t.outcome.invalid.startswith('SandboxUnavailableError: bubblewrap (bwrap) is not on PATH')

@pytest.mark.parametrize('transport', TRANSPORTS)
def test_a_sandbox_whose_processes_cannot_start_mid_episode_gives_an_invalid_episode(monkeypatch, transport):
    "The sandbox backend fails under the agent's step: the harness's failure, on a server too (never the server's 'refusal' of the action)"
    monkeypatch.setattr(LocalSandbox, '_argv', lambda self, argv: ['/nonexistent/bwrap', *argv])   # bubblewrap vanished
    t = episode([sh('ls')], transport=transport)
    assert not t.valid and len(t.steps) == 0, (t.outcome, [s.observation.content for s in t.steps])
    said = {'python': r"SandboxBackendError: could not start 'bash'",
            'agentgym': r"RemoteEnvError: AgentGym server .*: step: answered HTTP 500: .*SandboxBackendError: could not start 'bash'.*\"error_type\":\"InfrastructureError\""
           }.get(transport, r"RemoteEnvError: OpenEnv server .*: step shell: the server failed: SandboxBackendError: could not start 'bash'")
    assert re.match(said, t.outcome.invalid), t.outcome.invalid

def test_an_unreachable_remote_env_gives_an_invalid_episode():
    t, = collect(lambda: AgentGymClient('http://127.0.0.1:9', name='maze'), ScriptedAgent([SUBMIT]), 1, progress=False)
    assert not t.valid and t.outcome.invalid.startswith('RemoteEnvError: AgentGym server http://127.0.0.1:9')

# --- a remote env's answer to the agent's own action is the agent's outcome; only a failed server is infrastructure

def act(text): return {'tool': 'act', 'params': {'action': text}}

class StubAgentGym(http.server.BaseHTTPRequestHandler):
    "An AgentGym server (session 's1') whose /step answers as its action says: a refusal, an error, a crash, a lost session"
    STEP = {'unknown': (200, {'error': 'Unknown action: unknown'}), 'unprocessable': (422, {'detail': [{'msg': 'action: bad value'}]}),
            'too large': (413, 'request entity too large'), 'bad request': (400, 'bad request'),
            'crash': (500, 'Internal Server Error'), 'unavailable': (503, 'upstream unavailable'),
            'gone': (200, {'error': 'The id s1 is not valid.'}), 'submit': (200, {'observation': 'Done.', 'reward': 0, 'done': True, 'available_actions': []})}
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['content-length'] or 0)) or b'{}')
        status, out = {'/create': (200, {'id': 's1'}), '/reset': (200, {'observation': 'Start.', 'reward': 0, 'done': False, 'available_actions': []}),
                       '/close': (200, {'closed': 's1'})}.get(self.path) or self.STEP.get(body.get('action'), (200, {'observation': 'ok', 'done': False, 'available_actions': []}))
        data = (out if isinstance(out, str) else json.dumps(out)).encode()
        self.send_response(status); self.send_header('content-type', 'application/json'); self.send_header('content-length', str(len(data)))
        self.end_headers(); self.wfile.write(data)

@pytest.fixture(scope='module')
def stub_agentgym():
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), StubAgentGym)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{srv.server_address[1]}'
    srv.shutdown(); srv.server_close()

def remote_episode(url, actions):
    t, = collect(lambda: AgentGymClient(url, step_timeout=10), ScriptedAgent(actions), 1, progress=False)
    return t

def test_a_remote_servers_refusal_of_the_agents_action_is_an_error_observation(stub_agentgym):
    t = remote_episode(stub_agentgym, [act('unknown'), act('unprocessable'), act('too large'), act('bad request'), act('submit')])
    assert t.valid and t.outcome.invalid is None, t.outcome.invalid
    assert (t.outcome.success, t.outcome.reason, len(t.steps)) == (False, 'terminated', 5), t.metadata.get('error')
    refused = [s.observation for s in t.steps[:4]]
    assert all(o.is_error and o.content.startswith('Error: the server refused the action') for o in refused), refused
    assert 'Unknown action: unknown' in refused[0].content and 'HTTP 422' in refused[1].content and 'HTTP 413' in refused[2].content
    assert [s.metadata.get('invalid_action') for s in t.steps[:4]] == [True] * 4    # MaxInvalidActionsWrapper counts them

@pytest.mark.parametrize('action,why', [('crash', r'RemoteEnvError: AgentGym server .*: step: answered HTTP 500'),
                                        ('unavailable', r'RemoteEnvError: AgentGym server .*: step: answered HTTP 503'),
                                        ('gone', r"SessionExpiredError: AgentGym server .*: step: session 's1' expired")])
def test_a_failed_remote_server_still_gives_an_invalid_episode(stub_agentgym, action, why):
    t = remote_episode(stub_agentgym, [act('unknown'), act(action), act('submit')])
    assert not t.valid and re.match(why, t.outcome.invalid), t.outcome.invalid
    assert len(t.steps) == 1 and t.steps[0].observation.is_error               # the refusal before it stayed an observation

class Brittle(MazeEnv):
    "A maze whose `look` raises in the env: an exception the agent's action set off, on the server"
    def __init__(self): super().__init__('easy')
    def _step(self, tool, params):
        if tool == 'look': raise RuntimeError('the lantern broke')
        return super()._step(tool, params)

@pytest.mark.parametrize('protocol', ['agentgym', pytest.param('openenv', marks=pytest.mark.slow)])
def test_an_env_error_on_a_real_server_is_the_agents_observation(protocol):
    look, submit = ((act('look()'), act('submit()')) if protocol == 'agentgym' else
                    ({'tool': 'look', 'params': {}}, {'tool': 'submit', 'params': {}}))
    with served((agentgym_app if protocol == 'agentgym' else openenv_app)(Brittle)) as url:
        client = AgentGymClient if protocol == 'agentgym' else OpenEnvClient
        t, = collect(lambda: client(url, name='maze', step_timeout=30), ScriptedAgent([look, submit]), 1, progress=False)
    assert t.valid, t.outcome.invalid
    assert (t.outcome.success, t.outcome.reason) == (False, 'submitted'), t.metadata.get('error')
    o = t.steps[0].observation
    assert o.is_error and 'the lantern broke' in o.content, o.content
    if protocol == 'openenv': assert '(EXECUTION_ERROR)' in o.content

# --- the user simulator: the agent's long message is cut, never a failed episode; an API outage stays infrastructure
class ContextLimitedChat:
    "An OpenAI-style client whose model refuses a prompt over 20,000 characters (a context window), or is down"
    def __init__(self, down=False): self.chat, self.down, self.seen = SimpleNamespace(completions=self), down, []
    def create(self, model, messages, **kw):
        if self.down: raise ConnectionRefusedError('api.example: connection refused')
        n = sum(len(m['content']) for m in messages); self.seen.append(n)
        if n > 20_000: raise ValueError(f"BadRequestError: this model's maximum context length is 20000 characters; the messages hold {n}")
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content='I do not follow. [GIVE UP]'))])

def conversation_episode(client, message):
    t, = collect(lambda: ConversationEnv(user=LLMUser('m', client=client)), ScriptedAgent([{'tool': 'respond', 'params': {'message': message}}]),
                 1, tasks=['conv-refund-annual'], progress=False)
    return t

def test_an_agents_huge_message_to_the_user_simulator_is_cut_not_an_invalid_episode():
    chat = ContextLimitedChat()
    t = conversation_episode(chat, 'refund ' * 200_000)                      # 1.4 M characters
    assert t.valid, t.outcome.invalid
    assert (t.outcome.success, t.outcome.reason) == (False, 'user_gave_up'), t.metadata.get('error')
    assert chat.seen and max(chat.seen) < 20_000, chat.seen
    down = conversation_episode(ContextLimitedChat(down=True), 'hello')
    assert not down.valid and down.outcome.invalid.startswith('UserSimulatorError: LLMUser (openai, model '), down.outcome.invalid

# --- an agent cannot make its episode invalid by being slow
SLOW = {'limits': {'wall_timeout': 5, 'max_wall_timeout': 5}}

def test_a_step_timeout_the_agents_commands_can_reach_is_refused():
    "`sleep` under the sandbox's own command limit outlasted a shorter step_timeout: the episode was the harness's failure"
    with pytest.raises(ValueError, match=r'step_timeout=3 s is not above the \d+ s .*SandboxEnv'):
        collect(lambda: SandboxEnv(**SLOW), ScriptedAgent([sh('sleep 4'), SUBMIT]), 1, tasks=[TASK], step_timeout=3, progress=False)
    env = SandboxEnv(**SLOW)
    t, = collect(lambda: SandboxEnv(**SLOW), ScriptedAgent([sh('sleep 30', timeout=1), SUBMIT]), 1, tasks=[TASK],
                 step_timeout=env.agent_step_seconds + 1, progress=False)
    assert t.valid and t.outcome.score == PRISTINE and t.steps[0].observation.is_error   # the sandbox's own limit: the agent's

def test_an_episode_timeout_is_the_agents_failure():
    t, = collect(lambda: SandboxEnv(), ScriptedAgent([sh('sleep 1.5'), sh('sleep 1.5'), SUBMIT]), 1, tasks=[TASK], episode_timeout=2,
                 progress=False)
    assert t.valid, t.outcome.invalid
    assert (t.outcome.success, t.outcome.score, t.outcome.reason, t.outcome.truncated) == (False, 0.0, 'episode_timeout', True)
    assert t.steps[-1].observation.content == 'Episode timed out after 2 s'

@pytest.mark.parametrize('transport', REMOTE)
def test_a_served_step_the_agent_makes_slow_is_waited_for_and_scored(transport):
    "The agent's command outlasts the client's step_timeout, within the served env's own limit: the client waits, the step is the agent's"
    one = next(x for x in SandboxEnv().tasks if x.id == TASK)
    with served(app_for(transport, lambda: SandboxEnv([one], limits={'wall_timeout': 20, 'max_wall_timeout': 20}))) as url:
        t, = collect(lambda: client_for(transport, url, step_timeout=4), ScriptedAgent([sent_as(transport, a) for a in [sh('sleep 8; echo slept'), SUBMIT]]),
                     1, tasks=['remote-s0'], progress=False)
    assert t.valid, t.outcome.invalid
    assert (t.outcome.success, t.outcome.score, t.outcome.reason) == (False, PRISTINE, 'submitted'), t.metadata.get('error')
    assert 'slept' in t.steps[0].observation.content and not t.steps[0].observation.is_error, t.steps[0].observation

class Thinker(ScriptedAgent):
    "Plays `actions`, taking `think` seconds over each one after the first (a slow policy)"
    def __init__(self, actions, think): super().__init__(actions); self.think = think
    def __call__(self, observation, history):
        if self._i: time.sleep(self.think)
        return super().__call__(observation, history)

@pytest.mark.parametrize('transport', REMOTE)
def test_an_agent_thinking_past_the_servers_idle_timeout_ends_as_its_own_timeout(transport):
    "The policy takes longer between steps than the server keeps an idle session: the agent's time ran out, scored, never invalid"
    look, submit = {'tool': 'look', 'params': {}}, {'tool': 'submit', 'params': {}}
    with served(app_for(transport, lambda: MazeEnv('easy'), limits=SessionLimits(idle_timeout=2))) as url:
        t, = collect(lambda: client_for(transport, url, step_timeout=60), lambda: Thinker([sent_as(transport, a) for a in (look, look, submit)], 5),
                     1, progress=False)
    assert t.valid, t.outcome.invalid
    assert (t.outcome.success, t.outcome.score, t.outcome.reason, t.outcome.truncated) == (False, 0.0, 'idle_timeout', True), t.outcome
    assert len(t.steps) == 2 and t.steps[-1].observation.content.startswith('Episode ended: the agent took'), t.steps[-1].observation

def test_a_step_timeout_scored_as_the_agents_when_asked():
    rec = RecorderWrapper(TimeoutWrapper(SandboxEnv(), step_timeout=1, invalid_on_timeout=False))
    try:
        rec.reset(task=TASK)
        ts = rec.step(sh('sleep 3'))
    finally: rec.close()
    o = rec.get_trajectory().outcome
    assert ts.truncated and (o.invalid, o.success, o.score, o.reason) == (None, False, 0.0, 'step_timeout'), o


def test_a_judge_sandbox_failing_is_the_harness_failure_not_a_zero_verdict(monkeypatch):
    "The judge's report cannot be read because its sandbox failed (infrastructure): the verifier raises, it does not score 0"
    from knowlyr_lab.core import InfrastructureError
    from knowlyr_lab.sandbox.base import SandboxError
    from knowlyr_lab.verifiers import HiddenTestVerifier
    v = HiddenTestVerifier({'m.py': 'def f(): return 1\n'}, {'test_m.py': 'import unittest\nfrom m import f\nclass T(unittest.TestCase):\n    def test_f(self): self.assertEqual(f(), 1)\n'})
    assert v.verify({}).tests_passed == 1                 # the wire works here
    class Down(SandboxError, InfrastructureError): pass
    def read_fails(self, name, limit=1 << 20): raise Down('the judge sandbox is gone')
    monkeypatch.setattr(LocalSandbox, '_read_tmp', read_fails)
    with pytest.raises(InfrastructureError): v.verify({})

"""Issue 39 item 4: the feedback of `submit` names the failing tests but never quotes the hidden tests.

The attack: `info['messages']` of the submit step quoted the failing assertion line (and its expected value) for 73 of
78 failing tests on the bundled repositories, so a policy could copy the hidden tests out of one episode's feedback
and hard-code the answers in the next. Here every bundled repository with its planted bug, and a spread of HumanEval
problems left as bare prompts (their function returns None), is submitted through the env's real `step`, and nothing
of the hidden test files the agent does not already see -- no line, no literal -- may appear in the observation or in
`info`, while the failing tests are named. The candidate's own code cannot echo the test's inputs back either (its
exception message, its stderr, a forged protocol answer), and over the env servers (AgentGym, OpenEnv, OpenEnv's MCP
actions) the client gets the same clean `info`. Over the MCP server, an episode `run_pipeline` plays (its policy an
OpenAI-compatible endpoint) stores the submit feedback under the server's root, where the MCP client reads it back
through a sandbox: it names the failing tests, and nothing the server wrote quotes the hidden tests. A task that opts in (`feedback: full`, for a researcher debugging their own tasks) still gets the tracebacks."""
import ast
import asyncio
import json
import os
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import app_for, client_for, sent_as, served
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from test_verifier_forgery_remote import _Policy

from knowlyr_lab.coding_tasks import CodingTask, FileEdit, load_coding_tasks
from knowlyr_lab.envs.humaneval import HumanEvalEnv, humaneval_problems, humaneval_task
from knowlyr_lab.envs.sandbox import SandboxEnv
from knowlyr_lab.registry import make
from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.verifiers import unittest_names

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the coding envs refuse to create sandboxes')]

TASKS = load_coding_tasks()
HUMANEVAL = [p['task_id'] for p in humaneval_problems()][::16]           # 11 problems spread over the 164
SUBMIT = {'tool': 'submit', 'params': {}}

def _strings(x)->list[str]:
    "Every string in `x` (keys and values, at any depth)"
    if isinstance(x, str): return [x]
    if isinstance(x, dict): return [s for k, v in x.items() for s in _strings(k) + _strings(v)]
    if isinstance(x, (list, tuple, set)): return [s for v in x for s in _strings(v)]
    return []

def _secrets(task:CodingTask)->tuple[set, set]:
    "(lines, literals) of the hidden test files that the agent does not see in the instruction, the repository or the test names"
    public = '\n'.join([task.instruction, *task.files.values(), *unittest_names(task.hidden_tests)])
    lines = {s for src in task.hidden_tests.values() for l in src.splitlines() if len(s := l.strip()) >= 12 and s not in public}
    lits = set()
    for src in task.hidden_tests.values():
        for node in ast.walk(ast.parse(src)):
            try: v = ast.literal_eval(node)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError): continue
            if v is None or isinstance(v, bool): continue
            shown = [repr(v)] + ([v] if isinstance(v, str) and len(v) >= 6 else [])
            lits |= {s for s in shown if len(s) >= 4 and s not in public}
    return lines, lits

def _leaks(task:CodingTask, ts)->list[str]:
    "What of the hidden tests shows in the submit step's observation or info"
    lines, lits = _secrets(task)
    text = '\n'.join([ts.observation, json.dumps(ts.info, default=repr), *_strings(ts.info)])
    strings = '\n'.join([ts.observation, *_strings(ts.info)])          # literals only where text is shown (a score may be 0.25)
    return sorted(l for l in lines if l in text) + sorted(x for x in lits if x in strings)

def _check_named(ts, names:list[str]):
    "The failing tests are named in info and the observation, and each feedback message is about one of them"
    info = ts.info
    failing = info['failures'] + [e for e in info['errors'] if e in names]
    assert failing and set(failing) <= set(names), info
    assert len(set(failing)) == info['tests_total'] - info['tests_passed'], info
    assert all(n in ts.observation for n in failing[:10]), ts.observation
    assert info['messages'] and all(any(m.startswith(n + ':') for n in failing) for m in info['messages']), info['messages']

# -- every bundled repository, with its planted bug, through SandboxEnv.step --

@pytest.fixture(scope='module')
def sandbox_env():
    with SandboxEnv() as env: yield env

@pytest.mark.parametrize('task_id', [t.id for t in TASKS])
def test_repo_feedback_names_failures_without_quoting_the_tests(sandbox_env, task_id):
    sandbox_env.reset(task=task_id)
    ts = sandbox_env.step(SUBMIT)
    task = sandbox_env.task
    assert ts.done and ts.verdict.success is False, ts.info
    assert _leaks(task, ts) == [], (task_id, ts.info['messages'])
    _check_named(ts, unittest_names(task.hidden_tests))

# -- HumanEval: the bare prompt (the function returns None) --

@pytest.fixture(scope='module')
def humaneval_env():
    with HumanEvalEnv(task_ids=HUMANEVAL) as env: yield env

@pytest.mark.parametrize('task_id', HUMANEVAL)
def test_humaneval_feedback_names_failures_without_quoting_the_check(humaneval_env, task_id):
    humaneval_env.reset(task=task_id)
    ts = humaneval_env.step(SUBMIT)
    task = humaneval_env.task
    assert ts.done and ts.reward == 0.0, ts.info
    assert _leaks(task, ts) == [], (task_id, ts.info['messages'])
    _check_named(ts, ['TestHumanEval.test_check'])

# -- the candidate's own code echoing what the test handed it --

_TEST = {'test_shout.py': 'import unittest\nfrom shout import shout\n\nclass TestShout(unittest.TestCase):\n'
                          "    def test_fruit(self): self.assertEqual(shout('kumquat-417'), 'KUMQUAT-417!')\n"}
_BUG = 'def shout(s):\n    return s.upper()\n'
_ECHOES = {
    'exception message': "def shout(s):\n    raise ValueError('ECHO %s' % s)\n",
    'forged protocol answer': ('import gc, io, json, os\n\ndef shout(s):\n'
                               '    w = [o for o in gc.get_objects() if type(o) is io.BufferedWriter and o.fileno() > 2][0]\n'
                               "    w.write(json.dumps({'ok': {'$': 'ECHO ' + s}}).encode() + b'\\n'); w.flush()\n"
                               '    os._exit(0)\n'),
    'stderr, then the timeout': ('import sys, time\n\ndef shout(s):\n'
                                 "    print('ECHO', s, file=sys.stderr, flush=True)\n    time.sleep(60)\n"),
}

def _shout_task(**kw)->CodingTask:
    return CodingTask(id='shout', instruction='`shout` must upper-case its text and add "!".', files={'shout.py': _BUG},
                      hidden_tests=_TEST, fix=[FileEdit(path='shout.py', old_str='s.upper()', new_str="s.upper() + '!'")], timeout=4, **kw)

def _submit(task:CodingTask, code:str, **env_kw):
    with SandboxEnv(tasks=[task], **env_kw) as env:
        env.reset(task=task.id)
        env.step({'tool': 'file_write', 'params': {'path': 'shout.py', 'content': code}})
        return env.step(SUBMIT)

@pytest.mark.parametrize('how', list(_ECHOES))
def test_the_candidate_cannot_echo_the_tests_inputs(how):
    ts = _submit(_shout_task(), _ECHOES[how])
    shown = '\n'.join([ts.observation, *_strings(ts.info)])
    assert 'kumquat' not in shown and 'ECHO' not in shown, (how, ts.info)
    assert ts.verdict.success is False, ts.info
    if how != 'stderr, then the timeout': assert 'TestShout.test_fruit' in ts.observation, ts.info     # a timeout leaves no report

def test_the_kind_of_failure_is_shown():
    "The exception's type, and where it was raised, is feedback the agent can act on; its message is not shown"
    assert _submit(_shout_task(), _ECHOES['exception message']).info['messages'] == [
        "TestShout.test_fruit: ValueError raised in the candidate's code"]
    assert _submit(_shout_task(), _BUG).info['messages'] == ['TestShout.test_fruit: AssertionError (a check of the test failed)']

def test_full_feedback_is_a_task_setting_for_the_researcher():
    "feedback: full (a task's own setting, off by default) gives the tracebacks, as a researcher debugging a task wants"
    assert _shout_task().feedback == 'names'
    ts = _submit(_shout_task(feedback='full'), _BUG)
    assert "self.assertEqual(shout('kumquat-417'), 'KUMQUAT-417!')" in ts.info['messages'][0], ts.info['messages']

def test_full_feedback_is_an_env_setting_too_for_tasks_built_in_code():
    "SandboxEnv(feedback='full'), and HumanEvalEnv's (its tasks are built in code): the tracebacks without editing a task; the default stays names"
    task = _shout_task()                                               # the task's own setting: names
    full, default = _submit(task, _BUG, feedback='full'), _submit(task, _BUG)
    assert "self.assertEqual(shout('kumquat-417'), 'KUMQUAT-417!')" in full.info['messages'][0], full.info['messages']
    assert default.info['messages'] == ['TestShout.test_fruit: AssertionError (a check of the test failed)'], default.info['messages']
    shown = {}
    for fb in ('full', None):
        with HumanEvalEnv(task_ids=HUMANEVAL[:1], feedback=fb) as env:
            env.reset(task=HUMANEVAL[0]); shown[fb] = env.step(SUBMIT).info['messages']
    assert 'Traceback' in shown['full'][0] and 'assert candidate(' in shown['full'][0], shown['full']
    assert shown[None] == ['TestHumanEval.test_check: AssertionError (a check of the test failed)'], shown[None]
    with pytest.raises(ValueError, match=r"feedback must be one of \('names', 'full'\)"): SandboxEnv(feedback='everything')

# -- over the env server: the client's info --

@pytest.mark.parametrize('transport', ['agentgym', 'openenv', 'openenv-mcp'])
def test_env_server_client_gets_no_hidden_test_text(transport):
    "Over each protocol (OpenEnv's MCP actions too) the client's observation and info name the failures and quote nothing"
    task = {t.id: t for t in TASKS}['py-fizzbuzz-order']
    with served(app_for(transport, lambda: SandboxEnv([task]))) as url:
        env = client_for(transport, url, step_timeout=120)
        try:
            env.reset(seed=0)
            ts = env.step(sent_as(transport, SUBMIT))
        finally: env.close()
    assert ts.done and ts.verdict.success is False, ts.info
    assert ts.info['tests_passed'] == 3 and ts.info['failures'] == ['TestFizzBuzz.test_both', 'TestFizzBuzz.test_both_30'], ts.info
    assert _leaks(task, ts) == [], ts.info['messages']
    _check_named(ts, unittest_names(task.hidden_tests))

def test_a_test_command_says_its_exit_status_only():
    "A task graded by a shell command: its output (here an assertion with the expected value) is not feedback"
    cmd = "python3 -c \"from shout import shout; assert shout('kumquat-417') == 'KUMQUAT-417!', 'wanted KUMQUAT-417!'\""
    ts = _submit(_shout_task(test_command=cmd), _BUG)
    assert ts.info['failures'] == ['test_command'] and ts.info['messages'] == ['test_command: exit status 1'], ts.info
    assert 'kumquat' not in '\n'.join([ts.observation, *_strings(ts.info)]).lower(), ts.info

# -- over MCP: what run_pipeline stores under the server root, read back by the MCP client --

MCP_ENVS = ['knowlyr/sandbox', 'knowlyr/humaneval']

def _written_strings(d:Path)->list[str]:
    "Every string in the files under `d` (JSON and JSONL parsed, so an escaped line reads as it is shown)"
    out = []
    for p in sorted(d.rglob('*')):
        if not p.is_file() or p.suffix == '.parquet': continue
        text = p.read_bytes().decode('utf-8', 'replace')
        if p.suffix == '.json':
            try: out += _strings(json.loads(text)); continue
            except ValueError: pass
        if p.suffix == '.jsonl':
            try: out += [x for l in text.splitlines() if l.strip() for x in _strings(json.loads(l))]; continue
            except ValueError: pass
        out.append(text)
    return out

@pytest.fixture(scope='module')
def mcp_feedback(tmp_path_factory):
    "{env id: (the CodingTask played, the submit observation the MCP client read back, every string the server wrote)}"
    root = tmp_path_factory.mktemp('mcp-feedback')
    for env_id in MCP_ENVS: _Policy.scripts[f"submit-{env_id.split('/')[1]}"] = [SUBMIT]      # submit the workspace unchanged
    policy = ThreadingHTTPServer(('127.0.0.1', 0), _Policy)
    threading.Thread(target=policy.serve_forever, daemon=True).start()
    env = {**os.environ, 'PYTHONPATH': str(Path(__file__).resolve().parent.parent), 'OPENAI_API_KEY': 'test',
           'OPENAI_BASE_URL': f'http://127.0.0.1:{policy.server_address[1]}/v1', 'NO_PROXY': '127.0.0.1,localhost', 'no_proxy': '127.0.0.1,localhost'}
    async def go():
        params = StdioServerParameters(command=sys.executable, args=['-m', 'knowlyr_lab.mcp', '--root', str(root)], env=env)
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            seen = {}
            for env_id in MCP_ENVS:
                out = f"submit-{env_id.split('/')[1]}"
                res = await s.call_tool('run_pipeline', {'output_dir': out, 'env_id': env_id, 'agent': f'openai:{out}', 'max_tasks': 1,
                                                         'max_episode_steps': 4, 'export_formats': ['sft']})
                assert not res.is_error, res.content[0].text
                sb = await s.call_tool('create_sandbox', {'workspace': f'{out}/work/rollout'})   # the client reads what the server stored
                sid = sb.structured_content['sandbox_id']
                cat = await s.call_tool('execute_tool', {'sandbox_id': sid, 'tool': 'shell', 'params': {'command': 'cat *.json'}})
                await s.call_tool('close_sandbox', {'sandbox_id': sid})
                seen[env_id] = (res.content[0].text, cat.structured_content['output'])
            return seen
    try: seen = asyncio.run(go())
    finally: policy.shutdown()
    out = {}
    for env_id, (answer, rollout) in seen.items():
        t = json.loads(rollout)
        tid = make(env_id).list_tasks()[0]['id']
        task = humaneval_task({p['task_id']: p for p in humaneval_problems()}[tid]) if env_id == 'knowlyr/humaneval' else {x.id: x for x in TASKS}[tid]
        assert t['task']['id'] == tid and t['steps'][-1]['action']['tool'] == 'submit', t['steps']
        out[env_id] = task, t['steps'][-1]['observation']['content'], [answer, *_written_strings(root / f"submit-{env_id.split('/')[1]}")]
    return out

@pytest.mark.parametrize('env_id', MCP_ENVS)
def test_mcp_client_reads_failures_named_and_no_hidden_test_text(mcp_feedback, env_id):
    task, shown, written = mcp_feedback[env_id]
    names = unittest_names(task.hidden_tests)
    assert shown.startswith('Submitted.') and any(n in shown for n in names), shown             # the failing tests are named
    lines, lits = _secrets(task)
    text = '\n'.join(written)
    leaks = sorted(l for l in lines if l in text) + sorted(x for x in lits if x in text)
    assert leaks == [], (env_id, leaks[:10])

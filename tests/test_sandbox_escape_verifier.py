"""Verifiers the agent cannot forge (issue 13): whatever the agent's code prints, plants or exits with, the reward is
the hidden tests' true verdict on a pristine copy of the task with only the agent's files applied."""
import json

import pytest
from sandbox_backends import BACKENDS

from knowlyr_lab.envs.sandbox import SandboxEnv
from knowlyr_lab.verifier_catalogue import FORGERY_STRATEGIES

ISOLATING = [p for p in BACKENDS if p.id != 'local-unisolated']
FAKE = {'ran': 5, 'passed': 5, 'failures': [], 'errors': [], 'messages': []}
FAKE_LINES = ['KNOWLYR_TEST_REPORT ' + json.dumps(FAKE), json.dumps(FAKE), 'Ran 5 tests in 0.001s', 'OK', '5 passed']

APPENDED = {   # code appended to the buggy fb.py; the bug stays, so the true verdict is 3 of 5
    'exit-time-report-line': "\nimport atexit\natexit.register(lambda: print(%r))\n" % '\n'.join(FAKE_LINES),
    'import-time-report-line': "\nprint(%r)\nimport sys; sys.stderr.write(%r)\n" % ('\n'.join(FAKE_LINES), '\n'.join(FAKE_LINES)),
    'report-at-exit-of-every-stream': "\nimport atexit, os\natexit.register(lambda: [os.write(fd, (%r + '\\n').encode()) for fd in (1, 2)])\n" % FAKE_LINES[0],
}
PLANTED = {   # files the agent adds next to the code
    'hidden-test-dir': {'.hidden_tests/test_free.py': 'import unittest\nclass T(unittest.TestCase):\n' + ''.join(f'    def test_{i}(self): pass\n' for i in range(50))},
    'stdlib-shadow': {'unittest.py': 'raise SystemExit(0)\n', 'json.py': 'raise SystemExit(0)\n'},
    'sitecustomize': {'sitecustomize.py': 'import os; os._exit(0)\n', 'usercustomize.py': 'import os; os._exit(0)\n'},
    'extra-tests': {'test_more.py': 'import unittest\nclass T(unittest.TestCase):\n    def test_a(self): pass\n', 'conftest.py': 'import os; os._exit(0)\n'},
}

@pytest.fixture(scope='module', params=ISOLATING)
def env(request):
    if request.param == 'docker': request.getfixturevalue('docker_host')
    e = SandboxEnv(backend=request.param)
    yield e
    e.close()

def _submit(env, writes:dict, append:str|None=None):
    env.reset(task='py-fizzbuzz-order')
    if append is not None:
        src = env.step({'tool': 'file_read', 'params': {'path': 'fb.py'}}).observation
        writes = {'fb.py': src + append, **writes}
    for p, c in writes.items():
        ts = env.step({'tool': 'file_write', 'params': {'path': p, 'content': c}})
        assert not ts.info['is_error'], ts.observation
    return env.step({'tool': 'submit', 'params': {}})

def test_fake_reports_in_code_do_not_change_reward(env):
    "The issue's attack and its relatives, appended together to the buggy code: fake report lines at import and at exit, on every stream"
    ts = _submit(env, {}, ''.join(APPENDED.values()))
    assert (ts.info['tests_passed'], ts.info['tests_total'], ts.reward) == (3, 5, 0.6), ts.info

def test_planted_files_do_not_change_reward(env):
    "Tests where the hidden ones go, stdlib shadows, start-up hooks and extra test files, all planted at once"
    ts = _submit(env, {k: v for files in PLANTED.values() for k, v in files.items()})
    assert (ts.info['tests_passed'], ts.info['tests_total'], ts.reward) == (3, 5, 0.6), ts.info
    assert {'.hidden_tests/test_free.py', 'unittest.py', 'json.py', 'sitecustomize.py', 'usercustomize.py'} - set(ts.info['applied'] + list(ts.info['ignored'])) == set()
    assert set(ts.info['ignored']) == {'unittest.py', 'json.py', 'sitecustomize.py', 'usercustomize.py'}, ts.info['ignored']

IN_PROCESS = ['gc-result-instance', 'closure-cell-swap', 'code-swap', 'json-dumps-patch', 'builtins-sorted', 'sys-modules-poison',
              'class-level-patch', 'stack-walk-report']   # issue 24: each of the first five forged 5 of 5 when the tests imported fb.py

def test_in_process_forgery_does_not_change_reward(env):
    "The in-process attacks of issue 24, appended together: they run in the candidate's process, where no test runs"
    ts = _submit(env, {}, ''.join('\n' + FORGERY_STRATEGIES[n].code for n in IN_PROCESS))
    assert (ts.info['tests_passed'], ts.info['tests_total'], ts.reward) == (3, 5, 0.6), ts.info

def test_exit_status_is_not_the_verdict(env):
    "Code that ends the test process with status 0 before any test ran scores 0, not 1"
    ts = _submit(env, {}, "\nimport os\nos._exit(0)\n")
    assert (ts.info['tests_passed'], ts.reward, ts.verdict.success) == (0, 0.0, False), ts.info

def test_true_fix_still_scores_one(env):
    env.reset(task='py-fizzbuzz-order')
    ts = None
    while ts is None or not ts.done: ts = env.step(env.oracle_action())
    assert (ts.info['tests_passed'], ts.reward, ts.verdict.success) == (5, 1.0, True), ts.info

def test_sparse_files_past_the_quota_fail_the_episode_without_reading_them(env):
    "Sparse files take no room in the workspace's tmpfs, yet a thousand of them (64 GB) would be read, compressed and held in host memory"
    env.reset(task='py-fizzbuzz-order')
    ts = env.step({'tool': 'shell', 'params': {'command': 'for i in $(seq 10); do truncate -s 64M sparse$i; done'}})
    assert not ts.info['is_error'], ts.observation
    ts = env.step({'tool': 'submit', 'params': {}})
    assert (ts.info['tests_passed'], ts.info['tests_total'], ts.info['applied'], ts.reward) == (0, 0, [], 0.0), ts.info   # not graded
    assert 'more than 512 MiB of file data' in ts.info['workspace_error'] and 'more than 512 MiB' in ts.verdict.reason, ts.verdict

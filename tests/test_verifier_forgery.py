"""Issue 24: a wrong solution cannot forge the hidden tests' verdict, whatever its code does inside the process that
holds it. Each attack class of the issue, over the Python API (`HiddenTestVerifier.verify` and an env's `submit`),
on a planted-bug repository and on HumanEval; then the verifier probe over every bundled suite with a verifier, and
every reference fix (the bundled tasks' and HumanEval's canonical solutions) over the wire.
Every attack here raised the verdict of the verifier before the split (the tests imported the agent's code)."""
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from knowlyr_lab.cli.probe import main
from knowlyr_lab.coding_tasks import fixed_files, load_coding_tasks
from knowlyr_lab.envs.humaneval import HumanEvalEnv, humaneval_problems, humaneval_task
from knowlyr_lab.verifier_catalogue import FORGERY_STRATEGIES
from knowlyr_lab.verifier_probe import probe_envs, probe_summary, verifier_envs
from knowlyr_lab.verifier_strategies import attack_files

TASKS = {t.id: t for t in load_coding_tasks()}
PROBS = {p['task_id']: p for p in humaneval_problems()}
CLASSES = ['gc-result-instance', 'closure-cell-swap', 'code-swap', 'json-dumps-patch', 'stack-walk-report', 'always-equal', 'builtins-sorted']

@pytest.fixture(scope='module')
def fizz():
    t = TASKS['py-fizzbuzz-order']
    v = t.verifier()
    honest = v.verify({})
    assert (honest.tests_passed, honest.tests_total) == (3, 5)      # the planted bug: 15 and 30 come out as 'Fizz'
    return t, v

@pytest.mark.parametrize('name', CLASSES)
def test_attack_class_gets_the_true_verdict_on_a_repository(fizz, name):
    "The issue's classes, appended to the buggy module: the verdict stays the bug's 3 of 5 (or drops)"
    t, v = fizz
    r = v.verify(attack_files(t, FORGERY_STRATEGIES[name]))
    assert r.tests_passed <= 3 and not r.success, (name, r, r.errors, r.messages[:1])

HE0 = PROBS['HumanEval/0']['prompt']

@pytest.mark.parametrize('name', CLASSES)
def test_attack_class_gets_the_true_verdict_on_humaneval(name):
    "The same classes on HumanEval/0's bare prompt (which returns None): still 0 of 1"
    t = humaneval_task(PROBS['HumanEval/0'])
    r = t.verifier().verify(attack_files(t, FORGERY_STRATEGIES[name]))
    assert (r.tests_passed, r.tests_total) == (0, 1), (name, r.errors, r.messages[:1])

def test_always_equal_return_value_is_not_trusted():
    "A function that returns an object equal to everything: the judge compares a reference, which equals only itself"
    any_eq = 'class Any:\n    def __eq__(self, other): return True\n    def __ne__(self, other): return False\n'
    r = humaneval_task(PROBS['HumanEval/0']).verifier().verify({'solution.py': any_eq + HE0 + '    return Any()\n'})
    assert (r.tests_passed, r.failures) == (0, ['TestHumanEval.test_check']), r.messages
    t = TASKS['py-fizzbuzz-order']
    r = t.verifier().verify({'fb.py': any_eq + 'def fizzbuzz(n): return Any()\n'})
    assert r.tests_passed == 0 and len(r.failures) == 5, r

def test_a_redefined_prompt_helper_is_not_trusted():
    "HumanEval/38's check encodes with the prompt's encode_cyclic: an identity encode_cyclic in solution.py no longer lets an identity decode pass"
    p = PROBS['HumanEval/38']
    v = humaneval_task(p).verifier()
    cheat = 'def encode_cyclic(s): return s\n\ndef decode_cyclic(s): return s\n'
    assert v.verify({'solution.py': cheat}).tests_passed == 0
    assert v.verify({'solution.py': p['prompt'] + p['canonical_solution']}).success

@pytest.mark.slow
def test_every_reference_fix_passes_over_the_wire_and_every_bug_fails():
    "Each bundled task's bug fails and its reference fix passes, and each of HumanEval's 164 canonical solutions passes, through the wire"
    jobs = [(t.id, t, {}, False) for t in TASKS.values()] + [(t.id, t, fixed_files(t), True) for t in TASKS.values()]
    # a minute per run, not HumanEval's 10 s: this checks the wire's verdicts, and a timeout on 2 busy cores is not one
    jobs += [(p['task_id'], humaneval_task(p, test_timeout=60), {'solution.py': p['prompt'] + p['canonical_solution']}, True)
             for p in PROBS.values()]
    def wrong(job):
        tid, task, files, fixed = job
        r = task.verifier().verify(files)
        return None if r.success == fixed else (tid, 'fix' if fixed else 'bug', r, r.errors, r.messages[:2])
    with ThreadPoolExecutor(2) as ex: bad = [b for b in ex.map(wrong, jobs) if b]   # sandboxes are processes: two at a time
    assert len(TASKS) == 41 and len(PROBS) == 164 and bad == [], bad

def test_a_dead_candidate_fails_its_tests_and_says_why():
    t = TASKS['py-fizzbuzz-order']
    r = t.verifier().verify({'fb.py': t.files['fb.py'] + 'import os\nos._exit(0)\n'})
    assert r.tests_passed == 0 and r.errors[-1] == "the candidate's process stopped answering: the candidate process ended", r.errors

def test_attack_through_the_env_submit():
    "The stack-walk attack as an agent would play it: tool calls in a HumanEval episode, then submit"
    with HumanEvalEnv(task_ids=['HumanEval/0']) as env:
        env.reset(task='HumanEval/0')
        t = env.task
        for path, content in attack_files(t, FORGERY_STRATEGIES['stack-walk-report']).items():
            env.step({'tool': 'file_write', 'params': {'path': path, 'content': content}})
        ts = env.step({'tool': 'submit', 'params': {}})
    assert (ts.reward, ts.verdict.success, ts.info['tests_passed']) == (0.0, False, 0), ts.info

PROBE = {'knowlyr/sandbox': ['py-fizzbuzz-order', 'py-overdraft'], 'knowlyr/humaneval': ['HumanEval/0', 'HumanEval/38']}

def test_probe_finds_no_forgery_in_any_bundled_suite():
    "Every strategy of the catalogue against every bundled env with a verifier: 0 forged"
    envs = verifier_envs()
    assert set(envs) == set(PROBE), envs                   # a new suite with a verifier must be added to the probe here
    df = probe_envs(envs, tasks=PROBE)
    assert len(df) == 4 * len(FORGERY_STRATEGIES)
    forged = df[df.forged]
    assert forged.empty, forged.to_string()
    s = probe_summary(df)
    assert s.hackable_fraction.tolist() == [0.0, 0.0] and s.wrong_passed.tolist() == [0, 6], s

def test_probe_cli(capsys):
    "knowlyr-probe is declared as a console script and exits 0 when nothing forged, 2 on an env without a verifier"
    root = Path(__file__).resolve().parents[1]
    assert tomllib.loads((root / 'pyproject.toml').read_text())['project']['scripts']['knowlyr-probe'] == 'knowlyr_lab.cli.probe:main'
    assert main(['knowlyr/sandbox', '--n-tasks', '1', '--strategy', 'gc-result-instance']) == 0
    out = capsys.readouterr().out
    assert 'hackable_fraction' in out and 'knowlyr/sandbox' in out
    assert main(['knowlyr/maze']) == 2
    assert 'not graded by hidden tests' in capsys.readouterr().err

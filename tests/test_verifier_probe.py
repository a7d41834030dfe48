"""`knowlyr-probe` (issue 39 item 3): strategies are plugins (the built-in catalogue, entry points, a file given on the
command line), each is played through the env's real submit path (reset, tool calls, submit with its snapshot and
verifier), and the catalogue covers every attack class of issue 39: laundering through a failing snapshot, the wire
attacks, answers hard-coded from feedback. The exit status honours --max-hackable, a bad plugin file is one line
naming it, and CI runs the probe over every bundled suite.

The probe also plays the issue-39 classes through a client of the served task (AgentGym, OpenEnv and OpenEnv's MCP
actions), with a control that a forgery is seen over the wire where there is one.

The tests check that the probe plays and reports everything and that its verdicts follow its definition; the run over
every bundled suite also requires that nothing is forged (the snapshot and wire fixes of issue 39 items 1-2)."""
import json
import warnings

import pytest
from helpers import app_for, client_for, sent_as, served

from knowlyr_lab.cli.probe import main
from knowlyr_lab.coding_tasks import fixed_files, load_coding_tasks
from knowlyr_lab.envs.sandbox import SandboxEnv
from knowlyr_lab.plugins import RegistryWarning
from knowlyr_lab.registry import ENVS, register
from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.verifier_catalogue import FORGERY_STRATEGIES
from knowlyr_lab.verifier_episodes import one_process_passed, play_episode
from knowlyr_lab.verifier_plugins import StrategyFileError, available_strategies, load_strategy_file
from knowlyr_lab.verifier_probe import WEAK_TASKS, check_task, probe_task, verifier_envs
from knowlyr_lab.verifier_strategies import ForgeryStrategy
from knowlyr_lab.wrappers import EnvWrapper

needs_sandbox = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the sandbox env refuses to start')
TASKS = {t.id: t for t in load_coding_tasks()}
FIZZ = TASKS['py-fizzbuzz-order']          # fb.py with a planted bug: 3 of its 5 hidden tests pass as shipped
COLUMNS = ['env', 'task', 'strategy', 'kind', 'source', 'wrong', 'honest', 'attacked', 'total', 'outcome', 'forged', 'why']

# the classes of issue 39 (and the name of the built-in strategy for each)
ISSUE_39 = {'launder-chmod-dir': 'infra laundering', 'launder-chmod-file': 'infra laundering',
            'mutate-argument': 'wire: argument mutation', 'int-subclass-eq': 'wire: subclass ==', 'ordered-dict-order': 'wire: OrderedDict order',
            'all-exports-builtins': 'wire: __all__ hijack', 'planted-numpy': 'wire: planted module', 'die-on-bad-input': 'wire: process death',
            'feedback-hardcode': 'feedback leak'}
ISSUE_24 = ['gc-result-instance', 'closure-cell-swap', 'code-swap', 'json-dumps-patch', 'stack-walk-report', 'always-equal', 'builtins-sorted',
            'sys-modules-poison', 'atexit-fake-report', 'exit-after-fake-pass', 'class-level-patch', 'identity-helpers', 'channel-flood',
            'kill-the-runner', 'startup-hooks', 'stdlib-shadow', 'planted-tests']

def rows_of(out:str)->list[dict]: return [json.loads(l) for l in out.splitlines() if l.startswith('{')]

def consistent(r:dict)->bool:
    "A row's verdict follows the definition: forged = invalid, or more hidden tests passed than the reference's true score"
    return r['forged'] == (r['outcome'] == 'invalid' or (r['outcome'] == 'scored' and r['honest'] is not None and r['attacked'] > r['honest']))

def test_the_catalogue_covers_every_attack_class():
    cat = available_strategies()
    assert {n: cat[n].kind for n in ISSUE_39} == ISSUE_39
    assert set(ISSUE_24) <= set(cat) and all(cat[n].source == 'built-in' for n in [*ISSUE_24, *ISSUE_39])
    merge = TASKS['py-deep-merge']
    shell = lambda n: [a['params']['command'] for a in cat[n].actions(merge) if a['tool'] == 'shell']
    assert shell('launder-chmod-dir') == ['mkdir -p junk && chmod 000 junk'] and shell('launder-chmod-file') == ['chmod 000 config/merge.py']
    assert 'numpy.py' in cat['planted-numpy'].submission(merge)
    star = cat['all-exports-builtins'].submission(merge)['config/merge.py']
    assert all(f"'{b}'" in star for b in ('abs', 'sorted', 'len')) and '__all__ =' in star
    mutating = cat['mutate-argument'].submission(merge)['config/merge.py']
    assert mutating.startswith(fixed_files(merge)['config/merge.py'].rstrip('\n'))          # the fix, plus the mutation
    assert cat['mutate-argument'].reference_files(merge) is None                            # judged against itself in one process
    assert '_exit' in cat['die-on-bad-input'].code and cat['feedback-hardcode'].actions(merge) == []

# fb.py's planted bug fixed by a shell command: test for 15 first
SED_FIX = '''sed -i 's/    if n % 3 == 0:/    if n % 15 == 0:\\n        return "FizzBuzz"\\n    if n % 3 == 0:/' fb.py'''

PLUGIN = f'''
SED_FIX = {SED_FIX!r}
from knowlyr_lab.verifier_strategies import ForgeryStrategy

class FixBySed(ForgeryStrategy):
    "Fixes the planted bug with a shell command: more tests pass than the wrong solution's, so by definition it 'forges'"
    name, kind, what = 'fix-by-sed', 'plugin', 'fix fb.py with sed'
    commands = (SED_FIX, "grep -c 'n % 15' fb.py")

also = ForgeryStrategy('plugin-noop', 'plugin', 'change nothing', commands=('true',))
'''

@needs_sandbox
def test_a_strategy_from_a_file_is_played_through_the_env_and_reported(tmp_path, capsys):
    path = tmp_path/'my_strategies.py'
    path.write_text(PLUGIN)
    assert [(s.name, s.source) for s in load_strategy_file(path)] == [('fix-by-sed', str(path)), ('plugin-noop', str(path))]
    assert 'fix-by-sed' not in available_strategies() and available_strategies([path])['fix-by-sed'].source == str(path)
    rc = main(['knowlyr/sandbox', '--task', FIZZ.id, '--strategy', 'fix-by-sed', '--strategy', 'plugin-noop', '--strategies', str(path), '--json'])
    rows = {r['strategy']: r for r in rows_of(capsys.readouterr().out)}
    assert set(rows) == {'fix-by-sed', 'plugin-noop'} and {r['source'] for r in rows.values()} == {str(path)}
    fix, noop = rows['fix-by-sed'], rows['plugin-noop']
    assert (fix['outcome'], fix['attacked'], fix['total'], fix['wrong']) == ('scored', fix['total'], fix['total'], noop['wrong']), fix
    assert fix['attacked'] > fix['wrong'] and fix['forged'] and rc == 1      # its shell command's fix reached the verdict: the snapshot read it
    assert (noop['outcome'], noop['attacked'], noop['forged']) == ('scored', noop['wrong'], False)

@needs_sandbox
def test_laundering_goes_through_the_real_snapshot_at_submit():
    "The commands run in the episode's sandbox, then submit snapshots the workspace: a fix made by a shell command, followed by an unreadable directory, is judged"
    fix_then_launder = ForgeryStrategy('fix-then-launder', 'test', 'fix with sed, then the laundering command',
                                       commands=(SED_FIX, *FORGERY_STRATEGIES['launder-chmod-dir'].commands))
    ep = fix_then_launder.play(FIZZ, lambda actions: play_episode(lambda: SandboxEnv([FIZZ]), FIZZ.id, actions))
    assert len(ep.outputs) == 2                                                 # both commands ran before submit
    if ep.outcome == 'invalid': assert ep.why, ep                               # the snapshot raised: an infrastructure failure, with its reason
    else: assert (ep.outcome, ep.tests_passed, ep.info['tests_total'], ep.reward) == ('scored', 5, 5, 1.0), ep   # the snapshot held the shell's fix
    rows = probe_task(FIZZ, ['launder-chmod-dir', 'launder-chmod-file'])
    assert [(r['strategy'], r['wrong'], r['honest'], r['total']) for r in rows] == [('launder-chmod-dir', 3, 3, 5), ('launder-chmod-file', 3, 3, 5)]
    assert all(r['outcome'] in ('scored', 'invalid') and consistent(r) for r in rows), rows

@pytest.fixture
def weak_feedback_env():
    "A suite of one task whose feedback quotes the failing assertions (feedback: full), and the same task with the default feedback"
    full, names = WEAK_TASKS[-2][0], WEAK_TASKS[-1][0]
    assert (full.feedback, names.feedback) == ('full', 'names')
    register('probe-test/feedback-full', SandboxEnv, tasks=[full], overwrite=True)
    register('probe-test/feedback-names', SandboxEnv, tasks=[names], overwrite=True)
    yield
    for e in ('probe-test/feedback-full', 'probe-test/feedback-names'): ENVS.unregister(e)

@needs_sandbox
def test_the_exit_status_honours_max_hackable(weak_feedback_env, capsys):
    "Answers read off a quoting feedback and hard-coded in a second episode pass tests the wrong solution fails: hacked"
    argv = ['probe-test/feedback-full', '--strategy', 'feedback-hardcode', '--json']
    assert main(argv) == 1                                                       # default --max-hackable 0
    r, = rows_of(capsys.readouterr().out)
    assert (r['wrong'], r['honest'], r['attacked'], r['total'], r['forged']) == (1, 1, 3, 3, True), r
    assert main([*argv, '--max-hackable', '0.5']) == 1                           # 1 of 1 task hackable: above 0.5
    assert main([*argv, '--max-hackable', '1']) == 0
    capsys.readouterr()
    assert main(['probe-test/feedback-names', '--strategy', 'feedback-hardcode', '--json']) == 0   # the default feedback names tests only
    r, = rows_of(capsys.readouterr().out)
    assert (r['attacked'], r['forged']) == (1, False), r

@pytest.mark.parametrize('content, says', [
    ('from knowlyr_lab.verifier_strategies import ForgeryStrategy\n\nx = ForgeryStrategy(\n', r'cannot load forgery strategies: SyntaxError: .*\(line 3\)'),
    ('import json\n\nraise RuntimeError("broken plugin")\n', r'cannot load forgery strategies: RuntimeError: broken plugin \(line 3\)'),
    ('from knowlyr_lab.verifier_strategies import ForgeryStrategy\nx = ForgeryStrategy(name="a", base="nope")\n', r"base must be 'wrong' or 'fixed'"),
    ('X = 1\n', r'no ForgeryStrategy subclass or instance in it'),
    ('from knowlyr_lab.verifier_strategies import ForgeryStrategy\nx = ForgeryStrategy("code-swap")\n', r"strategy 'code-swap' is already defined \(built-in\)"),
])
def test_a_bad_plugin_file_gives_one_line_naming_it(tmp_path, capsys, content, says):
    path = tmp_path/'bad_strategies.py'
    path.write_text(content)
    assert main(['knowlyr/sandbox', '--strategies', str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith(f"knowlyr-probe: {path}: "), err
    with pytest.raises(StrategyFileError, match=says): available_strategies([path])

def test_a_missing_plugin_file_and_an_unknown_strategy(tmp_path, capsys):
    assert main(['knowlyr/sandbox', '--strategies', str(tmp_path/'nope.py')]) == 2
    assert capsys.readouterr().err == f"knowlyr-probe: {tmp_path/'nope.py'}: no such file\n"
    assert main(['knowlyr/sandbox', '--strategy', 'no-such-strategy']) == 2
    assert "unknown forgery strategy 'no-such-strategy'" in capsys.readouterr().err

def _install(site, name, value):
    "A package installed the way pip leaves one: a module and a dist-info folder whose entry point names it"
    (site/f'{name}.py').write_text(value)
    info = site/f'{name}-0.1.dist-info'
    info.mkdir()
    (info/'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n')
    (info/'entry_points.txt').write_text(f'[knowlyr_lab.probe_strategies]\n{name} = {name}\n')

def test_entry_point_strategies_are_discovered_and_a_broken_one_is_skipped(tmp_path, monkeypatch, capsys):
    _install(tmp_path, 'probe_pkg_good', "from knowlyr_lab.verifier_strategies import ForgeryStrategy\n"
                                          "class Mine(ForgeryStrategy):\n    name, kind, what = 'from-a-package', 'plugin', 'an entry point'\n")
    _install(tmp_path, 'probe_pkg_broken', "raise ImportError('missing dependency')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        cat = available_strategies()
        assert main(['--list']) == 0 and 'from-a-package' in capsys.readouterr().out
    assert cat['from-a-package'].source == 'entry point probe_pkg_good' and list(cat)[:len(FORGERY_STRATEGIES)] == list(FORGERY_STRATEGIES)
    assert any(issubclass(x.category, RegistryWarning) and 'probe_pkg_broken' in str(x.message) for x in w), [str(x.message) for x in w]

@needs_sandbox
def test_check_task_flags_tests_that_cannot_fail():
    "A task whose hidden tests do not reach its bug passes them unfixed; the one-process run sees a mutated argument whatever the wire does"
    merge = TASKS['py-deep-merge']
    blind = merge.model_copy(update={'id': 'blind', 'hidden_tests': {'test_merge.py': merge.hidden_tests['test_merge.py'].split('    def test_nested')[0]}})
    c = check_task(blind)
    assert (c['total'], c['unfixed'], c['fixed']) == (2, 2, 2) and 'the hidden tests all pass on the unfixed repository' in c['flags'], c
    c = check_task(merge)
    assert (c['unfixed'], c['unfixed_one_process'], c['fixed'], c['fixed_one_process'], c['mutating_one_process']) == (3, 3, 4, 4, 3), c
    assert c['mutating'] == 3 or any('when the fix mutates its arguments' in f for f in c['flags']), c     # a mutation the wire cannot show is flagged
    assert one_process_passed(FIZZ, {}) == ['TestFizzBuzz.test_buzz', 'TestFizzBuzz.test_fizz', 'TestFizzBuzz.test_plain']

@needs_sandbox
def test_check_on_the_command_line(capsys):
    "--check adds each probed task's check; a task with no flag and no forged try exits 0"
    assert main(['knowlyr/sandbox', '--task', FIZZ.id, '--strategy', 'code-swap', '--check']) == 0
    out = capsys.readouterr().out
    assert 'py-fizzbuzz-order' in out and 'flags' in out and 'code-swap' in out

@pytest.mark.slow
@needs_sandbox
def test_the_probe_runs_over_every_bundled_suite(capsys):
    "knowlyr-probe over every bundled suite with a verifier, 2 tasks each, every strategy, and the check of those tasks: the report is complete"
    envs = verifier_envs()
    assert {'knowlyr/sandbox', 'knowlyr/humaneval'} <= set(envs), envs
    rc = main([*envs, '--tasks', '2', '--check', '--json'])
    lines = rows_of(capsys.readouterr().out)
    tries, checks = [r for r in lines if 'strategy' in r], [r for r in lines if 'flags' in r]
    assert tries and set(tries[0]) == set(COLUMNS), tries[0]
    assert {r['env'] for r in tries} == set(envs)
    for e in envs:
        mine = [r for r in tries if r['env'] == e]
        assert len({r['task'] for r in mine}) == 2, e
        assert sorted((r['task'], r['strategy']) for r in mine) == sorted((t, s) for t in {r['task'] for r in mine} for s in FORGERY_STRATEGIES), e
    assert all(r['outcome'] in ('scored', 'invalid', 'error') and 0 <= r['attacked'] <= r['total'] and 0 <= r['wrong'] <= r['total'] for r in tries)
    bad = [r for r in tries if not consistent(r)]
    assert not bad, bad
    assert sorted((c['env'], c['task']) for c in checks) == sorted({(r['env'], r['task']) for r in tries})
    assert all(isinstance(c['flags'], list) and c['fixed'] == c['total'] for c in checks), checks      # each bundled fix passes its tests
    assert not [r for r in tries if r['forged']] and not [c for c in checks if c['flags']]   # no bundled verifier is forged, no test cannot fail
    assert rc == 0

# -- the same attacks over the env servers: the probe plays them through a client, as a remote policy would --

class ServedTask(EnvWrapper):
    "A client of a server that serves one task: the probe resets it by the task's id (the server's seed 0) and sends tool calls as `transport` does"
    def __init__(self, env, transport): super().__init__(env); self.transport = transport
    def reset(self, *, task=None, seed=None): return self.env.reset(seed=0)
    def step(self, action): return self.env.step(sent_as(self.transport, action))

def probe_over(transport:str, task, strategies:list)->list[dict]:
    "`probe_task` rows of `strategies` on `task`, every episode played through a client of `task` served over `transport`"
    with served(app_for(transport, lambda: SandboxEnv([task]))) as url:
        return probe_task(task, strategies, env=lambda: ServedTask(client_for(transport, url, step_timeout=120), transport))

@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize('transport', ['agentgym', 'openenv', 'openenv-mcp'])
def test_the_issue_39_classes_forge_nothing_over_the_env_servers(transport):
    "Laundering, the wire attacks and feedback hard-coding, each played through a client of the served task: every one scored, none forged"
    rows = probe_over(transport, FIZZ, list(ISSUE_39))
    assert [r['strategy'] for r in rows] == list(ISSUE_39)
    assert all(r['outcome'] == 'scored' and consistent(r) and not r['forged'] for r in rows), [r for r in rows if r['forged'] or r['outcome'] != 'scored']
    assert all((r['wrong'], r['total']) == (3, 5) for r in rows), rows

@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize('transport', ['agentgym', 'openenv-mcp'])
def test_the_probe_over_a_server_sees_a_forgery_where_there_is_one(transport):
    "The control: a task whose feedback quotes its assertions (feedback: full) is hacked from that feedback over the wire too; by default it is not"
    full, names = WEAK_TASKS[-2][0], WEAK_TASKS[-1][0]
    hacked, = probe_over(transport, full, ['feedback-hardcode'])
    held, = probe_over(transport, names, ['feedback-hardcode'])
    assert hacked['forged'] and hacked['attacked'] > hacked['honest'], hacked
    assert not held['forged'] and held['outcome'] == 'scored', held

"Every knowlyr command reports an error the same way (`cli_errors.run_cli`): one line on stderr, status 2 for bad input, --debug for the traceback"
import contextlib
import io
import subprocess
import sys

import pytest

CLIS = {  # command -> (module with `main`, arguments naming an input that does not exist)
    'knowlyr-lab': ('knowlyr_lab.cli', ['loop', '--env', 'knowlyr/nope']),            # an env id nothing is registered under
    'knowlyr-hub': ('knowlyr_lab.cli.hub', ['run', '-o', '{tmp}/out', '--logs', '{missing}']),
    'knowlyr-recorder': ('knowlyr_lab.cli.recorder', ['convert', '{missing}', '-o', '{tmp}/o.jsonl', '--no-progress']),
    'knowlyr-reward': ('knowlyr_lab.cli.reward', ['score', '{missing}', '-o', '{tmp}/o.jsonl']),
    'knowlyr-trainer': ('knowlyr_lab.cli.trainer', ['sft', '--model-name-or-path', '{missing}', '--train-data', '{tmp}/t.jsonl', '--output-dir', '{tmp}/run']),
}

def _run(module, args, tmp_path, debug=False):
    args = [a.format(missing=tmp_path / 'nope', tmp=tmp_path) for a in args]
    code = f"import sys; from {module} import main; sys.exit(main())"
    return subprocess.run([sys.executable, '-c', code, *(['--debug'] if debug else []), *args], capture_output=True, text=True, timeout=300)

@pytest.mark.parametrize('prog', list(CLIS))
def test_a_missing_input_is_one_line_status_2_and_debug_adds_the_traceback(prog, tmp_path):
    module, args = CLIS[prog]
    r = _run(module, args, tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"{prog} {args[0]}: error: ") and 'nope' in lines[0], r.stderr[-2000:]
    assert 'Traceback' not in r.stderr and r.stdout == ''
    d = _run(module, args, tmp_path, debug=True)
    assert d.returncode == 2 and 'Traceback' in d.stderr and d.stderr.strip().splitlines()[-1] == lines[0], d.stderr[-2000:]


PARSERS = {'knowlyr-lab': ('knowlyr_lab.cli', '_parser'), 'knowlyr-hub': ('knowlyr_lab.cli.hub', '_parser'),
           'knowlyr-recorder': ('knowlyr_lab.cli.recorder', 'build_parser'), 'knowlyr-reward': ('knowlyr_lab.cli.reward', 'build_parser'),
           'knowlyr-trainer': ('knowlyr_lab.cli.trainer', 'build_parser')}

@pytest.mark.parametrize('prog', list(PARSERS))
def test_every_flag_of_every_cli_is_documented(prog):
    import argparse
    import importlib
    module, fn = PARSERS[prog]
    p = getattr(importlib.import_module(module), fn)()
    subs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    for sp in subs.choices.values(): sp.format_help()     # knowlyr-trainer adds a subcommand's config flags when it is used
    missing = [f"{prog} {name} {a.dest}" for name, sp in subs.choices.items() for a in sp._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not missing, missing


# -- Ten newcomer mistakes per command (#27): each is one line on stderr naming the fix, exit 2, no traceback, no usage block.
# Run in-process (`main(argv)`) so sixty mistakes cost seconds; the subprocess tests above cover the console-script path.
MCP_MAIN = ('knowlyr_lab.mcp', 'main')
MISTAKES = {  # command -> (module, [(argv, what the line must say)])
    'knowlyr-lab': ('knowlyr_lab.cli', [
        (['loop', '--env', 'knowlyr/maze-esay'], "did you mean 'knowlyr/maze-easy'"),
        (['lop'], "did you mean 'loop'"),
        (['loop', '--sed', '1'], 'did you mean --seed'),
        (['demo', '--siz', 'ci'], 'did you mean --size'),                       # abbreviations are refused, with the flag
        (['loop', '--seed', 'one'], "invalid int value: 'one'"),
        (['demo', '--size', 'huge'], "choose from 'ci', 'small', 'full'"),
        (['loop', '--env'], 'expected one argument'),
        ([], 'the following arguments are required: cmd'),
        (['envs', '--verbose'], 'unrecognized arguments: --verbose (see knowlyr-lab envs --help)'),
        (['mcp', '--root', '{missing}'], 'server root {missing} is not a directory'),
    ]),
    'knowlyr-recorder': ('knowlyr_lab.cli.recorder', [
        (['convert', '{missing}', '-o', '{tmp}/o.jsonl'], '{missing}'),
        (['convert', '{log}', '-o', '{tmp}/o.csv'], 'must end in .jsonl, .jsonl.gz, .parquet'),
        (['convert', '{corrupt}', '-o', '{tmp}/o.jsonl', '--no-progress'], 'none of the 2 records was usable'),
        (['convert', '{log}', '-o', '{tmp}/o.jsonl', '-f', 'openai-chatt'], 'openai-chat'),
        (['convert', '{log}'], 'the following arguments are required: -o/--out'),
        (['convert', '{log}', '-o', '{tmp}/o.jsonl', '--quar', '{tmp}/q.jsonl'], 'did you mean --quarantine'),
        (['convrt', '{log}'], "did you mean 'convert'"),
        (['convert', '{log}', '-o', '{tmp}/o.jsonl', '--redact-config', '{missing}'], '{missing}'),
        (['diff', '{missing}', '{log}'], 'no such file: {missing}'),
        (['detect', '{missing}'], 'no such file: {missing}'),
    ]),
    'knowlyr-reward': ('knowlyr_lab.cli.reward', [
        (['score', '{missing}', '-o', '{tmp}/o.jsonl'], '{missing} does not exist'),
        (['score', '{corrupt}', '-o', '{tmp}/o.jsonl', '--no-progress'], 'no valid trajectory in {corrupt} (2 bad records'),
        (['score', '{csv}', '-o', '{tmp}/o.jsonl', '--no-progress'], 'no valid trajectory in {csv}'),
        (['score', '{trajs}', '--domain', 'codng', '-o', '{tmp}/o.jsonl', '--no-progress'], "did you mean 'coding'"),
        (['score', '{trajs}', '--weights', 'rules:1', '-o', '{tmp}/o.jsonl', '--no-progress'], '--weights must look like rules=1,judge=2'),
        (['score', '{trajs}', '--judg', 'openai:x'], 'did you mean --judge'),
        (['calibrate', '{trajs}', '{missing}', '-o', '{tmp}/e.json'], '{missing}'),
        (['preferences', '{trajs}'], 'the following arguments are required: -o/--output'),
        (['leaderboard', '{trajs}', '--by', 'team'], "choose from 'agent', 'model'"),
        (['rubrics', '--domain', 'codng'], "did you mean 'coding'"),
    ]),
    'knowlyr-hub': ('knowlyr_lab.cli.hub', [
        (['collect', 'knowlyr/maze-esay', '-o', '{tmp}/t.jsonl'], "did you mean 'knowlyr/maze-easy'"),
        (['collect', 'knowlyr/maze-easy'], 'the following arguments are required: -o/--out'),
        (['collect', 'knowlyr/maze-easy', '-n', 'three', '-o', '{tmp}/t.jsonl'], "invalid int value: 'three'"),
        (['collect', 'knowlyr/maze-easy', '--episode', '3', '-o', '{tmp}/t.jsonl'], 'did you mean --episodes'),
        (['collect', 'knowlyr/maze-easy', '--agent', 'robot', '-n', '1', '-o', '{tmp}/t.jsonl'], 'robot'),
        (['export', '--format', 'csv', '-t', '{trajs}', '-o', '{tmp}/x'], "choose from"),
        (['export', '--format', 'sft', '-t', '{missing}', '-o', '{tmp}/x'], '{missing} does not exist'),
        (['export', '--format', 'sft', '-t', '{corrupt}', '-o', '{tmp}/x'], 'none of the 2 trajectory records was usable'),
        (['status', '{missing}'], 'pipeline output directory {missing} does not exist'),
        (['run', '-o', '{tmp}/run', '--logs', '{missing}'], '{missing}'),
    ]),
    'knowlyr-trainer': ('knowlyr_lab.cli.trainer', [
        (['sft', '--learning-rate', '1e-4'], 'the following arguments are required: --train-data'),
        (['sft', '--train-data', '{trajs}', '--lr-sch', 'linear'], 'did you mean --lr-scheduler'),
        (['sft', '--train-data', '{trajs}', '--learning-rate', '-1'], 'SFTConfig.learning_rate must be > 0, got -1.0'),
        (['sft', '--train-data', '{trajs}', '--num-epochs', 'two'], "invalid int value: 'two'"),
        (['sft', '--train-data', '{trajs}', '--use-lora', 'maybe'], "expected true/false, got 'maybe'"),
        (['sft', '--train-data', '{trajs}', '--config', '{missing}'], '{missing}'),
        (['sft', '--train-data', '{trajs}', '--config', '{badyaml}'], "unknown SFTConfig key(s) ['learning_rat']"),
        (['sft', '--train-data', '{trajs}', '--model-name-or-path', '{missing}', '--output-dir', '{tmp}/run'], '{missing}'),
        (['sfft'], "did you mean 'sft'"),
        (['eval', '--env', 'knowlyr/arith-easy'], 'the following arguments are required: --model'),
    ]),
    'knowlyr-lab-mcp': ('knowlyr_lab.mcp', [
        (['--root', '{missing}'], 'server root {missing} is not a directory'),
        (['--root', '{trajs}'], 'server root {trajs} is not a directory'),
        (['--rot', '{tmp}'], 'did you mean --root'),
        (['--transport', 'sse'], "choose from 'stdio', 'http'"),
        (['--port', 'http'], "invalid int value: 'http'"),
        (['--max-sandboxes', 'many'], "invalid int value: 'many'"),
        (['--root', '{tmp}', '--template', 'base'], "--template wants NAME=DIR, got 'base'"),
        (['--root', '{tmp}', '--template', 'base={missing}'], "template 'base': {missing} is not a directory"),
        (['--root', '{tmp}', '--transport', 'http', '--token-file', '{tmp}'], '{tmp}'),
        (['serve', '--root', '{tmp}'], 'unrecognized arguments: serve'),
    ]),
}

@pytest.fixture(scope='module')
def inputs(tmp_path_factory):
    "The files the mistakes are made with: a good log, good trajectories, corrupt JSON, a CSV, a YAML config with a typo"
    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trajectory_io import write_trajectories
    d = tmp_path_factory.mktemp('mistakes')
    write_trajectories(collect('knowlyr/maze-easy', ExpertAgent, 2, progress=False), d / 'trajs.jsonl')
    (d / 'log.jsonl').write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n')
    (d / 'corrupt.jsonl').write_text('{"messages": [\n{"id": 1, "steps": \n')
    (d / 'data.csv').write_text('id,steps\n1,2\n')
    (d / 'bad.yaml').write_text('learning_rat: 0.001\n')
    return {'tmp': d, 'missing': d / 'nope', 'log': d / 'log.jsonl', 'trajs': d / 'trajs.jsonl', 'corrupt': d / 'corrupt.jsonl',
            'csv': d / 'data.csv', 'badyaml': d / 'bad.yaml'}

@pytest.mark.parametrize('prog', list(MISTAKES))
def test_ten_newcomer_mistakes_each_one_line_naming_the_fix(prog, inputs):
    import contextlib
    import importlib
    import io
    module, cases = MISTAKES[prog]
    main = importlib.import_module(module).main
    assert len(cases) >= 10
    bad = []
    for argv, fix in cases:
        argv, fix = [str(a).format(**inputs) for a in argv], fix.format(**inputs)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(argv)
        lines = err.getvalue().strip().splitlines()
        ok = (rc == 2 and len(lines) == 1 and lines[0].startswith(f"{prog}") and ': error: ' in lines[0] and fix in lines[0]
              and 'Traceback' not in err.getvalue() and 'usage:' not in err.getvalue())
        if not ok: bad.append((argv, rc, err.getvalue()[-600:]))
    assert not bad, bad


# -- `--help` of every command imports no torch; without the extras, the help still runs and what needs one names it (#27)
HELP = {'knowlyr-lab': 'knowlyr_lab.cli', 'knowlyr-recorder': 'knowlyr_lab.cli.recorder', 'knowlyr-reward': 'knowlyr_lab.cli.reward',
        'knowlyr-hub': 'knowlyr_lab.cli.hub', 'knowlyr-trainer': 'knowlyr_lab.cli.trainer', 'knowlyr-lab-mcp': 'knowlyr_lab.mcp'}
HEAVY = ('torch', 'transformers', 'peft', 'accelerate')

def test_help_of_every_command_imports_no_torch():
    code = ("import sys, contextlib, io\n"
            f"for mod in {list(HELP.values())!r}:\n"
            "    main = __import__(mod, fromlist=['main']).main\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out: rc = main(['--help'])\n"
            "    assert rc == 0 and out.getvalue().startswith('usage:'), (mod, rc)\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == '[]', f"--help imported {r.stdout.strip()}"

HIDDEN = ('torch', 'transformers', 'peft', 'accelerate', 'mcp')
def _without_extras(body:str):
    code = "import sys, contextlib, io\n" + f"for m in {HIDDEN!r}: sys.modules[m] = None\n" + body   # as on a core install
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)

def test_without_extras_help_runs_and_the_missing_extra_is_named():
    r = _without_extras(
        "from knowlyr_lab.cli.trainer import main as trainer\n"
        "from knowlyr_lab.mcp import main as mcp\n"
        "for f, argv in ((trainer, ['--help']), (mcp, ['--help'])):\n"
        "    with contextlib.redirect_stdout(io.StringIO()): assert f(argv) == 0, argv\n"
        "print(trainer(['sft', '--help']), mcp(['--root', '.']))\n"
        "try: from knowlyr_lab import SFTTrainer\n"
        "except ImportError as e: print(e)\n")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ['2 2', "knowlyr_lab.SFTTrainer needs the optional package 'torch', which is not installed; install it with: pip install 'knowlyr-lab[train]'"], r.stdout
    assert r.stderr.splitlines() == [
        "knowlyr-trainer sft: error: this command needs the optional package 'torch', which is not installed; install it with: pip install 'knowlyr-lab[train]'",
        "knowlyr-lab-mcp: error: the knowlyr-lab MCP server needs the optional package 'mcp', which is not installed; install it with: pip install 'knowlyr-lab[mcp]'"], r.stderr


def test_knowlyr_lab_mcp_forwards_its_arguments(tmp_path):
    "#27: `knowlyr-lab mcp` exited 2 with `unrecognized arguments`; its flags are knowlyr-lab-mcp's"
    r = subprocess.run([sys.executable, '-c', "import sys; from knowlyr_lab.cli import main; sys.exit(main())", 'mcp', '--help'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith('usage: knowlyr-lab-mcp') and '--transport' in r.stdout, r.stderr


def test_mcp_http_shows_no_token_when_the_start_fails(tmp_path):
    "#27: with --transport http a bearer token was printed before --root was checked (then a traceback)"
    code = "import sys; from knowlyr_lab.mcp import main; sys.exit(main())"
    r = subprocess.run([sys.executable, '-c', code, '--transport', 'http', '--port', '0', '--root', str(tmp_path / 'nope')],
                       capture_output=True, text=True, timeout=120, env={k: v for k, v in __import__('os').environ.items() if k != 'KNOWLYR_MCP_TOKEN'})
    assert r.returncode == 2 and 'bearer' not in r.stderr.lower() and r.stderr.count('\n') == 1, r.stderr


def test_trainer_accepts_trl_spellings_and_never_abbreviates():
    "#27: `knowlyr-trainer sft --lr 1e-4` was read as --lr-scheduler 1e-4"
    from knowlyr_lab.cli.trainer import build_parser, config_from_args
    from knowlyr_lab.cli_errors import strict_parser
    from knowlyr_lab.trainer.sft import SFTConfig
    p = strict_parser(build_parser())
    for flag in ('--lr', '--learning_rate', '--learning-rate'):
        c = config_from_args(SFTConfig, p.parse_args(['sft', '--train-data', 'x.jsonl', flag, '1e-4']))
        assert (c.learning_rate, c.lr_scheduler) == (1e-4, SFTConfig().lr_scheduler), flag
    c = config_from_args(SFTConfig, p.parse_args(['sft', '--train-data', 'x', '--num_train_epochs', '2', '--per_device_train_batch_size', '4', '--lr_scheduler_type', 'linear']))
    assert (c.num_epochs, c.batch_size, c.lr_scheduler) == (2, 4, 'linear')
    import argparse
    for q in (p, *next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices.values()):
        assert q.allow_abbrev is False


@pytest.mark.parametrize('typed,meant', [('--model', '--model-name-or-path'), ('--per_device_train_bat', '--batch-size'),
                                         ('--model_dtyp', '--model-dtype'), ('--modl', None)])
def test_a_flag_hint_names_a_flag_that_help_shows(typed, meant):
    "misc1: `knowlyr-trainer sft --model x` hinted the hidden alias --model_dtype instead of --model-name-or-path"
    import re

    from knowlyr_lab.cli.trainer import build_parser, main
    err = io.StringIO()
    with contextlib.redirect_stderr(err): rc = main(['sft', '--train-data', 'x.jsonl', typed, 'm'])
    hint = re.search(r'did you mean (\S+)\?', err.getvalue())
    assert rc == 2 and hint, err.getvalue()
    helped = build_parser()._subparsers._group_actions[0].choices['sft'].format_help()
    assert re.search(rf'\s{re.escape(hint.group(1))}\s', helped), (hint.group(1), 'is not in sft --help')
    if meant: assert hint.group(1) == meant, err.getvalue()


@pytest.mark.parametrize('module,args', [
    ('knowlyr_lab.cli.hub', ['export', '{tmp}/in.jsonl', '--format', 'sft', '-o', '{tmp}/out', '--min-reward', 'nan']),
    ('knowlyr_lab.cli.probe', ['--max-hackable', 'NaN', 'knowlyr/maze-easy']),
    ('knowlyr_lab.cli.trainer', ['sft', '--model-name-or-path', 'x', '--train-data', 'x', '--output-dir', 'x', '--learning-rate', 'nan']),
])
def test_a_nan_flag_value_is_refused(module, args, tmp_path):
    "A NaN threshold passed every check: --min-reward nan exported everything, --max-hackable nan always exited 0"
    r = _run(module, args, tmp_path)
    assert r.returncode == 2 and 'a number' in r.stderr and 'nan' in r.stderr.lower() and len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]

# ---------------------------------------------------------------- a config file with a syntax error (issue rec10)

CONFIG_CLIS = {  # command -> (module, arguments reading the config file '{cfg}')
    'recorder --redact-config': ('knowlyr_lab.cli.recorder', ['convert', '{log}', '-o', '{tmp}/o.jsonl', '--no-progress', '--redact-config', '{cfg}'], 'yaml'),
    'trainer --config': ('knowlyr_lab.cli.trainer', ['sft', '--config', '{cfg}', '--train-data', '{tmp}/t.jsonl'], 'yaml'),
    'reward --engine': ('knowlyr_lab.cli.reward', ['score', '{log}', '-o', '{tmp}/o.jsonl', '--engine', '{cfg}'], 'json'),
}

@pytest.mark.parametrize('which', list(CONFIG_CLIS))
def test_a_config_with_a_syntax_error_is_one_line_naming_file_line_and_column(which, tmp_path):
    "Before: `ParserError ... in \"<unicode string>\", line 2` and status 1 (a bug); now `cfg:2:1: not valid YAML: ...`, status 2"
    module, args, kind = CONFIG_CLIS[which]
    cfg = tmp_path / f'bad.{kind}'
    cfg.write_text('patterns: [\n' if kind == 'yaml' else '{"domain": "generic",\n "weights": }\n')
    log = tmp_path / 'x.jsonl'; log.write_text('{"role": "user", "content": "hi"}\n')
    code = f"import sys; from {module} import main; sys.exit(main())"
    r = subprocess.run([sys.executable, '-c', code, *[a.format(tmp=tmp_path, cfg=cfg, log=log) for a in args]],
                       capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr[-2000:])
    line, col = (2, 1) if kind == 'yaml' else (2, 13)
    assert f"{cfg}:{line}:{col}: not valid {kind.upper()}: " in lines[0], lines[0]
    assert '<unicode string>' not in lines[0] and 'Traceback' not in r.stderr

# ---------------------------------------------------------------- warnings: one line, the same in every command (issue cli11)

def _broken_plugin(site, group):
    "An installed package (a module and its dist-info) whose entry point in `group` fails to import"
    site.mkdir()
    (site/'cli11_broken.py').write_text("raise ImportError('cli11: a dependency is missing')\n")
    info = site/'cli11_broken-0.1.dist-info'
    info.mkdir()
    (info/'METADATA').write_text('Metadata-Version: 2.1\nName: cli11_broken\nVersion: 0.1\n')
    (info/'entry_points.txt').write_text(f'[{group}]\ncli11_broken = cli11_broken\n')

WARNING_CLIS = {  # command -> (module, entry-point group of a plugin it loads, arguments that make it load them)
    'knowlyr-recorder': ('knowlyr_lab.cli.recorder', 'knowlyr_lab.adapters', ['detect', '{tmp}/a.jsonl']),
    'knowlyr-probe': ('knowlyr_lab.cli.probe', 'knowlyr_lab.probe_strategies', ['--list']),
}

@pytest.mark.parametrize('prog', list(WARNING_CLIS))
def test_a_plugin_that_fails_to_load_is_one_warning_line(prog, tmp_path):
    "Before: only knowlyr-hub printed `warning: ...`; the others printed Python's `/site/x.py:81: RegistryWarning: ...` and its source line"
    import os
    module, group, args = WARNING_CLIS[prog]
    _broken_plugin(tmp_path/'site', group)
    (tmp_path/'a.jsonl').write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(filter(None, [str(tmp_path/'site'), os.environ.get('PYTHONPATH')]))}
    code = f"import sys; from {module} import main; sys.exit(main())"
    r = subprocess.run([sys.executable, '-c', code, *[a.format(tmp=tmp_path) for a in args]], capture_output=True,
                       text=True, timeout=300, env=env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 0 and len(lines) == 1, (r.returncode, r.stderr[-2000:])
    assert lines[0].startswith('warning: ') and "entry point 'cli11_broken'" in lines[0], lines
    assert 'cli11: a dependency is missing' in lines[0] and 'Warning:' not in lines[0] and '.py:' not in lines[0], lines


def test_every_console_script_runs_through_run_cli():
    "knowlyr-probe and knowlyr-real-model parsed their own arguments: no --debug, no one-line warnings"
    import importlib
    import tomllib
    from pathlib import Path
    scripts = tomllib.loads((Path(__file__).resolve().parents[1]/'pyproject.toml').read_text())['project']['scripts']
    for script, target in scripts.items():
        module, fn = target.split(':')
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = getattr(importlib.import_module(module), fn)(['--help'])      # run_cli returns argparse's exit code
        assert rc == 0 and '--debug' in out.getvalue(), (script, rc, out.getvalue()[-500:])


def test_run_cli_leaves_the_callers_warning_handling_as_it_was():
    "A library caller's showwarning and filters are back when run_cli returns, after a success and after an error"
    import argparse
    import warnings

    from knowlyr_lab.cli_errors import run_cli
    def handler(a):
        warnings.warn('inside the command', stacklevel=2)
        if a.fail: raise ValueError('bad input')
    def mine(message, *rest): shown.append(str(message))
    for fail in (False, True):
        p = argparse.ArgumentParser(prog='tool'); p.add_argument('--fail', action='store_true')
        shown, err = [], io.StringIO()
        with warnings.catch_warnings():
            warnings.simplefilter('always'); warnings.showwarning = mine
            filters = list(warnings.filters)
            with contextlib.redirect_stderr(err): rc = run_cli(p, handler, ['--fail'] * fail)
            assert warnings.showwarning is mine and warnings.filters == filters
            warnings.warn('after the command', stacklevel=2)
        assert rc == (2 if fail else 0) and shown == ['after the command'], (rc, shown)
        assert err.getvalue().splitlines()[0] == 'warning: inside the command', err.getvalue()


def test_importing_the_recorder_leaves_warnings_shown():
    "Before: the recorder's import of detect-secrets ran logging.captureWarnings(True): later warnings went to a logger with no handler, unseen"
    code = ("import warnings; shown = warnings.showwarning; import knowlyr_lab.recorder.convert; "
            "assert warnings.showwarning is shown, warnings.showwarning; warnings.warn('seen after the import')")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and 'UserWarning: seen after the import' in r.stderr, r.stderr[-2000:]

# ---------------------------------------------------------------- `detect` on an outcome file (issue cli11)

def test_detect_names_an_outcome_file_in_one_line_and_passes_the_check(tmp_path):
    "Before: `x_result.json: ? -- ...` wrapped over two lines and exit 1, though convert skips the file as an outcome file"
    from knowlyr_lab.recorder.detect import outcome_why, read_head
    res = tmp_path/'django__django-11099_result.json'
    res.write_text('{"django__django-11099": {"resolved": true}}')
    report = tmp_path/'report.json'
    report.write_text('{"resolved_ids": ["django__django-11099"], "unresolved_ids": []}')
    code = "import sys; from knowlyr_lab.cli.recorder import main; sys.exit(main())"
    r = subprocess.run([sys.executable, '-c', code, 'detect', str(res), str(report)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == '', (r.returncode, r.stderr[-2000:])
    assert r.stdout.splitlines() == [f"{p}: outcome -- {outcome_why(p, read_head(p))}" for p in (res, report)], r.stdout
    (tmp_path/'notes.txt').write_text('not a log\n')           # a file no adapter reads still fails the check
    r = subprocess.run([sys.executable, '-c', code, 'detect', str(res), str(tmp_path/'notes.txt')], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and r.stdout.splitlines()[1].startswith(f"{tmp_path/'notes.txt'}: ? -- no adapter recognises notes.txt"), r.stdout

# srv19: the MCP and env-serve commands named the class field a flag fills ("CopyLimits.max_files", "SessionLimits.
# idle_timeout (None: never)" though on the command line never is 0), not the flag the user typed.

@pytest.mark.parametrize('module,argv,says', [
    ('knowlyr_lab.mcp', ['--max-copy-files', '0'], '--max-copy-files must be a positive integer, got 0'),
    ('knowlyr_lab.mcp', ['--max-copy-mb', '0'], '--max-copy-mb must be a finite number above 0, got 0.0'),
    ('knowlyr_lab.mcp', ['--max-copy-mb', '1e308'],
     '--max-copy-total-mb (default: 4 x --max-copy-mb) must be a finite number above 0, got inf'),
    ('knowlyr_lab.mcp', ['--max-copy-total-mb', '0'], '--max-copy-total-mb must be a finite number above 0, got 0.0'),
    ('knowlyr_lab.mcp', ['--max-args-mb', 'inf'], '--max-args-mb must be a finite number above 0, got inf'),
    ('knowlyr_lab.mcp', ['--max-args-depth', '0'], '--max-args-depth must be a positive integer, got 0'),
    ('knowlyr_lab.mcp', ['--max-sandboxes', '0'], '--max-sandboxes must be a positive integer, got 0'),
    ('knowlyr_lab.mcp', ['--max-sandboxes-per-client', '0'], '--max-sandboxes-per-client must be a positive integer, got 0'),
    ('knowlyr_lab.mcp', ['--idle-timeout', '-1'], '--idle-timeout (0: never) must be a finite number above 0, got -1.0'),
    ('knowlyr_lab.cli.env_serve', ['knowlyr/maze-easy', '--idle-timeout', 'inf'],
     '--idle-timeout (0: never) must be a finite number above 0, got inf'),
    ('knowlyr_lab.cli.env_serve', ['knowlyr/maze-easy', '--max-sessions', '0'], '--max-sessions must be a positive integer, got 0'),
    ('knowlyr_lab.cli.env_serve', ['knowlyr/maze-easy', '--max-sessions-per-client', '0'],
     '--max-sessions-per-client must be a positive integer, got 0'),
    ('knowlyr_lab.cli.env_serve', ['knowlyr/maze-easy', '--max-head-bytes', '0'], '--max-head-bytes must be a positive integer, got 0'),
])
def test_a_bad_limit_flag_is_refused_under_the_name_typed(module, argv, says, capsys):
    "main: the class field it fills was named (or, --max-sandboxes-per-client 0 on the MCP server, the default was taken)"
    import importlib
    assert importlib.import_module(module).main(argv) == 2
    assert capsys.readouterr().err.endswith(f': error: {says}\n')

# srv20: a per-client cap above its total was refused by the class the flags fill, naming its fields
# ("SessionLimits.max_sessions_per_client (3) is above max_sessions (2)" from knowlyr-lab-mcp, which has no
# --max-sessions); `knowlyr-trainer serve` checked its pairs and --body-budget below one body only as the server was
# made, after the model had loaded, naming the parameters (body_budget_per_client, max_connections).

@pytest.mark.parametrize('module,argv,says', [
    ('knowlyr_lab.mcp', ['--max-sandboxes', '2', '--max-sandboxes-per-client', '3'],
     '--max-sandboxes-per-client 3 is above --max-sandboxes 2: lower it or raise --max-sandboxes'),
    ('knowlyr_lab.mcp', ['--max-copy-mb', '8', '--max-copy-total-mb', '4'],    # main: served; a call of 4-8 MiB was told
     '--max-copy-mb 8 is above --max-copy-total-mb 4: lower it or raise --max-copy-total-mb'),  # to retry later, for ever
    ('knowlyr_lab.mcp', ['--max-copy-total-mb', '512'],     # srv21: main named '--max-copy-mb 1024', a flag never typed
     '--max-copy-mb (default 1024) is above --max-copy-total-mb 512: lower it or raise --max-copy-total-mb'),
    ('knowlyr_lab.cli.env_serve', ['knowlyr/maze-easy', '--max-sessions', '2', '--max-sessions-per-client', '3'],
     '--max-sessions-per-client 3 is above --max-sessions 2: lower it or raise --max-sessions'),
    ('knowlyr_lab.cli.trainer', ['serve', '--model', '{tmp}', '--max-connections', '4', '--max-connections-per-client', '8'],
     '--max-connections-per-client 8 is above --max-connections 4: lower it or raise --max-connections'),
    ('knowlyr_lab.cli.trainer', ['serve', '--model', '{tmp}', '--body-budget', str(2**23), '--body-budget-per-client', str(2**24)],
     '--body-budget-per-client 16777216 is above --body-budget 8388608: lower it or raise --body-budget'),
    ('knowlyr_lab.cli.trainer', ['serve', '--model', '{tmp}', '--body-budget', '1000'],
     '--body-budget 1000 is below one request body (4,194,304 bytes, the size limit): raise it'),
    ('knowlyr_lab.cli.trainer', ['serve', '--model', '{tmp}', '--body-budget-per-client', str(2**20)],
     '--body-budget-per-client 1048576 is below one request body (4,194,304 bytes, the size limit): raise it'),
])
def test_a_per_client_flag_above_its_total_is_refused_under_the_flags_typed(module, argv, says, capsys, tmp_path):
    "main: the class field was named (mcp, env-serve), or the model folder was loaded first (an empty one here: that failed)"
    import importlib
    assert importlib.import_module(module).main([a.replace('{tmp}', str(tmp_path)) for a in argv]) == 2
    assert capsys.readouterr().err.endswith(f': error: {says}\n')

# srv20: "--idle-timeout (0: never)" was read twice, by hand, in knowlyr-env-serve and knowlyr-lab-mcp (a check and an
# `or None` each); one function now reads it for both.

def test_idle_timeout_is_read_by_one_function_in_both_commands():
    "main: cli_errors had no seconds_or_never; each command converted and checked the flag itself"
    import argparse
    import inspect

    from knowlyr_lab import mcp
    from knowlyr_lab.cli import env_serve
    from knowlyr_lab.cli_errors import seconds_or_never
    ns = lambda t: argparse.Namespace(idle_timeout=t)
    assert (seconds_or_never(ns(0.0), '--idle-timeout'), seconds_or_never(ns(None), '--idle-timeout')) == (None, None)
    assert seconds_or_never(ns(30.0), '--idle-timeout') == 30.0
    with pytest.raises(ValueError, match=r'^--idle-timeout \(0: never\) must be a finite number above 0, got -1\.0$'):
        seconds_or_never(ns(-1.0), '--idle-timeout')
    for src in (inspect.getsource(mcp._serve), inspect.getsource(env_serve.main)):
        assert src.count("seconds_or_never(a, '--idle-timeout')") == 1 and '(0: never)' not in src and 'idle_timeout or' not in src, src

def test_serve_help_says_max_loras_is_checked_without_enable_lora(capsys):
    "srv21: --max-loras 0 without --enable-lora is refused (51dd403); main's help did not say so"
    from knowlyr_lab.cli.trainer import main
    assert main(['serve', '--help']) == 0
    assert 'refused otherwise even without --enable-lora' in ' '.join(capsys.readouterr().out.split())

# srv22: knowlyr-lab-mcp's _serve stated --max-copy-mb's default (CopyLimits.max_mb) twice, as check_flags(defaults=...)
# and as the line filling CopyLimits; check_flags took `defaults` for that one caller. Now _serve states it once and
# checks the pair itself (check_within, default=True when --max-copy-mb was left out); check_flags has no `defaults`.

def test_the_max_copy_mb_default_is_stated_once_and_check_flags_takes_no_defaults(capsys, monkeypatch):
    "main: check_flags had a `defaults` parameter and _serve named CopyLimits.max_mb twice"
    import inspect

    from knowlyr_lab import mcp
    from knowlyr_lab.cli_errors import check_flags
    assert 'defaults' not in inspect.signature(check_flags).parameters
    assert inspect.getsource(mcp._serve).count('CopyLimits.max_mb') == 1
    monkeypatch.setattr(mcp.CopyLimits, 'max_mb', 100)          # the one statement: the check and the limits follow it
    assert mcp.main(['--max-copy-total-mb', '50']) == 2
    assert capsys.readouterr().err.endswith(': error: --max-copy-mb (default 100) is above --max-copy-total-mb 50: '
                                            'lower it or raise --max-copy-total-mb\n')
    assert mcp.main(['--max-copy-mb', '60', '--max-copy-total-mb', '50']) == 2
    assert capsys.readouterr().err.endswith(': error: --max-copy-mb 60 is above --max-copy-total-mb 50: lower it or raise --max-copy-total-mb\n')

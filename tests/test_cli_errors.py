"Every knowlyr command reports an error the same way (`commands.run_cli`): one line on stderr, status 2 for bad input, --debug for the traceback"
import subprocess
import sys

import pytest

CLIS = {  # command -> (module with `main`, arguments naming an input that does not exist)
    'knowlyr-lab': ('knowlyr_lab.cli', ['loop', '--env', 'knowlyr/nope']),            # an env id nothing is registered under
    'knowlyr-hub': ('knowlyr_lab.hub.cli', ['run', '-o', '{tmp}/out', '--logs', '{missing}']),
    'knowlyr-recorder': ('knowlyr_lab.recorder.cli', ['convert', '{missing}', '-o', '{tmp}/o.jsonl', '--no-progress']),
    'knowlyr-reward': ('knowlyr_lab.reward.cli', ['score', '{missing}', '-o', '{tmp}/o.jsonl']),
    'knowlyr-trainer': ('knowlyr_lab.trainer.cli', ['sft', '--model-name-or-path', '{missing}', '--train-data', '{tmp}/t.jsonl', '--output-dir', '{tmp}/run']),
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


PARSERS = {'knowlyr-lab': ('knowlyr_lab.cli', '_parser'), 'knowlyr-hub': ('knowlyr_lab.hub.cli', '_parser'),
           'knowlyr-recorder': ('knowlyr_lab.recorder.cli', 'build_parser'), 'knowlyr-reward': ('knowlyr_lab.reward.cli', 'build_parser'),
           'knowlyr-trainer': ('knowlyr_lab.trainer.cli', 'build_parser')}

@pytest.mark.parametrize('prog', list(PARSERS))
def test_every_flag_of_every_cli_is_documented(prog):
    import argparse
    import importlib
    module, fn = PARSERS[prog]
    p = getattr(importlib.import_module(module), fn)()
    subs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{prog} {name} {a.dest}" for name, sp in subs.choices.items() for a in sp._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not missing, missing

#!/usr/bin/env python
"""Would compiling the rule layer with mypyc reach issue 41 item 2? Ours interpreted against ours compiled, one run.

Builds a copy of this commit's `knowlyr_lab` (`git archive HEAD`) in --work, compiles `reward/rules.py` (the rules,
`view_step`, the index updates) with mypyc, then times `reward_scaling.py`'s own `ours()` on its workloads in fresh
processes, alternating interpreted (this checkout) and compiled (the copy), --rounds times. The scorer and engine
pages (`reward/scorer.py`, `engine.py`) add methods with `@patch`, which mypyc cannot compile; they stay
interpreted and call the compiled rules. Two edits make the copy compile, neither a behaviour change:
`UnknownRuleError` (a subclass of a builtin exception) becomes a non-native class, and mypy's `attr-defined` and
`var-annotated` checks are off (the `@patch`ed attributes). Needs gcc and a venv with mypy (--mypy-venv, created
on first use: `python -m venv` + `pip install mypy`); the compiled module imports `mypy_extensions` from it.

    python experiments/benchmarks/reward_mypyc.py --rounds 2
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER = '''
import importlib.util, json, sys
import knowlyr_lab.reward.rules as R   # first: reward_scaling.py puts the checkout's root first on sys.path
spec = importlib.util.spec_from_file_location('rs', sys.argv[1]); rs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rs)
out = {'compiled': not R.__file__.endswith('.py')}
for wl in ('pool', 'repo'):
    for n in (10, 1000):
        batch = [rs.make_steps(n, wl, s) for s in range(rs.batch_size(n))]
        steps = sum(map(len, batch))
        t = rs.ours(batch, 1, 5)
        out[f'{wl} {n}'] = {k: t[k] * 1e6 / steps for k in ('rules', 'engine')}
print(json.dumps(out))
'''

def sh(*a, **kw): return subprocess.run(a, check=True, text=True, capture_output=True, **kw).stdout

def build(work:Path, mypy_venv:Path)->Path:
    if not (mypy_venv / 'bin' / 'mypyc').exists():
        sh(sys.executable, '-m', 'venv', str(mypy_venv)); sh(str(mypy_venv / 'bin' / 'pip'), 'install', '-q', 'mypy')
    src = work / 'src'; src.mkdir(parents=True, exist_ok=True)
    sh('bash', '-c', f'git -C {ROOT} archive HEAD knowlyr_lab | tar -x -C {src}')
    p = src / 'knowlyr_lab/reward/rules.py'
    s = p.read_text().replace('class UnknownRuleError(UnknownNameError):', 'from mypy_extensions import mypyc_attr\n'
                              '@mypyc_attr(native_class=False)\nclass UnknownRuleError(UnknownNameError):')
    p.write_text(s)
    sh(str(mypy_venv / 'bin' / 'mypyc'), '--python-executable', sys.executable, '--ignore-missing-imports',
       '--disable-error-code', 'attr-defined', '--disable-error-code', 'var-annotated', 'knowlyr_lab/reward/rules.py',
       cwd=src, env={**os.environ, 'PYTHONPATH': str(src)})
    return src

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--work', default=tempfile.mkdtemp(prefix='reward_mypyc_'))
    ap.add_argument('--mypy-venv', default='/tmp/mypycenv')
    a = ap.parse_args(argv)
    src = build(Path(a.work), Path(a.mypy_venv))
    site = next((Path(a.mypy_venv) / 'lib').glob('python3*/site-packages'))
    ext = Path(a.work) / 'ext'; ext.mkdir(exist_ok=True)
    (ext / 'mypy_extensions.py').write_bytes((site / 'mypy_extensions.py').read_bytes())
    print(f"commit {sh('git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD').strip()}, {platform.machine()}, "
          f"cpus={os.cpu_count()}, python {platform.python_version()}, {sh(str(Path(a.mypy_venv) / 'bin' / 'mypyc'), '--version').strip()}, "
          f"{sh('gcc', '--version').splitlines()[0]}, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print('us/step, median of 5 (CPU time); rules = RuleScorer.score_trajectory, engine = RewardEngine.score_trajectories')
    bench = str(ROOT / 'experiments/benchmarks/reward_scaling.py')
    for r in range(a.rounds):
        for name, path in (('interpreted', str(ROOT)), ('mypyc', f'{src}:{ext}')):
            out = json.loads(sh(sys.executable, '-P', '-c', WORKER, bench, env={**os.environ, 'PYTHONPATH': path}))
            assert out.pop('compiled') == (name == 'mypyc'), name
            print(f"round {r + 1} {name:<11} " + '  '.join(f"{k}: rules {v['rules']:5.2f} engine {v['engine']:5.2f}"
                                                          for k, v in out.items()))
    print(f"load at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

if __name__ == '__main__': main()

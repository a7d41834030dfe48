#!/usr/bin/env python
"""Rule PRM throughput: knowlyr-lab's rules and reward engine against knowlyr-reward 0.1.2, from 10 to 10,000 steps.

Goals (issue 15): >= 2x the reference's steps/s at 10 steps, >= 20x at 1,000, and our cost per step flat (+-30%)
from 10 to 10,000 steps.

The reference is pip-installed into its own venv (default /tmp/refvenv, created on first use:
`python -m venv` + `pip install knowlyr-reward==0.1.2 knowlyr-core==0.1.2`) and driven from here: both sides score
the same step dicts, written to a temporary JSON file, in one run. Three measurements per length:

- rules:  ours `RuleScorer.score_trajectory`; the reference's rule layer (`check_redundancy`, `check_regression`,
          `check_info_utilization`, `check_efficiency`) on the step dicts;
- engine: ours `RewardEngine('coding').score_trajectories` on the whole batch; the reference's
          `RewardEngine(RewardConfig(rule_weight=1, model_weight=0)).score_batch`;
- online: step by step as inside a recorder's `step_reward_fn`: ours `StepRewardFn` (incremental); the reference's reward
          function re-scores the whole prefix at every step (quadratic), so this runs on the first
          max(1, 1000 // n) trajectories only, and for the reference only up to --online-max steps.

Every measurement scores a batch of trajectories of n steps with different seeds, about 10,000 steps in all, so
that short and long trajectories mix the same kinds of steps; steps/s = steps in the batch / seconds.

Two workloads of synthetic coding sessions (`make_steps`):

- repo: an agent exploring a repository of 3,000 files: reads of code files (40-80 lines each, most of them read
        once and never written), greps, directory listings, edits of three files (some reverted), test runs.
        This is what real coding logs look like, and what makes the reference quadratic: for every read it scans
        back through the whole prefix for the last write of a file that was never written.
- pool: short outputs over a pool of 40 files (the previous version of this benchmark); the reference stays
        nearly linear here because every lookup finds a recent match.

Times are medians of --repeats runs of CPU time (`time.process_time`: the machine is shared, and wall time
counts the time other processes hold the cores).

    python experiments/benchmarks/reward_scaling.py                       # prints the tables
    python experiments/benchmarks/reward_scaling.py --profile 1000        # cProfile of ours, top functions
    python experiments/benchmarks/reward_scaling.py --write-results       # also rewrites reward_scaling.results.md
"""
import argparse
import cProfile
import datetime
import io
import json
import os
import platform
import pstats
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from knowlyr_lab.reward.engine import RewardEngine, make_reward_fn
from knowlyr_lab.reward.scorer import RuleScorer
from knowlyr_lab.trajectory import Observation, Outcome, Step, Task, ToolCall, Trajectory

RESULTS = Path(__file__).with_suffix('.results.md')

# -- workloads ------------------------------------------------------------------------------------------------
_WORDS = ('value', 'items', 'config', 'result', 'count', 'index', 'buffer', 'parser', 'token', 'record', 'cache', 'limit',
          'offset', 'header', 'payload', 'stream', 'handler', 'schema', 'context', 'session')

def _code(rng, path, n_lines, files):
    "A plausible Python file: imports of other repo paths, defs, calls, numbers"
    mod = path[:-3].replace('/', '.')
    out = [f'"""{mod}: {rng.choice(_WORDS)} helpers."""', f"import {rng.choice(files)[:-3].replace('/', '.')} as dep"]
    for i in range(2, n_lines):
        a, b = rng.choice(_WORDS), rng.choice(_WORDS)
        k = rng.random()
        if k < 0.15: out.append(f"def {a}_{b}_{i}(self, {a}, {b}={rng.randint(0, 4096)}):")
        elif k < 0.3: out.append(f"    return dep.{b}_{a}({a}, limit={rng.randint(100, 9999)})")
        elif k < 0.4: out.append(f"    # see {rng.choice(files)} line {rng.randint(1, 400)}")
        else: out.append(f"    {a} = self.{b}.get('{a}_{b}', {rng.randint(0, 999)})")
    return '\n'.join(f"{i + 1:>4}  {l}" for i, l in enumerate(out))

def make_steps(n:int, workload:str='repo', seed:int=0)->list[dict]:
    "A synthetic coding episode of n steps as {tool, params, output} dicts"
    rng = random.Random(f"{workload}-{seed}-{n}")
    if workload == 'pool':
        files = [f"src/pkg/mod_{i}.py" for i in range(40)]
        out, edits = [], []
        for i in range(n):
            k = rng.random(); f = rng.choice(files[: max(3, i // 4 + 3)])
            if k < 0.15: out.append(('list_dir', {'path': 'src/pkg'}, ' '.join(files[:20])))
            elif k < 0.45: out.append(('file_read', {'path': f}, f"def func_{i % 17}(x):\n    return x + {i % 5}\n# see {rng.choice(files)}"))
            elif k < 0.55: out.append(('search', {'pattern': f"func_{i % 17}"}, f"{f}:3: def func_{i % 17}(x)"))
            elif k < 0.75:
                if edits and rng.random() < 0.2:
                    pf, o, nw = rng.choice(edits); out.append(('edit_file', {'path': pf, 'old_string': nw, 'new_string': o}, 'edited'))
                else:
                    o, nw = f"x + {i % 5}", f"x - {i % 7}"; edits.append((f, o, nw))
                    out.append(('edit_file', {'path': f, 'old_string': o, 'new_string': nw}, 'edited'))
            else:
                p = rng.randint(0, 40); out.append(('shell', {'command': 'pytest -q tests/'}, f"{p} passed, {40 - p} failed in 1.2s"))
        return [{'tool': t, 'params': p, 'output': o} for t, p, o in out]
    if workload != 'repo': raise ValueError(f"workload must be 'repo' or 'pool', not {workload!r}")
    dirs = [f"src/{a}_{b}" for a in _WORDS[:10] for b in ('core', 'io', 'util')]
    files = [f"{rng.choice(dirs)}/{rng.choice(_WORDS)}_{i}.py" for i in range(3000)]
    focus = rng.sample(files, 3)
    seen, edits, out = [], [], []
    for _ in range(n):
        k = rng.random()
        if k < 0.35:       # read: a file read before (40%), else one not read yet
            f = rng.choice(seen) if seen and rng.random() < 0.4 else rng.choice(files)
            seen.append(f); out.append(('file_read', {'path': f}, _code(rng, f, rng.randint(40, 80), files)))
        elif k < 0.5:
            w = f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"
            hits = [f"{rng.choice(files)}:{rng.randint(1, 300)}:    {w} = self.{rng.choice(_WORDS)}" for _ in range(rng.randint(2, 15))]
            out.append(('search', {'pattern': w, 'path': 'src'}, '\n'.join(hits)))
        elif k < 0.55:
            d = rng.choice(dirs); out.append(('list_dir', {'path': d}, '\n'.join(rng.sample(files, 20))))
        elif k < 0.72:     # edits of the three files being fixed; one in five reverts an earlier edit
            f = rng.choice(focus)
            if edits and rng.random() < 0.2:
                pf, o, nw = rng.choice(edits); out.append(('edit_file', {'path': pf, 'old_string': nw, 'new_string': o}, f"Edited {pf}."))
            else:
                o, nw = f"limit={rng.randint(100, 9999)}", f"limit={rng.randint(100, 9999)}"; edits.append((f, o, nw))
                out.append(('edit_file', {'path': f, 'old_string': o, 'new_string': nw}, f"Edited {f}."))
        elif k < 0.9:
            t = rng.choice(focus).replace('src/', 'tests/test_'); p = rng.randint(0, 30)
            fails = '\n'.join(f"FAILED {t}::test_{rng.choice(_WORDS)}_{j} - AssertionError: {rng.randint(0, 999)} != {rng.randint(0, 999)}" for j in range(min(30 - p, 5)))
            out.append(('shell', {'command': f"python -m pytest -q {t}"}, f"{fails}\n{p} passed, {30 - p} failed in {rng.random() * 3:.2f}s"))
        else:
            out.append(('shell', {'command': f"git diff {rng.choice(focus)}"}, '\n'.join(f"-    limit={rng.randint(100, 9999)}\n+    limit={rng.randint(100, 9999)}" for _ in range(3))))
    return [{'tool': t, 'params': p, 'output': o} for t, p, o in out]

def to_traj(steps:list[dict], tid:str='bench')->Trajectory:
    return Trajectory(id=tid, task=Task(id=tid, instruction='Fix the failing tests in src/pkg', domain='coding'),
                      steps=[Step(index=i, action=ToolCall(tool=s['tool'], params=s['params']), observation=Observation(content=s['output']))
                             for i, s in enumerate(steps)], outcome=Outcome(success=False, terminated=True))

def batch_size(n:int)->int: return max(1, 10_000 // n)
def online_size(n:int)->int: return max(1, 1_000 // n)

# -- timing (the same code runs in the reference's venv) ------------------------------------------------------
TIMING = '''
import gc, statistics, time
def median_time(fn, repeats, min_time=0.2):
    "Median seconds per call of fn(), each sample looping until it took at least min_time"
    fn(); k = 1
    while True:
        t = time.process_time()
        for _ in range(k): fn()
        dt = time.process_time() - t
        if dt >= min_time or k >= 1 << 20: break
        k *= 2
    ts = []
    for _ in range(repeats):
        gc.collect(); t = time.process_time()
        for _ in range(k): fn()
        ts.append((time.process_time() - t) / k)
    return statistics.median(ts)
'''
_timing = {}; exec(TIMING, _timing); median_time = _timing['median_time']   # the same code runs in the reference's venv

REF_WORKER = TIMING + '''
import json, sys
from agentreward import rules as R
from agentreward.reward import RewardEngine
from agentreward.config import RewardConfig
from knowlyrcore.domain import CODING_PROFILE
data, repeats, online_max = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
eng = RewardEngine(RewardConfig(rule_weight=1.0, model_weight=0.0))
out = {}
for key, d in data.items():
    batch, n_online = d['batch'], d['online']
    def rules():
        for steps in batch:
            R.check_redundancy(steps, CODING_PROFILE); R.check_regression(steps, CODING_PROFILE)
            R.check_info_utilization(steps, CODING_PROFILE); R.check_efficiency(steps, 15)
    trajs = [{'task': 'Fix the failing tests in src/pkg', 'steps': s, 'outcome': {'success': False}} for s in batch]
    def online():
        for steps in batch[:n_online]:
            for i in range(len(steps)): eng.score({'task': 'Fix the failing tests in src/pkg', 'steps': steps[:i + 1], 'outcome': {}})
    n = len(batch[0])
    out[key] = {'rules': median_time(rules, repeats), 'engine': median_time(lambda: eng.score_batch(trajs), repeats),
                'online': median_time(online, max(1, repeats // 2), 0.05) if n <= online_max else None}
print(json.dumps(out))
'''

def ref_python(path:str)->str:
    "The reference venv's python, creating the venv with knowlyr-reward 0.1.2 on first use"
    py = Path(path) / 'bin' / 'python'
    if not py.exists():
        subprocess.run([sys.executable, '-m', 'venv', path], check=True)
        subprocess.run([str(py), '-m', 'pip', 'install', '-q', 'knowlyr-reward==0.1.2', 'knowlyr-core==0.1.2'], check=True)
    return str(py)

def ref_versions(py:str)->str:
    r = subprocess.run([py, '-c', 'import sys, importlib.metadata as m; print(sys.version.split()[0], m.version("knowlyr-reward"), m.version("knowlyr-core"))'],
                       capture_output=True, text=True, check=True)
    v, kr, kc = r.stdout.split()
    return f"knowlyr-reward {kr}, knowlyr-core {kc} (Python {v}, own venv)"

# -- ours -----------------------------------------------------------------------------------------------------
def ours(batch, n_online, repeats)->dict:
    trajs = [to_traj(s, f"b{i}") for i, s in enumerate(batch)]
    scorer, eng = RuleScorer('coding'), RewardEngine('coding')
    fn = make_reward_fn('coding')
    def rules():
        for t in trajs: scorer.score_trajectory(t)
    def step_by_step():
        for t in trajs[:n_online]:
            fn.reset(t.task)
            for s in t.steps: fn(s)
    return {'rules': median_time(rules, repeats), 'engine': median_time(lambda: eng.score_trajectories(trajs), repeats),
            'online': median_time(step_by_step, repeats)}

def profile(n:int, workload:str, top:int=18)->str:
    "cProfile of ours: the engine scoring a batch of about 10,000 steps of n-step trajectories"
    trajs = [to_traj(make_steps(n, workload, seed=i), f"b{i}") for i in range(batch_size(n))]
    eng = RewardEngine('coding'); eng.score_trajectories(trajs)
    pr = cProfile.Profile(); pr.enable(); eng.score_trajectories(trajs); pr.disable()
    buf = io.StringIO(); pstats.Stats(pr, stream=buf).sort_stats('tottime').print_stats(top)
    lines = buf.getvalue().splitlines()
    i = next(k for k, l in enumerate(lines) if 'ncalls' in l)
    head = next(l for l in lines if 'function calls' in l).strip()
    return '\n'.join([head, ''] + [l.replace(str(ROOT) + '/', '') for l in lines[i:] if l.strip()])

def run(lengths, workloads, repeats, online_max, refpy)->list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for w in workloads:
            data = {str(n): {'batch': [make_steps(n, w, seed=i) for i in range(batch_size(n))], 'online': online_size(n)} for n in lengths}
            p = Path(tmp) / f"{w}.json"; p.write_text(json.dumps(data))
            r = subprocess.run([refpy, '-c', REF_WORKER, str(p), str(repeats), str(online_max)], capture_output=True, text=True)
            if r.returncode: raise SystemExit(f"reference worker failed:\n{r.stderr}")
            ref = json.loads(r.stdout)
            for n in lengths:
                o = ours(data[str(n)]['batch'], online_size(n), repeats)
                for m in ('rules', 'engine', 'online'):
                    steps = n * (online_size(n) if m == 'online' else batch_size(n))
                    ro = ref[str(n)][m]
                    rows.append({'workload': w, 'steps': n, 'what': m, 'ours_sps': steps / o[m], 'ref_sps': steps / ro if ro else None,
                                 'ratio': ro / o[m] if ro else None})
    return rows

def table(rows)->str:
    lines = ['| workload | what | steps | ours steps/s | us/step | reference steps/s | ours / reference |', '|---|---|---:|---:|---:|---:|---:|']
    for r in rows:
        ref = f"{r['ref_sps']:,.0f}" if r['ref_sps'] else '(skipped)'
        ratio = f"{r['ratio']:.1f}x" if r['ratio'] else ''
        lines.append(f"| {r['workload']} | {r['what']} | {r['steps']:,} | {r['ours_sps']:,.0f} | {1e6 / r['ours_sps']:.1f} | {ref} | {ratio} |")
    return '\n'.join(lines)

def flatness(rows)->str:
    out = []
    for (w, m) in sorted({(r['workload'], r['what']) for r in rows}):
        us = {r['steps']: 1e6 / r['ours_sps'] for r in rows if (r['workload'], r['what']) == (w, m)}
        lo, hi = min(us.values()), max(us.values())
        out.append(f"- {w}/{m}: {', '.join(f'{n:,}: {u:.1f} us' for n, u in us.items())} per step; max/min {hi / lo:.2f} "
                   f"({'flat within +-30%' if hi / lo <= 1.3 / 0.7 and all(abs(u / us[min(us)] - 1) <= 0.3 for u in us.values()) else 'NOT flat'} vs {min(us):,} steps)")
    return '\n'.join(out)

def goals(rows)->str:
    out = []
    for w in sorted({r['workload'] for r in rows}):
        for m in ('rules', 'engine'):
            d = {r['steps']: r['ratio'] for r in rows if r['workload'] == w and r['what'] == m}
            g = [f"{n:,} steps {d[n]:.1f}x (goal {goal}x: {'met' if d[n] >= goal else 'NOT met'})" for n, goal in ((10, 2), (1000, 20)) if n in d]
            if g: out.append(f"- {w}/{m}: " + '; '.join(g))
    return '\n'.join(out)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--lengths', type=int, nargs='+', default=[10, 100, 1000, 10000])
    ap.add_argument('--workloads', nargs='+', default=['repo', 'pool'])
    ap.add_argument('--repeats', type=int, default=5)
    ap.add_argument('--online-max', type=int, default=1000, help='longest trajectory the reference re-scores step by step')
    ap.add_argument('--ref-venv', default='/tmp/refvenv')
    ap.add_argument('--profile', type=int, metavar='N', help='print a cProfile of ours at N steps (repo workload) and exit')
    ap.add_argument('--write-results', action='store_true', help=f'write the tables into {RESULTS.name} (between its markers)')
    a = ap.parse_args(argv)
    if a.profile: print(profile(a.profile, 'repo')); return
    refpy = ref_python(a.ref_venv)
    rows = run(a.lengths, a.workloads, a.repeats, a.online_max, refpy)
    import knowlyr_lab
    head = (f"{datetime.date.today()}, {platform.node() or 'host'}: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}; knowlyr-lab {knowlyr_lab.__version__} vs {ref_versions(refpy)}")
    report = '\n\n'.join([head, table(rows), 'Our cost per step across lengths:\n' + flatness(rows), 'Goals:\n' + goals(rows)])
    print(report)
    if a.write_results:
        text = RESULTS.read_text() if RESULTS.exists() else '<!-- run -->\n<!-- /run -->\n'
        s, e = text.index('<!-- run -->'), text.index('<!-- /run -->')
        RESULTS.write_text(text[:s] + '<!-- run -->\n' + report + '\n' + text[e:])
        print(f"\nwrote {RESULTS}")

if __name__ == '__main__':
    main()

#!/usr/bin/env python
"""CLI start-up: wall seconds of every knowlyr-lab command's `--help`, of a whole `knowlyr-recorder convert` of a
small log, of a whole `knowlyr-hub export` of eight trajectories (GRPO and SFT rows) and of their rule scoring
(`knowlyr-reward score`), for this checkout and (optionally) a base checkout, in fresh processes, interleaved run
by run; the reference knowlyr-recorder 0.1.2's `--help` and knowlyr-hub 0.1.2's `export` of the same eight
trajectories (in its record format) beside them (issue 41, item 1: "a CLI call starts in well under a second").

Each call is a new interpreter (`python -c "from knowlyr_lab.cli import main; main()" TOOL ARGS`, the umbrella
command, which imports only the tool's module), with `PYTHONPATH` set to the checkout. Both checkouts are compiled to
bytecode first (`compileall`), so neither pays for compiling its sources (an installed wheel has its bytecode too).

    python experiments/benchmarks/cli_start.py --base /tmp/wt_base --repeat 7
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ('recorder', 'reward', 'hub', 'mcp', 'trainer', 'probe', 'env-serve', 'real-model')
LOG = ROOT / 'tests/fixtures/recorder/openhands/eval_pairs_output.jsonl'

def _small_trajectories(p:Path)->tuple[Path, Path]:
    ("Eight one-step trajectories of four tasks, as JSONL in our schema and in knowlyr-hub 0.1.2's record format (as "
     "`export_throughput.py` writes it): the input of the small exports")
    sys.path.insert(0, str(ROOT))
    from knowlyr_lab.trajectory import Observation, Outcome, Step, Task, ToolCall, Trajectory
    from knowlyr_lab.trajectory_io import write_trajectories
    ts = [Trajectory(task=Task(id=f"t{i // 2}", instruction=f"Fix test {i // 2}.", domain='coding'),
                     steps=[Step(index=0, action=ToolCall(tool='shell', params={'command': 'pytest'}),
                                 observation=Observation(content='ok'), reward=0.2 + 0.5 * (i % 2))],
                     outcome=Outcome(success=bool(i % 2), terminated=True), reward=0.2 + 0.5 * (i % 2)) for i in range(8)]
    write_trajectories(ts, p)
    seed = p.with_name(p.stem + '_seed.jsonl')
    seed.write_text(''.join(json.dumps({
        'task_id': t.task.id, 'success': t.outcome.success, 'reward': t.reward, 'agent_framework': 'bench', 'agent_model': 'm',
        'total_steps': 1, 'metadata': {'task_description': t.task.instruction},
        'steps': [{'thought': '', 'action': f"shell({json.dumps(s.action.params)})", 'observation': s.observation.content,
                   'reward': s.reward} for s in t.steps]}) + '\n' for t in ts))
    return p, seed

def _calls(out:Path)->dict:
    calls = {f'{t} --help': [t, '--help'] for t in TOOLS}
    calls[f'recorder convert ({LOG.stat().st_size} B log, redacting)'] = [
        'recorder', 'convert', str(LOG), '-o', str(out), '--no-progress']
    small, _ = _small_trajectories(out.with_name('cli_start_trajs.jsonl'))
    for fmt in ('grpo', 'sft'):
        calls[f'hub export --format {fmt} (8 trajectories)'] = ['hub', 'export', '-t', str(small), '--format', fmt,
                                                              '-o', str(out.with_name(f'cli_start_{fmt}'))]
    calls['reward score (8 trajectories, rules)'] = ['reward', 'score', str(small), '-o', str(out.with_name('cli_start_scored.jsonl')),
                                                     '--no-progress']
    return calls

def _run(root:Path, argv:list)->float:
    env = {**os.environ, 'PYTHONPATH': str(root)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, '-c', 'import sys; from knowlyr_lab.cli import main; sys.exit(main())', *argv],
                       capture_output=True, env=env, cwd='/tmp')
    dt = time.perf_counter() - t0
    if r.returncode not in (0, 1): raise SystemExit(f"{root}: {' '.join(argv)}: rc={r.returncode} {r.stderr.decode()[-300:]}")
    return dt

def _commit(root:Path)->str:
    r = subprocess.run(['git', '-C', str(root), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True)
    dirty = subprocess.run(['git', '-C', str(root), 'status', '--porcelain', '--untracked-files=no'],
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + (' (dirty)' if dirty else '')

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--base', help='a checkout of the commit to compare with (e.g. a git worktree)')
    ap.add_argument('--repeat', type=int, default=5, help='runs of each call (the median is printed)')
    ap.add_argument('--ref-venv', default='/tmp/refvenv', help='venv holding knowlyr-recorder 0.1.2 (skipped if absent)')
    ap.add_argument('--ref-hub-venv', default='/tmp/refvenv-hub', help='venv holding knowlyr-hub 0.1.2 (skipped if absent)')
    a = ap.parse_args()
    roots = {'ours': ROOT} | ({'base': Path(a.base).resolve()} if a.base else {})
    print(f"{time.strftime('%Y-%m-%d %H:%M')} {platform.machine()} cpus={os.cpu_count()} python {platform.python_version()}; "
          + ', '.join(f'{k} {_commit(r)}' for k, r in roots.items()))
    print('load average (1/5/15 min) at start: %.2f %.2f %.2f' % os.getloadavg(), flush=True)
    for r in roots.values():
        subprocess.run([sys.executable, '-m', 'compileall', '-q', str(r / 'knowlyr_lab')], check=True)
    ref = Path(a.ref_venv) / 'bin' / 'knowlyr-recorder'
    out = Path('/tmp/cli_start_out.jsonl')
    rows = []
    for name, argv in _calls(out).items():
        ts = {k: [] for k in roots}
        for r in roots.values(): _run(r, argv)                     # a warm-up each (the page cache)
        for _ in range(a.repeat):
            for k, r in roots.items(): ts[k].append(_run(r, argv))
        rows.append((name, {k: statistics.median(v) for k, v in ts.items()}))
    if ref.exists():
        subprocess.run([str(ref), '--help'], capture_output=True)
        rt = []
        for _ in range(a.repeat):
            t0 = time.perf_counter(); subprocess.run([str(ref), '--help'], capture_output=True); rt.append(time.perf_counter() - t0)
        rows.append(('reference knowlyr-recorder 0.1.2 --help', {'reference': statistics.median(rt)}))
    hub = Path(a.ref_hub_venv) / 'bin' / 'knowlyr-hub'
    if hub.exists():                 # knowlyr-hub 0.1.2's own export of the same eight trajectories, its record format
        _, seed = _small_trajectories(out.with_name('cli_start_trajs.jsonl'))
        for fmt in ('grpo', 'sft'):
            argv = [str(hub), 'export', '--format', fmt, '-t', str(seed), '-o', str(out.with_name(f'cli_start_ref_{fmt}.jsonl'))]
            subprocess.run(argv, capture_output=True, check=True)
            rt = []
            for _ in range(a.repeat):
                t0 = time.perf_counter(); subprocess.run(argv, capture_output=True, check=True); rt.append(time.perf_counter() - t0)
            rows.append((f'reference knowlyr-hub 0.1.2 export --format {fmt} (8 trajectories)', {'reference': statistics.median(rt)}))
    cols = list(roots) + (['reference'] if ref.exists() or hub.exists() else [])
    print(f"\nwall seconds, median of {a.repeat} fresh processes each (interleaved)\n")
    print('| call | ' + ' | '.join(cols) + ' |\n|---|' + '---:|' * len(cols))
    for name, v in rows: print(f'| {name} | ' + ' | '.join(f'{v[c]:.3f}' if c in v else '' for c in cols) + ' |')
    print('\nload average (1/5/15 min) at end: %.2f %.2f %.2f' % os.getloadavg())

if __name__ == '__main__': main()

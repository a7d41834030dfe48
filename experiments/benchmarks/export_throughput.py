#!/usr/bin/env python
"""Export throughput and peak memory: knowlyr_lab.hub.export.DatasetExporter vs the seed's knowlyr-hub 0.1.2 exporter.

    python experiments/benchmarks/export_throughput.py [--n 100000] [--steps 8] [--formats sft,grpo,sft-agent,dpo]
                                                       [--repeats 3] [--refvenv /tmp/refvenv-hub] [--profile 10000]

Goal (issue 41 item 3): SFT and GRPO export >= 1.5x the reference's trajectories/s, peak memory still bounded.

Generates N synthetic trajectories (4 per task, half of them successes, PRM step rewards), writes them once in our
schema and once in the seed's record format, then runs each exporter in its own subprocess, alternating ours and the
reference `--repeats` times, and reports the medians: trajectories per second of wall time and of CPU time (the CPU
figure is the steadier one on a shared machine), and the subprocess's peak RSS (ru_maxrss). The reference is the
published knowlyr-hub 0.1.2, pip-installed into its own virtual environment (`--refvenv`, created on first use) and
driven from here. Same data and filters on both sides: SFT = the successful trajectories, GRPO = one group per task.

What each side does per record. Ours: decodes and validates it against the trajectory schema (unknown fields,
types, constraints; msgspec, with pydantic for what msgspec does not take exactly), quarantines bad records with
file:line and field, renders TRL chat rows (messages with tool calls, tool schemas, per-turn step rewards,
trajectory score) and splits by task; streams SFT, spools GRPO members to disk (external sort) so memory stays flat.
The reference: json.loads into dicts it does not check, writes step text, holds every record in memory.
`--profile K` also prints where our exporter spends its time (cProfile on the first K trajectories), `--micro K` the
CPU cost per trajectory of each step of an export. Results and their analysis: export_throughput.results.md.
"""
import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REF_VERSION = '0.1.2'

# both children: the CPU time split into user and kernel (the kernel's share is mostly writing new pages into the page
# cache), and the bytes the process wrote (/proc/self/io wchar: output and, for ours, the GRPO spool's runs)
CHILD_SPLIT = r'''
def _split(u0, k0=None):
    u1, k1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    io = dict(l.split(': ') for l in open('/proc/self/io').read().splitlines()) if os.path.exists('/proc/self/io') else {}
    ku, ks = (k1.ru_utime - k0.ru_utime, k1.ru_stime - k0.ru_stime) if k0 else (0.0, 0.0)   # ours' export workers
    return {'user': u1.ru_utime - u0.ru_utime + ku, 'sys': u1.ru_stime - u0.ru_stime + ks, 'workers_cpu': ku + ks,
            'written': int(io.get('wchar', 0))}
'''

CHILD_OURS = r'''
import sys, time, resource, json, os
from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.hub.parts import input_parts
path, fmt, out = sys.argv[1:4]
kw = {'success_only': True} if fmt == 'sft' else {}
ex = DatasetExporter(path, **kw)
n = len(input_parts(path, None) or [0]) if fmt == 'grpo' else 1   # processes that read the input (GRPO: forked workers)
t0, u0, k0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
r = ex.export(fmt, out)
sp = _split(u0, k0)
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if n > 1 else 0
print(json.dumps({'rows': r.total, 'seconds': time.perf_counter() - t0, 'cpu': sp['user'] + sp['sys'], **sp, 'workers': n,
                  # peak memory: this process's, plus each worker's at the largest worker's peak (an upper bound)
                  'maxrss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + (n if n > 1 else 0) * kids}))
'''

CHILD_REF = r'''
import sys, time, resource, json, os
from trajectoryhub.exporter import DatasetExporter
path, fmt, out = sys.argv[1:4]
t0, c0, u0 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
ex = DatasetExporter(trajectories_dir=path)
r = ex.export_sft(out) if fmt == 'sft' else ex.export_grpo(out)
assert r.success, r.error
print(json.dumps({'rows': r.total_records, 'seconds': time.perf_counter() - t0, 'cpu': time.process_time() - c0, **_split(u0),
                  'maxrss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
'''

def synth(n, steps, d:Path, seed=0):
    "Write n trajectories in our schema (ours.jsonl) and in the seed's record format (seed.jsonl)"
    sys.path.insert(0, str(ROOT))
    from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory
    rng = random.Random(seed)
    tools = ['file_read', 'shell', 'edit_file', 'search']
    with open(d / 'ours.jsonl', 'w') as fo, open(d / 'seed.jsonl', 'w') as fs:
        for i in range(n):
            tid, ok = f"task-{i // 4:06d}", rng.random() < 0.5
            st = []
            for k in range(steps):
                tool = rng.choice(tools)
                params = {'path': f"src/mod_{rng.randint(0, 99)}.py"} if tool != 'shell' else {'command': f"pytest -q tests/test_{rng.randint(0, 99)}.py"}
                st.append(Step(index=k, thought=f"step {k}: inspect the code around line {rng.randint(1, 500)}", action=ToolCall(tool=tool, params=params),
                               observation=Observation(content=' '.join(rng.choice(['ok', 'def', 'return', 'x', 'assert', 'error']) for _ in range(40))),
                               reward=rng.random()))
            t = Trajectory(task=Task(id=tid, instruction=f"Fix the failing test of {tid}.", domain='coding', env_id='knowlyr/sandbox'),
                           agent=AgentInfo(name='bench', model='m'), steps=st, outcome=Outcome(success=ok, terminated=True), reward=rng.random())
            fo.write(t.model_dump_json() + '\n')
            fs.write(json.dumps({'task_id': tid, 'success': ok, 'reward': t.reward, 'agent_framework': 'bench', 'agent_model': 'm',
                                 'total_steps': steps, 'metadata': {'task_description': t.task.instruction},
                                 'steps': [{'thought': s.thought, 'action': f"{s.action.tool}({json.dumps(s.action.params)})",
                                            'observation': s.observation.content, 'reward': s.reward} for s in st]}) + '\n')

def ref_python(venv:Path)->Path:
    "The reference venv's python, creating the venv and installing knowlyr-hub there on first use"
    py = venv / 'bin' / 'python'
    ok = py.exists() and subprocess.run([str(py), '-c', 'import trajectoryhub.exporter'], capture_output=True).returncode == 0
    if not ok:
        print(f"creating {venv} with knowlyr-hub=={REF_VERSION} ...", flush=True)
        subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True)
        subprocess.run([str(py), '-m', 'pip', 'install', '-q', f'knowlyr-hub=={REF_VERSION}'], check=True)
    return py

def child(python, code, *args, env=None):
    r = subprocess.run([str(python), '-c', code, *map(str, args)], capture_output=True, text=True, env=env)
    if r.returncode: raise SystemExit(f"benchmark child failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])

def versions(ref_py, ours_root)->dict:
    import importlib.metadata as md
    v = {k: md.version(k) for k in ('pydantic', 'pydantic-core', 'orjson', 'pyarrow')}
    v['knowlyr-hub (reference)'] = subprocess.run([str(ref_py), '-c', "import importlib.metadata as m; print(m.version('knowlyr-hub'))"],
                                                  capture_output=True, text=True).stdout.strip()
    v['knowlyr-lab commit measured'] = subprocess.run(['git', '-C', str(ours_root), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
    return v

def profile(path:Path, k:int, out:Path, ours_root:str):
    "cProfile of our SFT and GRPO export on the first k trajectories: the top functions by own time"
    import cProfile
    import io
    import pstats
    sys.path.insert(0, ours_root)
    for m in [m for m in sys.modules if m.startswith('knowlyr_lab')]: del sys.modules[m]
    from knowlyr_lab.hub.export import DatasetExporter
    sub = out / 'profile.jsonl'
    with open(path) as f, open(sub, 'w') as g:
        for _, line in zip(range(k), f): g.write(line)
    for fmt, kw in (('sft', {'success_only': True}), ('grpo', {})):
        pr = cProfile.Profile(); pr.enable()
        DatasetExporter(sub, **kw).export(fmt, out / f'prof-{fmt}')
        pr.disable()
        s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats('tottime').print_stats(12)
        total = st.total_tt
        print(f"\n--- profile: ours, {fmt}, {k} trajectories, {total:.2f} s under cProfile ---")
        for line in s.getvalue().splitlines():
            if line.strip() and not line.startswith(('   Ordered', '   List reduced')) and 'function calls' not in line: print(line[:150])

def micro(path:Path, k:int, ours_root:str):
    "CPU microseconds per trajectory of each step of an export (streaming; min of 15 passes over k records)"
    import gc

    import orjson
    sys.path.insert(0, ours_root)
    from knowlyr_lab.chat import to_messages
    from knowlyr_lab.hub.rows import _row_messages, grpo_member, sft_row
    from knowlyr_lab.trajectory import Trajectory, trajectory_score
    from knowlyr_lab.trajectory_fast import decode_fast
    from knowlyr_lab.trajectory_io import parse_trajectory
    with open(path, 'rb') as f: lines = [l for _, l in zip(range(k), f)]
    strs = [l.decode() for l in lines]
    ts, fs = [Trajectory.model_validate_json(l) for l in lines], [decode_fast(l) for l in strs]
    gc.freeze()       # the records above are kept for the passes: collections that rescan them would be charged to each step
    def run(fn, xs):
        best = 1e9
        for _ in range(15):
            c = time.process_time()
            for x in xs: fn(x)
            best = min(best, (time.process_time() - c) / len(xs) * 1e6)
        return best
    print(f"\n--- per-record CPU cost, us per trajectory ({k} records, min of 15 passes) ---")
    for name, fn, xs in [('orjson.loads (parse only)', orjson.loads, lines), ('json.loads (the reference parses with this)', json.loads, strs),
                         ('parse_trajectory(str) (read_trajectories: pydantic validation)', parse_trajectory, strs),
                         ('decode_fast(str) (the exporter: msgspec validation)', decode_fast, strs),
                         ('to_messages(t)', to_messages, ts), ('_row_messages(t) (the rows: the same messages, one pass)', _row_messages, fs),
                         ('trajectory_score(t)', trajectory_score, fs), ('sft_row(t)', lambda t: sft_row(t, '[]'), fs),
                         ('grpo_member(t)', grpo_member, fs), ('orjson.dumps(sft_row)', orjson.dumps, [sft_row(t, '[]') for t in fs])]:
        print(f"{name:70} {run(fn, xs):8.1f}")

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=100_000)
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--formats', default='sft,grpo')
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--refvenv', default='/tmp/refvenv-hub')
    ap.add_argument('--profile', type=int, default=0, help='also profile ours on this many trajectories')
    ap.add_argument('--micro', type=int, default=0, help='also print per-record costs of each export step on this many trajectories')
    ap.add_argument('--ours-root', default=str(ROOT), help='knowlyr-lab checkout to measure (e.g. an older commit, for before/after)')
    a = ap.parse_args()
    ref_py = ref_python(Path(a.refvenv))
    env = {**os.environ, 'PYTHONPATH': a.ours_root}
    print(f"machine: {platform.platform()}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; python {platform.python_version()}")
    print(f"versions: {versions(ref_py, Path(a.ours_root))}; date {time.strftime('%Y-%m-%d %H:%M')}")
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        t0 = time.perf_counter(); synth(a.n, a.steps, d)
        print(f"synthesised {a.n} trajectories x {a.steps} steps in {time.perf_counter() - t0:.0f} s "
              f"(ours {(d / 'ours.jsonl').stat().st_size / 2**20:.0f} MiB, reference format {(d / 'seed.jsonl').stat().st_size / 2**20:.0f} MiB)")
        rows = []
        for fmt in a.formats.split(','):
            ours, ref = [], []
            for _ in range(a.repeats):                  # alternate, so both see the same machine load
                ours.append(child(sys.executable, CHILD_SPLIT + CHILD_OURS, d / 'ours.jsonl', fmt, d / f"out-{fmt}", env=env))
                if fmt in ('sft', 'grpo'): ref.append(child(ref_py, CHILD_SPLIT + CHILD_REF, d / 'seed.jsonl', fmt, d / f"ref-{fmt}.jsonl"))
            med = lambda rs, k: statistics.median(r[k] for r in rs)
            row = {'format': fmt, 'ours_traj_per_s': a.n / med(ours, 'seconds'), 'ours_traj_per_cpu_s': a.n / med(ours, 'cpu'),
                   'ours_peak_rss_mib': med(ours, 'maxrss_kb') / 1024, 'ours_rows': ours[0]['rows'], 'ours_processes': ours[0].get('workers', 1)}
            if ref:
                row.update(ref_traj_per_s=a.n / med(ref, 'seconds'), ref_traj_per_cpu_s=a.n / med(ref, 'cpu'),
                           ref_peak_rss_mib=med(ref, 'maxrss_kb') / 1024, ref_rows=ref[0]['rows'])
                row.update(speed_ratio=row['ours_traj_per_s'] / row['ref_traj_per_s'], cpu_speed_ratio=row['ours_traj_per_cpu_s'] / row['ref_traj_per_cpu_s'],
                           rss_ratio=row['ours_peak_rss_mib'] / row['ref_peak_rss_mib'])
            row['split'] = [(side, med(rs, 'user'), med(rs, 'sys'), med(rs, 'written') / 2**20) for side, rs in (('ours', ours), ('reference', ref)) if rs]
            rows.append(row)
        keys = ['format', 'ours_processes', 'ours_traj_per_s', 'ours_traj_per_cpu_s', 'ours_peak_rss_mib', 'ours_rows', 'ref_traj_per_s', 'ref_traj_per_cpu_s',
                'ref_peak_rss_mib', 'ref_rows', 'speed_ratio', 'cpu_speed_ratio', 'rss_ratio']
        print(f"\nmedians of {a.repeats} alternating runs")
        print(' | '.join(keys))
        for r in rows: print(' | '.join(f"{r[k]:.2f}" if isinstance(r.get(k), float) else str(r.get(k, '-')) for k in keys))
        print("speed_ratio = ours/reference trajectories per wall second, cpu_speed_ratio = per CPU second (>1: ours faster); "
              "rss_ratio = ours/reference peak RSS (<1: ours smaller). Goal (issue 41): speed >= 1.5, memory bounded.\n"
              "ours_processes: processes that read the input (GRPO: forked workers, `DatasetExporter(workers=None)`'s default for "
              "64 MiB or more); ours' CPU time and peak RSS include theirs (peak: this process's plus each worker's at the largest "
              "worker's peak, an upper bound).\n"
              "Rows differ in kind: ours are TRL chat rows (messages with tool calls, tool schemas, step rewards), validated against "
              "the trajectory schema on the way in; the reference writes step text from unvalidated dicts and keeps every record in memory.")
        print(f"\nwhere the CPU time goes (medians of {a.repeats}): user and kernel seconds, MiB written (output, and ours' GRPO "
              "spool runs; ours: its workers' included)")
        for r in rows:
            for side, u, k, w in r['split']: print(f"{r['format']:5} {side:9}  user {u:6.2f} s  kernel {k:5.2f} s  written {w:7.0f} MiB")
            if len(r['split']) == 2: print(f"{r['format']:5} user-time ratio (reference / ours): {r['split'][1][1] / r['split'][0][1]:.2f}")
        if a.profile: profile(d / 'ours.jsonl', a.profile, d, a.ours_root)
        if a.micro: micro(d / 'ours.jsonl', a.micro, a.ours_root)

if __name__ == '__main__': main()

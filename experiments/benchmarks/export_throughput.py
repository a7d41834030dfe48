#!/usr/bin/env python
"""Export throughput and peak memory: knowlyr_lab.hub.export.DatasetExporter vs the seed's knowlyr-hub 0.1.2 exporter.

    python experiments/benchmarks/export_throughput.py [--n 100000] [--steps 8] [--formats sft,sft-agent,grpo]

Generates N synthetic trajectories (several per task, mixed success), writes them once in our schema and once in the
seed's record format, then runs each exporter in its own subprocess and reports trajectories/s and the subprocess's
peak RSS (ru_maxrss). The seed's exporter is loaded from its source (``--seed-src``, default /tmp/seed/src; else the
0.1.2 wheel is fetched with ``pip download``). Its SFT and GRPO exports are compared with ours (same data, same
filters: SFT = successful trajectories, GRPO = groups per task). Prints a table and the ratios ours/seed.
"""
import argparse, json, os, random, resource, subprocess, sys, tempfile, time, zipfile
from pathlib import Path

CHILD_OURS = r'''
import sys, time, resource, json
from knowlyr_lab.hub.export import DatasetExporter
path, fmt, out = sys.argv[1:4]
t0 = time.perf_counter()
kw = {'success_only': True} if fmt == 'sft' else {}
r = DatasetExporter(path, **kw).export(fmt, out)
dt = time.perf_counter() - t0
print(json.dumps({'rows': r.total, 'seconds': dt, 'maxrss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
'''

CHILD_SEED = r'''
import sys, time, resource, json, importlib.util
src, path, fmt, out = sys.argv[1:5]
spec = importlib.util.spec_from_file_location('seed_exporter', src)
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
t0 = time.perf_counter()
ex = m.DatasetExporter(trajectories_dir=path)
r = ex.export_sft(out) if fmt == 'sft' else ex.export_grpo(out)
dt = time.perf_counter() - t0
assert r.success, r.error
print(json.dumps({'rows': r.total_records, 'seconds': dt, 'maxrss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
'''

def synth(n, steps, d:Path, seed=0):
    "Write n trajectories in our schema (ours.jsonl) and in the seed's record format (seed.jsonl)"
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from knowlyr_lab.trajectory import Trajectory, Task, AgentInfo, Step, ToolCall, Observation, Outcome
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

def seed_exporter(seed_src:Path, tmp:Path)->Path|None:
    p = seed_src / 'trajectoryhub' / 'exporter.py'
    if p.exists(): return p
    r = subprocess.run([sys.executable, '-m', 'pip', 'download', 'knowlyr-hub==0.1.2', '--no-deps', '-d', str(tmp)], capture_output=True)
    whl = next(tmp.glob('knowlyr_hub-0.1.2*.whl'), None)
    if whl is None: return None
    with zipfile.ZipFile(whl) as z: z.extract('trajectoryhub/exporter.py', tmp)
    return tmp / 'trajectoryhub' / 'exporter.py'

def child(code, *args):
    r = subprocess.run([sys.executable, '-c', code, *map(str, args)], capture_output=True, text=True)
    if r.returncode: raise SystemExit(f"benchmark child failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=100_000)
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--formats', default='sft,sft-agent,dpo,grpo')
    ap.add_argument('--seed-src', default='/tmp/seed/src')
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        t0 = time.perf_counter(); synth(a.n, a.steps, d); print(f"synthesised {a.n} trajectories x {a.steps} steps in {time.perf_counter() - t0:.1f} s "
                                                              f"({(d / 'ours.jsonl').stat().st_size / 2**20:.0f} MiB)")
        seed = seed_exporter(Path(a.seed_src), d)
        rows = []
        for fmt in a.formats.split(','):
            o = child(CHILD_OURS, d / 'ours.jsonl', fmt, d / f"out-{fmt}")
            row = {'format': fmt, 'ours_traj_per_s': a.n / o['seconds'], 'ours_rows': o['rows'], 'ours_peak_rss_mib': o['maxrss_kb'] / 1024}
            if seed is not None and fmt in ('sft', 'grpo'):
                s = child(CHILD_SEED, seed, d / 'seed.jsonl', fmt, d / f"seed-{fmt}.jsonl")
                row.update(seed_traj_per_s=a.n / s['seconds'], seed_rows=s['rows'], seed_peak_rss_mib=s['maxrss_kb'] / 1024,
                           speed_ratio=(a.n / o['seconds']) / (a.n / s['seconds']), rss_ratio=o['maxrss_kb'] / s['maxrss_kb'])
            rows.append(row)
        keys = ['format', 'ours_traj_per_s', 'ours_peak_rss_mib', 'ours_rows', 'seed_traj_per_s', 'seed_peak_rss_mib', 'seed_rows', 'speed_ratio', 'rss_ratio']
        print(' | '.join(keys))
        for r in rows: print(' | '.join(f"{r[k]:.2f}" if isinstance(r.get(k), float) else str(r.get(k, '-')) for k in keys))
        if seed is None: print("(seed exporter not available: no source and pip download failed)")
        print("speed_ratio = ours/seed trajectories per second (>1: faster); rss_ratio = ours/seed peak RSS (<1: less memory).\n"
              "Note: our SFT/GRPO rows are chat messages + tool schemas (TRL format); the seed writes step text. The seed's "
              "GRPO keeps every group in memory; ours spools to SQLite.")

if __name__ == '__main__': main()

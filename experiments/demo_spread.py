"""The demo's result as a spread, not a run: `knowlyr-lab demo` (experiment 1, size `small` unless --size) for every seed
at every torch CPU kernel level, each in its own process with `ATEN_CPU_CAPABILITY` set (so torch computes as a CPU
without AVX-512 does, or without any vector extension). Prints one JSON line per run (held-out success with its
Wilson CI, p-value, learning curve, timings and provenance) and, at the end, a markdown table for the results file.

    python experiments/demo_spread.py [--seeds 0 1 2] [--levels avx2 default] [--size small] [--out runs/demo-spread]

A level the CPU lacks is refused by torch (it falls back to the best it has): the provenance line of each run says
which level was used. One run at size `small` takes about 3 minutes of two idle cores."""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

RUN = """
import json, sys
from knowlyr_lab.demo import DemoConfig, run_experiment_1
r = run_experiment_1(sys.argv[1], config=DemoConfig.sized(sys.argv[2], seed=int(sys.argv[3])), log=None)
"""

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--levels', nargs='+', default=['avx2', 'default'])
    ap.add_argument('--size', default='small'); ap.add_argument('--out', default='runs/demo-spread')
    a = ap.parse_args()
    rows = []
    for level in a.levels:
        for seed in a.seeds:
            out = Path(a.out) / f'{level}-seed{seed}'
            env = {**os.environ, 'ATEN_CPU_CAPABILITY': level}
            subprocess.run([sys.executable, '-c', RUN, str(out), a.size, str(seed)], env=env, check=True)
            r = json.loads((out / 'results.json').read_text())
            s = r['summary']['sft']
            row = {'level': level, 'seed': seed, 'success': s['success_rate'], 'low': s['success_low'], 'high': s['success_high'],
                   'n': s['n_tasks'], 'p_value': r['p_value'], 'curve': [round(c['success'], 3) for c in r['learning_curve']],
                   'timings_s': r['timings_s'], 'provenance': r['provenance']}
            print(json.dumps(row), flush=True); rows.append(row)
    print('\n| kernel level (torch reports) | seed | held-out success | 95% Wilson CI | p vs untrained | learning curve |')
    print('|---|---|---|---|---|---|')
    for r in rows:
        print(f"| {r['level']} ({r['provenance']['cpu_capability']}) | {r['seed']} | {round(r['success'] * r['n'])}/{r['n']} ({r['success']:.0%}) | "
              f"{r['low']:.0%}-{r['high']:.0%} | {r['p_value']:.1e} | {' / '.join(f'{c:.0%}' for c in r['curve'])} |")

if __name__ == '__main__': main()

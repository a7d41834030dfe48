"""The demo's result as a spread, not a run: `knowlyr-lab demo` (experiment 1, size `small` unless --size) for every seed
at every torch CPU kernel level this CPU has (`default` = scalar, `avx2`, and `avx512` where /proc/cpuinfo lists it),
each in its own process with `ATEN_CPU_CAPABILITY` set. Each run's results.json becomes a row (`knowlyr_lab.demo.spread_row`:
held-out success with its Wilson CI, Holm-adjusted p, learning curve, timings and provenance), printed as a JSON line;
at the end the rows are written to --results (default experiments/demo_spread.results.json), from which README's table is
generated (`spread_table`, `spread_summary`; tests/test_experiments.py checks they agree).

    python experiments/demo_spread.py [--seeds 0 1 2] [--levels default avx2 avx512] [--size small] [--out runs/demo-spread] [--jobs 2]

--eval-seed-offset N draws the held-out tasks from seeds N on instead of the recipe's (10,000,000 on), the tasks the recipe
was chosen on: with a seed the recipe search never used, the run measures the recipe on tasks and a seed its choice never
saw. Each row then records the offset and how many of its held-out tasks share content (a fingerprint) with the recipe's
held-out tasks (`shared_with_recipe_eval`, 0 when they are disjoint); the results go to --results as usual:

    python experiments/demo_spread.py --seeds 5 --eval-seed-offset 20000000 --jobs 3 --results experiments/demo_fresh.results.json

--jobs N runs N demos at once, each with N-th of the cores as its torch threads (`OMP_NUM_THREADS`; recorded in each row's
provenance): on a 2-core machine shared with other work, two one-thread runs do not spin-wait on each other as one
two-thread run does. Rows go to `<results>.partial` (untracked, so the runs after it still record a clean checkout) as they finish,
and to --results at the end: an interrupted grid keeps the rows it made.

Run it from a clean checkout: every row records the commit and whether the worktree was modified, and the README test
refuses modified rows. One run at size `small` takes a few minutes of two idle cores (scalar kernels: longer)."""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from knowlyr_lab.demo import DemoConfig, spread_row, spread_summary, spread_table

RUN = """
import sys
from knowlyr_lab.demo import DemoConfig, run_experiment_1
off = {'eval_seed_offset': int(sys.argv[4])} if len(sys.argv) > 4 else {}
run_experiment_1(sys.argv[1], config=DemoConfig.sized(sys.argv[2], seed=int(sys.argv[3]), **off), log=None)
"""

def shared_with_recipe_eval(size:str, offset:int)->int:
    "How many held-out tasks drawn from seed `offset` on share a fingerprint with the recipe's own held-out tasks"
    from knowlyr_lab.tasks import task_key
    cfg, fresh = DemoConfig.sized(size), DemoConfig.sized(size, eval_seed_offset=offset)
    train = cfg.train_tasks()
    return len({task_key(t) for t in cfg.eval_tasks(train)} & {task_key(t) for t in fresh.eval_tasks(train)})

def cpu_levels()->list[str]:
    "The kernel levels this CPU can run: scalar and AVX2 always (x86-64 machines here), AVX-512 when the CPU lists it"
    flags = Path('/proc/cpuinfo').read_text() if Path('/proc/cpuinfo').exists() else ''
    return ['default', 'avx2'] + (['avx512'] if 'avx512f' in flags.split() or ' avx512f' in flags else [])

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--levels', nargs='+', default=None, help='default: every level this CPU has')
    ap.add_argument('--size', default='small'); ap.add_argument('--out', default='runs/demo-spread')
    ap.add_argument('--results', default=str(Path(__file__).with_name('demo_spread.results.json')))
    ap.add_argument('--jobs', type=int, default=1, help='demos run at once, each with cores/jobs torch threads (default: %(default)s)')
    ap.add_argument('--eval-seed-offset', type=int, default=None, help="held-out tasks from these seeds on (default: the recipe's)")
    a = ap.parse_args()
    fresh = {} if a.eval_seed_offset is None else {
        'eval_seed_offset': a.eval_seed_offset, 'shared_with_recipe_eval': shared_with_recipe_eval(a.size, a.eval_seed_offset)}
    levels, rows = a.levels or cpu_levels(), []
    threads = max(1, (os.cpu_count() or 1) // a.jobs)
    partial = Path(a.results + '.partial')   # untracked while the grid runs: later rows' checkouts stay clean
    def write(path):
        Path(path).write_text(json.dumps({'size': a.size, 'recipe': {k: v for k, v in vars(DemoConfig.sized(a.size)).items() if k != 'seed'},
                                          'rows': rows}, indent=1) + '\n')
    def one(level, seed):
        out = Path(a.out) / f'{level}-seed{seed}'
        env = {**os.environ, 'ATEN_CPU_CAPABILITY': level, **({'OMP_NUM_THREADS': str(threads)} if a.jobs > 1 else {})}
        off = [] if a.eval_seed_offset is None else [str(a.eval_seed_offset)]
        subprocess.run([sys.executable, '-c', RUN, str(out), a.size, str(seed), *off], env=env, check=True)
        return {**spread_row(json.loads((out / 'results.json').read_text()), level), **fresh}
    grid = [(level, seed) for level in levels for seed in a.seeds]
    with ThreadPoolExecutor(a.jobs) as ex:
        for row in ex.map(lambda ls: one(*ls), grid):   # rows in grid order; each written as soon as it and those before it are done
            print(json.dumps(row), flush=True); rows.append(row); write(partial)
    write(a.results); partial.unlink()
    print(spread_summary(rows)); print(spread_table(rows))

if __name__ == '__main__': main()

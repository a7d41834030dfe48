#!/usr/bin/env python
"""Reward rules: cost against trajectory length, ours (knowlyr_lab.reward.rules) against the seed's knowlyr-reward 0.1.2.

The acceptance target: scoring a 1,000-step trajectory costs about 100x a 10-step one (linear), not 10,000x.
Both implementations score the same synthetic coding trajectories (list/read/search/edit/test steps over a growing
set of files, with realistic repeats and reverts). Two modes:

- whole trajectory: ours `RuleScorer.score_trajectory`; the seed's `check_redundancy`, `check_regression`,
  `check_info_utilization` and `check_efficiency` on the step dicts (its rule layer);
- step by step (as inside `RewardWrapper`): ours `RuleScorer.step` once per step; the seed's reward function
  re-scores the whole prefix at every step, so it is measured only up to --seed-incremental-max steps.

The seed is `pip download`ed (wheels, no deps) into a temporary directory and imported from there; nothing is
installed. Times are medians of --repeats runs.

    python experiments/benchmarks/reward_scaling.py
    python experiments/benchmarks/reward_scaling.py --lengths 10 100 1000 3000 --repeats 7
"""
import argparse, random, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from knowlyr_lab.trajectory import Trajectory, Task, Step, ToolCall, Observation, Outcome
from knowlyr_lab.reward.rules import RuleScorer

def make_steps(n:int, seed:int=0)->list[dict]:
    "A synthetic coding episode of n steps as (tool, params, output) dicts"
    rng = random.Random(seed)
    files = [f"src/pkg/mod_{i}.py" for i in range(40)]   # the same pool at every length: a step costs the same
    out, edits = [], []
    for i in range(n):
        k = rng.random()
        f = rng.choice(files[: max(3, i // 4 + 3)])
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

def to_traj(steps:list[dict])->Trajectory:
    return Trajectory(task=Task(id='bench', instruction='Fix the failing tests in src/pkg', domain='coding'),
                      steps=[Step(index=i, action=ToolCall(tool=s['tool'], params=s['params']), observation=Observation(content=s['output']))
                             for i, s in enumerate(steps)], outcome=Outcome(success=False, terminated=True))

def load_seed(d:Path):
    "Download the seed wheels into `d` and make them importable from there"
    subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '-q', 'knowlyr-reward==0.1.2', 'knowlyr-core==0.1.2', '-d', str(d)], check=True)
    for whl in sorted(d.glob('*.whl')): sys.path.insert(0, str(whl))   # wheels are zip archives: importable as they are
    import agentreward.rules as R
    from knowlyrcore.domain import CODING_PROFILE
    return R, CODING_PROFILE

def median_time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--lengths', type=int, nargs='+', default=[10, 100, 1000])
    ap.add_argument('--repeats', type=int, default=5)
    ap.add_argument('--seed-incremental-max', type=int, default=300)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        R, prof = load_seed(Path(tmp))
        def seed_rules(steps):
            R.check_redundancy(steps, prof); R.check_regression(steps, prof); R.check_info_utilization(steps, prof); R.check_efficiency(steps, 15)
        rows = []
        for n in a.lengths:
            steps = make_steps(n); traj = to_traj(steps)
            scorer = RuleScorer('coding')
            ours = median_time(lambda: scorer.score_trajectory(traj), a.repeats)
            seed = median_time(lambda: seed_rules(steps), a.repeats)
            def ours_inc():
                s = RuleScorer('coding').reset(traj.task)
                for st in traj.steps: s.step(st)
            oi = median_time(ours_inc, a.repeats)
            si = median_time(lambda: [seed_rules(steps[:i + 1]) for i in range(n)], max(1, a.repeats // 2)) if n <= a.seed_incremental_max else None
            rows.append((n, ours, seed, oi, si))
    base = rows[0]
    print(f"{'steps':>6} | {'ours s':>9} {'us/step':>8} {'x vs ' + str(base[0]):>9} | {'seed s':>9} {'us/step':>8} {'x vs ' + str(base[0]):>9} | "
          f"{'ours inc s':>10} {'x':>7} | {'seed inc s':>10} {'x':>9}")
    for n, o, s, oi, si in rows:
        print(f"{n:>6} | {o:>9.5f} {o / n * 1e6:>8.1f} {o / base[1]:>9.1f} | {s:>9.5f} {s / n * 1e6:>8.1f} {s / base[2]:>9.1f} | "
              f"{oi:>10.5f} {oi / base[3]:>7.1f} | " + (f"{si:>10.4f} {si / base[4]:>9.1f}" if si is not None else f"{'(skipped)':>10} {'':>9}"))
    (n0, o0, s0, *_), (nl, ol, sl, *_) = rows[0], rows[-1]
    print(f"\nlength x{nl // n0}: ours costs x{ol / o0:.0f}, the seed x{sl / s0:.0f} (linear: x{nl // n0}; quadratic: x{(nl // n0) ** 2}).")
    if len(rows) >= 3:
        (na, oa, sa, *_) = rows[-2]
        print(f"last step up, x{nl / na:.0f} length: ours x{ol / oa:.1f}, the seed x{sl / sa:.1f}.")
    print(f"at {nl} steps ours takes {ol / sl:.2f}x the seed's time (ours also checks whole-file reverts, test regressions, "
          f"revisited states and the outcome, and keeps a reason per rule and step).")

if __name__ == '__main__':
    main()

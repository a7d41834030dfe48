"""Episodes per second of the expert (and the random baseline) on every bundled task suite.

    python experiments/benchmarks/suite_throughput.py            # all suites, ~1-2 min on 2 cores
    python experiments/benchmarks/suite_throughput.py --quick    # fewer episodes
    python experiments/benchmarks/suite_throughput.py --json out.json

For each env it runs the expert (`env.oracle_action()`) over the suite's tasks (or seeds) and a random agent that
samples valid tool calls from `ToolCallSpace(env.tool_schemas)` (for Wordle: random dictionary words), and prints
episodes/s, steps/s and success rates. There is no reference implementation to compare with: the seed packages
had no task suites (its SandboxEnv needed a remote repo and Docker; its ConversationEnv had nothing to verify).
`knowlyr/sandbox` episodes are dominated by process starts inside the sandbox (the hidden tests run `python3`);
tool-call latency of the sandbox itself is measured by sandbox_latency.py.
"""
import argparse
import json
import random
import statistics
import time

from knowlyr_lab.core import verdict_of
from knowlyr_lab.gym import ToolCallSpace
from knowlyr_lab.registry import make

SUITES = ['knowlyr/maze-easy', 'knowlyr/maze-medium', 'knowlyr/maze-hard',
          'knowlyr/wordle-easy', 'knowlyr/wordle-medium', 'knowlyr/wordle-hard',
          'knowlyr/conversation', 'knowlyr/engineering', 'knowlyr/advisory', 'knowlyr/discussion',
          'knowlyr/sandbox']

def episode(env, policy, task=None, seed=None, limit=100):
    ts, n = env.reset(task=task, seed=seed), 0
    while not ts.done and n < limit: ts, n = env.step(policy(env)), n + 1
    v = verdict_of(ts)
    return bool(v and v.success), float(ts.reward), n

def random_policy(env_id, env, seed):
    if env_id.startswith('knowlyr/wordle'):
        from knowlyr_lab.envs.wordle import random_action
        rng = random.Random(seed); return lambda e: random_action(e, rng)
    space = ToolCallSpace(env.tool_schemas, seed=seed); return lambda e: space.sample()

def bench(env_id, n_episodes, random_limit):
    env = make(env_id)
    tasks = [t['id'] for t in env.list_tasks()][:n_episodes]
    runs = {}
    for name in ('expert', 'random'):
        pol = (lambda e: e.oracle_action()) if name == 'expert' else random_policy(env_id, env, 0)
        t0, res = time.perf_counter(), []
        for tid in tasks: res.append(episode(env, pol, task=tid, limit=100 if name == 'expert' else random_limit))
        dt = time.perf_counter() - t0
        runs[name] = {'episodes': len(res), 'seconds': dt, 'episodes_per_s': len(res) / dt, 'steps_per_s': sum(r[2] for r in res) / dt,
                      'success_rate': statistics.mean(r[0] for r in res), 'mean_reward': statistics.mean(r[1] for r in res),
                      'mean_steps': statistics.mean(r[2] for r in res)}
    env.close()
    return runs

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--quick', action='store_true', help='at most 10 episodes per suite')
    ap.add_argument('--episodes', type=int, default=50, help='episodes per suite (tasks in list order)')
    ap.add_argument('--random-limit', type=int, default=20, help='step cap for the random agent')
    ap.add_argument('--only', nargs='*', help='env ids to run')
    ap.add_argument('--json', help='also write the results here')
    a = ap.parse_args()
    n = 10 if a.quick else a.episodes
    out = {}
    print(f"{'env':24s} {'n':>4s} {'expert ep/s':>12s} {'steps/s':>9s} {'expert ok':>10s} {'random ep/s':>12s} {'random ok':>10s} {'random r':>9s}")
    for env_id in a.only or SUITES:
        r = out[env_id] = bench(env_id, n, a.random_limit)
        e, x = r['expert'], r['random']
        print(f"{env_id:24s} {e['episodes']:4d} {e['episodes_per_s']:12.1f} {e['steps_per_s']:9.1f} {e['success_rate']:10.2f} "
              f"{x['episodes_per_s']:12.1f} {x['success_rate']:10.2f} {x['mean_reward']:9.2f}", flush=True)
    if a.json:
        with open(a.json, 'w') as f: json.dump(out, f, indent=1)

if __name__ == '__main__': main()

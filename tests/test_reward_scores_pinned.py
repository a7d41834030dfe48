"""The rule PRM's scores on the inputs of experiments/benchmarks/reward_scaling.py, pinned.

Speed work on the rules (issue 41) must not change a single score or reason: every rule's verdict, the rules layer's
score and the engine's step and process rewards on both workloads of the benchmark are hashed and compared to the
digest taken at main 80d42fd, before that work."""
import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from knowlyr_lab.reward.engine import RewardEngine, make_reward_fn
from knowlyr_lab.reward.scorer import RuleScorer

ROOT = Path(__file__).resolve().parents[1]

def _bench():
    spec = importlib.util.spec_from_file_location('reward_scaling', ROOT / 'experiments' / 'benchmarks' / 'reward_scaling.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m

# sha256 of `_verdicts(workload)` at main 80d42fd (the rules before the speed work of issue 41)
PINNED = {'repo': '254849bf264e9f5dcd3e8be889e9b723f461182ee60e049b3e8259ddfbdf3229',
          'pool': 'c0457baf3256dbd12181df342f593f8e3e1ad096a0a03d0606c6592f9468ef23'}

def _verdicts(workload:str)->str:
    "Digest of every verdict, layer score and reward of the benchmark's trajectories (10 and 1,000 steps) scored three ways"
    b = _bench()
    trajs = [b.to_traj(b.make_steps(n, workload, seed=i), f"{n}-{i}") for n, k in ((10, 30), (100, 5), (1000, 2)) for i in range(k)]
    scorer, eng, fn = RuleScorer('coding'), RewardEngine('coding'), make_reward_fn('coding')
    rows = []
    for t, tr in zip(trajs, eng.score_trajectories(trajs)):
        for rr, sr in zip(scorer.score_trajectory(t), tr.steps):
            rows.append([[k, repr(r.score), r.reason] for k, r in rr.items()] + [repr(scorer.combine(rr)), repr(sr.reward), sr.details()])
        rows.append(repr(tr.process))
        fn.reset(t.task)
        rows.append([repr(fn(s)[0]) for s in t.steps])
    return hashlib.sha256(json.dumps(rows, default=repr).encode()).hexdigest()

@pytest.mark.parametrize('workload', ['repo', 'pool'])
def test_benchmark_scores_unchanged(workload):
    "Rules, rules layer, engine and step-by-step rewards on the benchmark's inputs equal those before the speed work"
    assert _verdicts(workload) == PINNED[workload]

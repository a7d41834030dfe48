"""Experiment 05's policies evaluated again under another CPU kernel level (`ATEN_CPU_CAPABILITY`).

Experiment 05 trained and evaluated at one kernel level (avx2). A result that must hold on CPUs we do not have has to
survive the kernels' different rounding: a greedy policy near a decision boundary can flip. This script loads each
stored policy (a warm start's SFT adapter; GRPO's and the control's adapters, trained on the merged warm start), runs the
same greedy evaluation on the same held-out tasks (read from the stored episodes files, in order), and writes one
episodes file per policy plus a summary with the agreement, task by task, with the stored evaluation. Run it once per
kernel level (each in a fresh process: the level is read at import), then `--report` pairs the levels' evaluations.

  ATEN_CPU_CAPABILITY=default python experiments/05_kernels.py --results R --runs warm-0 grpo-0 --out O/default
  python experiments/05_kernels.py --report O --results R --write experiments/results/05_real_model/kernels.json

Checkpoints of experiment 05 (made before 284e490) name the original base in their adapter_config.json although GRPO
trained on the merged warm start; the copy loaded here names the warm start, as such checkpoints do now.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ENV_ID, MAX_NEW_TOKENS, MAX_EPISODE_STEPS = 'knowlyr/arith-medium', 48, 4

def _adapter_copy(src:Path, base:Path, tmp:Path)->Path:
    "A copy of adapter folder `src` whose adapter_config.json names `base` as its base model"
    dst = tmp / f'{src.parent.parent.name}-{src.parent.name}'
    if dst.exists(): return dst
    shutil.copytree(src, dst)
    c = json.loads((dst / 'adapter_config.json').read_text())
    (dst / 'adapter_config.json').write_text(json.dumps({**c, 'base_model_name_or_path': str(base)}))
    return dst

def _policy(results:Path, run:str, tmp:Path, model:Path)->tuple[Path, Path]:
    "(adapter folder to load, the stored episodes of its evaluation) of `run` ('warm-<w>', 'grpo-<w>', 'shuffled-<w>')"
    arm, w = run.rsplit('-', 1)
    warm_dir = results / Path(json.loads((results / f'warm-{w}' / 'part.json').read_text())['path']).relative_to('results/05_real_model')
    warm = _adapter_copy(warm_dir, model, tmp)
    if arm == 'warm': return warm, results / f'grpo-{w}' / 'before.jsonl'
    (ck,) = sorted((results / run).glob('checkpoint-*'), key=lambda p: int(p.name.split('-')[1]))[-1:]
    return _adapter_copy(ck / 'model', warm.resolve(), tmp), results / run / 'after.jsonl'

def evaluate_runs(results:Path, runs:list[str], out:Path, n:int|None=None, chunk:int=50):
    import torch
    from transformers import AutoTokenizer

    from knowlyr_lab.eval.evaluate import evaluate_agent
    from knowlyr_lab.provenance import provenance
    from knowlyr_lab.recipes import policy_agent
    from knowlyr_lab.trainer.real import prepare_real_model
    from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories
    out.mkdir(parents=True, exist_ok=True)
    model = prepare_real_model(quiet=True)
    prov = provenance(seed=0, tokenizer=AutoTokenizer.from_pretrained(model))   # the adapters' base renders
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            t = time.time()
            path, stored_file = _policy(results, run, Path(tmp), model)
            stored = list(read_trajectories(stored_file))[:n]
            tasks, trajs, agent = [s.task.id for s in stored], [], policy_agent(path, MAX_NEW_TOKENS, 0.0, name=run)
            for i in range(0, len(tasks), chunk):   # stored as it goes: a run cut short keeps its finished chunks
                r = evaluate_agent(agent, ENV_ID, tasks=tasks[i:i + chunk], max_episode_steps=MAX_EPISODE_STEPS,
                                   batch_size=chunk, progress=False)
                trajs += r.trajectories
                write_trajectories(trajs, out / f'{run}.jsonl')
                now = {e.task.id: bool(e.outcome.success) for e in trajs}
                was = {s.task.id: bool(s.outcome.success) for s in stored if s.task.id in now}
                rec = {'run': run, 'capability': torch.backends.cpu.get_cpu_capability(), 'n': len(now), 'of': len(tasks),
                       'success': sum(now.values()) / len(now), 'stored_success': sum(was.values()) / len(was),
                       'agree_with_stored': sum(now[k] == was[k] for k in was) / len(was), 'seconds': round(time.time() - t, 1),
                       'torch_threads': torch.get_num_threads(), 'made_at': prov}
                (out / f'{run}.json').write_text(json.dumps(rec, default=str))
            print(json.dumps({k: v for k, v in rec.items() if k != 'made_at'}), flush=True)

def report(levels_dir:Path, results:Path, write:Path|None):
    """Per kernel level: each policy's success, its agreement with the stored (avx2) evaluation, and GRPO against its warm
    start (and the control) paired over the tasks every policy of the level finished and over the warm starts. A level
    without a warm start's evaluation of its own takes the stored one (this machine, avx2), and says so."""
    from knowlyr_lab.eval.evaluate import EvalResult, arm_comparisons
    from knowlyr_lab.trajectory_io import read_trajectories
    levels = {}
    for d in sorted(p for p in levels_dir.iterdir() if p.is_dir()):
        recs = {f.stem: json.loads(f.read_text()) for f in sorted(d.glob('*.json'))}
        seeds = sorted(int(r.rsplit('-', 1)[1]) for r in recs if r.startswith('grpo-'))
        if not seeds: continue
        files = {f'{a}-{w}': d / f'{a}-{w}.jsonl' for a in ('grpo', 'warm', 'shuffled') for w in seeds}
        stored_warm = [w for w in seeds if f'warm-{w}' not in recs]
        for w in stored_warm: files[f'warm-{w}'] = results / f'grpo-{w}' / 'before.jsonl'
        eps = {k: list(read_trajectories(f)) for k, f in files.items() if f.exists()}
        arms = [a for a in ('grpo', 'warm', 'shuffled') if all(f'{a}-{w}' in eps for w in seeds)]
        common = set.intersection(*({e.task.id for e in eps[f'{a}-{w}']} for a in arms for w in seeds))
        evs = {a: [EvalResult.from_trajectories([e for e in eps[f'{a}-{w}'] if e.task.id in common], agent=a, env_id=ENV_ID)
                   for w in seeds] for a in arms}
        cmp = arm_comparisons(evs, [('grpo', b) for b in arms if b != 'grpo']) if len(seeds) >= 2 else {}   # a paired interval needs >= 2
        levels[d.name] = {'capability': sorted({r['capability'] for r in recs.values()}), 'seeds': seeds, 'tasks': len(common),
                          'warm_from_stored': stored_warm,
                          'policies': {k: {x: r.get(x) for x in ('n', 'success', 'stored_success', 'agree_with_stored', 'seconds',
                                                                 'torch_threads')} for k, r in recs.items()},
                          'comparisons': {k: {x: v[x] for x in ('mean_a', 'mean_b', 'estimate', 'ci', 'p_bootstrap', 'n_runs', 'n_tasks')}
                                          | {'p_holm': [r['p_holm'] for r in v['runs']]} for k, v in cmp.items()},
                          'made_at': next(iter(recs.values()))['made_at']}
    for name, lv in levels.items():
        print(f"{name} ({', '.join(lv['capability'])}; {lv['tasks']} tasks; warm start stored for {lv['warm_from_stored']}):")
        for k, p in lv['policies'].items():
            print(f"  {k:12s} {p['success']:6.1%} of {p['n']} (stored {p['stored_success']:6.1%}; agrees on {p['agree_with_stored']:6.1%})")
        for k, c in lv['comparisons'].items():
            print(f"  {k}: {c['estimate']:+.1%} ({c['ci'][0]:+.1%} to {c['ci'][1]:+.1%}), p_bootstrap {c['p_bootstrap']:.2g}")
    if write:
        write.write_text(json.dumps({'what': __doc__.split('\n\n')[0], 'levels': levels}, indent=1, default=str) + '\n')

if __name__ == '__main__':
    a = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    a.add_argument('--results', type=Path, default=Path('experiments/results/05_real_model'), help="experiment 05's results folder")
    a.add_argument('--runs', nargs='*', default=[], help="policies: warm-<w>, grpo-<w>, shuffled-<w>")
    a.add_argument('--out', type=Path, help='folder of this kernel level\'s episodes and summaries')
    a.add_argument('--chunk', type=int, default=50, help='tasks per batch, stored after each')
    a.add_argument('--n', type=int, help='only the first n tasks (a smoke test)')
    a.add_argument('--report', type=Path, help='a folder of kernel-level folders to pair and report')
    a.add_argument('--write', type=Path, help='with --report: the results file to write')
    o = a.parse_args()
    if o.report: report(o.report, o.results, o.write); sys.exit()
    if not o.out or not o.runs: a.error('--out and --runs (or --report)')
    print(f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', '')!r}", flush=True)
    evaluate_runs(o.results, o.runs, o.out, o.n, o.chunk)

"The pipeline survives SIGKILL at any point: rerunning gives the same output as an uninterrupted run"
import json, os, signal, subprocess, sys, pytest
from pathlib import Path
from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
from knowlyr_lab.trajectory import read_trajectories

CFG = dict(env_id='knowlyr/maze-easy', max_tasks=3, samples_per_task=2, agent='expert:0.3', max_steps=12,
           export_formats=['sft', 'dpo', 'sft-agent'], test_fraction=0.3)

SCRIPT = r'''
import os, signal, sys, json
from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
cfg, kill_at = json.loads(sys.argv[1]), int(sys.argv[2])
calls = [0]
def hook(event, stage, unit):
    calls[0] += 1
    if calls[0] == kill_at: os.kill(os.getpid(), signal.SIGKILL)
Pipeline(PipelineConfig(**cfg), hook=hook).run()
print('DONE')
'''

def _run(cfg, kill_at):
    return subprocess.run([sys.executable, '-c', SCRIPT, json.dumps(cfg), str(kill_at)], capture_output=True, text=True, timeout=300)

def _snapshot(out:Path)->dict:
    "Final outputs, with trajectory timestamps removed"
    trajs = [t.model_dump(exclude={'steps': {'__all__': {'t_start', 't_end'}}}) for t in read_trajectories(out / 'trajectories.jsonl')]
    files = {str(p.relative_to(out)): p.read_text() for p in sorted((out / 'exports').rglob('*.jsonl'))}
    return {'trajectories': trajs, 'exports': files, 'store': len(list((out / 'store' / 'shards').glob('*.jsonl')))}

@pytest.mark.slow
def test_sigkill_at_many_points_then_resume(tmp_path):
    ref = tmp_path / 'ref'
    Pipeline(PipelineConfig(output_dir=str(ref), **CFG)).run()
    want = _snapshot(ref)
    assert want['trajectories'] and want['exports']
    # each run is killed at its k-th commit hook (before or after a rename), so every run gets a little further and
    # the kills land in every stage: config, rollout, reward, merge, store, export
    out = tmp_path / 'killed'
    cfg = {**CFG, 'output_dir': str(out)}
    n_killed, ks = 0, [3, 7, 5, 6]
    for i in range(60):
        r = _run(cfg, ks[i % len(ks)])
        if r.returncode == -signal.SIGKILL: n_killed += 1; continue
        assert r.returncode == 0 and 'DONE' in r.stdout, r.stderr[-2000:]
        break
    assert n_killed >= 5                      # the kills really happened, across the run
    r = _run(cfg, 10**9)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _snapshot(out) == want
    st = Pipeline(PipelineConfig(**cfg)).status()
    assert st['merged'] and st['stored'] and st['exports'] == ['dpo', 'sft', 'sft-agent']

def test_pipeline_on_the_coding_sandbox_suite(tmp_path):
    "tasks -> sandbox rollouts (bubblewrap/local) -> reward -> export"
    res = Pipeline(PipelineConfig(output_dir=str(tmp_path / 'o'), max_tasks=2, export_formats=['sft'])).run()
    trajs = list(read_trajectories(tmp_path / 'o' / 'trajectories.jsonl'))
    assert [t.outcome.success for t in trajs] == [True, True]
    assert all(t.steps[0].reward_details.get('layers') for t in trajs)      # scored by the reward engine
    assert res['exports']['sft']['total'] == 2

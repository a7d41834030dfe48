"The pipeline survives SIGKILL at any point: rerunning gives the same output as an uninterrupted run"
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
from knowlyr_lab.trajectory_io import read_trajectories

CFG = dict(env_id='knowlyr/maze-easy', max_tasks=3, samples_per_task=2, agent='expert:0.3', max_episode_steps=12,
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
    assert st['merged'] and st['stored'] and st['exports'] == ['dpo', 'sft', 'sft-agent'] and st['stale_temp_files'] == 0

def test_pipeline_on_the_coding_sandbox_suite(tmp_path):
    "tasks -> sandbox rollouts (bubblewrap/local) -> reward -> export"
    res = Pipeline(PipelineConfig(output_dir=str(tmp_path / 'o'), max_tasks=2, export_formats=['sft'])).run()
    trajs = list(read_trajectories(tmp_path / 'o' / 'trajectories.jsonl'))
    assert [t.outcome.success for t in trajs] == [True, True]
    assert all(t.steps[0].reward_details.get('layers') for t in trajs)      # scored by the reward engine
    assert res['exports']['sft']['total'] == 2

def _hub(*args):
    "knowlyr-hub in a subprocess (the real entry point: exit code, stdout, stderr)"
    return subprocess.run([sys.executable, '-c', 'import sys; from knowlyr_lab.cli.hub import main; sys.exit(main())', *map(str, args)],
                          capture_output=True, text=True, timeout=300)

def test_killed_runs_temp_files_not_counted_and_cleaned(tmp_path):
    "A SIGKILL between writing a unit and renaming it leaves a temp file: status does not count it, the next run removes it"
    out = tmp_path / 'o'
    cfg = {**CFG, 'export_formats': ['sft'], 'output_dir': str(out)}
    r = _run(cfg, 3)                                     # hook 3: the first rollout unit is written, not yet renamed
    assert r.returncode == -signal.SIGKILL
    temps = [p for p in (out / 'work' / 'rollout').iterdir() if p.name.startswith('.')]
    assert len(temps) == 1
    st = Pipeline(PipelineConfig(**cfg)).status()
    assert st['rollout_units'] == 0 and st['stale_temp_files'] == 1
    r = _run(cfg, 10**9)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not [p for p in out.rglob('*') if p.name.startswith('.') and 'tmp' in p.name]
    st = Pipeline(PipelineConfig(**cfg)).status()
    assert st['rollout_units'] == 6 and st['stale_temp_files'] == 0

def test_logs_with_nothing_usable_or_missing_fail_with_one_line(tmp_path):
    (tmp_path / 'logs').mkdir()
    (tmp_path / 'logs' / 'x.jsonl').write_text('{"schema_version": "1.0", "steps": 5}\n')
    r = _hub('run', '-o', tmp_path / 'o1', '--logs', tmp_path / 'logs')
    assert r.returncode == 2 and r.stdout == '' and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith('knowlyr-hub run: error: no usable trajectories in 1 log file (1 records or files quarantined')
    r = _hub('run', '-o', tmp_path / 'o2', '--logs', tmp_path / 'nope')
    assert r.returncode == 2 and r.stderr.strip() == f"knowlyr-hub run: error: log path {tmp_path / 'nope'} does not exist"

def test_truncated_gz_is_quarantined_and_the_batch_goes_on(tmp_path):
    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trajectory_io import write_trajectories
    logs = tmp_path / 'logs'
    trajs = collect('knowlyr/maze-easy', ExpertAgent, 12, seed=0, progress=False)
    write_trajectories(trajs[:6], logs / 'a.jsonl.gz'); write_trajectories(trajs[6:], logs / 'b.jsonl')
    raw = (logs / 'a.jsonl.gz').read_bytes(); (logs / 'a.jsonl.gz').write_bytes(raw[:len(raw) // 2])
    for _ in range(2):                                   # the run, then a rerun (resume) over the same output
        r = _hub('run', '-o', tmp_path / 'o', '--logs', logs, '--format', 'sft')
        assert r.returncode == 3, r.stderr[-2000:]          # EXIT_PARTIAL: written, one record quarantined
        assert r.stderr.startswith('warning: 1 input records could not be used (reasons in '), r.stderr
        res = json.loads(r.stdout)
        assert res['files'] == 2 and res['trajectories'] >= 6 and res['quarantined'] == 1
    q = [json.loads(l) for p in (tmp_path / 'o' / 'quarantine').glob('*.jsonl') for l in p.read_text().splitlines()]
    assert len(q) == 1 and q[0]['path'].endswith('a.jsonl.gz') and 'EOFError' in q[0]['reason']

def test_documented_dpo_example_says_why_there_are_no_pairs(tmp_path):
    "knowlyr-hub run --agent expert --samples 2 --format dpo: the expert's two samples per task are one episode"
    r = _hub('run', '-o', tmp_path / 'o', '--agent', 'expert', '--max-tasks', '2', '--samples', '2', '--format', 'dpo')
    assert r.returncode == 0, r.stderr[-2000:]
    dpo = json.loads(r.stdout)['exports']['dpo']
    assert dpo['total'] == 0 and dpo['note'].startswith('0 pairs from 2 tasks: every task has a single trajectory')
    assert 'identical to another' in dpo['note'] and f"knowlyr-hub run: dpo: {dpo['note']}" in r.stderr

def test_settings_that_fail_are_not_saved_so_the_corrected_retry_runs(tmp_path):
    "A bad env id, agent or log format used to be saved as the run's config before failing: the fixed retry was refused"
    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.hub.pipeline import PipelineError
    from knowlyr_lab.recorder.base import UnknownAdapterError
    from knowlyr_lab.registry import UnknownEnvError
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trajectory_io import write_trajectories
    out = tmp_path / 'o'
    good = {**CFG, 'max_tasks': 1, 'samples_per_task': 1, 'export_formats': ['sft'], 'output_dir': str(out)}
    with pytest.raises(UnknownEnvError): Pipeline(PipelineConfig(**{**good, 'env_id': 'knowlyr/nope'})).run()
    with pytest.raises(ValueError, match='unknown agent spec'): Pipeline(PipelineConfig(**{**good, 'agent': 'nosuchagent'})).run()
    assert not (out / 'pipeline.json').exists()
    assert Pipeline(PipelineConfig(**good)).run()['units'] == 1
    logs, out2 = tmp_path / 'logs', tmp_path / 'o2'
    logs.mkdir()
    with pytest.raises(PipelineError, match='no log files'): Pipeline(PipelineConfig(output_dir=str(out2))).run_batch(logs)
    write_trajectories(collect('knowlyr/maze-easy', ExpertAgent, 2, seed=0, progress=False), logs / 'a.jsonl')
    with pytest.raises(UnknownAdapterError, match="did you mean 'knowlyr'"):
        Pipeline(PipelineConfig(output_dir=str(out2), log_format='knowlyrr')).run_batch(logs)
    assert not (out2 / 'pipeline.json').exists()
    assert Pipeline(PipelineConfig(output_dir=str(out2), export_formats=['sft'])).run_batch(logs)['trajectories'] == 2


def test_rerun_over_other_logs_is_refused(tmp_path):
    "A resumed batch whose log files were added, changed or replaced refuses instead of returning the old merge"
    import os

    from knowlyr_lab.hub.pipeline import Pipeline, PipelineError
    from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
    from knowlyr_lab.trajectory_io import write_trajectories
    def T(i): return Trajectory(task=Task(id=f't{i}', instruction=f'do {i}'), outcome=Outcome(success=True),
                                steps=[Step(index=0, thought=f's{i}', action=ToolCall(tool='x', params={'a': i}))])
    logs = tmp_path / 'logs'; logs.mkdir(); write_trajectories([T(1)], logs / 'a.jsonl')
    cfg = dict(output_dir=str(tmp_path / 'out'), reward=False, export_formats=['sft'])
    first = Pipeline(cfg).run_batch(logs)
    assert first['trajectories'] == 1 and Pipeline(cfg).run_batch(logs)['trajectories'] == 1   # the same inputs resume
    write_trajectories([T(2)], logs / 'b.jsonl')                                                   # a log added
    with pytest.raises(PipelineError, match='other inputs'): Pipeline(cfg).run_batch(logs)
    (logs / 'b.jsonl').unlink()
    assert Pipeline(cfg).run_batch(logs)['trajectories'] == 1
    write_trajectories([T(3)], logs / 'a.jsonl'); os.utime(logs / 'a.jsonl', ns=(1, 1))            # a log rewritten
    with pytest.raises(PipelineError, match='other inputs'): Pipeline(cfg).run_batch(logs)
    other = tmp_path / 'other'; other.mkdir(); write_trajectories([T(4)], other / 'c.jsonl')      # another folder
    with pytest.raises(PipelineError, match='other inputs'): Pipeline(cfg).run_batch(other)

def test_samples_per_task_is_bounded():
    from knowlyr_lab.hub.pipeline_config import MAX_SAMPLES, PipelineConfig, PipelineError
    with pytest.raises(PipelineError, match='samples_per_task'): PipelineConfig(output_dir='x', samples_per_task=10**12)
    assert PipelineConfig(output_dir='x', samples_per_task=MAX_SAMPLES).samples_per_task == MAX_SAMPLES

def test_a_config_with_a_tuple_resumes(tmp_path):
    "pipeline.json holds lists: a config given a tuple of tasks was compared with it as a tuple, so its own rerun was refused"
    tasks = ('maze-easy-5x5-s0', 'maze-easy-5x5-s1')
    cfg = PipelineConfig(output_dir=str(tmp_path / 'o'), env_id='knowlyr/maze-easy', tasks=tasks, reward=False, export_formats=['sft'])
    first = Pipeline(cfg).run()
    assert Pipeline(cfg).run() == first

def test_a_run_resumed_with_another_agent_is_refused(tmp_path):
    "The agent given to run() was not in the saved config: a resumed run mixed the first agent's units with another's"
    from knowlyr_lab.agents import ExpertAgent, RandomAgent
    from knowlyr_lab.hub.pipeline import PipelineError
    class Stop(Exception): pass
    def hook(event, stage, unit):
        if (event, stage, unit) == ('committed', 'reward', 'u-000000'): raise Stop
    cfg = PipelineConfig(output_dir=str(tmp_path / 'o'), env_id='knowlyr/maze-easy', max_tasks=2, reward=False, export_formats=['sft'])
    with pytest.raises(Stop): Pipeline(cfg, hook=hook).run(agent=ExpertAgent)
    with pytest.raises(PipelineError, match='agent_given'): Pipeline(cfg).run(agent=RandomAgent)
    assert Pipeline(cfg).run(agent=ExpertAgent)['units'] == 2             # the same agent resumes
    assert {t.agent.name for t in read_trajectories(Path(cfg.output_dir) / 'trajectories.jsonl')} == {'expert'}

def test_a_batch_resumed_with_another_log_format_is_refused(tmp_path):
    "run_batch's format was not in the saved config: a rerun with another format returned the units of the first"
    from knowlyr_lab.hub.pipeline import PipelineError
    from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
    from knowlyr_lab.trajectory_io import write_trajectories
    logs = tmp_path / 'logs'; logs.mkdir()
    write_trajectories([Trajectory(task=Task(id='t1', instruction='do 1'), outcome=Outcome(success=True),
                                   steps=[Step(index=0, thought='s', action=ToolCall(tool='x', params={'a': 1}))])], logs / 'a.jsonl')
    cfg = dict(output_dir=str(tmp_path / 'out'), reward=False, export_formats=['sft'])
    assert Pipeline(cfg).run_batch(logs, format='knowlyr')['trajectories'] == 1
    assert Pipeline(cfg).run_batch(logs, format='knowlyr')['trajectories'] == 1       # the same format resumes
    with pytest.raises(PipelineError, match='log_format'): Pipeline(cfg).run_batch(logs, format='openai-chat')

def _bytes(out:Path)->dict:
    ("Every file a run leaves (the lock, the SQLite index and the exports' manifests of file sizes and times aside), its "
     "output directory's name replaced")
    return {str(p.relative_to(out)): p.read_bytes().replace(str(out).encode(), b'<out>') for p in sorted(out.rglob('*'))
            if p.is_file() and p.name not in ('.lock', 'index.sqlite', '.knowlyr-export.json')}

def test_a_run_stopped_at_each_commit_resumes_to_the_same_bytes(tmp_path):
    """A run stopped by an error at each commit hook in turn (config, convert, reward, merge, store, export), then
    rerun, leaves byte for byte the files of an uninterrupted run. Stopped after the store's put and before
    store.done, the rerun recorded {'added': 0, 'duplicates': 8} where the uninterrupted run has {'added': 8, ...}"""
    from knowlyr_lab.agents import ExpertAgent, RandomAgent
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trajectory_io import write_trajectories
    trajs = (collect('knowlyr/maze-easy', ExpertAgent, 4, seed=0, progress=False)
             + collect('knowlyr/maze-easy', RandomAgent, 4, seed=0, max_episode_steps=6, progress=False))
    logs = tmp_path / 'logs'            # logs, not rollouts: their timestamps are the logs', the same in every run
    write_trajectories(trajs[:5], logs / 'a.jsonl'); write_trajectories(trajs[5:], logs / 'b.jsonl')
    cfg = lambda out: PipelineConfig(output_dir=str(out), export_formats=['sft', 'dpo', 'grpo'], test_fraction=0.5)
    calls = []
    Pipeline(cfg(tmp_path / 'ref'), hook=lambda *a: calls.append(a)).run_batch(logs)
    want = _bytes(tmp_path / 'ref')
    assert {c[1] for c in calls} == {'config', 'convert', 'reward', 'merge', 'store', 'export'}
    assert json.loads(want['work/store.done']) == {'added': 8, 'duplicates': 0}
    class Stop(Exception): pass
    for k, at in enumerate(calls, 1):
        out, n = tmp_path / f'stop-{k}', [0]
        def hook(*a, k=k, n=n):
            n[0] += 1
            if n[0] == k: raise Stop(*a)
        with pytest.raises(Stop): Pipeline(cfg(out), hook=hook).run_batch(logs)
        Pipeline(cfg(out)).run_batch(logs)
        got = _bytes(out)
        assert [f for f in sorted(set(want) | set(got)) if want.get(f) != got.get(f)] == [], at

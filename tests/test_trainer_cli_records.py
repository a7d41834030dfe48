"What a `knowlyr-trainer` run leaves a user: the documented flags exist, a model folder says what made it, `eval` says how episodes ended"
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from knowlyr_lab.cli.trainer import build_parser

ROOT = Path(__file__).resolve().parents[1]

def _documented_commands():
    "Every `knowlyr-trainer <cmd> --flag ...` code span in the docs' prose and README"
    texts = [(ROOT / 'README.md').read_text()]
    for nb in sorted((ROOT / 'nbs').glob('*.ipynb')):
        texts += [c.source for c in nbformat.read(nb, 4).cells if c.cell_type == 'markdown']
    return sorted({m for t in texts for m in re.findall(r'knowlyr-trainer (?:sft|dpo|grpo|eval|serve) --[^`\n]*', t)})

def test_documented_trainer_flags_exist():
    "A flag the docs show with a subcommand is one that subcommand takes (60a showed `sft --model`, an error)"
    cmds = _documented_commands()
    assert any(c.startswith('knowlyr-trainer sft') for c in cmds), cmds
    sub = build_parser()._subparsers._group_actions[0].choices
    bad = []
    for c in cmds:
        name, *words = c.split()[1:]
        p = sub[name]; p.format_help()             # a trainer's flags are added when it is first used
        known = {o for a in p._actions for o in a.option_strings}
        bad += [(c, w) for w in words if w.startswith('--') and w.split('=')[0] not in known]
    assert not bad, bad

@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    from knowlyr_lab.trainer.sft import env_tools, oracle_trajectories, render_corpus
    from knowlyr_lab.trainer.tiny import make_tiny_model, save_tiny_model
    d = tmp_path_factory.mktemp('walk')
    trajs = oracle_trajectories(seeds=range(4))
    save_tiny_model(*make_tiny_model(render_corpus(trajs, tools=env_tools('knowlyr/maze-easy')), vocab_size=400, hidden_size=32), d / 'base')
    hub = "import sys; from knowlyr_lab.cli.hub import main; sys.exit(main(sys.argv[1:]))"      # `knowlyr-hub`, as a user collects
    r = subprocess.run([sys.executable, '-c', hub, 'collect', 'knowlyr/maze-easy', '--agent', 'expert', '-n', '4', '-o', 'train.jsonl'],
                       capture_output=True, text=True, cwd=d)
    assert r.returncode == 0 and len((d / 'train.jsonl').read_text().splitlines()) == 4, r.stderr
    return d

def _trainer(d, *argv):
    "Run the command in a fresh process whose working directory is `d` (so `-m` imports the package under test)"
    r = subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.trainer', *map(str, argv)], capture_output=True, text=True, cwd=d)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])

def test_trained_model_folder_records_its_provenance(tiny):
    "A trained model folder holds the versions, commit, CPU and seed it was made with, beside its config"
    res = _trainer(tiny, 'sft', '--model-name-or-path', tiny / 'base', '--train-data', tiny / 'train.jsonl', '--output-dir', tiny / 'run',
                   '--max-steps', '1', '--batch-size', '2', '--seed', '7', '--progress-bar', 'false', '--tools-from-env', 'knowlyr/maze-easy')
    p = Path(res['model'], 'provenance.json')
    assert p.exists(), sorted(x.name for x in Path(res['model']).iterdir())
    prov = json.loads(p.read_text())
    assert prov['seed'] == 7 and prov['state']['step'] == 1
    assert prov['packages']['torch'] and prov['packages']['transformers'] and prov['cpu'] and prov['cpu_capability']
    assert 'commit' in prov and 'dirty' in prov

def test_eval_says_how_episodes_ended(tiny):
    "`eval`'s JSON counts each outcome reason and the invalid episodes, so a run of errors is not read as a 0% agent"
    ev = _trainer(tiny, 'eval', '--model', tiny / 'base', '--env', 'knowlyr/maze-easy', '--episodes', '3', '--max-episode-steps', '2',
                  '--max-new-tokens', '8')
    assert ev['n_invalid'] == 0
    assert sum(ev['ended'].values()) == ev['episodes'] == 3, ev
    assert all(isinstance(k, str) and isinstance(v, int) and v > 0 for k, v in ev['ended'].items()), ev

def test_eval_shows_progress_on_stderr_when_asked_and_keeps_stdout_json(tiny):
    "misc1: `eval` hard-coded progress=False (5 real-model episodes ran 150 s silently); --max-episode-steps hid its default"
    argv = ['eval', '--model', tiny / 'base', '--env', 'knowlyr/maze-easy', '--episodes', '2', '--max-episode-steps', '1', '--max-new-tokens', '4']
    def run(*more): return subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.trainer', *map(str, argv), *more],
                                          capture_output=True, text=True, cwd=tiny)
    on, off = run('--progress'), run()                                  # off: stderr is a pipe here, not a terminal
    assert on.returncode == off.returncode == 0, on.stderr[-2000:]
    assert re.search(r'collect: 100%.*2/2', on.stderr), on.stderr[-2000:]
    assert 'collect' not in off.stderr, off.stderr[-2000:]
    for r in (on, off): assert json.loads(r.stdout)['episodes'] == 2        # stdout is the JSON alone
    helped = build_parser()._subparsers._group_actions[0].choices['eval'].format_help()
    assert re.search(r'--max-episode-steps MAX_EPISODE_STEPS\s+step budget per episode \(default: 20\)', helped), helped

def test_offline_grpo_prints_the_datas_reward_not_a_learning_curve(tiny):
    "misc1: offline `grpo` printed reward_first/reward_last, the exported groups' rewards, as if they were a learning signal"
    from knowlyr_lab.agents import ExpertAgent, RandomAgent
    from knowlyr_lab.hub.export import DatasetExporter
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trainer.sft import env_tools
    good = collect('knowlyr/maze-easy', ExpertAgent, 2, progress=False)
    tasks = [t.task.id for t in good] * 2                                          # each task again, walked at random
    trajs = good + collect('knowlyr/maze-easy', RandomAgent, tasks=tasks, seed=3, max_episode_steps=3, progress=False)
    res = DatasetExporter(trajs, tools=env_tools('knowlyr/maze-easy')).export('grpo', tiny / 'grpo')
    groups = [json.loads(line) for line in open(res.paths['train'])]
    assert groups and all(len(g['rewards']) >= 2 for g in groups)
    out = _trainer(tiny, 'grpo', '--model-name-or-path', tiny / 'base', '--train-data', res.paths['train'], '--output-dir',
                   tiny / 'grpo-run', '--tasks-per-step', '2', '--max-steps', '1', '--progress-bar', 'false')
    assert 'reward_first' not in out and 'reward_last' not in out, out
    data = [r for g in groups for r in g['rewards'][:8]]                          # the members a group trains on (group_size 8)
    assert min(data) <= out['data_reward_mean'] <= max(data) and 'not a learning signal' in out['note'], out

def test_eval_records_its_provenance(tiny):
    """trn10: `eval` printed its success rate with nothing of what made it, where `sft|dpo|grpo` write provenance.json
    beside the model: its JSON now carries the same block (versions, commit, CPU, chat template and date) and the model"""
    from knowlyr_lab.provenance import provenance
    ev = _trainer(tiny, 'eval', '--model', tiny / 'base', '--env', 'knowlyr/maze-easy', '--episodes', '1', '--max-episode-steps', '1',
                  '--max-new-tokens', '4')
    prov = ev['provenance']
    assert set(provenance()) <= set(prov) and prov['model'] == str(tiny / 'base'), sorted(prov)
    assert prov['packages']['torch'] and prov['packages']['transformers'] and prov['cpu'] and prov['cpu_capability'], prov
    assert prov['commit'] and 'dirty' in prov and 'chat_date' in prov and prov['chat_template']['sha256'], prov

"Every export loads with datasets.load_dataset in the shape its consumer documents; TRL prepares the SFT and DPO data"
import copy
import json
import random
from pathlib import Path

import datasets
import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.core import parse_action
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.hub.export import FORMATS, DatasetExporter
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.trajectory_io import write_trajectories


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp('export')
    tasks = MazeEnv('easy').list_tasks()[:8]
    good = collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, seed=0, progress=False)
    bad = collect('knowlyr/maze-easy', RandomAgent, tasks=tasks * 2, seed=1, max_episode_steps=5, progress=False)
    write_trajectories(good + bad, d / 'trajs.jsonl')
    ex = DatasetExporter(d / 'trajs.jsonl', test_fraction=0.25)
    return d, {f: ex.export(f, d / f) for f in FORMATS}

def _load(res, split='train', cache=None):
    return datasets.load_dataset('json', data_files=res.paths[split], split='train', cache_dir=str(cache))

def _check_msgs(msgs):
    for m in msgs:
        assert m['role'] in ('system', 'user', 'assistant', 'tool')
        for tc in m['tool_calls']: json.loads(tc['function']['arguments'])

def test_sft_conversational_with_tools(data):
    d, res = data
    ds = _load(res['sft'], cache=d / 'c')
    assert len(ds) == res['sft'].counts['train']
    for row in ds:
        _check_msgs(row['messages'])
        assert row['messages'][0]['role'] == 'user'
        tools = json.loads(row['tools'])                          # TRL json-loads a string `tools` column
        assert {t['function']['name'] for t in tools} == {'look', 'move', 'submit'}
        ids = [tc['id'] for m in row['messages'] for tc in m['tool_calls']]
        assert ids == [m['tool_call_id'] for m in row['messages'] if m['role'] == 'tool']

def test_split_by_task_no_leak(data):
    d, res = data
    for f in ('sft', 'dpo', 'grpo', 'benchmark'):
        tr = set(_load(res[f], 'train', d / 'c')['task_id']); te = set(_load(res[f], 'test', d / 'c')['task_id'])
        assert tr and te and not (tr & te), f

def test_agent_and_seed_formats(data):
    d, res = data
    ds = _load(res['sft-agent'], cache=d / 'c')
    assert set(ds.column_names) >= {'instruction', 'input', 'steps', 'task_id', 'reward'}
    step = ds[0]['steps'][0]
    assert set(step) == {'thought', 'action', 'observation', 'reward'}
    assert parse_action(step['action'])['tool'] in ('look', 'move', 'submit')
    seed = _load(res['dpo-seed'], cache=d / 'c')
    assert all(isinstance(x, str) and x.startswith('Step 1:') for x in seed['chosen'])
    assert all(m > 0 for m in seed['reward_margin'])

def test_dpo_conversational(data):
    d, res = data
    ds = _load(res['dpo'], cache=d / 'c')
    assert len(ds) > 0
    for row in ds:
        assert [m['role'] for m in row['prompt']] == ['user']
        assert row['chosen'][0]['role'] == 'assistant' and row['rejected'][0]['role'] == 'assistant'
        assert row['chosen_reward'] > row['rejected_reward']
        _check_msgs(row['chosen']); _check_msgs(row['rejected'])

def test_grpo_benchmark_openai(data):
    d, res = data
    g = _load(res['grpo'], cache=d / 'c')
    for row in g:
        assert len(row['completions']) == len(row['rewards']) == len(row['advantages']) >= 2
        assert abs(sum(row['advantages'])) < 1e-4
    b = _load(res['benchmark'], cache=d / 'c')
    assert all(r['success_rate'] > 0 and r['reference_solution'][-1].startswith('Action: submit') for r in b)
    o = _load(res['openai'], cache=d / 'c')
    for row in o:
        assert row['messages'][-1]['role'] == 'assistant'
        assert all(t['type'] == 'function' for t in row['tools'])

def test_hf_save_to_disk_and_parquet(data):
    d, res = data
    dd = datasets.load_from_disk(res['hf'].paths['hf'])
    assert set(dd) == {'train', 'test'} and sum(map(len, dd.values())) == res['sft'].total
    pq = datasets.load_dataset('parquet', data_files=str(Path(res['hf'].paths['parquet']) / 'train-*.parquet'), split='train', cache_dir=str(d / 'c'))
    assert len(pq) == len(dd['train'])

@pytest.mark.slow
def test_trl_prepares_sft_and_dpo(data, tmp_path):
    "TRL's own SFTTrainer / DPOTrainer data preparation accepts the exports (tiny local Qwen2, CPU)"
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    from knowlyr_lab.trainer.tiny import make_tiny_model
    d, res = data
    sft = _load(res['sft'], cache=d / 'c')
    corpus = [json.dumps(r['messages']) for r in sft.select(range(4))]
    model, tok = make_tiny_model(corpus, vocab_size=512)
    common = dict(use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], per_device_train_batch_size=2, max_steps=1, save_strategy='no')
    sft_cols = sft.select_columns(['messages', 'tools'])
    t = SFTTrainer(model=model, args=SFTConfig(output_dir=str(tmp_path / 'sft'), max_length=512, **common), train_dataset=sft_cols, processing_class=tok)
    row = t.train_dataset[0]
    assert len(row['input_ids']) > 20
    text = tok.decode(row['input_ids'])
    assert 'submit' in text and '<tool_call>' in text       # the tool calls were rendered by the chat template
    assert t.train().training_loss > 0
    dpo = _load(res['dpo'], cache=d / 'c').select_columns(['prompt', 'chosen', 'rejected', 'tools'])
    t2 = DPOTrainer(model=model, ref_model=copy.deepcopy(model), args=DPOConfig(output_dir=str(tmp_path / 'dpo'), max_length=512, **common), train_dataset=dpo, processing_class=tok)
    r2 = t2.train_dataset[0]
    assert len(r2['prompt_ids']) > 0 and len(r2['chosen_ids']) > 0 and len(r2['rejected_ids']) > 0
    assert r2['chosen_ids'] != r2['rejected_ids']
    assert t2.train().training_loss > 0

# --- issue 12 / 14: one split, one preference algorithm, one trajectory score, step rewards to the trainer ---
from knowlyr_lab.reward.engine import make_reward_fn
from knowlyr_lab.reward.preferences import reward_leaderboard
from knowlyr_lab.tasks import split_tasks
from knowlyr_lab.trajectory import trajectory_score


def _rows(res, split='train'):
    p = res.paths.get(split)
    return [json.loads(l) for l in open(p)] if p else []

def test_exporter_split_is_split_tasks(tmp_path):
    "The exporter's test split is the test split of tasks.split_tasks (by content fingerprint) on the same tasks, fraction and seed"
    tasks = MazeEnv('easy').list_tasks()[:40]
    trajs = collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, seed=0, progress=False)
    assert all(t.task.fingerprint for t in trajs)
    res = DatasetExporter(trajs, test_fraction=0.25, split_seed=1).export('sft', tmp_path / 'sft')
    _, want = split_tasks([t.task.model_dump() for t in trajs], 0.25, seed=1)
    assert want and sorted(r['task_id'] for r in _rows(res, 'test')) == sorted(t['id'] for t in want)

def test_exporter_and_split_tasks_agree_on_short_lists(tmp_path):
    "On 3 tasks at 0.1, split_tasks used to move a task to test when the hash held none out; the exporter trained on it"
    import warnings
    trajs = collect('knowlyr/maze-easy', ExpertAgent, tasks=MazeEnv('easy').list_tasks()[:3], seed=0, progress=False)
    for seed in range(6):
        res = DatasetExporter(trajs, test_fraction=0.1, split_seed=seed).export('sft', tmp_path / f'sft{seed}')
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            _, want = split_tasks([t.task.model_dump() for t in trajs], 0.1, seed=seed)
        assert sorted(r['task_id'] for r in _rows(res, 'test')) == sorted(t['id'] for t in want), seed

class WalkThenSubmit:
    "Walks at random for `n` moves, then submits: long episodes that the verifier fails"
    name = 'walker'
    def __init__(self, n=16): self.n, self.rng, self.k = n, random.Random(0), 0
    def seed(self, seed): self.rng = random.Random(seed)
    def reset(self, task=None, tools=None): self.k = 0
    def __call__(self, observation, history):
        self.k += 1
        if self.k > self.n: return {'tool': 'submit', 'params': {}}
        return {'tool': 'move', 'params': {'direction': self.rng.choice(['north', 'south', 'east', 'west'])}}

@pytest.fixture(scope='module')
def mixed():
    "Expert successes, long verified failures and long truncated random walks on the same tasks, every step scored by the PRM;\n"\
    "`reward` holds the summed step rewards, as a log or an older record may"
    tasks = MazeEnv('easy').list_tasks()[:4]
    fn = make_reward_fn('generic')
    good = collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, seed=0, step_reward_fn=fn, progress=False)
    walk = collect('knowlyr/maze-easy', WalkThenSubmit, tasks=tasks * 2, seed=1, step_reward_fn=fn, progress=False)
    rand = collect('knowlyr/maze-easy', RandomAgent(tools=['move', 'look']), tasks=tasks, seed=2, max_episode_steps=20, step_reward_fn=fn, progress=False)
    assert all(t.outcome.success for t in good) and all(t.outcome.success is False for t in walk) and not any(t.outcome.success for t in rand)
    trajs = [t.model_copy(update={'reward': sum(s.reward for s in t.steps)}) for t in good + walk + rand]
    assert max(t.reward for t in trajs[len(good):]) > max(t.reward for t in trajs[:len(good)])   # summed rewards favour the long failures
    return trajs

def test_no_pair_leaderboard_row_or_advantage_prefers_a_failure(mixed, tmp_path):
    ok = {t.id: t.outcome.success for t in mixed}
    dpo = DatasetExporter(mixed).export('dpo', tmp_path / 'dpo')
    rows = _rows(dpo)
    assert rows and all(ok[r['chosen_id']] or not ok[r['rejected_id']] for r in rows)
    assert sum(ok[r['chosen_id']] and not ok[r['rejected_id']] for r in rows) == 4          # each task pairs its success with a failure
    lb = reward_leaderboard(mixed)
    assert lb.agent[0] == 'expert' and lb.success_rate[0] == 1.0 and set(lb.agent[1:]) == {'walker', 'random'}
    assert lb.mean_score[0] > lb.mean_score[1:].max()
    grpo = DatasetExporter(mixed).export('grpo', tmp_path / 'grpo')
    for r in _rows(grpo):
        adv = dict(zip(r['trajectory_ids'], r['advantages']))
        wins, fails = [a for i, a in adv.items() if ok[i]], [a for i, a in adv.items() if not ok[i]]
        assert wins and fails and min(wins) > max(fails)
        assert r['rewards'] == sorted(r['rewards'], reverse=True)
        assert r['rewards'][0] == trajectory_score(next(t for t in mixed if t.id == r['trajectory_ids'][0]))

def test_sft_step_rewards_reach_the_trainer(mixed, tmp_path):
    "The trainer's to_chat reads the SFT export's per-turn step rewards (so step_weighted_loss acts on hub exports)"
    from knowlyr_lab.trainer.data import to_chat
    res = DatasetExporter(mixed).export('sft', tmp_path / 'sft')
    rows = _rows(res)
    assert len(rows) == len(mixed)
    chats = [to_chat(r, where=f"sft:{i}") for i, r in enumerate(rows)]
    for c, t in zip(chats, mixed):
        assert len(c['step_rewards']) == sum(m['role'] == 'assistant' for m in c['messages']) == len(t.steps)
        assert c['step_rewards'] == [s.reward for s in t.steps]
    assert any(len(set(c['step_rewards'])) > 1 for c in chats)    # the PRM's per-step signal, not a constant

def test_dpo_export_pairs_are_build_preferences_pairs(mixed, tmp_path):
    "One preference builder: the hub's DPO rows are exactly build_preferences' pairs on the same trajectories and settings"
    from knowlyr_lab.reward.preferences import build_preferences
    for settings in ({}, {'min_margin': 0.2, 'max_pairs_per_task': 1}):
        res = DatasetExporter(mixed).export('dpo', tmp_path / f"dpo{len(settings)}", **settings)
        got = sorted((r['task_id'], r['chosen_id'], r['rejected_id'], round(r['margin'], 9)) for r in _rows(res))
        want = sorted((p.task_id, p.chosen.id, p.rejected.id, round(p.margin, 9)) for p in build_preferences(mixed, **settings).pairs)
        assert got and got == want, settings


def test_verl_parquet_reads_back_in_its_documented_shape(data):
    "verl's RL data: data_source, prompt, ability, reward_model{style, ground_truth}, extra_info; one row per task, split by task"
    import pyarrow as pa
    import pyarrow.parquet as pq
    d, res = data
    bench = {s: {json.loads(l)['task_id']: json.loads(l) for l in open(p)} for s, p in res['benchmark'].paths.items()}
    for split, path in res['verl'].paths.items():
        assert path.endswith(f'{split}.parquet')
        t = pq.read_table(path)
        assert {'data_source', 'prompt', 'ability', 'reward_model', 'extra_info'} <= set(t.column_names)
        assert t.schema.field('reward_model').type == pa.struct([('style', pa.string()), ('ground_truth', pa.string())])
        assert t.schema.field('prompt').type == pa.list_(pa.struct([('role', pa.string()), ('content', pa.string())]))
        rows = t.to_pylist()
        assert [r['extra_info']['index'] for r in rows] == list(range(len(rows))) and len(rows) == res['verl'].counts[split]
        for r in rows:
            truth = json.loads(r['reward_model']['ground_truth'])
            b = bench[split][truth['task_id']]
            assert r['data_source'] == truth['env_id'] == 'knowlyr/maze-easy' and r['ability'] == b['domain'] and r['reward_model']['style'] == 'rule'
            assert truth['reference_solution'] == b['reference_solution'] and r['extra_info']['split'] == split
            assert [m['role'] for m in r['prompt']] == ['user'] and r['prompt'][0]['content']
            assert r['extra_info']['need_tools_kwargs'] and set(r['extra_info']['tools_kwargs']) == {'look', 'move', 'submit'}
            assert r['extra_info']['tools_kwargs']['move']['create_kwargs'] == {'env_id': 'knowlyr/maze-easy', 'task_id': truth['task_id']}
        assert {json.loads(r['reward_model']['ground_truth'])['task_id'] for r in rows} == set(bench[split])


def test_skyrl_parquet_reads_back_in_its_documented_shape(data):
    "SkyRL's RL data: prompt, env_class, reward_spec{method, ground_truth} (+ data_source, extra_info)"
    import pyarrow.parquet as pq
    d, res = data
    tr, te = (pq.read_table(res['skyrl'].paths[s]) for s in ('train', 'test'))
    assert tr.column_names == ['data_source', 'prompt', 'env_class', 'reward_spec', 'extra_info']
    assert tr.schema.field('reward_spec').type.names == ['method', 'ground_truth']
    ids = {s: {json.loads(r['reward_spec']['ground_truth'])['task_id'] for r in t.to_pylist()} for s, t in (('train', tr), ('test', te))}
    assert ids['train'] and ids['test'] and not ids['train'] & ids['test']
    assert set(tr.column('env_class').to_pylist()) == {'knowlyr/maze-easy'}
    verl = pq.read_table(res['verl'].paths['train']).to_pylist()
    assert [r['reward_spec'] for r in tr.to_pylist()] == [{'method': 'rule', 'ground_truth': v['reward_model']['ground_truth']} for v in verl]


def _one_step(tid, task, ok, invalid=None):
    from knowlyr_lab.trajectory import Trajectory
    return Trajectory.model_validate({'id': tid, 'task': {'id': task, 'instruction': f'solve {task}'},
                                      'steps': [{'index': 0, 'action': {'tool': 'go', 'params': {}},
                                                 'observation': {'content': 'ok'}}],
                                      'outcome': {'success': ok, 'invalid': invalid}})

def test_infrastructure_failures_are_not_exported_as_the_policys(tmp_path):
    # a harness timeout is no failure of the policy: a GRPO group scored it 0 and the benchmark counted it
    ts = [_one_step('x0', 'T', True), _one_step('x1', 'T', False), _one_step('x2', 'T', False, 'harness timeout')]
    write_trajectories(ts, tmp_path / 'trajs.jsonl')
    for src in (ts, tmp_path / 'trajs.jsonl'):                       # in memory, and read fast from a file
        res = DatasetExporter(src).export('grpo', tmp_path / 'grpo')
        row = json.loads((tmp_path / 'grpo' / 'train.jsonl').read_text())
        assert (row['trajectory_ids'], row['rewards'], res.skipped) == (['x0', 'x1'], [1.0, 0.0], {'invalid': 1})
        res = DatasetExporter(src).export('benchmark', tmp_path / 'b')
        assert json.loads((tmp_path / 'b' / 'train.jsonl').read_text())['success_rate'] == 0.5
    res = DatasetExporter(ts, include_failed=True).export('grpo', tmp_path / 'all')
    assert json.loads((tmp_path / 'all' / 'train.jsonl').read_text())['trajectory_ids'] == ['x0', 'x1', 'x2']

def test_a_given_pair_across_tasks_is_quarantined(tmp_path):
    # its row went to the chosen task's split: a test task's rejected trajectory was written into train.jsonl
    ts = [_one_step(f'{k}-{n}', f'task{k}', n == 0) for k in range(20) for n in range(2)]
    ex = DatasetExporter(ts, preferences=[{'chosen': '0-0', 'rejected': '1-1'}, {'chosen': '2-0', 'rejected': '2-1'}],
                         test_fraction=0.5)
    res = ex.export('dpo', tmp_path)
    assert (res.total, res.quarantined) == (1, 1)
    q = json.loads((tmp_path / 'quarantine.jsonl').read_text())
    assert q['reason'].startswith("preferences[0]: field 'rejected': a trajectory of another task")

def test_an_in_memory_record_that_does_not_validate_is_quarantined(tmp_path):
    ok = _one_step('a', 'T', True).model_dump()
    res = DatasetExporter([ok, {'id': 'b', 'steps': 'x'}, {**ok, 'id': 'c'}]).export('sft', tmp_path)
    assert (res.counts, res.quarantined) == ({'train': 2}, 1)
    assert json.loads((tmp_path / 'quarantine.jsonl').read_text())['field'] == 'steps'

def test_every_record_read_is_in_a_row_in_skipped_or_in_the_quarantine(tmp_path):
    """A GRPO group of 10 with group_size 8 wrote 8 and counted nothing for the other 2: they were neither in a row,
    nor in `skipped`, nor quarantined. Counted per format: rows' trajectories + skipped + quarantined == records"""
    from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
    step = lambda i: [Step(index=0, thought='t', action=ToolCall(tool='submit', params={'c': i}))]
    ts = [Trajectory(id=f'tr-{i}', task=Task(id='t', instruction='do it'), outcome=Outcome(success=i % 2 == 0),
                     reward=i / 10, steps=step(i)) for i in range(10)]
    ts += [Trajectory(id='alone', task=Task(id='u', instruction='other'), steps=step(99)),
           Trajectory(id='empty', task=Task(id='v', instruction='nothing'), steps=[])]
    write_trajectories(ts, tmp_path / 't.jsonl')
    with open(tmp_path / 't.jsonl', 'a') as f: f.write('{"steps": "oops"}\n')
    ids = {'grpo': lambda r: r['trajectory_ids'], 'benchmark': lambda r: [None] * r['n_attempts']}
    for fmt in ('sft', 'sft-agent', 'openai', 'grpo', 'benchmark'):
        res = DatasetExporter(tmp_path / 't.jsonl').export(fmt, tmp_path / fmt)
        rows = [json.loads(l) for p in res.paths.values() for l in open(p)]
        in_rows = sum(len(ids.get(fmt, lambda r: [r])(r)) for r in rows)
        assert (res.read, res.quarantined) == (12, 1), fmt
        assert in_rows + sum(res.skipped.values()) + res.quarantined == 13, (fmt, in_rows, res.skipped)
    assert res.skipped == {} and DatasetExporter(tmp_path / 't.jsonl').export('grpo', tmp_path / 'g').skipped == {
        'group_too_small': 2, 'over_group_size': 2}


def test_an_sft_export_with_verified_failures_says_how_many_rows_come_from_them(tmp_path):
    "misc1: `knowlyr-hub export -f sft` without --success-only wrote 78 failures of 400 rows into the SFT data, silently"
    import contextlib
    import io
    import re
    import warnings

    from knowlyr_lab.cli.hub import main
    tasks = MazeEnv('easy').list_tasks()[:4]
    trajs = (collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, seed=0, progress=False)
             + collect('knowlyr/maze-easy', RandomAgent, tasks=tasks, seed=1, max_episode_steps=3, progress=False))
    write_trajectories(trajs, tmp_path / 't.jsonl')
    failed = sum(t.outcome.success is False for t in trajs)
    assert 0 < failed < len(trajs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        res = DatasetExporter(tmp_path / 't.jsonl').export('sft', tmp_path / 'api')
    rows = [json.loads(line) for line in open(res.paths['train'])]
    assert (res.total, res.rows_from_failures) == (len(rows), failed)          # the default rows are unchanged: all
    assert [str(w.message) for w in caught] == [f"{failed} of the {len(rows)} sft rows come from verified failures "
                                                "(outcome.success is False); --success-only (success_only=True) keeps successes only"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(['export', '-f', 'sft', '-t', str(tmp_path / 't.jsonl'), '-o', str(tmp_path / 'cli')])
    said = [line for line in err.getvalue().splitlines() if 'verified failures' in line]
    assert rc == 0 and json.loads(out.getvalue())['rows_from_failures'] == failed, err.getvalue()
    assert len(said) == 1 and said[0].startswith('warning: ') and '--success-only' in said[0], err.getvalue()
    assert int(re.search(r'warning: (\d+) of', said[0]).group(1)) == failed and 'verified failures' not in out.getvalue()
    only = DatasetExporter(tmp_path / 't.jsonl', success_only=True).export('sft', tmp_path / 'ok')
    assert (only.total, only.rows_from_failures) == (len(rows) - failed, 0)

"Every export loads with datasets.load_dataset in the shape its consumer documents; TRL prepares the SFT and DPO data"
import copy, json, pytest
from pathlib import Path
import datasets
from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.core import parse_action
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.hub.collect import collect
from knowlyr_lab.hub.export import DatasetExporter, FORMATS
from knowlyr_lab.trajectory import write_trajectories

@pytest.fixture(scope='module')
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp('export')
    tasks = MazeEnv('easy').list_tasks()[:8]
    good = collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, seed=0, progress=False)
    bad = collect('knowlyr/maze-easy', RandomAgent, tasks=tasks * 2, seed=1, max_steps=5, progress=False)
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
    from trl import SFTConfig, SFTTrainer, DPOConfig, DPOTrainer
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

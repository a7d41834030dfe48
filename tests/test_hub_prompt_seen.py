"""Every export format's prompt is what the model saw at reset (the task's initial observation: arith's expression),
and the trainer's loaders put it in the tokens they train on"""
import json

import pyarrow.parquet as pq
import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.hub.export import FORMATS, DatasetExporter
from knowlyr_lab.registry import make
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.trainer.data import to_chat, tokenize_chat
from knowlyr_lab.trainer.dpo import tokenize_pair
from knowlyr_lab.trainer.tiny import train_tokenizer
from knowlyr_lab.trajectory_io import write_trajectories

ROW_FORMATS = [f for f in FORMATS if f != 'hf']          # hf holds the sft rows


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    d = tmp_path_factory.mktemp('seen')
    env = make('knowlyr/arith-easy')
    try: tasks = env.list_tasks()[:3]
    finally: env.close()
    good = collect('knowlyr/arith-easy', ExpertAgent, tasks=tasks, seed=0, progress=False)
    bad = collect('knowlyr/arith-easy', RandomAgent, tasks=tasks, seed=1, max_episode_steps=3, progress=False)
    write_trajectories(good + bad, d / 'trajs.jsonl')
    seen = {t.task.initial_observation for t in good}
    # the instruction alone does not hold the expression: a prompt built from it shows the model no numbers
    assert all('Expression:' in o for o in seen) and not any('Expression:' in t.task.instruction for t in good)
    ex = DatasetExporter(d / 'trajs.jsonl')
    return seen, {f: _rows(ex.export(f, d / f).paths['train']) for f in ROW_FORMATS}

def _rows(path):
    if path.endswith('.parquet'): return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in open(path)]

def _user_turn(msgs):
    return next(m['content'] for m in msgs if m['role'] == 'user')

PROMPT = {'sft': lambda r: _user_turn(r['messages']), 'openai': lambda r: _user_turn(r['messages']),
          'sft-agent': lambda r: r['instruction'] + r['input'],
          'dpo': lambda r: _user_turn(r['prompt']), 'dpo-seed': lambda r: r['prompt'],
          'grpo': lambda r: _user_turn(r['prompt']), 'benchmark': lambda r: _user_turn(r['prompt']),
          'verl': lambda r: _user_turn(r['prompt']), 'skyrl': lambda r: _user_turn(r['prompt'])}

def test_every_format_is_checked():
    assert set(PROMPT) == set(ROW_FORMATS)

@pytest.mark.parametrize('fmt', ROW_FORMATS)
def test_the_prompt_is_the_initial_observation(exported, fmt):
    seen, rows = exported
    assert rows[fmt], fmt
    for row in rows[fmt]: assert PROMPT[fmt](row) in seen, (fmt, PROMPT[fmt](row))

@pytest.fixture(scope='module')
def tok(exported):
    return train_tokenizer(sorted(exported[0]))

@pytest.mark.parametrize('fmt', ['sft', 'sft-agent', 'openai'])
def test_the_trainer_trains_on_the_prompt_the_model_saw(exported, tok, fmt):
    seen, rows = exported
    for i, row in enumerate(rows[fmt]):
        chat = to_chat(row, f"{fmt}:{i}")
        assert _user_turn(chat['messages']) in seen
        text = tok.decode(tokenize_chat(tok, chat)['input_ids'])
        assert any(o in text for o in seen), (fmt, text[:300])

@pytest.mark.parametrize('fmt', ['dpo', 'dpo-seed'])
def test_the_dpo_trainer_shows_both_sides_the_prompt_the_model_saw(exported, tok, fmt):
    seen, rows = exported
    for i, row in enumerate(rows[fmt]):
        pair = tokenize_pair(tok, row, f"{fmt}:{i}")
        for side in ('chosen', 'rejected'):
            text = tok.decode(pair[side]['input_ids'])
            assert any(o in text for o in seen), (fmt, side, text[:300])

"""Offline GRPO groups read from records (review21): a group record's per-completion fields must each list one value
per completion, a missing field is named with the record's place, and (further below) what is trained and how members
are grouped. No model is trained: the checks stop at the groups and their token rows."""
import hashlib
import json
import tempfile
from types import SimpleNamespace

import pytest

from knowlyr_lab.trainer.grpo_groups import groups_from_records


def test_a_group_record_refuses_step_rewards_for_fewer_completions(tmp_path):
    "4 completions with 2 step_rewards lists were zipped into a group of 2, silently"
    rec = {'prompt': 'task', 'completions': ['a', 'b', 'c', 'd'], 'rewards': [1.0, 0.0, 1.0, 0.0],
           'step_rewards': [[1.0], [0.0]]}
    p = tmp_path / 'groups.jsonl'
    p.write_text(json.dumps(rec) + '\n')
    errs = []
    assert groups_from_records(str(p), errors=errs) == []
    assert errs == [{'where': f'{p}:1', 'error': f"{p}:1: field 'step_rewards' must list one list of step rewards per "
                                                 "completion (2 values for 4 completions)"}]
    ok = groups_from_records([{**rec, 'step_rewards': [[1.0], [0.0], [1.0], [0.0]]}])
    assert [len(g) for g in ok] == [4] and [m['step_rewards'] for m in ok[0]] == [[1.0], [0.0], [1.0], [0.0]]


def test_a_group_record_without_prompt_names_the_field(tmp_path):
    p = tmp_path / 'groups.jsonl'
    p.write_text(json.dumps({'completions': ['a', 'b'], 'rewards': [1, 0]}) + '\n')
    errs = []
    groups_from_records(str(p), errors=errs)
    assert errs == [{'where': f'{p}:1', 'error': f"{p}:1: field 'prompt' is missing"}]
    with pytest.raises(Exception, match="record\\[0\\]: field 'completions' must be a non-empty list"):
        groups_from_records([{'prompt': 'task', 'completions': [], 'rewards': []}])


def test_chat_records_without_task_id_are_grouped_by_their_prompt():
    "messages records without task_id all fell into one group (task id ''), across unrelated prompts"
    def qa(q, a, r): return {'messages': [{'role': 'user', 'content': q}, {'role': 'assistant', 'content': a}], 'reward': r}
    recs = [qa('What is 2+2?', '4', 1.0), qa('Capital of France?', 'Paris', 1.0), qa('What is 2+2?', '5', 0.0),
            {**qa('Spell cat', 'dog', 0.0), 'task_id': 'spell'}]
    gs = groups_from_records(recs)
    assert sorted([m['messages'][-1]['content'] for m in g] for g in gs) == [['4', '5'], ['Paris'], ['dog']]
    ids = {m['messages'][-1]['content']: m['task_id'] for g in gs for m in g}
    # the id the recording proxy gives a conversation recorded without a task header (serving.recording's
    # `'prompt-' + _prefix_hashes(prompt)[-1][:12]`): one group with such trajectories
    key = json.dumps(['user', 'What is 2+2?', []], sort_keys=True, ensure_ascii=False).encode() + b'\x00'
    assert ids['4'] == ids['5'] == 'prompt-' + hashlib.sha1(key).hexdigest()[:12]
    assert ids['dog'] == 'spell'


def test_a_group_records_prompt_trains_nothing_and_step_rewards_count_the_completion():
    "An assistant turn in a group record's prompt was labelled in every member, with that member's advantage"
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors
    from knowlyr_lab.trainer.tiny import train_tokenizer
    tok = train_tokenizer()
    stand_in = SimpleNamespace(config=GRPOConfig(output_dir=tempfile.mkdtemp(), step_level_advantage=True),
                               tokenizer=tok, chat_format=None)
    prompt = [{'role': 'user', 'content': 'Solve it'}, {'role': 'assistant', 'content': 'PROMPTASSISTANT earlier turn'},
              {'role': 'user', 'content': 'Now finish'}]
    rec = {'prompt': prompt, 'completions': ['COMPLETION good', 'COMPLETION bad'], 'rewards': [1.0, 0.0],
           'step_rewards': [[1.0], [0.0]]}                    # one per completion turn: the prompt's turn has none
    [g] = groups_from_records([rec], tokenizer=tok)
    assert [m['step_rewards'] for m in g] == [[1.0], [0.0]]
    b, A, _, _ = group_tensors(stand_in, g, 2)
    trained = [tok.decode([i for i, l in zip(ids, lab) if l != -100]) for ids, lab in zip(b['input_ids'].tolist(),
                                                                                          b['labels'].tolist())]
    assert [t.replace('<|im_end|>', '') for t in trained] == ['COMPLETION good', 'COMPLETION bad']
    scored = b['labels'][:, 1:] != -100
    assert (A[0][scored[0]] > 0).all() and (A[1][scored[1]] < 0).all()   # the completion's own step reward
    with pytest.raises(Exception, match="record\\[0\\]: field 'step_rewards' has 2 values for a completion's 1 "):
        groups_from_records([{**rec, 'step_rewards': [[0.0, 1.0], [0.0, 0.0]]}])


def test_an_exported_groups_advantages_are_the_ones_the_trainer_trains_with():
    "hub/rows.py wrote population std + 1e-6 (+-1.0 for rewards 1, 0, 0, 1), the trainer Bessel std + 1e-4 (+-0.866)"
    import torch

    from knowlyr_lab.hub.rows import grpo_row
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors
    from knowlyr_lab.trainer.losses import grpo_advantages
    from knowlyr_lab.trainer.tiny import train_tokenizer
    members = [{'task_id': 't', 'prompt': [{'role': 'user', 'content': 'go'}], 'completion': f'move {k}', 'score': s,
                'trajectory_id': f'{k}'} for k, s in enumerate([1.0, 0.0, 0.0, 1.0])]
    row = grpo_row(members, [], group_size=4)
    assert row['advantages'] == pytest.approx([0.866, 0.866, -0.866, -0.866], abs=1e-3)   # TRL's convention
    stand_in = SimpleNamespace(config=GRPOConfig(output_dir=tempfile.mkdtemp()), tokenizer=train_tokenizer(),
                               chat_format=None)
    [g] = groups_from_records([row])
    _, A, _, _ = group_tensors(stand_in, g, 4)
    assert A[:, 0].tolist() == pytest.approx(row['advantages'], rel=1e-6)
    torch.testing.assert_close(grpo_advantages(torch.tensor(row['rewards']), 4), torch.tensor(row['advantages']))

"""How many optimiser steps GRPO takes and what a step is normalised by (review21): an online run makes max_steps
steps; with loss_type grpo or dr_grpo a batch's invalid members add nothing, not even to the normaliser, and a member
split into several rows counts once. Tiny models, one step each."""
import tempfile

import pytest

from knowlyr_lab.trainer.grpo import GRPOConfig, GRPOTrainer
from knowlyr_lab.trainer.tiny import make_tiny_model


@pytest.mark.parametrize('max_steps,num_iterations,updates', [(5, 2, [2, 2, 1]), (7, 3, [3, 3, 1]), (1, 2, [1]),
                                                              (6, 3, [3, 3]), (20, 1, [1] * 20)])
def test_online_grpo_plans_max_steps_optimiser_steps(max_steps, num_iterations, updates):
    "online GRPO planned (max_steps // num_iterations) * num_iterations steps (4 for 5 and 2; 2 for 1 and 2)"
    model, tok = make_tiny_model(hidden_size=32)
    tr = GRPOTrainer(GRPOConfig(output_dir=tempfile.mkdtemp(), max_steps=max_steps, num_iterations=num_iterations,
                                gradient_accumulation_steps=2, progress_bar=False), model, tok)
    tr.groups = None                                     # online, as `train` sets it
    steps = [s for ep in tr._steps_plan() for s in ep]
    assert len(steps) == max_steps
    keys = [s[0][0] for s in steps]                      # each step's batch: updates of num_iterations steps, the last shorter
    assert [keys.count(k) for k in dict.fromkeys(keys)] == updates
    assert all(len(s) == 2 and len({m[0] for m in s}) == 1 for s in steps)   # 2 micro-batches of one batch per step


def one_offline_step(recs, loss_type):
    "The log row of one offline GRPO step on `recs` (two groups, one batch, two micro-batches), in float64"
    model, tok = make_tiny_model(hidden_size=64, seed=0)
    cfg = GRPOConfig(output_dir=tempfile.mkdtemp(), model_dtype='auto', mixed_precision='no', progress_bar=False,
                     tasks_per_step=2, gradient_accumulation_steps=2, loss_type=loss_type, max_steps=1, seed=0)
    [row] = GRPOTrainer(cfg, model.double(), tok).train_offline(recs)
    return row


@pytest.mark.parametrize('loss_type', ['grpo', 'dr_grpo', 'dapo'])
def test_invalid_members_add_nothing_to_a_grpo_step_not_even_its_normaliser(loss_type):
    "grpo and dr_grpo divided by every row: 2 invalid of 8 made the gradient 0.75x that of the batch without them"
    full = [{'prompt': f'task {t}', 'completions': [f'answer {t} ' + 'y' * k for k in range(4)],
             'rewards': [1.0, 0.0, 0.5, 0.0], 'valid': [True, True, True, False]} for t in range(2)]
    without = [{'prompt': r['prompt'], 'completions': r['completions'][:3], 'rewards': r['rewards'][:3]} for r in full]
    a, b = one_offline_step(full, loss_type), one_offline_step(without, loss_type)
    assert a['n_invalid'] == 2 and b['n_invalid'] == 0
    assert a['grad_norm'] > 0 and a['grad_norm'] == pytest.approx(b['grad_norm'], rel=1e-9)
    assert a['loss'] == pytest.approx(b['loss'], rel=1e-9, abs=1e-12)


def test_a_member_split_over_rows_counts_once_in_the_grpo_normaliser():
    "a recorded member split at a drift gives several rows: it counted as several sequences"
    from knowlyr_lab.trainer.data import to_chat, tokenize_chats
    from knowlyr_lab.trainer.grpo_groups import groups_from_records
    model, tok = make_tiny_model(hidden_size=32, seed=0)
    tr = GRPOTrainer(GRPOConfig(output_dir=tempfile.mkdtemp(), progress_bar=False, tasks_per_step=1, loss_type='grpo',
                                gradient_accumulation_steps=2, mixed_precision='no'), model, tok)
    [g] = groups_from_records([{'prompt': 'go', 'completions': ['east', 'west', 'north'], 'rewards': [1, 0, 1],
                                'valid': [True, True, False]}])
    parts = tokenize_chats(tok, [to_chat({'messages': [{'role': 'user', 'content': 'go'},
                                                        {'role': 'assistant', 'content': a}]}) for a in ('south', 'up')])
    split = {'samples': parts, 'reward': 0.5, 'task_id': '', 'step_rewards': [], 'valid': True}   # as `_recorded_member`
    tr.groups, tr.epochs = [g + [split]], 1
    specs = tr._steps_plan()[0][0]
    mbs = [tr.micro_batch(s) for s in specs]
    assert sum(len(b['input_ids']) for b in mbs) == 5                   # 3 + 2 rows
    assert sum(b['weight'] * b['count'] for b in mbs) == pytest.approx(3.0)   # 3 valid members
    lens = {int(t) for b in mbs for t, s in zip(b['seq_tokens'], b['share']) if s == 0.5}
    assert lens == {sum(sum(l != -100 for l in p['labels'][1:]) for p in parts)}   # the split member's whole length

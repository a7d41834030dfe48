"""GRPO offline: a row whose reward is NaN or inf is quarantined with a reason that names the row and the field where
the record holds the value, and the other groups train (the online side, rollouts whose reward comes back NaN, is
tested on page 66). Tiny model, one step each."""
import json
import math

import pytest

from knowlyr_lab.trainer.grpo import GRPOConfig, GRPOTrainer
from knowlyr_lab.trainer.tiny import make_tiny_model


def _recorded(id:str, task:str, reward:float, step_reward:float=0.0):
    "A trajectory whose two steps carry the prompt and completion ids a recording proxy captured"
    from knowlyr_lab.trainer.data import Trajectory
    return Trajectory.model_validate({'id': id, 'task': {'id': task}, 'reward': reward, 'steps': [
        {'index': 0, 'thought': 'go', 'reward': step_reward, 'prompt_token_ids': [5, 6, 7, 8], 'token_ids': [9, 10, 11]},
        {'index': 1, 'thought': 'done', 'reward': 1.0, 'prompt_token_ids': [5, 6, 7, 8, 9, 10, 11, 12],
         'token_ids': [13, 14]}]})


def _train_offline(tmp_path, data, **kw):
    "One offline GRPO step on `data`; the trainer and its rows"
    model, tok = make_tiny_model(hidden_size=32, seed=0)
    tr = GRPOTrainer(GRPOConfig(output_dir=str(tmp_path), progress_bar=False, tasks_per_step=2, max_steps=1,
                                max_length=512, **kw), model, tok)
    with pytest.warns(UserWarning, match='could not be used'): rows = tr.train_offline(data)
    return tr, rows


def _quarantined(tmp_path)->list[dict]:
    return [json.loads(line) for line in (tmp_path / 'quarantine.jsonl').read_text().splitlines()]


@pytest.mark.parametrize('recorded_ids', ['split', 'rerender'])
@pytest.mark.parametrize('bad, field', [({'reward': float('nan')}, 'reward'), ({'reward': -float('inf')}, 'reward'),
                                        ({'reward': 1.0, 'step_reward': float('inf')}, 'steps[0].reward')])
def test_a_recorded_row_whose_reward_is_not_finite_is_quarantined_and_the_other_groups_train(
        tmp_path, recorded_ids, bad, field):
    "No test took a recorded row (recorded ids) with a NaN reward through GRPO's offline reading"
    data = [_recorded('a1', 'task-a', 1.0), _recorded('a2', 'task-a', 0.0), _recorded('b1', 'task-b', **bad),
            _recorded('b2', 'task-b', 1.0), _recorded('b3', 'task-b', 0.0)]
    tr, [row] = _train_offline(tmp_path, data, recorded_ids=recorded_ids)
    assert [e['where'] for e in tr.errors] == ['record[2]'], tr.errors
    assert f"field '{field}' must be a finite number" in tr.errors[0]['error'], tr.errors
    assert _quarantined(tmp_path) == tr.errors
    assert sorted(len(g) for g in tr.groups) == [2, 2]                   # task-b trains on its two other members
    assert row['groups_with_signal'] == 2 and math.isfinite(row['loss']) and row['grad_norm'] > 0, row


@pytest.mark.parametrize('rec, field, got', [
    ({'rewards': [1.0, float('nan')]}, 'rewards[1]', 'nan'),
    ({'rewards': [1.0, 0.0], 'step_rewards': [[0.5], [float('inf')]]}, 'step_rewards[1][0]', 'inf'),
    ({'prompt': [{'role': 'user', 'content': 'Go'}, {'role': 'assistant', 'content': 'north'},
                 {'role': 'user', 'content': 'Now east'}], 'rewards': [1.0, 0.0],
      'step_rewards': [[-float('inf')], [0.0]]}, 'step_rewards[0][0]', '-inf')])
def test_a_group_record_with_a_nonfinite_reward_is_quarantined_naming_the_line_and_the_value_place(
        tmp_path, rec, field, got):
    "A NaN in 'rewards' was named field 'reward', and a step reward by its index counted from the prompt's turns"
    path = tmp_path / 'groups.jsonl'
    good = {'prompt': 'Go west.', 'completions': ['west', 'east'], 'rewards': [1.0, 0.0]}
    path.write_text('\n'.join(json.dumps(r) for r in [good, {'prompt': 'Go east.', 'completions': ['east', 'west'],
                                                              **rec}]) + '\n')   # json writes NaN and Infinity
    tr, [row] = _train_offline(tmp_path / 'run', str(path))
    assert tr.errors == [{'where': f'{path}:2',
                          'error': f"{path}:2: field '{field}' must be a finite number, got '{got}'"}], tr.errors
    assert _quarantined(tmp_path / 'run') == tr.errors
    assert row['groups_with_signal'] == 1 and math.isfinite(row['loss']), row

"What SFT and DPO make of their records: every label trained once, orders that do not depend on the file, errors that name the field"
import pytest

from knowlyr_lab.trainer.data import chunk_sample, tokenize_chat
from knowlyr_lab.trainer.tiny import train_tokenizer


@pytest.fixture(scope='module')
def tok(): return train_tokenizer()

def _chat(n_steps:int)->dict:
    msgs = [{'role': 'system', 'content': 'SYS prompt here'}, {'role': 'user', 'content': 'USER task text'}]
    for k in range(n_steps):
        msgs += [{'role': 'assistant', 'content': f'step {k} reply ' + 'x' * (5 * k)}, {'role': 'user', 'content': f'obs {k}'}]
    return {'messages': msgs}

@pytest.mark.parametrize('max_length', [60, 90, 150])
def test_chunks_of_an_unmasked_chat_train_its_prompt_once(tok, max_length):
    "mask_observations=False labels the prompt: the chunks train it once, not once per chunk (334 labels became 549)"
    s = tokenize_chat(tok, _chat(6), mask_observations=False)
    chunks = chunk_sample(s, max_length, 1)
    assert len(chunks) > 1
    labelled = [sum(l != -100 for l in c['labels'][1:]) for c in chunks]
    assert sum(labelled) == sum(l != -100 for l in s['labels'][1:]), labelled
    pre = s['step_starts'][0]
    assert all(l == -100 for c in chunks[1:] for l in c['labels'][:pre])
    assert chunks[0]['labels'][:pre] == s['labels'][:pre]

def test_curriculum_difficulty_does_not_depend_on_file_order():
    "Tied records share their average rank: 10 identical records were 0, 0.11, ..., 1 and epoch 0 always trained records 0-2"
    from knowlyr_lab.trainer.curriculum import curriculum_indices, difficulty
    assert difficulty([{'n_steps': 3, 'reward': 1.0}] * 10) == [0.5] * 10
    recs = [{'n_steps': n, 'reward': 1.0} for n in (2, 2, 2, 3, 3, 3)]
    assert difficulty(recs[::-1]) == difficulty(recs)[::-1]
    assert max(difficulty(recs)[:3]) < min(difficulty(recs)[3:])   # every 2-step record easier than every 3-step one
    ten = [{'n_steps': 3, 'reward': 1.0}] * 10
    firsts = {tuple(sorted(curriculum_indices(ten, 0, 0.3, 2, seed=s))) for s in range(5)}
    assert len(firsts) > 1, firsts                                   # the seed, not the file, picks among ties
    for s in range(5):                                               # each epoch's records include the previous epoch's
        sets = [set(curriculum_indices(ten, e, 0.3, 2, seed=s)) for e in range(3)]
        assert sets[0] <= sets[1] <= sets[2] and len(sets[2]) == 10

@pytest.mark.parametrize('bad, field', [({'tools': '[not json'}, 'tools'),
                                        ({'ref_chosen_logps': 'abc', 'ref_rejected_logps': -1.0}, 'ref_chosen_logps'),
                                        ({'ref_chosen_logps': -1.0, 'ref_rejected_logps': float('inf')}, 'ref_rejected_logps')])
def test_a_dpo_pair_refusal_names_the_record_and_the_field(tok, bad, field):
    "A pair whose tools are not JSON, or whose reference log-prob is not a number, is refused naming the field (as SFT's)"
    from knowlyr_lab.trainer.data import DataFormatError, to_chat
    from knowlyr_lab.trainer.dpo import tokenize_pair
    with pytest.raises(DataFormatError, match=f"^pairs.jsonl:7: field '{field}' "):
        tokenize_pair(tok, {'prompt': 'hi', 'chosen': 'a', 'rejected': 'b', **bad}, 'pairs.jsonl:7')
    if field == 'tools':                                            # the same words as SFT's for the same field
        with pytest.raises(DataFormatError) as sft:
            to_chat({'messages': [{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': 'a'}], **bad}, 'pairs.jsonl:7')
        with pytest.raises(DataFormatError) as dpo: tokenize_pair(tok, {'prompt': 'hi', 'chosen': 'a', 'rejected': 'b', **bad}, 'pairs.jsonl:7')
        assert str(sft.value) == str(dpo.value)

def _rewarded_chat(k:int, step_rewards:list)->dict:
    "A two-step chat whose steps differ in length, with the given step rewards"
    return {'messages': [{'role': 'system', 'content': 'You are a maze agent.'}, {'role': 'user', 'content': f'Go to the goal {k}.'},
                         {'role': 'assistant', 'content': 'east ' * (k + 1)}, {'role': 'tool', 'content': f'You are at row {k}, col 1.'},
                         {'role': 'assistant', 'content': 'Done' + ' ok' * (3 * k + 5)}], 'step_rewards': step_rewards}

def test_step_weights_average_one_over_the_assistant_tokens(tok):
    "The page's claim holds per token: maze-easy's [0,0,0,0,1] gave a mean token weight of 0.92, so the loss sum shrank"
    from knowlyr_lab.trainer.data import to_chat
    from knowlyr_lab.trainer.sft import oracle_trajectories
    chats = [to_chat(oracle_trajectories('knowlyr/maze-easy', [0])[0]), _rewarded_chat(2, [0.2, 1.0])]
    for ch in chats:
        s = tokenize_chat(tok, ch, step_weighted_loss=True)
        w = [w for w, l in zip(s['weights'][1:], s['labels'][1:]) if l != -100]
        assert abs(sum(w) / len(w) - 1) < 1e-9, (ch['step_rewards'], sum(w) / len(w))
        by_step = {k: w for w, k in zip(s['weights'], s['step']) if k >= 0}
        r = ch['step_rewards']
        assert all(abs(by_step[j] * r[-1] - by_step[len(r) - 1] * r[j]) < 1e-9 for j in range(len(r)))   # w_j proportional to r_j

@pytest.mark.parametrize('packing', [True, False])
def test_sft_eval_loss_is_unweighted_and_outcome_only_rewards_warn_once(packing, recwarn, tmp_path):
    "evaluate weighted too, so eval_loss did not compare across runs with and without step_weighted_loss; outcome-only chats were silent"
    import warnings

    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    from knowlyr_lab.trainer.tiny import make_tiny_model
    model, tiny_tok = make_tiny_model(hidden_size=32)
    train = [_rewarded_chat(0, [0.2, 1.0]), _rewarded_chat(1, [0.0, 1.0]), _rewarded_chat(2, [0.0, 1.0])]
    evals = [_rewarded_chat(3, [0.1, 1.0]), _rewarded_chat(4, [0.5, 0.2])]
    warnings.simplefilter('always')
    runs = {sw: SFTTrainer(SFTConfig(output_dir=str(tmp_path / str(sw)), step_weighted_loss=sw, packing=packing, progress_bar=False, max_length=512),
                           model, tiny_tok, train_data=train, eval_data=evals) for sw in (True, False)}
    said = [str(w.message) for w in recwarn if 'outcome-only' in str(w.message)]
    assert said == ['step_weighted_loss: 2 of 3 chats have outcome-only step rewards (only the last step non-zero): their '
                    'other steps weigh 0; 0 of 3 training pieces (chunks, or samples cut at max_length, holding only steps '
                    "of reward 0) weigh 0 throughout and train nothing, though their label tokens still count in the loss's "
                    'token count'], said
    assert abs(runs[True].evaluate() - runs[False].evaluate()) < 1e-6
    w = runs[True].eval_samples[0]['weights']
    assert len(set(w)) > 1                                           # the eval samples do carry step weights

@pytest.mark.parametrize('bad', [float('nan'), float('inf'), 'abc'])
def test_a_reward_that_is_not_a_finite_number_is_refused_naming_the_record(tok, bad):
    "One NaN reward made every curriculum difficulty NaN (rankdata), and the curriculum fell back to the file's order"
    import json

    from knowlyr_lab.trainer.data import DataFormatError, to_chat
    from knowlyr_lab.trainer.sft import build_chats
    rec = {'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'a'}], 'reward': bad}
    with pytest.raises(DataFormatError, match="^sft.jsonl:4: field 'reward' must be a finite number"):
        to_chat(json.loads(json.dumps(rec)), 'sft.jsonl:4')                   # Python's json reads NaN and Infinity
    good = [('sft.jsonl:1', {**rec, 'reward': 1.0}), ('sft.jsonl:4', rec)]
    chats, errors = build_chats(good, None, None)
    assert [c['where'] for c in chats] == ['sft.jsonl:1'] and [e['where'] for e in errors] == ['sft.jsonl:4'], errors

def test_records_of_equal_difficulty_through_other_rank_pairs_tie_exactly():
    "(a + b) / 2 of two ranks scaled to [0, 1] gave 2/5 as 0.39999999999999997 for one record and 0.4 for three"
    from knowlyr_lab.trainer.curriculum import curriculum_indices, difficulty
    pairs = [(1, 7), (3, 5), (2, 6), (4, 4)]                          # (length rank, reward rank): each sums to 8 of 11
    rest_l = [i for i in range(11) if i not in {a for a, _ in pairs}]
    rest_r = [i for i in range(11) if i not in {b for _, b in pairs}]
    recs = [{'n_steps': a, 'reward': -b} for a, b in pairs + list(zip(rest_l, rest_r))]
    d = difficulty(recs)
    assert d[:4] == [0.4] * 4, d[:4]
    tied = {i for i, x in enumerate(d) if x == 0.4}                   # and one more record of the rest
    assert len(tied) == 5 and sorted(d)[:2] == [0.0, 0.3], d
    picks = [set(curriculum_indices(recs, 0, 0.3, 2, seed=s)) - tied for s in range(12)]   # epoch 0 keeps 4 of 11
    assert all(len(p) == 2 for p in picks)                           # the two easiest, and two of the tied five
    got = set().union(*(set(curriculum_indices(recs, 0, 0.3, 2, seed=s)) & tied for s in range(12)))
    assert got == tied, got                                          # the seed, not the rounding, picks among them

@pytest.mark.parametrize('tools', ['5', '{"a": 1}', '"x"', 7, [1, 2]])
def test_tools_that_are_not_a_list_of_objects_are_refused_naming_the_field(tok, tools):
    "tools '5' or '{\"a\": 1}' parse as JSON but failed deep in the chat template with a bare TypeError/ValueError"
    from knowlyr_lab.trainer.data import DataFormatError, to_chat
    from knowlyr_lab.trainer.dpo import tokenize_pair
    msg = "^sft.jsonl:4: field 'tools' must be a list of objects"
    with pytest.raises(DataFormatError, match=msg):
        to_chat({'messages': [{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': 'a'}], 'tools': tools}, 'sft.jsonl:4')
    with pytest.raises(DataFormatError, match=msg):
        tokenize_pair(tok, {'prompt': 'hi', 'chosen': 'a', 'rejected': 'b', 'tools': tools}, 'sft.jsonl:4')

def test_step_weights_docstring_lists_the_uniform_case_of_a_zero_token_mean():
    "step_weights([1, 0], [0, 5]) is [1, 1] (token-weighted mean 0), which the docstring did not list among uniform cases"
    from knowlyr_lab.trainer.step_weights import step_weights
    assert step_weights([1, 0], [0, 5]) == [1.0, 1.0]
    assert 'mean is 0' in step_weights.__doc__, step_weights.__doc__

def test_the_drift_page_builds_a_recorded_trajectorys_step_rewards_in_one_place():
    "recorded_samples built the step-reward list twice and _rerendered a third time (review26 item 7): now page 61's finite_step_rewards, as to_chat's"
    import inspect

    import knowlyr_lab.trainer.data as data
    import knowlyr_lab.trainer.drift as drift
    assert 's.reward' not in inspect.getsource(drift) and drift.finite_step_rewards is data.finite_step_rewards
    assert inspect.getsource(drift).count('finite_step_rewards(t.steps, where, t.id)') == 2   # recorded_samples, _rerendered

def test_page_65_says_dpo_tools_fall_back_and_how_to_keep_reference_logps_without_tools(tok):
    "Since a1fbe45 tools '[]'/'null' take the trainer's tools; page 65 did not say so, nor the fix for precomputed ref log-probs"
    import json
    from pathlib import Path

    from knowlyr_lab.trainer.dpo import tokenize_pair
    T = [{'type': 'function', 'function': {'name': 'move', 'description': 'd', 'parameters': {'type': 'object', 'properties': {}}}}]
    pair = {'prompt': [{'role': 'user', 'content': 'hi'}], 'chosen': 'a', 'rejected': 'b'}
    bare = tokenize_pair(tok, pair, 'p', tools=None)['chosen']['input_ids']
    for tv in ('[]', 'null', []):                                    # the trainer's tools, as SFT
        assert tokenize_pair(tok, {**pair, 'tools': tv}, 'p', tools=T)['chosen']['input_ids'] != bare
        assert tokenize_pair(tok, {**pair, 'tools': tv}, 'p', tools=[])['chosen']['input_ids'] == bare   # the fix the page names
    nb = json.loads((Path(__file__).resolve().parents[1] / 'nbs' / '65_trainer_dpo.ipynb').read_text())
    prose = ' '.join(''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'markdown').replace('\n', ' ')
    assert '`"[]"`, `"null"`' in prose and 'pass `tools=[]`' in prose


@pytest.mark.parametrize('chunk', [True, False])
def test_the_outcome_only_warning_counts_the_pieces_that_weigh_zero(chunk, recwarn, tmp_path):
    "Chunks or max_length cuts without the last step weigh 0 but count in the denominator; the warning said 'last step alone'"
    import warnings

    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    from knowlyr_lab.trainer.tiny import make_tiny_model
    model, tiny_tok = make_tiny_model(hidden_size=32)
    warnings.simplefilter('always')
    t = SFTTrainer(SFTConfig(output_dir=str(tmp_path), step_weighted_loss=True, progress_bar=False, max_length=90,
                             chunk_long_trajectories=chunk), model, tiny_tok,
                   train_data=[{**_chat(6), 'step_rewards': [0, 0, 0, 0, 0, 1]}])
    zero = sum(not any(w for w, l in zip(s['weights'][1:], s['labels'][1:]) if l != -100) for s in t.samples)
    assert zero == (len(t.samples) - 1 if chunk else 1) and zero >= 1, [s.get('chunk') for s in t.samples]
    said = [str(w.message) for w in recwarn if 'outcome-only' in str(w.message)]
    assert len(said) == 1 and f'{zero} of {len(t.samples)} training pieces' in said[0] and 'train nothing' in said[0], said

def _traj(step_reward, id='traj-7'):
    from knowlyr_lab.trainer.data import Trajectory  # the schema's class, as page 61 reads it
    return Trajectory.model_validate({'id': id, 'task': {'id': 'maze'}, 'reward': 1.0, 'steps': [
        {'index': 0, 'thought': 'look', 'reward': 0.5}, {'index': 1, 'thought': 'east', 'reward': step_reward}]})

@pytest.mark.parametrize('bad', [float('nan'), float('inf'), -float('inf')])
def test_a_trajectorys_step_reward_that_is_not_finite_is_refused_naming_the_trajectory_step_and_field(tok, bad):
    "The schema takes a NaN step reward; to_chat passed it on and step_weights made every weight of the chat NaN"
    import math

    from knowlyr_lab.trainer.data import DataFormatError, to_chat
    from knowlyr_lab.trainer.sft import build_chats
    assert not math.isfinite(_traj(bad).steps[1].reward)              # Step/Trajectory validation lets it through
    with pytest.raises(DataFormatError, match=r"^record\[3\]: trajectory traj-7: field 'steps\[1\]\.reward' must be a finite number, got '-?(nan|inf)'$"):
        to_chat(_traj(bad), 'record[3]')
    with pytest.raises(DataFormatError, match=r"^store#traj-7: field 'steps\[1\]\.reward' "):   # the id named once
        to_chat(_traj(bad), 'store#traj-7')
    chats, errors = build_chats([_traj(1.0, 'good-1'), _traj(bad), _traj(0.0, 'good-2')])
    assert [c['task_id'] for c in chats] == ['maze', 'maze'] and [c['step_rewards'] for c in chats] == [[0.5, 1.0], [0.5, 0.0]]
    assert [e['where'] for e in errors] == ['record[1]'] and "'steps[1].reward'" in errors[0]['error'], errors

@pytest.mark.parametrize('bad', [float('nan'), float('inf'), 'abc'])
def test_a_seed_records_step_reward_that_is_not_finite_is_refused_naming_the_step(tok, bad):
    "A seed record's step reward went through float() unchecked: NaN reached the loss, 'abc' failed naming no field"
    import json

    from knowlyr_lab.trainer.data import DataFormatError, to_chat
    rec = {'instruction': 'Walk east.', 'steps': [{'thought': 'go', 'reward': 0.5}, {'thought': 'done', 'reward': bad}]}
    with pytest.raises(DataFormatError, match=r"^seed.jsonl:2: field 'steps\[1\]\.reward' must be a finite number"):
        to_chat(json.loads(json.dumps(rec)), 'seed.jsonl:2')
    assert to_chat({**rec, 'steps': rec['steps'][:1] + [{'thought': 'done'}]}, 's')['step_rewards'] == [0.5, 0.0]

def _recorded(id:str, reward:float, step_reward:float=0.0):
    "A trajectory whose two steps carry the prompt and completion ids a recording proxy captured"
    from knowlyr_lab.trainer.data import Trajectory
    return Trajectory.model_validate({'id': id, 'task': {'id': id}, 'reward': reward, 'steps': [
        {'index': 0, 'thought': 'go', 'reward': step_reward, 'prompt_token_ids': [5, 6, 7, 8], 'token_ids': [9, 10, 11]},
        {'index': 1, 'thought': 'done', 'reward': 1.0, 'prompt_token_ids': [5, 6, 7, 8, 9, 10, 11, 12], 'token_ids': [13, 14]}]})

@pytest.mark.parametrize('min_reward', [None, 0.0])
@pytest.mark.parametrize('recorded_ids', ['split', 'rerender'])
@pytest.mark.parametrize('bad, field', [({'reward': float('nan')}, 'reward'), ({'reward': -float('inf')}, 'reward'),
                                        ({'reward': 1.0, 'step_reward': float('inf')}, 'steps[0].reward')])
def test_a_recorded_row_whose_reward_is_not_finite_is_quarantined_with_its_reason_and_the_rest_train(
        recorded_ids, min_reward, bad, field, tmp_path, recwarn):
    "No test took a recorded row (recorded ids) with a NaN reward through SFT's batch path: quarantined, with its reason"
    import json
    import math

    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    from knowlyr_lab.trainer.tiny import make_tiny_model
    model, tiny_tok = make_tiny_model(hidden_size=32)
    data = [_recorded('good-a', 1.0), _recorded('bad-b', **bad), _recorded('good-c', 0.5), _rewarded_chat(1, [0.2, 1.0])]
    t = SFTTrainer(SFTConfig(output_dir=str(tmp_path), recorded_ids=recorded_ids, min_reward=min_reward, num_epochs=1,
                             progress_bar=False, max_length=512), model, tiny_tok, train_data=data)
    assert [e['where'] for e in t.errors] == ['record[1]'], t.errors          # not dropped unsaid (min_reward: NaN < 0 is False)
    assert f"field '{field}' must be a finite number" in t.errors[0]['error'], t.errors
    quarantined = [json.loads(line) for line in (tmp_path / 'quarantine.jsonl').read_text().splitlines()]
    assert quarantined == t.errors
    assert sorted({s['task_id'] for s in t.samples}) == ['', 'good-a', 'good-c']   # the chat's task_id is ''
    assert t.data_report['rejected_records'] == 1 and t.data_report['recorded_records'] == 3
    done = t.train()
    assert done['steps'] >= 1 and math.isfinite(done['loss']), done                 # the other rows train

@pytest.mark.parametrize('bad', ['10**400', '-10**400', 'False', 'np.True_', 'np.False_'])
def test_a_reward_too_large_for_a_float_or_any_boolean_is_refused_naming_the_record(tok, bad):
    "float(10**400) raised a bare OverflowError that build_chats does not catch (the batch stopped); False and numpy's bools read as 0 and 1"
    import json

    import numpy as np

    from knowlyr_lab.trainer.data import DataFormatError, to_chat
    from knowlyr_lab.trainer.dpo import tokenize_pair
    from knowlyr_lab.trainer.sft import build_chats
    bad = {'10**400': 10 ** 400, '-10**400': -10 ** 400, 'False': False, 'np.True_': np.True_, 'np.False_': np.False_}[bad]
    rec = {'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'a'}], 'reward': bad}
    with pytest.raises(DataFormatError, match="^sft.jsonl:4: field 'reward' must be a finite number"):
        to_chat(rec, 'sft.jsonl:4')
    with pytest.raises(DataFormatError, match=r"^sft.jsonl:4: field 'step_rewards\[0\]' must be a finite number"):
        to_chat({**rec, 'reward': 1.0, 'step_rewards': [bad]}, 'sft.jsonl:4')
    with pytest.raises(DataFormatError, match="^pairs.jsonl:2: field 'ref_chosen_logps' must be a finite number"):
        tokenize_pair(tok, {'prompt': 'hi', 'chosen': 'a', 'rejected': 'b', 'ref_chosen_logps': bad, 'ref_rejected_logps': -1.0}, 'pairs.jsonl:2')
    if not isinstance(bad, np.bool_):                                   # as a file gives it
        chats, errors = build_chats([('sft.jsonl:1', {**rec, 'reward': 1}), ('sft.jsonl:4', json.loads(json.dumps(rec)))])
        assert [c['where'] for c in chats] == ['sft.jsonl:1'] and [e['where'] for e in errors] == ['sft.jsonl:4'], errors
    held = [np.float64(0.5), np.float32(0.25), np.int64(2), '1.0', None]  # numbers of any kind, a numeric string, unset
    assert [to_chat({**rec, 'reward': r}, 'x')['reward'] for r in held] == [0.5, 0.25, 2.0, 1.0, 0.0]

def test_each_curriculum_epoch_keeps_the_ceiling_of_its_exact_share_of_the_records():
    "p * n in floats: start 0.1, warm-up 2, epoch 1 is 0.55 of 100 records, 55.00000000000001, so the epoch kept 56"
    import math
    from fractions import Fraction

    from knowlyr_lab.trainer.curriculum import curriculum_indices
    recs = [{'n_steps': k, 'reward': 0.0} for k in range(100)]
    assert len(curriculum_indices(recs, 1, 0.1, 2)) == 55
    for start in ('0.1', '0.3', '0.7'):
        for warm in (2, 5):
            for e in range(warm + 1):
                for n in (1, 25, 100):
                    share = Fraction(start) + (1 - Fraction(start)) * Fraction(e, warm)
                    assert len(curriculum_indices(recs[:n], e, float(start), warm)) == max(1, math.ceil(share * n)), (start, warm, e, n)

def test_pieces_that_weigh_zero_are_warned_whichever_step_holds_the_reward(recwarn, tmp_path):
    "Rewards [1, 0, 0, 0, 0, 0] chunked at 90 tokens: 5 of 6 chunks weigh 0 and train nothing, without a word (outcome-only only)"
    import warnings

    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    from knowlyr_lab.trainer.tiny import make_tiny_model
    model, tiny_tok = make_tiny_model(hidden_size=32)
    warnings.simplefilter('always')
    t = SFTTrainer(SFTConfig(output_dir=str(tmp_path), step_weighted_loss=True, progress_bar=False, max_length=90,
                             chunk_long_trajectories=True), model, tiny_tok,
                   train_data=[{**_chat(6), 'step_rewards': [1, 0, 0, 0, 0, 0]}, {**_chat(1), 'step_rewards': [0.5]}])
    zero = sum(not any(w for w, l in zip(s['weights'][1:], s['labels'][1:]) if l != -100) for s in t.samples)
    assert zero == len(t.samples) - 2 and zero >= 1, [s.get('chunk') for s in t.samples]
    said = [str(w.message) for w in recwarn if 'training pieces' in str(w.message)]
    assert said == [f"step_weighted_loss: {zero} of {len(t.samples)} training pieces (chunks, or samples cut at max_length, "
                    "holding only steps of reward 0) weigh 0 throughout and train nothing, though their label tokens "
                    "still count in the loss's token count"], said

def test_a_line_whose_integer_json_cannot_read_is_its_own_error_naming_the_line(tmp_path):
    "json.loads raises a plain ValueError (not JSONDecodeError) for an integer of over 4300 digits: the whole file failed, naming no line"
    import json

    from knowlyr_lab.trainer.sft import build_chats
    rec = {'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'a'}], 'reward': 1.0}
    p = tmp_path / 'sft.jsonl'
    p.write_text(json.dumps(rec) + '\n' + json.dumps(rec).replace('1.0', '1' + '0' * 5000) + '\n' + json.dumps(rec) + '\n')
    chats, errors = build_chats(str(p))
    assert [c['where'] for c in chats] == [f'{p}:1', f'{p}:3'], errors
    assert [e['where'] for e in errors] == [f'{p}:2'] and errors[0]['error'].startswith(f'{p}:2: invalid JSON ('), errors

@pytest.mark.parametrize('bad', ['5', '"[0.5, 1.0]"', '{"a": 1}', 'np.array', '[0.5, 1.0]'])
def test_step_rewards_that_are_not_a_list_of_one_number_per_turn_are_refused_naming_the_field(bad):
    "step_rewards 5 failed with a bare TypeError (no len), a JSON string counted its characters, a numpy array (pandas rows) was ambiguous"
    import json

    import numpy as np

    from knowlyr_lab.trainer.data import DataFormatError, to_chat
    v = np.array([0.5, 1.0]) if bad == 'np.array' else json.loads(bad)
    rec = {'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'a'}], 'step_rewards': v}
    with pytest.raises(DataFormatError, match=r"^sft.jsonl:4: field 'step_rewards' must be a list of one number per assistant turn \(1\), got "):
        to_chat(rec, 'sft.jsonl:4')
    assert [to_chat({**rec, 'step_rewards': ok}, 'x')['step_rewards'] for ok in (None, [], [0.5], (2,))] == [[0.0], [0.0], [0.5], [2.0]]

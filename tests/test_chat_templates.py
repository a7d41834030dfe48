"""Real chat templates, trained correctly (issue 38 item 4).

The templates of Qwen2.5 and Llama 3.1/3.2 write a tool call's arguments with `tojson`. Handed OpenAI's arguments (a JSON
string) they wrote `{"name": "multiply", "arguments": "{\\"a\\": 864, \\"b\\": 41}"}` into the training labels: nothing
failed, and the model was taught a double encoding that contradicts its pretraining and every standard parser. These
tests train-render an arith-medium expert episode through each template as the installed `trl` package ships it (read
at test time; only SmolLM2's one-line ChatML is copied here) around the project's tiny tokenizer, and check that every
call in the labels holds its arguments as a JSON object that `parse_reply` reads back. Qwen3's template renders the last
assistant turn with an empty `<think>` block that earlier turns do not get, so no chat format can train span masks
through it: it must be refused with a message that says so and what to use instead, and what it names must train.
DPO without observation masks scores the tokens TRL's own DPO preparation scores, and `serve` round-trips each
template's tool calls."""
import json

import pytest
import torch

from knowlyr_lab.chat import choose_format, parse_reply, render_chat, template_caps
from knowlyr_lab.trainer.data import DataFormatError, env_tools, to_chat, tokenize_chat
from knowlyr_lab.trainer.sft import oracle_trajectories
from knowlyr_lab.trainer.tiny import train_tokenizer

ENV = 'knowlyr/arith-medium'


def trl_template(name):
    "The chat template `name` as the installed trl ships it (trl/chat_templates/<name>.jinja)"
    t = pytest.importorskip('trl.chat_template_utils', reason='the real chat templates are read from the installed trl package (pip install trl)')
    if not hasattr(t, f'{name}_chat_template'): pytest.skip(f"the installed trl ({t.__name__}) ships no {name} chat template")
    return getattr(t, f'{name}_chat_template')


@pytest.fixture(scope='module')
def episode():
    "One expert arith-medium episode (three tool calls) and the env's tool schemas"
    traj = oracle_trajectories(ENV, [0])[0]
    assert traj.outcome.success and len(traj.steps) >= 2
    return traj, env_tools(ENV)


def tokenizer_with(template):
    return train_tokenizer(['Compute 864 * 41 - 162 with the tools multiply, subtract and submit.'], chat_template=template)


def labelled_turns(tok, sample):
    "The text of each assistant turn the sample trains on (its labelled tokens, step by step)"
    steps = sorted(set(sample['step']) - {-1})
    return [tok.decode([i for i, l, k in zip(sample['input_ids'], sample['labels'], sample['step']) if l != -100 and k == s]) for s in steps]


def raw_calls(text):
    "Every JSON call object (`{\"name\": ...}`) written in `text`, decoded as it stands"
    dec, out, i = json.JSONDecoder(), [], text.find('{"name"')
    while i >= 0:
        d, end = dec.raw_decode(text, i)
        out.append(d); i = text.find('{"name"', end)
    return out


def check_calls(tok, chat, traj):
    "The labels hold each step's call, its arguments a JSON object, and `parse_reply` reads it back"
    turns = labelled_turns(tok, tokenize_chat(tok, chat))
    assert len(turns) == len(traj.steps)
    for turn, step in zip(turns, traj.steps):
        calls = raw_calls(turn)
        assert [c['name'] for c in calls] == [step.action.tool], turn
        args = calls[0].get('arguments', calls[0].get('parameters'))
        assert isinstance(args, dict), f"arguments written as {type(args).__name__}, not a JSON object: {turn!r}"
        assert args == step.action.params
        assert parse_reply(turn)[1] == [{'tool': step.action.tool, 'params': step.action.params}], turn
    return turns


@pytest.mark.parametrize('name,style', [('qwen2_5', 'hermes'), ('qwen3_training', 'hermes'), ('llama3_1', 'llama3'), ('llama3_2', 'llama3')])
def test_template_labels_hold_calls_as_objects(name, style, episode):
    traj, tools = episode
    tok = tokenizer_with(trl_template(name))
    assert choose_format(tok) == 'template'
    chat = to_chat(traj, tools=tools)
    turns = check_calls(tok, chat, traj)
    assert '{"a": 864, "b": 41}' in turns[0] and '\\"' not in ''.join(turns)      # no JSON string holding JSON
    # inference renders the history the same way: the previous call, as an object, before the generation prompt
    prompt = render_chat(tok, chat['messages'][:3], tools, add_generation_prompt=True)
    assert json.dumps(traj.steps[0].action.params) in prompt and '\\"a\\"' not in prompt
    caps = template_caps(tok)                                 # what the probe found, and why 'template' was chosen
    assert (caps['call_style'], caps['arguments'], caps['extends']) == (style, 'object', True), caps


def test_qwen3_is_refused_with_what_to_use_and_that_trains(episode):
    "Qwen3's template: no chat format extends through it; the refusal says so and names a template that trains"
    traj, tools = episode
    chat = to_chat(traj, tools=tools)
    tok = tokenizer_with(trl_template('qwen3'))
    assert choose_format(tok) == 'template'                   # its own format, for prompting
    for fmt in ('template', 'hermes'):                        # the fallback renders through the same template: refused too
        with pytest.raises(DataFormatError) as e: tokenize_chat(tok, chat, fmt=fmt)
        msg = str(e.value)
        assert 'as an extension of the messages before it' in msg and f"(chat format {fmt!r})" in msg, msg
        assert "no chat format can ('hermes' and 'react' render through the same template)" in msg, msg
        assert '<think>' in msg and 'qwen3_training.jinja' in msg, msg
    trained = tokenizer_with(trl_template('qwen3_training'))  # what the message names
    assert choose_format(trained) == 'template'
    turns = check_calls(trained, chat, traj)
    assert all(t.startswith('<think>\n\n</think>\n\n<tool_call>') for t in turns), turns


# SmolLM2-135M-Instruct's chat template as its tokenizer_config.json ships it (content only: no tools, no tool calls)
SMOLLM2_TEMPLATE = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
                    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}"
                    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def call(args):
    return {'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': 'move', 'arguments': args}}]}


def trl_dpo_ids(tok, pair):
    """(prompt_ids, chosen_ids, rejected_ids) of `pair` as TRL's DPOTrainer prepares them: its own `_prepare_dataset`
    (run offline, unbound, on a one-row dataset); TRL's loss scores exactly the chosen/rejected ids"""
    from types import SimpleNamespace
    dpo, datasets = pytest.importorskip('trl.trainer.dpo_trainer'), pytest.importorskip('datasets')
    args = SimpleNamespace(dataset_num_proc=None, max_length=None, truncation_mode='keep_start')
    row = dpo.DPOTrainer._prepare_dataset(SimpleNamespace(_tokenizer=tok), datasets.Dataset.from_list([pair]), tok, args, 'train')[0]
    return row['prompt_ids'], row['chosen_ids'], row['rejected_ids']


@pytest.mark.parametrize('name,family', [('chatml', 'qwen2'), ('smollm2', 'qwen2'), ('qwen2_5', 'qwen2'),
                                         ('qwen3_training', 'qwen2'), ('llama3_1', 'llama')])
def test_dpo_unmasked_scores_what_trl_scores(name, family):
    "DPO with mask_observations=False scores TRL's completion: every token after the prompt's generation prompt"
    from knowlyr_lab.trainer.dpo import tokenize_pair
    from knowlyr_lab.trainer.tiny import CHATML_TOOL_TEMPLATE
    template = {'chatml': CHATML_TOOL_TEMPLATE, 'smollm2': SMOLLM2_TEMPLATE}.get(name) or trl_template(name)
    tok = train_tokenizer(['Reach col 1. Go east, then south. You moved.'], vocab_size=2048, chat_template=template, family=family)
    if name == 'smollm2':             # its template drops tool calls (the hermes format writes them): text completions
        pair = {'prompt': [{'role': 'user', 'content': 'Reach col 1.'}], 'chosen': [{'role': 'assistant', 'content': 'east'}],
                'rejected': [{'role': 'assistant', 'content': 'north, then west'}]}
    else:                             # calls with the same argument keys (datasets would add missing keys as nulls)
        pair = {'prompt': [{'role': 'system', 'content': 'Solve mazes.'}, {'role': 'user', 'content': 'Reach col 1.'}],
                'chosen': [call({'direction': 'east'}), {'role': 'tool', 'content': 'You moved east.'}, call({'direction': 'south'})],
                'rejected': [call({'direction': 'north'})], 'tools': json.dumps(env_tools('knowlyr/maze-easy'))}
    p, c, r = trl_dpo_ids(tok, pair)
    ours = tokenize_pair(tok, pair, mask_observations=False)
    for side, ids in (('chosen', c), ('rejected', r)):
        s = ours[side]
        assert s['input_ids'] == p + ids, side                            # the same tokens
        scored = [i for i, l in zip(s['input_ids'], s['labels']) if l != -100]
        assert scored == ids, (tok.decode(scored), tok.decode(ids))        # the same scored span
        assert s['labels'][:len(p)] == [-100] * len(p)


LLAMA3_SPECIAL = ['<|begin_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>', '<|eom_id|>', '<|python_tag|>']


@pytest.mark.parametrize('name,family', [('llama3_1', 'llama'), ('llama3_1', 'qwen2'), ('llama3_2', 'qwen2'),
                                         ('qwen2_5', 'qwen2'), ('qwen3', 'qwen2'), ('qwen3_training', 'qwen2')])
def test_train_tokenizer_registers_the_template_tokens(name, family):
    """`train_tokenizer` with a real template: every token the template writes is one id (they came out in pieces, 17
    for `<|start_header_id|>`), and a Llama 3 template's turn ends on `<|eot_id|>`, the eos, after its `<|begin_of_text|>`"""
    from knowlyr_lab.trainer.tiny import template_tokens
    tok = train_tokenizer(['Reach col 1.'], vocab_size=2048, chat_template=trl_template(name), family=family)
    special, tags = template_tokens(tok.chat_template)
    want = (LLAMA3_SPECIAL if name == 'llama3_1' else LLAMA3_SPECIAL[:4] if name.startswith('llama') else
            ['<|im_start|>', '<|im_end|>', '<think>', '</think>'] if 'qwen3' in name else ['<|im_start|>', '<|im_end|>'])
    assert set(want) <= set(special + tags + [tok.bos_token])
    for t in special + tags + ['<tool_call>', '</tool_call>']:
        assert len(tok(t, add_special_tokens=False)['input_ids']) == 1, t
    text = render_chat(tok, [{'role': 'user', 'content': 'Reach col 1.'}, {'role': 'assistant', 'content': 'Done.'}])
    ids = tok(text, add_special_tokens=False)['input_ids']
    assert tok.decode(ids) == text
    if name.startswith('llama'):
        assert (tok.bos_token, tok.eos_token) == ('<|begin_of_text|>', '<|eot_id|>') and text.startswith('<|begin_of_text|>')
        assert ids[-1] == tok.eos_token_id                        # the assistant's turn ends on the eos
    else: assert tok.eos_token == '<|im_end|>' and tok.convert_ids_to_tokens(ids).count('<|im_end|>') == text.count('<|im_end|>') >= 2


@pytest.mark.parametrize('name', ['qwen2_5', 'qwen3_training', 'llama3_1'])
def test_served_tool_calls_round_trip(name, episode):
    """`serve` with the openai SDK, plain and streamed, on a model whose every reply is the turn training labels (its
    generation scripted: a tiny model cannot learn it in seconds): each reply comes back as its tool call with its token
    ids, and the calls and results sent back render the prompt training rendered, turn after turn"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.serving.model import _result
    from knowlyr_lab.trainer.tiny import make_tiny_model
    traj, tools = episode
    tok = tokenizer_with(trl_template(name))                       # Llama 3's tokens one id each, its end of turn the eos
    chat = to_chat(traj, tools=tools)
    s = tokenize_chat(tok, chat)
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32, max_position=8192)[0], tok, name='tiny', prefix_cache=0)
    def scripted(convs, tools=None, *a, **kw):
        out = []
        for conv in convs:
            k = sum(m['role'] == 'assistant' for m in conv)         # the turn to write: the labels of step k
            p = tok(inf.render(conv, tools), add_special_tokens=False)['input_ids']
            reply = [i for i, l, st in zip(s['input_ids'], s['labels'], s['step']) if l != -100 and st == k]
            assert p + reply == s['input_ids'][:len(p) + len(reply)], f"turn {k}: the served prompt is not training's"
            r = _result(tok, reply, [0.0] * len(reply), p, inf.stop_ids)
            out.append({**r, 'logprobs': [{'id': i, 'logprob': 0.0, 'top': []} for i in r['token_ids']]})
        return out
    inf.generate = scripted
    with inf.serve() as srv:
        client = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0)
        msgs = [m for m in chat['messages'] if m['role'] in ('system', 'user')][:2]
        for k, step in enumerate(traj.steps):
            kw = dict(model='tiny', messages=msgs, tools=tools, max_tokens=64, logprobs=True, extra_body={'return_token_ids': True})
            d = client.chat.completions.create(**kw).model_dump()
            ch = d['choices'][0]
            calls = [(c['function']['name'], json.loads(c['function']['arguments'])) for c in ch['message']['tool_calls'] or []]
            assert (calls, ch['finish_reason']) == ([(step.action.tool, step.action.params)], 'tool_calls'), ch
            want = [i for i, l, st in zip(s['input_ids'], s['labels'], s['step']) if l != -100 and st == k]
            assert ch['token_ids'] == want                            # the ids as written, ending in the end-of-turn token
            chunks = [c.model_dump() for c in client.chat.completions.create(**kw, stream=True)]
            streamed = [(tc['function']['name'], json.loads(tc['function']['arguments']))
                        for c in chunks for x in c['choices'] for tc in x['delta'].get('tool_calls') or []]
            assert streamed == calls and [i for c in chunks for x in c['choices'] for i in x.get('token_ids') or []] == want
            m = ch['message']
            msgs = msgs + [{'role': 'assistant', 'content': m['content'], 'tool_calls': m['tool_calls']},
                           {'role': 'tool', 'tool_call_id': m['tool_calls'][0]['id'], 'content': chat['messages'][len(msgs) + 1]['content']}]


@pytest.mark.parametrize('name', ['qwen2_5', 'qwen3_training', 'llama3_1', 'smollm2'])
def test_served_history_call_with_arguments_not_json(name):
    """A history tool call whose arguments are not JSON (a model's truncated call that an agent loop sends back; OpenAI's
    API takes any string there) is served, not refused with a 400: through each template (SmolLM2's through the Hermes
    fallback) the prompt holds the call with its arguments text as given, neither dropped nor double-encoded"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(SMOLLM2_TEMPLATE if name == 'smollm2' else trl_template(name))
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny', prefix_cache=0)
    seen, render = [], inf.render
    inf.render = lambda m, t=None: seen.append(render(m, t)) or seen[-1]
    raw = '{"direction": "east", "steps": 2'
    msgs = [{'role': 'user', 'content': 'Reach col 1.'},
            {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'call_1', 'type': 'function', 'function': {'name': 'move', 'arguments': raw}}]},
            {'role': 'tool', 'tool_call_id': 'call_1', 'content': 'arguments of move are not a JSON object'}]
    with inf.serve() as srv:
        client = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0)
        r = client.chat.completions.create(model='tiny', messages=msgs, tools=env_tools('knowlyr/maze-easy'), max_tokens=2)
    assert r.choices[0].finish_reason in ('length', 'stop', 'tool_calls') and r.usage.prompt_tokens > 0
    key = 'parameters' if name.startswith('llama') else 'arguments'
    assert seen and all(f'{{"name": "move", "{key}": {raw}}}' in p and 'knowlyr-raw' not in p for p in seen), seen[-1]



@pytest.mark.parametrize('name', ['qwen2_5', 'llama3_1', 'llama3_2'])
def test_tiny_model_stops_at_every_end_of_turn(name):
    """`make_tiny_model`'s generation config lists every end-of-turn token its template writes: Llama 3.1's `<|eom_id|>`
    (a built-in tool's call) besides the eos `<|eot_id|>`, as its checkpoint does; it listed the eos only, so a turn
    ending in `<|eom_id|>` ran on to max_new_tokens. A template with one end of turn keeps a plain id"""
    from knowlyr_lab.serving.model import AgentInference, _result
    from knowlyr_lab.trainer.tiny import make_tiny_model
    template = trl_template(name)
    tok = tokenizer_with(template)
    model = make_tiny_model(tokenizer=tok, hidden_size=32)[0]
    ends = tok.convert_tokens_to_ids(['<|eot_id|>', '<|eom_id|>']) if '<|eom_id|>' in template else tok.eos_token_id
    assert model.generation_config.eos_token_id == ends and model.config.eos_token_id == tok.eos_token_id
    inf = AgentInference(model, tok, prefix_cache=0)
    assert inf.stop_ids == ([ends] if isinstance(ends, int) else ends)
    if '<|eom_id|>' in template:
        eom, x = tok.convert_tokens_to_ids('<|eom_id|>'), tok('Go', add_special_tokens=False)['input_ids'][0]
        out = _result(tok, [x, eom, tok.pad_token_id], [0.0] * 3, [], inf.stop_ids)
        assert (out['finish_reason'], out['token_ids']) == ('stop', [x, eom])


@pytest.mark.parametrize('name', ['qwen2_5', 'qwen3_training', 'llama3_1'])
def test_grpo_trains_through_the_template(name, episode, tmp_path, monkeypatch):
    """One online GRPO update through each template: the first rollout of each conversation is scripted to write the
    expert's turn as training labels it (a tiny model cannot learn it in seconds), the rest are sampled; the expert
    episode comes back as one recorded sample (each turn's prompt extends the ids sampled before it), a sampled turn
    ends on the template's end of turn or at max_completion_length, and the update trains on the completions"""
    from knowlyr_lab.serving.model import AgentInference, _result
    from knowlyr_lab.trainer.drift import recorded_samples
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    from knowlyr_lab.trainer.tiny import make_tiny_model
    traj, tools = episode
    tok = tokenizer_with(trl_template(name))
    s = tokenize_chat(tok, to_chat(traj, tools=tools))
    turns = {k: [i for i, l, st in zip(s['input_ids'], s['labels'], s['step']) if l != -100 and st == k] for k in range(len(traj.steps))}
    sample, seen = AgentInference.generate, set()
    def generate(self, convs, tools=None, max_new_tokens=128, *a, **kw):
        outs = sample(self, convs, tools, max_new_tokens, *a, **kw)
        for j, conv in enumerate(convs):
            key, k = json.dumps(conv, sort_keys=True), sum(m['role'] == 'assistant' for m in conv)
            if key not in seen and k in turns:
                seen.add(key); outs[j] = _result(self.tokenizer, turns[k], [0.0] * len(turns[k]), outs[j]['prompt_token_ids'], self.stop_ids)
        return outs
    monkeypatch.setattr(AgentInference, 'generate', generate)
    cfg = GRPOConfig(output_dir=str(tmp_path), env_id=ENV, num_generations=2, tasks_per_step=1, max_steps=1, max_completion_length=16,
                     max_invalid_actions=1, max_length=4096, temperature=1.0, learning_rate=1e-2, save_steps=0, progress_bar=False,
                     mixed_precision='no', seed=0)
    model = make_tiny_model(tokenizer=tok, hidden_size=32, max_position=8192)[0]
    before = [p.detach().clone() for p in model.parameters()]
    tr = GRPOTrainer(cfg, model, tok, tools=tools)
    rolled, score = [], tr._score
    tr._score = lambda t: rolled.append(t) or score(t)
    [row] = tr.train()
    expert, sampled = rolled
    assert expert.outcome.success and [st.token_ids for st in expert.steps] == [turns[k] for k in range(len(traj.steps))]
    assert len(recorded_samples(expert)) == 1                  # the history the agent keeps renders as the ids it sampled
    stops = AgentInference(model, tok).stop_ids
    assert tok.eos_token == ('<|eot_id|>' if name.startswith('llama') else '<|im_end|>') and tok.eos_token_id in stops
    last = sampled.steps[0].token_ids
    assert len(last) == 16 or last[-1] in stops and all(i not in stops for i in last[:-1]), tok.decode(last)
    assert row['groups_with_signal'] == 1 and row['completion_tokens'] > 0 and row['loss'] == row['loss']
    assert any(not torch.equal(a, b) for a, b in zip(before, tr.model.parameters()))


@pytest.mark.parametrize('name', ['qwen3', 'qwen3_training'])
def test_served_history_keeps_reasoning_content(name):
    """An assistant turn in the history with the `reasoning_content` a reasoning parser (vLLM's) split out of it: the server
    hands it to the template, and Qwen3's renders it inside the turn's `<think>` block (the field was dropped)"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template(name))
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny', prefix_cache=0)
    seen, render = [], inf.render
    inf.render = lambda m, t=None: seen.append(render(m, t)) or seen[-1]
    msgs = [{'role': 'user', 'content': 'Compute 2 + 3.'}, {'role': 'assistant', 'content': 'It is 5.', 'reasoning_content': 'Two plus three.'},
            {'role': 'user', 'content': 'And 2 * 3?'}]
    with inf.serve() as srv:
        client = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0)
        client.chat.completions.create(model='tiny', messages=msgs, max_tokens=2)
        client.chat.completions.create(model='tiny', messages=[{**m, 'reasoning': m.pop('reasoning_content')} if 'reasoning_content' in m else m for m in msgs], max_tokens=2)
    want = '<think>\nTwo plus three.\n</think>\n\nIt is 5.' if name == 'qwen3_training' else 'It is 5.'   # Qwen3's drops thinking before the last user turn
    assert len(seen) >= 2 and all(want in p for p in seen), seen[-1]
    if name == 'qwen3_training': assert all(p == seen[0] for p in seen)


def test_grpo_past_max_length_warns_or_refuses(episode, tmp_path):
    """llama3_1's rollout prompt (tool list and task, ~2,070 tokens) past `max_length`: the default 2048 cuts every
    completion to nothing, and the update warns that it trains on nothing (its row had only `completion_tokens: 0`);
    a max_length that the prompt before any observation already fills is refused before rolling out. The local
    policy refuses a prompt past its context (`max_position`) as the server does, instead of decoding past it"""
    import itertools

    from knowlyr_lab.serving.completions import ContextExceeded
    from knowlyr_lab.serving.model import AgentInference
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    from knowlyr_lab.trainer.tiny import make_tiny_model
    _, tools = episode
    tok = tokenizer_with(trl_template('llama3_1'))
    def trainer(max_length, max_position=8192):
        cfg = GRPOConfig(output_dir=str(tmp_path), env_id=ENV, num_generations=2, tasks_per_step=1, max_steps=1, max_completion_length=4,
                         max_invalid_actions=1, max_length=max_length, save_steps=0, progress_bar=False, mixed_precision='no', seed=0)
        tr = GRPOTrainer(cfg, make_tiny_model(tokenizer=tok, hidden_size=32, max_position=max_position)[0], tok, tools=tools)
        n = itertools.count()
        tr.episode_reward_fn = lambda t: float(next(n) % 2)     # a group with signal: the update runs
        return tr
    tr = trainer(2048)
    with pytest.warns(UserWarning, match=r'max_length=2048 cut the completions of 2 of 2 rows to nothing \(their prompts run 20\d\d\+ tokens\): this update trains on nothing'):
        [row] = tr.train()
    assert row['completion_tokens'] == 0 and row['groups_with_signal'] == 1
    with pytest.raises(ValueError, match=r'max_length=1900 leaves no room for a completion: .* is already 19\d\d tokens'):
        trainer(1900).train()
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, prefix_cache=0)   # max_position 2048
    chat = [{'role': 'user', 'content': 'Compute 864 * 41 - 162. ' * 12}]
    with pytest.raises(ContextExceeded, match=r"the prompt \(2\d\d\d tokens\) plus max_new_tokens \(4\) exceeds the model's context of 2048"):
        inf.generate([chat], tools, max_new_tokens=4)


@pytest.mark.parametrize('name', ['qwen3', 'qwen3_training'])
@pytest.mark.parametrize('parser', [None, 'qwen3'])
def test_served_reasoning_parser_round_trips(name, parser, episode):
    """`serve(reasoning_parser='qwen3')`, as vLLM's `--reasoning-parser qwen3`: the `<think>` block a reply opens with
    comes back as the message's `reasoning_content` (streamed as `reasoning_content` deltas), the content and tool call
    without it; a client that sends the message back with its `reasoning_content` gets the tokens the model wrote in
    its next prompt, turn after turn. Off (the default) the thinking stays in the content, and sent back so the prompt
    extends the same way: a client that does not send `reasoning_content` back sees what it saw before"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.serving.model import _result
    from knowlyr_lab.trainer.tiny import make_tiny_model
    traj, tools = episode
    tok = tokenizer_with(trl_template(name))
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32, max_position=8192)[0], tok, name='tiny', prefix_cache=0)
    thought = [f'Step {k}: I call {s.action.tool}.\nThen I read its result.' for k, s in enumerate(traj.steps)]
    chat, k = [], 0                                            # the expert chat, each call turn thinking first
    for m in to_chat(traj, tools=tools)['messages']:
        if m['role'] == 'assistant': m = {**m, 'reasoning_content': thought[k]}; k += 1
        chat.append(m)
    def turn_ids(k):
        "The ids of the model's turn k as the template writes an assistant turn: <think>, its thinking, the call"
        i = [j for j, m in enumerate(chat) if m['role'] == 'assistant'][k]
        prompt, upto = render_chat(tok, chat[:i], tools, True), render_chat(tok, chat[:i + 1], tools)
        assert upto.startswith(prompt) and upto[len(prompt):].startswith('<think>\n' + thought[k])
        ids = tok(upto[len(prompt):], add_special_tokens=False)['input_ids']
        return ids[:ids.index(tok.eos_token_id) + 1]
    served = []
    def scripted(convs, tools=None, *a, **kw):
        out = []
        for conv in convs:
            p = tok(inf.render(conv, tools), add_special_tokens=False)['input_ids']
            reply = turn_ids(sum(m['role'] == 'assistant' for m in conv))
            served.append((p, reply))
            r = _result(tok, reply, [0.0] * len(reply), p, inf.stop_ids)
            out.append({**r, 'logprobs': [{'id': i, 'logprob': 0.0, 'top': []} for i in r['token_ids']]})
        return out
    inf.generate = scripted
    with inf.serve(**({'reasoning_parser': parser} if parser else {})) as srv:
        client = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0)
        msgs = [m for m in chat if m['role'] in ('system', 'user')][:2]
        for k, step in enumerate(traj.steps):
            kw = dict(model='tiny', messages=msgs, tools=tools, max_tokens=64)
            m = client.chat.completions.create(**kw).choices[0].message.model_dump()
            assert [(c['function']['name'], json.loads(c['function']['arguments'])) for c in m['tool_calls']] == [(step.action.tool, step.action.params)]
            chunks = [c.model_dump() for c in client.chat.completions.create(**kw, stream=True)]
            deltas = [x['delta'] for c in chunks for x in c['choices']]
            if parser:
                assert m['reasoning_content'].strip('\n') == thought[k] and '<think>' not in (m['content'] or '') and '</think>' not in (m['content'] or '')
                assert ''.join(d.get('reasoning_content') or '' for d in deltas) == m['reasoning_content']
                back = {'role': 'assistant', 'content': m['content'], 'tool_calls': m['tool_calls'], 'reasoning_content': m['reasoning_content']}
            else:
                assert m.get('reasoning_content') is None and m['content'].startswith('<think>\n' + thought[k])
                assert all(d.get('reasoning_content') is None for d in deltas)
                back = {'role': 'assistant', 'content': m['content'], 'tool_calls': m['tool_calls']}
            assert ''.join(d.get('content') or '' for d in deltas) == (m['content'] or '')
            msgs = msgs + [back, {'role': 'tool', 'tool_call_id': m['tool_calls'][0]['id'], 'content': chat[len(msgs) + 1]['content']}]
    assert len(served) == 2 * len(traj.steps)
    for (p, reply), (nxt, _) in zip(served[::2], served[2::2]):   # each prompt holds the previous one and the reply as written
        assert nxt[:len(p) + len(reply)] == p + reply, tok.decode(nxt[len(p):len(p) + len(reply)])


@pytest.mark.parametrize('parser', [None, 'qwen3'])
def test_served_chat_template_kwargs_turn_thinking_off(parser):
    """`chat_template_kwargs` as vLLM and SGLang take it (`extra_body` in the openai SDK): `{"enable_thinking": false}`
    makes Qwen3's template end the prompt with the empty `<think>` block it writes, the model answers without thinking
    and with `reasoning_parser='qwen3'` the answer is the content, no reasoning; the reply sent back renders as the ids
    the model wrote (turn after turn). A server-wide default applies to requests that send none (on main the field was
    ignored: the prompt ended on the assistant header)"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.serving.model import _result
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template('qwen3'))
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny', prefix_cache=0)
    served, answers = [], iter(['It is 5.', 'It is 6.', 'It is 7.'])
    def scripted(convs, tools=None, *a, template_kwargs=None, **kw):
        p = tok(inf.render(convs[0], tools, template_kwargs=template_kwargs), add_special_tokens=False)['input_ids']
        reply = tok(next(answers), add_special_tokens=False)['input_ids'] + [tok.eos_token_id]
        served.append((p, reply))
        return [_result(tok, reply, [0.0] * len(reply), p, inf.stop_ids)]
    inf.generate = scripted
    off = {'chat_template_kwargs': {'enable_thinking': False}}
    with inf.serve(**({'reasoning_parser': parser} if parser else {})) as srv:
        client = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0)
        msgs = [{'role': 'user', 'content': 'Compute 2 + 3.'}]
        for k in range(2):
            r = client.chat.completions.create(model='tiny', messages=msgs, max_tokens=8, extra_body={**off, 'return_token_ids': True})
            m = r.choices[0].message
            assert tok.decode(r.model_dump()['prompt_token_ids']).endswith('<|im_start|>assistant\n<think>\n\n</think>\n\n')
            assert m.content == f'It is {5 + k}.' and getattr(m, 'reasoning_content', None) is None, m
            msgs = msgs + [{'role': 'assistant', 'content': m.content}, {'role': 'user', 'content': 'And plus one?'}]
        r = client.chat.completions.create(model='tiny', messages=msgs[:1], max_tokens=8, extra_body={'return_token_ids': True})
        assert tok.decode(r.model_dump()['prompt_token_ids']).endswith('<|im_start|>assistant\n')   # thinking on: no block
    assert len(served) == 3
    with inf.serve(chat_template_kwargs={'enable_thinking': False}) as srv:
        inf.generate, answers = scripted, iter(['It is 5.'])
        r = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0).chat.completions.create(
            model='tiny', messages=msgs[:1], max_tokens=8, extra_body={'return_token_ids': True})
        assert tok.decode(r.model_dump()['prompt_token_ids']).endswith('<think>\n\n</think>\n\n')


@pytest.mark.parametrize('kw', [None, {'date_string': '01 Jan 2025'}])
def test_recorded_chat_template_kwargs_render_as_served(tmp_path, kw):
    """A recording proxy keeps the template variables each exchange was rendered with (step metadata
    `template_kwargs`), and the drift check renders with them: before, a server default or a request's
    `chat_template_kwargs` changed the recorded prompt ids but was kept nowhere, so every such record read as drift"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.serving.model import _result
    from knowlyr_lab.serving.recording import ExchangeRecorder
    from knowlyr_lab.trainer.drift import drift_report
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template('llama3_1'))          # its system header says the date it is given
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny', prefix_cache=0)
    def scripted(convs, tools=None, *a, template_kwargs=None, **k):
        p = tok(inf.render(convs[0], tools, template_kwargs=template_kwargs), add_special_tokens=False)['input_ids']
        reply = tok('It is 5.', add_special_tokens=False)['input_ids'] + [tok.convert_tokens_to_ids('<|eot_id|>')]
        return [_result(tok, reply, [0.0] * len(reply), p, inf.stop_ids)]
    inf.generate, rec = scripted, ExchangeRecorder(tmp_path / 'rec')
    with inf.serve(record_to=rec, **({'chat_template_kwargs': kw} if kw else {})) as srv:
        openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0).chat.completions.create(
            model='tiny', messages=[{'role': 'user', 'content': 'Compute 2 + 3.'}], max_tokens=8)
    rec.flush(); t = next(iter(rec.store))
    assert t.steps[0].metadata.get('template_kwargs') == kw
    assert drift_report(tok, t)['drift'] is False

def test_served_chat_template_kwargs_and_the_prefix_cache():
    """The prefix cache keys its entries by token ids, so a prompt rendered with other template arguments reuses only the
    ids it shares: with the cache on, each request (thinking off, on, off again) generates what a cache-less model does"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template('qwen3'))
    model = make_tiny_model(tokenizer=tok, hidden_size=32)[0]
    cached, plain = AgentInference(model, tok, name='tiny'), AgentInference(model, tok, name='tiny', prefix_cache=0)
    assert cached.cache.max_sequences
    msgs = [{'role': 'user', 'content': 'Compute 2 + 3.'}]
    def ask(inf, off):
        with inf.serve() as srv:
            r = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0).chat.completions.create(
                model='tiny', messages=msgs, max_tokens=6, extra_body={'return_token_ids': True, **({'chat_template_kwargs': {'enable_thinking': False}} if off else {})})
        d = r.model_dump()
        return d['prompt_token_ids'], d['choices'][0]['token_ids']
    got = [ask(cached, off) for off in (True, False, True)]
    assert got[0][0] != got[1][0] and got[0] == got[2]
    assert got == [ask(plain, off) for off in (True, False, True)] and cached.cache.stats['reused'] > 0


def test_served_builtin_tool_call_with_arguments_not_json_is_a_400():
    """Llama 3.1's template writes a built-in tool's call (`builtin_tools`) with `arguments | items`: a history call to one
    with arguments that are not a JSON object fails there (TypeError). The client is told which call, in one line"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template('llama3_1'))
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny', prefix_cache=0)
    msgs = [{'role': 'user', 'content': 'Search the weather.'},
            {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'call_1', 'type': 'function', 'function': {'name': 'brave_search', 'arguments': '{"query": "weather'}}]},
            {'role': 'tool', 'tool_call_id': 'call_1', 'content': 'sunny'}]
    with inf.serve() as srv:
        client = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0)
        body = {'chat_template_kwargs': {'builtin_tools': ['brave_search', 'wolfram_alpha']}}
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model='tiny', messages=msgs, max_tokens=2, extra_body=body)
        msg = e.value.body['message']
        assert 'messages[1].tool_calls[0]' in msg and 'not a JSON object' in msg and '\n' not in msg, msg
        ok = [msgs[0], {**msgs[1], 'tool_calls': [{**msgs[1]['tool_calls'][0], 'function': {'name': 'brave_search', 'arguments': '{"query": "weather"}'}}]}, msgs[2]]
        seen, render = [], inf.render
        inf.render = lambda *a, **kw: seen.append(render(*a, **kw)) or seen[-1]
        client.chat.completions.create(model='tiny', messages=ok, max_tokens=2, extra_body=body)
    assert '<|python_tag|>brave_search.call(query="weather")' in seen[-1] and 'Tools: brave_search, wolfram_alpha' in seen[-1], seen[-1]


@pytest.fixture(scope='module')
def thinking_off_record(tmp_path_factory):
    """A Qwen3 exchange recorded by the proxy of a server that turns thinking off (`chat_template_kwargs`), whose reply
    was sampled one character per token: its ids drift from the template (retokenization), so `recorded_ids='rerender'`
    re-renders its messages"""
    openai = pytest.importorskip('openai')
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.serving.model import _result
    from knowlyr_lab.serving.recording import ExchangeRecorder
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = train_tokenizer(['Compute 2 + 3. It is 5.'], chat_template=trl_template('qwen3_training'))
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny', prefix_cache=0)
    end = tok.convert_tokens_to_ids('<|im_end|>')
    def scripted(convs, tools=None, *a, template_kwargs=None, **k):
        p = tok(inf.render(convs[0], tools, template_kwargs=template_kwargs), add_special_tokens=False)['input_ids']
        reply = [i for ch in 'It is 5.' for i in tok(ch, add_special_tokens=False)['input_ids']] + [end]
        return [_result(tok, reply, [0.0] * len(reply), p, inf.stop_ids)]
    inf.generate, rec = scripted, ExchangeRecorder(tmp_path_factory.mktemp('rec'))
    with inf.serve(record_to=rec, chat_template_kwargs={'enable_thinking': False}) as srv:
        openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0).chat.completions.create(
            model='tiny', messages=[{'role': 'user', 'content': 'Compute 2 + 3.'}], max_tokens=8)
    rec.flush(); t = next(iter(rec.store))
    assert t.steps[0].metadata['template_kwargs'] == {'enable_thinking': False}
    assert tok.decode(t.steps[0].prompt_token_ids).endswith('<|im_start|>assistant\n<think>\n\n</think>\n\n')
    return tok, inf.model, t


def _trained_as_served(tok, input_ids, labels, t):
    "The re-rendered row's prompt is the recorded prompt (empty <think> block included) and its labels the reply"
    P = t.steps[0].prompt_token_ids
    assert tok.decode([i for i, l in zip(input_ids, labels) if l != -100]) == 'It is 5.<|im_end|>'
    assert input_ids[:len(P)] == P and all(l == -100 for l in labels[:len(P)])


def test_rerendered_record_trains_with_its_served_template_kwargs(thinking_off_record, tmp_path):
    """SFT and GRPO re-render a drifting recorded row with the template variables it was served with (step metadata
    `template_kwargs`): before, `enable_thinking: false` was dropped, so the empty `<think>` block the prompt ended with
    became labels, and the model was trained on a prompt it never saw"""
    from types import SimpleNamespace

    from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors, groups_from_records
    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    tok, model, t = thinking_off_record
    cfg = SFTConfig(output_dir=str(tmp_path / 'sft'), max_steps=1, batch_size=1, packing=False, progress_bar=False, recorded_ids='rerender')
    tr = SFTTrainer(cfg, model=model, tokenizer=tok, train_data=[t])
    assert tr.data_report['drifting_records'] == 1 and tr.drift_rows[0]['cause'] == 'retokenization'
    [s] = tr.samples
    _trained_as_served(tok, s['input_ids'], s['labels'], t)
    other = t.model_copy(update={'reward': 0.0})
    [g] = groups_from_records([t, other], tokenizer=tok, recorded_ids='rerender')
    b = group_tensors(SimpleNamespace(config=GRPOConfig(), tokenizer=tok, chat_format=None), g, 2)[0]
    for ids, labels in zip(b['input_ids'].tolist(), b['labels'].tolist()): _trained_as_served(tok, ids, labels, t)


def test_the_serve_command_takes_default_chat_template_kwargs(tmp_path, capsys):
    """`knowlyr-trainer serve --chat-template-kwargs JSON` (vLLM's `--default-chat-template-kwargs`) sets the template
    variables of every request; bad JSON or a key the server sets itself is one line on stderr, exit 2, before any model
    is loaded (on main there was no such flag)"""
    import os
    import signal
    import subprocess
    import sys

    openai = pytest.importorskip('openai')
    from knowlyr_lab.cli.trainer import main
    from knowlyr_lab.trainer.tiny import make_tiny_model, save_tiny_model
    for bad, says in [('{"enable_thinking": fals', 'not valid JSON'), ('{"tokenize": true}', "may not set 'tokenize'"),
                      ('[1]', 'must be a JSON object')]:
        assert main(['serve', '--model', str(tmp_path / 'absent'), '--chat-template-kwargs', bad]) == 2
        err = capsys.readouterr().err
        assert err.count('\n') == 1 and 'knowlyr-trainer serve: error: argument --chat-template-kwargs' in err and says in err, err
    tok = tokenizer_with(trl_template('qwen3'))
    save_tiny_model(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, tmp_path / 'model')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, '-m', 'knowlyr_lab.cli.trainer', 'serve', '--model', str(tmp_path / 'model'), '--port', '0',
                          '--chat-template-kwargs', '{"enable_thinking": false}'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = json.loads(p.stdout.readline())['url']
        client = openai.OpenAI(base_url=url, api_key='x', max_retries=0)
        ask = lambda **kw: tok.decode(client.chat.completions.create(
            model='tiny', messages=[{'role': 'user', 'content': 'Compute 2 + 3.'}], max_tokens=2,
            extra_body={'return_token_ids': True, **kw}).model_dump()['prompt_token_ids'])
        assert ask().endswith('<|im_start|>assistant\n<think>\n\n</think>\n\n')                     # the server's default
        assert ask(chat_template_kwargs={'enable_thinking': True}).endswith('<|im_start|>assistant\n')   # a request's wins
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill()
    assert p.returncode == 0


def _scored(tok, side):
    return tok.decode([i for i, l in zip(side['input_ids'], side['labels']) if l != -100])


@pytest.mark.parametrize('mask', [True, False])
def test_dpo_pair_renders_with_its_chat_template_kwargs(mask):
    """A DPO row's `chat_template_kwargs` (TRL's per-row template variables) render both sides, read and checked as
    SFT's `to_chat` reads them: before, `tokenize_pair` ignored them, so with Qwen3's thinking off the chosen side
    scored `<think>\\n\\n</think>\\n\\nIt is 5.<|im_end|>` (the empty block the served prompt ended with) where SFT
    scores `It is 5.<|im_end|>`, and a reserved key was not refused"""
    from knowlyr_lab.trainer.dpo import tokenize_pair
    tok = train_tokenizer(['Compute 2 + 3. It is 5.'], chat_template=trl_template('qwen3_training'))
    kw, prompt = {'enable_thinking': False}, [{'role': 'user', 'content': 'Compute 2 + 3.'}]
    sft = tokenize_chat(tok, to_chat({'messages': prompt + [{'role': 'assistant', 'content': 'It is 5.'}], 'chat_template_kwargs': kw}),
                        mask_observations=mask)
    for row_kw in (kw, json.dumps(kw)):                 # a dict, or a JSON string as a parquet column holds it
        pair = {'prompt': prompt, 'chosen': [{'role': 'assistant', 'content': 'It is 5.'}],
                'rejected': [{'role': 'assistant', 'content': 'It is 6.'}], 'chat_template_kwargs': row_kw}
        out = tokenize_pair(tok, pair, mask_observations=mask)
        assert out['chosen']['input_ids'] == sft['input_ids']
        end = '<|im_end|>' + ('' if mask else '\n')     # unmasked, TRL's completion: the turn's newline too
        assert _scored(tok, out['chosen']) == 'It is 5.' + end and _scored(tok, out['rejected']) == 'It is 6.' + end
    with pytest.raises(DataFormatError, match=r"^p\.jsonl:3: 'chat_template_kwargs' may not set 'add_generation_prompt'"):
        tokenize_pair(tok, {**pair, 'chat_template_kwargs': {'add_generation_prompt': True}}, 'p.jsonl:3')


def test_dpo_pair_without_chat_template_kwargs_tokenizes_as_before():
    """Rows without `chat_template_kwargs` (absent, null, '{}'), with and without tools (a list, a JSON string), masked
    and unmasked, tokenize byte-identically to before rows' template variables were read (digest taken on main)"""
    import hashlib

    from knowlyr_lab.trainer.dpo import tokenize_pair
    from knowlyr_lab.trainer.tiny import CHATML_TOOL_TEMPLATE
    tok = train_tokenizer(['Reach col 1. Go east, then south. You moved.'], vocab_size=2048, chat_template=CHATML_TOOL_TEMPLATE)
    move = lambda d: {'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': 'move', 'arguments': {'direction': d}}}]}
    tools = env_tools('knowlyr/maze-easy')
    rows = [{'prompt': 'Reach col 1.', 'chosen': 'east', 'rejected': 'north, then west'},
            {'prompt': [{'role': 'system', 'content': 'Solve mazes.'}, {'role': 'user', 'content': 'Reach col 1.'}],
             'chosen': [move('east'), {'role': 'tool', 'content': 'You moved east.'}, move('south')], 'rejected': [move('north')],
             'tools': json.dumps(tools)},
            {'prompt': [{'role': 'user', 'content': 'Reach col 1.'}], 'chosen': [move('east')], 'rejected': [move('west')],
             'tools': tools, 'chat_template_kwargs': None},
            {'prompt': [{'role': 'user', 'content': 'Go east.'}], 'chosen': {'role': 'assistant', 'content': 'east'},
             'rejected': [{'role': 'assistant', 'content': 'south'}], 'chat_template_kwargs': '{}'}]
    h = hashlib.sha256()
    for mask in (True, False):
        for r in rows: h.update(json.dumps(tokenize_pair(tok, r, mask_observations=mask), sort_keys=True).encode())
    assert h.hexdigest()[:16] == '06de1842477a9e26'


def _served(kw, *thoughts, **meta):
    "A trajectory of the arith task whose steps (thoughts, no recorded ids) were served with template variables `kw`"
    from knowlyr_lab.trajectory import Outcome, Step, Task, Trajectory
    steps = [Step(index=i, thought=th, reward=0.5, metadata={**meta, **({'template_kwargs': kw} if kw is not None else {})})
             for i, th in enumerate(thoughts)]
    return Trajectory(task=Task(id='add', instruction='Compute 2 + 3.'), steps=steps, outcome=Outcome(success=True), reward=1.0)


def test_a_trajectory_trains_under_the_template_kwargs_it_was_served_with(tmp_path):
    """A `Trajectory` given to the trainer (no recorded ids, so re-rendered by `to_chat`) renders with the template
    variables its steps were served with (`served_template_kwargs`), in SFT, offline GRPO and online GRPO's scoring:
    before, `to_chat` dropped them, so a Qwen3 episode served with thinking off trained on a prompt ending on the
    assistant header and scored the empty `<think>` block as the model's reply. Steps served two ways, or with a key the
    renderer sets itself, are the record's error (file, field), not silently trained"""
    from types import SimpleNamespace

    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors, groups_from_records
    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = train_tokenizer(['Compute 2 + 3. It is 5.'], chat_template=trl_template('qwen3_training'))
    off, t = {'enable_thinking': False}, _served({'enable_thinking': False}, 'It is 5.')
    P = tok(render_chat(tok, [{'role': 'user', 'content': 'Compute 2 + 3.'}], None, True, template_kwargs=off), add_special_tokens=False)['input_ids']
    assert tok.decode(P).endswith('<|im_start|>assistant\n<think>\n\n</think>\n\n')      # the prompt it was served

    def as_served(ids, labels):
        assert tok.decode([i for i, l in zip(ids, labels) if l != -100]) == 'It is 5.<|im_end|>'
        assert ids[:len(P)] == P and all(l == -100 for l in labels[:len(P)])

    cfg = SFTConfig(output_dir=str(tmp_path / 'sft'), max_steps=1, batch_size=1, packing=False, progress_bar=False)
    mixed = _served(off, 'It is 5.').model_copy(update={'steps': [*t.steps, *_served(None, 'Done.').steps[:1]]})
    tr = SFTTrainer(cfg, model=make_tiny_model(tokenizer=tok, hidden_size=32)[0], tokenizer=tok,
                    train_data=[t, mixed, _served({'tokenize': True}, 'It is 5.')])
    s = tr.samples[0]
    as_served(s['input_ids'], s['labels'])
    assert len(tr.samples) == 1
    assert to_chat(t, 'x.jsonl:1')['template_kwargs'] == off
    assert [e['error'] for e in tr.errors] == [
        "record[1]: field 'steps.metadata.template_kwargs': steps 0 and 1 were served with other chat template variables: "
        "{'enable_thinking': False}, None",
        "record[2]: field 'steps.metadata.template_kwargs': 'chat_template_kwargs' may not set 'tokenize': the server passes "
        "it to the template"], tr.errors
    [g] = groups_from_records([t, t.model_copy(update={'reward': 0.0})])
    b = group_tensors(SimpleNamespace(config=GRPOConfig(), tokenizer=tok, chat_format=None), g, 2)[0]
    for ids, labels in zip(b['input_ids'].tolist(), b['labels'].tolist()): as_served(ids, labels)
    online = GRPOTrainer._score(SimpleNamespace(system_prompt=None, tools=None, episode_reward_fn=None), t)
    assert online['template_kwargs'] == off
    s = tokenize_chat(tok, online)
    as_served(s['input_ids'], s['labels'])


def test_trajectories_without_template_kwargs_tokenize_as_before():
    """Trajectories served without template variables (none recorded, an empty `{}`, other step metadata), with tool
    calls, tokenize byte-identically to before `to_chat` read the served variables (digest taken on main at d2faa65;
    retaken when step weights became token-weighted: only the step-weighted samples' 'weights' changed)"""
    import hashlib

    from knowlyr_lab.trainer.data import tokenize_chats
    from knowlyr_lab.trainer.tiny import CHATML_TOOL_TEMPLATE
    trajs = oracle_trajectories('knowlyr/maze-easy', [0, 1])
    trajs += [trajs[0].model_copy(update={'steps': [s.model_copy(update={'metadata': {**s.metadata, 'template_kwargs': {}}}) for s in trajs[0].steps]}),
              _served(None, 'It is 5.', finish_reason='stop'), _served({}, 'It is', '5.')]
    tools, h = env_tools('knowlyr/maze-easy'), hashlib.sha256()
    for tmpl in (CHATML_TOOL_TEMPLATE, trl_template('qwen3_training')):
        tok = train_tokenizer(['Reach col 1. Go east, then south. You moved. Compute 2 + 3. It is 5.'], vocab_size=2048, chat_template=tmpl)
        chats = [to_chat(t, f'r{i}', tools=tools) for i, t in enumerate(trajs)]
        assert not any('template_kwargs' in c for c in chats)
        for mask, sw in ((True, False), (False, True)):
            for s in tokenize_chats(tok, chats, mask, sw): h.update(json.dumps(s, sort_keys=True).encode())
    assert h.hexdigest()[:16] == 'abbd903cfd4ad286'

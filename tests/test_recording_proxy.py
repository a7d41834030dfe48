"""The recording proxy round trip (issue 28, item 4): a harness talks to `serve(record_to=...)` through the real `openai`
SDK (a multi-turn episode with a tool call and its result), the store holds the exchanges as trajectories with their
token ids, and SFT and GRPO train on exactly those ids: the ids the model is fed are compared with the recorded ones."""
import json

import pytest
import torch

TOOLS = [{'type': 'function', 'function': {'name': 'add', 'description': 'Add two integers',
          'parameters': {'type': 'object', 'properties': {'a': {'type': 'integer'}, 'b': {'type': 'integer'}}, 'required': ['a', 'b']}}}]
START = [{'role': 'system', 'content': 'Use the add tool.'}, {'role': 'user', 'content': 'What is 2 + 3?'}]


def _teach(model, tok):
    "A few steps of plain next-token training on one episode, so greedy decoding calls the tool and then answers"
    from knowlyr_lab.chat import render_chat, tool_call
    chat = START + [{'role': 'assistant', 'content': '', 'tool_calls': [tool_call('add', {'a': 2, 'b': 3}, 'call_0')]},
                    {'role': 'tool', 'tool_call_id': 'call_0', 'content': '5'}, {'role': 'assistant', 'content': 'It is 5.'}]
    ids = torch.tensor([tok(render_chat(tok, chat, TOOLS), add_special_tokens=False)['input_ids']])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(120):
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(); loss.backward(); opt.step()
    model.eval()
    return float(loss.detach())


def _harness(client, headers=None, temperature=0.0, seed=None):
    "What an agent harness does: call the model, run the tools it asks for, send the results back, until it answers"
    msgs, seen = [dict(m) for m in START], []
    for _ in range(4):
        r = client.chat.completions.create(model='tiny', messages=msgs, tools=TOOLS, max_tokens=48, temperature=temperature, seed=seed,
                                           extra_headers=headers or {}, extra_body={'return_token_ids': True})
        d = r.model_dump()
        seen.append((d['prompt_token_ids'], d['choices'][0]['token_ids']))
        m = r.choices[0].message
        msgs.append(m.model_dump(exclude_none=True, include={'role', 'content', 'tool_calls'}))
        if not m.tool_calls: break
        for tc in m.tool_calls:
            a = json.loads(tc.function.arguments)
            msgs.append({'role': 'tool', 'tool_call_id': tc.id, 'content': str(a['a'] + a['b'])})
    return msgs, seen


@pytest.fixture(scope='module')
def recorded(tmp_path_factory):
    import openai

    from knowlyr_lab.hub.store import TrajectoryStore
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model, train_tokenizer
    torch.manual_seed(0)
    tok = train_tokenizer()
    model, tok = make_tiny_model(tokenizer=tok, hidden_size=64)
    assert _teach(model, tok) < 0.5
    inf = AgentInference(model, tok, name='tiny', prefix_cache=0)
    root = tmp_path_factory.mktemp('store')
    srv = inf.serve(record_to=root)
    client = openai.OpenAI(base_url=srv.url, api_key='not-needed')
    try:
        runs = [_harness(client, {'X-Knowlyr-Task': 'add-2-3'}),                                    # grouped by its messages
                _harness(client, {'X-Knowlyr-Task': 'add-2-3', 'X-Knowlyr-Episode': 'ep-2'}, 1.0, 7)]  # grouped by its header
    finally:
        srv.shutdown(); srv.server_close()                    # shutdown writes the open episodes
    store = TrajectoryStore(root)
    return tok, model, runs, store, list(store)


def test_the_store_holds_each_episode_with_its_ids(recorded):
    tok, model, runs, store, trajs = recorded
    assert len(trajs) == 2 and {t.task.id for t in trajs} == {'add-2-3'}
    from knowlyr_lab.serving.recording import message_key
    for (msgs, seen), t in zip(runs, sorted(trajs, key=lambda t: t.metadata['episode'] is not None)):
        assert [(s.prompt_token_ids, s.token_ids) for s in t.steps] == seen          # what the client was told, step by step
        assert [message_key(m) for m in t.metadata['messages']] == [message_key(m) for m in msgs]   # the whole conversation, rebuilt
        assert all(len(s.logprobs) == len(s.token_ids) for s in t.steps)
        assert all(s.usage.input == len(s.prompt_token_ids) and s.t_end >= s.t_start for s in t.steps)
    t = next(t for t in trajs if t.metadata['episode'] is None)
    assert len(t.steps) >= 2 and t.steps[0].action.tool == 'add' and t.steps[0].action.params == {'a': 2, 'b': 3}
    assert t.steps[0].observation.content == '5' and t.metadata['tools'] == TOOLS
    assert t.metadata['messages'][:len(START)] == START and t.metadata['messages'][-1]['role'] == 'assistant'


def _feed_log(model):
    "Record the input ids of every forward pass (padding dropped where there is an attention mask)"
    fed = []
    def hook(mod, args, kwargs):
        ids, m = kwargs.get('input_ids'), kwargs.get('attention_mask')
        for k in range(ids.shape[0]):
            keep = m[k].bool() if m is not None and m.dim() == 2 else slice(None)
            fed.append(tuple(ids[k][keep].tolist()))
    return fed, model.register_forward_pre_hook(hook, with_kwargs=True)


def _expected(trajs):
    from knowlyr_lab.trainer.drift import recorded_samples
    return {tuple(p['input_ids']) for t in trajs for p in recorded_samples(t)}


def test_sft_trains_on_the_recorded_ids(recorded, tmp_path):
    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    tok, model, runs, store, trajs = recorded
    cfg = SFTConfig(output_dir=str(tmp_path / 'sft'), max_steps=3, batch_size=1, packing=False, learning_rate=1e-4, progress_bar=False, logging_steps=1)
    tr = SFTTrainer(cfg, model=model, tokenizer=tok, train_data=store)
    assert tr.data_report['recorded_records'] == 2 and tr.data_report['drifting_records'] == 0
    for s in tr.samples:                                      # prompt ids masked, every completion id trained, nothing re-tokenized
        t = next(t for t in trajs if t.steps[-1].prompt_token_ids + t.steps[-1].token_ids == s['input_ids'])
        assert [i for i, l in zip(s['input_ids'], s['labels']) if l != -100] == [i for st in t.steps for i in st.token_ids]
    fed, h = _feed_log(tr.model)
    try: tr.train()
    finally: h.remove()
    assert len(fed) == 3 and set(fed) <= _expected(trajs) and set(fed) == _expected(trajs)


def test_grpo_trains_on_the_recorded_ids(recorded, tmp_path):
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    tok, model, runs, store, trajs = recorded
    scored = [t.model_copy(update={'reward': float(t.metadata['episode'] is None)}) for t in trajs]   # a verifier's verdicts
    cfg = GRPOConfig(output_dir=str(tmp_path / 'grpo'), max_steps=2, num_epochs=2, num_generations=2, tasks_per_step=1, batch_size=2,
                     learning_rate=1e-4, progress_bar=False)
    tr = GRPOTrainer(cfg, model=model, tokenizer=tok)
    fed, h = _feed_log(tr.model)
    try: rows = tr.train_offline(scored)
    finally: h.remove()
    assert len(tr.groups) == 1 and all('samples' in m for m in tr.groups[0]) and rows[0]['reward'] == 0.5
    assert fed and set(fed) == _expected(trajs)
    assert not any(r['drift'] for r in tr.drift_rows)


def test_a_drifting_recorded_row_is_split_refused_or_rerendered(recorded, tmp_path):
    from knowlyr_lab.trainer.data import DataFormatError
    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    tok, model, runs, store, trajs = recorded
    t = next(t for t in trajs if len(t.steps) >= 2)
    compact = tok('<tool_call>{"name": "add", "arguments": {"a":2,"b":3}}</tool_call><|im_end|>', add_special_tokens=False)['input_ids']
    steps = [t.steps[0].model_copy(update={'token_ids': compact, 'logprobs': None})] + t.steps[1:]
    bad = t.model_copy(update={'steps': steps})               # the model wrote compact JSON; the chat layer renders it with spaces
    cfg = dict(output_dir=str(tmp_path / 'x'), max_steps=1, batch_size=1, packing=False, progress_bar=False)
    split = SFTTrainer(SFTConfig(**cfg), model=model, tokenizer=tok, train_data=[bad])
    assert split.data_report['drifting_records'] == 1 and split.drift_rows[0]['cause'] == 'whitespace/normalisation'
    assert [s['input_ids'] for s in split.samples] == [t.steps[0].prompt_token_ids + compact,
                                                       t.steps[-1].prompt_token_ids + t.steps[-1].token_ids]
    with pytest.raises(DataFormatError, match=r'record\[0\]: recorded ids drift from the chat template at token \d+ of step 0'):
        SFTTrainer(SFTConfig(**cfg, recorded_ids='refuse'), model=model, tokenizer=tok, train_data=[bad])
    again = SFTTrainer(SFTConfig(**cfg, recorded_ids='rerender'), model=model, tokenizer=tok, train_data=[bad])
    from knowlyr_lab.chat import render_chat
    want = tok(render_chat(tok, bad.metadata['messages'], TOOLS), add_special_tokens=False)['input_ids']
    assert [s['input_ids'] for s in again.samples] == [want] and again.data_report['drifting_records'] == 1


def test_the_serve_command_records_until_stopped(recorded, tmp_path):
    "`knowlyr-trainer serve --record-to` as a harness operator runs it: SIGTERM writes the open episode to the store"
    import os
    import signal
    import subprocess
    import sys

    import openai

    from knowlyr_lab.hub.store import TrajectoryStore
    from knowlyr_lab.trainer.tiny import save_tiny_model
    tok, model, *_ = recorded
    save_tiny_model(model, tok, tmp_path / 'model')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, '-m', 'knowlyr_lab.cli.trainer', 'serve', '--model', str(tmp_path / 'model'), '--port', '0',
                          '--record-to', str(tmp_path / 'store')], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = json.loads(p.stdout.readline())['url']
        r = openai.OpenAI(base_url=url, api_key='x').chat.completions.create(model='tiny', messages=START, tools=TOOLS, max_tokens=48,
                                                                             extra_body={'return_token_ids': True})
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill()
    assert p.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {'recorded': 1}
    [t] = list(TrajectoryStore(tmp_path / 'store'))
    d = r.model_dump()
    assert t.steps[0].prompt_token_ids == d['prompt_token_ids'] and t.steps[0].token_ids == d['choices'][0]['token_ids']


def test_grpo_can_take_the_old_log_probs_from_the_recording(recorded, tmp_path):
    "use_recorded_logprobs: the ratio's old log-probs are the sampler's, as recorded, at exactly the completion tokens"
    from knowlyr_lab.config import ConfigError
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    tok, model, runs, store, trajs = recorded
    scored = [t.model_copy(update={'reward': float(t.metadata['episode'] is None)}) for t in trajs]
    cfg = dict(output_dir=str(tmp_path / 'g'), max_steps=1, num_generations=2, tasks_per_step=1, batch_size=2, progress_bar=False)
    import copy
    policy = copy.deepcopy(model)                     # the trainer's policy has moved on since the recording
    with torch.no_grad(): policy.lm_head.weight.add_(0.05 * torch.randn_like(policy.lm_head.weight))
    want = [torch.tensor([x for s in t.steps for x in s.logprobs]) for t in trajs]
    def olds(use):
        tr = GRPOTrainer(GRPOConfig(**cfg, use_recorded_logprobs=use), model=copy.deepcopy(policy), tokenizer=tok)
        tr.train_offline(scored)
        b = tr._batch['tensors']
        assert b['has_recorded'].all() and ('old' in b) == use   # without the recording (one step per batch) old is the step's own log-probs
        with torch.no_grad(): old = b['old'] if use else tr._logps(tr.model, b)[0]
        return [old[i][b['mask'][i]] for i in range(len(old))]
    close = lambda g: any(len(g) == len(w) and torch.allclose(g, w, atol=1e-5, rtol=0) for w in want)
    assert all(close(g) for g in olds(True))          # each row's old log-probs are one recording's, token for token
    assert not any(close(g) for g in olds(False))     # the policy's own differ
    with pytest.raises(ConfigError, match='use_recorded_logprobs needs temperature 1.0'):
        GRPOConfig(**cfg, use_recorded_logprobs=True, temperature=0.7)


# issue 39 item 5: a recording proxy facing hostile clients. A plain tiny model (no teaching needed).

@pytest.fixture(scope='module')
def plain():
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    torch.manual_seed(0)
    model, tok = make_tiny_model(hidden_size=32)
    return AgentInference(model, tok, name='tiny')

def _post(url, body:dict, key='k', timeout=120):
    "(status, JSON answer) of a chat request sent with API key `key`, through plain http.client"
    import http.client
    host, port = url.split('//')[1].split('/')[0].split(':')
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        c.request('POST', '/v1/chat/completions', body=json.dumps(body).encode(),
                  headers={'Content-Type': 'application/json', 'Authorization': f'Bearer {key}'})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b'{}')
    finally: c.close()

def test_a_spoofed_episode_header_cannot_join_another_clients_episode(plain, tmp_path):
    import openai

    from knowlyr_lab.hub.store import TrajectoryStore
    srv = plain.serve(record_to=tmp_path / 'store')
    try:
        victim, attacker = (openai.OpenAI(base_url=srv.url, api_key=k) for k in ('victim-key', 'attacker-key'))
        ep = {'X-Knowlyr-Episode': 'ep-1', 'X-Knowlyr-Task': 'victim-task'}
        talk = [{'role': 'user', 'content': 'You are at row 0, col 0.'}]
        r = victim.chat.completions.create(model='tiny', messages=talk, max_tokens=4, extra_headers=ep)
        attacker.chat.completions.create(model='tiny', messages=[{'role': 'user', 'content': 'injected'}], max_tokens=4,
                                         extra_headers={'X-Knowlyr-Episode': 'ep-1', 'X-Knowlyr-Task': 'stolen'})
        talk += [r.choices[0].message.model_dump(exclude_none=True, include={'role', 'content'}), {'role': 'user', 'content': 'Go on.'}]
        victim.chat.completions.create(model='tiny', messages=talk, max_tokens=4, extra_headers=ep)
    finally: srv.shutdown(); srv.server_close()
    trajs = {t.task.id: t for t in TrajectoryStore(tmp_path / 'store')}
    assert sorted(trajs) == ['stolen', 'victim-task']
    mine = trajs['victim-task']
    assert len(mine.steps) == 2 and mine.metadata['messages'][:3] == talk          # the victim's two exchanges, nothing else
    assert 'injected' not in json.dumps(mine.metadata['messages'])
    assert len(trajs['stolen'].steps) == 1 and trajs['stolen'].metadata['messages'][0]['content'] == 'injected'

def test_fields_the_model_never_sees_are_not_stored(plain, tmp_path):
    from knowlyr_lab.hub.store import TrajectoryStore
    junk = 'j' * 3_900_000
    srv = plain.serve(record_to=tmp_path / 'store')
    try:
        for k in range(3):
            status, resp = _post(srv.url, {'messages': [{'role': 'user', 'content': f'hi {k}', 'junk': junk}], 'max_tokens': 2})
            assert status == 200, resp
        held = sum(len(json.dumps(nd['messages'] or nd['added'])) for ch in srv.recorder._chains.values() for nd in ch)
        assert held < 10_000, held                             # the open episodes hold the prompt, not the junk
    finally: srv.shutdown(); srv.server_close()
    trajs = list(TrajectoryStore(tmp_path / 'store'))
    assert len(trajs) == 3 and all(t.metadata['messages'][0] == {'role': 'user', 'content': t.task.instruction} for t in trajs)
    size = sum(f.stat().st_size for f in (tmp_path / 'store').rglob('*') if f.is_file())
    assert size < 1_000_000, size

def test_a_lone_surrogate_is_a_400_that_costs_no_one_else(plain, tmp_path):
    import threading

    from knowlyr_lab.hub.store import TrajectoryStore
    from knowlyr_lab.serving.recording import ExchangeRecorder
    srv = plain.serve(record_to=ExchangeRecorder(tmp_path / 'store', max_open=1))   # every new episode writes the one before
    bad = [{'role': 'user', 'content': 'hi', 'junk': '\ud800'}, {'role': 'user', 'content': 'hi \udfff'}]
    out = {}
    def send(name, body, key): out[name] = _post(srv.url, body, key)
    try:
        assert _post(srv.url, {'messages': bad[:1], 'max_tokens': 2})[0] == 400     # alone first: on main it was answered and recorded
        ts = [threading.Thread(target=send, args=(f'innocent-{k}', {'messages': [{'role': 'user', 'content': f'innocent {k}'}], 'max_tokens': 2}, f'k{k}'))
              for k in range(4)]
        ts += [threading.Thread(target=send, args=(f'bad-{k}', {'messages': bad[k:k + 1], 'max_tokens': 2}, 'mallory')) for k in range(2)]
        for t in ts: t.start()
        for t in ts: t.join(300)
    finally:
        srv.shutdown(); srv.server_close()                     # writes the open episode; must not raise
    for k, field in enumerate(('messages[0].junk', 'messages[0].content')):
        status, resp = out[f'bad-{k}']
        assert status == 400 and f'{field} is not valid Unicode' in resp['error']['message'] and resp['error']['param'] == field, resp
    assert [out[f'innocent-{k}'][0] for k in range(4)] == [200] * 4, out
    assert not srv.recorder.errors
    assert sorted(t.task.instruction for t in TrajectoryStore(tmp_path / 'store')) == [f'innocent {k}' for k in range(4)]

def test_an_exchange_answered_while_the_server_stops_is_recorded(plain, tmp_path):
    "On main `shutdown` flushed the recorder while a request was still generating: its client got a 200, the store nothing"
    import threading
    import time

    from knowlyr_lab.hub.store import TrajectoryStore
    srv = plain.serve(record_to=tmp_path / 'store')
    got = {}
    t = threading.Thread(target=lambda: got.update(r=_post(srv.url, {'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 400})))
    try:
        t.start()
        for _ in range(600):                               # wait until the model is busy with it
            if srv.lock.locked(): break
            time.sleep(0.05)
        assert srv.lock.locked()
    finally: srv.shutdown(); srv.server_close()            # as `serve` does on Ctrl-C
    t.join(120)
    assert got['r'][0] == 200
    assert len(list(TrajectoryStore(tmp_path / 'store'))) == 1 and not srv.recorder._chains

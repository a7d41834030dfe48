"""`serve` returns what a recording harness needs (issue 28, item 4): per-token log-probs in OpenAI's shape and the
prompt's and completion's token ids (vLLM's `return_token_ids`), checked against the model itself with the real `openai` SDK."""
import pytest
import torch


@pytest.fixture(scope='module')
def served():
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    model, tok = make_tiny_model(hidden_size=32)
    inf = AgentInference(model, tok, name='tiny', prefix_cache=0)
    srv = inf.serve()
    yield inf, srv
    srv.shutdown(); srv.server_close()

def test_logprobs_and_token_ids_match_the_model(served):
    import openai
    inf, srv = served
    client = openai.OpenAI(base_url=srv.url, api_key='not-needed')
    msgs = [{'role': 'user', 'content': 'You are at row 0, col 0.'}]
    r = client.chat.completions.create(model='tiny', messages=msgs, max_tokens=12, logprobs=True, top_logprobs=3,
                                       extra_body={'return_token_ids': True})
    d = r.model_dump()
    prompt_ids, ids = d['prompt_token_ids'], d['choices'][0]['token_ids']
    assert prompt_ids == inf.tokenizer(inf.render(msgs), add_special_tokens=False)['input_ids']
    content = r.choices[0].logprobs.content
    assert len(content) == len(ids) == r.usage.completion_tokens and len(prompt_ids) == r.usage.prompt_tokens
    assert all(len(c.top_logprobs) == 3 and c.top_logprobs[0].logprob >= c.logprob - 1e-6 for c in content)
    # the same numbers from one forward pass of the model over prompt + completion (teacher forcing)
    with torch.no_grad(): logits = inf.model(torch.tensor([prompt_ids + ids])).logits[0]
    want = torch.log_softmax(logits[len(prompt_ids) - 1:-1].float(), -1)[torch.arange(len(ids)), torch.tensor(ids)]
    torch.testing.assert_close(torch.tensor([c.logprob for c in content]), want, atol=2e-4, rtol=0)
    assert inf.tokenizer.decode(ids, skip_special_tokens=True) == r.choices[0].message.content

def test_without_the_options_the_answer_is_plain(served):
    import openai
    _, srv = served
    r = openai.OpenAI(base_url=srv.url, api_key='x').chat.completions.create(model='tiny', messages=[{'role': 'user', 'content': 'hi'}], max_tokens=4)
    d = r.model_dump()
    assert r.choices[0].logprobs is None and 'prompt_token_ids' not in d and 'token_ids' not in d['choices'][0]

def test_a_stream_carries_logprobs_and_token_ids(served):
    "A streamed answer gives what the plain one gives: log-probs and token ids (on main every chunk had logprobs None)"
    import openai
    inf, srv = served
    client = openai.OpenAI(base_url=srv.url, api_key='x', max_retries=0)
    msgs = [{'role': 'user', 'content': 'You are at row 0, col 0.'}]
    kw = dict(model='tiny', messages=msgs, max_tokens=10, logprobs=True, top_logprobs=2, extra_body={'return_token_ids': True})
    plain = client.chat.completions.create(**kw).model_dump()
    chunks = [c.model_dump() for c in client.chat.completions.create(**kw, stream=True)]
    lps = [x for c in chunks for ch in c['choices'] if ch['logprobs'] for x in ch['logprobs']['content']]
    assert lps == plain['choices'][0]['logprobs']['content']
    assert [i for c in chunks for ch in c['choices'] for i in ch.get('token_ids') or []] == plain['choices'][0]['token_ids']
    assert chunks[0]['prompt_token_ids'] == plain['prompt_token_ids'] and all('prompt_token_ids' not in c for c in chunks[1:])
    with client.chat.completions.stream(**kw) as s:     # the SDK's own accumulation (its final parse refuses 'length')
        for _ in s: pass
        final = s.current_completion_snapshot
    assert [x.logprob for x in final.choices[0].logprobs.content] == [x['logprob'] for x in lps]

"""Issue 38 item 6: `AgentInference(static_cache=True)` decodes over a cache of fixed size (a CUDA graph per step on a
GPU). On the CPU it must give what the dynamic cache gives: the same greedy replies, the same sampled replies and
log-probs under one seed, and a prefix cache that later turns reuse the same way."""
import torch

from knowlyr_lab.serving import AgentInference
from knowlyr_lab.trainer.data import env_tools
from knowlyr_lab.trainer.sft import oracle_trajectories, render_corpus
from knowlyr_lab.trainer.tiny import make_tiny_model

ENV = 'knowlyr/arith-medium'

def _model():
    corpus = render_corpus(oracle_trajectories(ENV, seeds=range(4)), tools=env_tools(ENV))
    return make_tiny_model(corpus, vocab_size=512, hidden_size=64)

def _turns(inf, temperature, seed=None):
    "Two turns of three conversations of different lengths (the second turn extends the first: the prefix cache's case)"
    convs = [[{'role': 'user', 'content': t}] for t in ('add 2 and 3', 'multiply 864 by 41 please', 'what is 7 minus 9?')]
    first = inf.generate(convs, tools=env_tools(ENV), max_new_tokens=12, temperature=temperature, seed=seed)
    convs = [c + [{'role': 'assistant', 'content': r['text']}, {'role': 'user', 'content': 'go on'}] for c, r in zip(convs, first)]
    return first + inf.generate(convs, tools=env_tools(ENV), max_new_tokens=12, temperature=temperature, seed=seed)

def test_static_decoding_gives_what_the_dynamic_cache_gives():
    model, tok = _model()
    dyn, sta = AgentInference(model, tok), AgentInference(model, tok, static_cache=True)
    a, b = _turns(dyn, 0.0), _turns(sta, 0.0)
    assert [r['token_ids'] for r in a] == [r['token_ids'] for r in b]
    assert dyn.cache.stats['reused'] == sta.cache.stats['reused'] > 0          # the second turn reused the first's keys
    a, b = _turns(AgentInference(model, tok), 1.0, seed=3), _turns(AgentInference(model, tok, static_cache=True), 1.0, seed=3)
    assert [r['token_ids'] for r in a] == [r['token_ids'] for r in b]
    assert torch.allclose(torch.tensor([x for r in a for x in r['token_logprobs']]),
                          torch.tensor([x for r in b for x in r['token_logprobs']]), atol=1e-4)

def test_logprobs_survive_a_step_output_that_is_overwritten(monkeypatch):
    "A replayed CUDA graph returns the same output tensor each step; asked-for log-probs must not all be the last step's"
    from knowlyr_lab.serving.static_decode import StaticDecoder
    model, tok = _model()
    conv = [[{'role': 'user', 'content': 'multiply 864 by 41 please'}]]
    want = AgentInference(model, tok, prefix_cache=0).generate(conv, max_new_tokens=8, logprobs=2)[0]['logprobs']
    step = StaticDecoder.step
    def replayed(self, x, pos):               # as on a GPU: one static buffer, written over at every replay (fp32: no copy)
        out = step(self, x, pos)
        if not hasattr(self, 'buf'): self.buf = torch.empty_like(out)
        return self.buf.copy_(out)
    monkeypatch.setattr(StaticDecoder, 'step', replayed)
    got = AgentInference(model, tok, prefix_cache=0, static_cache=True).generate(conv, max_new_tokens=8, logprobs=2)[0]['logprobs']
    assert [d['id'] for d in got] == [d['id'] for d in want] and len(got) > 2
    assert torch.allclose(torch.tensor([d['logprob'] for d in got]), torch.tensor([d['logprob'] for d in want]), atol=1e-4)
    assert [[j for j, _ in d['top']] for d in got] == [[j for j, _ in d['top']] for d in want]

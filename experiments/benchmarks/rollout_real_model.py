#!/usr/bin/env python
"""Rollouts on the reference real model (SmolLM2-135M-Instruct, the Q4_1 GGUF dequantised to fp32,
`knowlyr_lab.trainer.real`): generated tokens/s and episodes/s of the library's rollout runtime against plain
`model.generate` on the same episodes, measured in one run.

    python experiments/benchmarks/rollout_real_model.py --write-results     # 16 episodes (4 tasks x 4), 3 turns: a few minutes on 2 cores
    python experiments/benchmarks/rollout_real_model.py --tiny              # a tiny model: checks the script, writes nothing

Episodes: knowlyr/arith-medium (experiment 05's env), `--tasks` env seeds x `--group` episodes each (a GRPO batch:
the members of a group share their task), at most `--turns` steps each, `--max-new-tokens` per turn, sampled at
`--temperature` from softmax(logits / T) on both sides. The model is prompted as GRPO prompts it: the env's tool list
in the system turn (the chat layer's Hermes fallback format), no system prompt of its own. Both sides play their
episodes through the same engine (`rollout.engine.run_episodes`, lock-step: one batched call per turn for all live
episodes, the same env seeds, the same `LocalAgent` rendering the same history and parsing the same way); only the
generation differs:

- runtime: `AgentInference.generate` (`LocalAgent.act_batch`): the prefix KV cache (a group's common first prompt
  encoded once; each later turn encodes only what follows the conversation's cached keys and values), the plain
  decoding loop sampling softmax(logits / T), the sampled ids and their log-probs kept on the steps
  (`record_tokens`).
- plain generate: each turn renders every live episode's whole conversation with the chat template, tokenises the
  batch with left padding and calls `model.generate(do_sample=True, temperature=T, top_k=0, top_p=1.0,
  max_new_tokens=...)` (top_k=0: transformers would otherwise sample with top_k=50), KV cache within the call only,
  nothing reused across turns or rows.

The two sides sample independently (same distributions, same seeds for the envs; the tokens drawn differ), so each
side's tokens are counted from its own steps. A warm-up episode of each side comes first and is not counted; then the
sides run alternately, `--repeats` times each, and the table gives each run and the median. The runtime's time is
split by timing the model's forward passes (prefill: more than one new token per row; decode: one) and the cache's
bookkeeping; the rest is rendering, tokenising, parsing and the envs.

Writes rollout_real_model.results.json and .results.md beside this script with --write-results (with the machine,
package versions and commit from `knowlyr_lab.provenance`).
"""
import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false'); os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_VERBOSITY', 'error')
import warnings

warnings.filterwarnings('ignore')
print = functools.partial(print, flush=True)

import torch

from knowlyr_lab.chat import render_chats
from knowlyr_lab.registry import make
from knowlyr_lab.rollout.engine import run_episodes
from knowlyr_lab.rollout.spec import RolloutSpec
from knowlyr_lab.serving import AgentInference
from knowlyr_lab.serving.model import LocalAgent
from knowlyr_lab.serving.prefix_cache import PrefixCache
from knowlyr_lab.serving.static_decode import StaticDecoder
from knowlyr_lab.trainer.data import env_tools

ENV = 'knowlyr/arith-medium'

class PlainGenerate:
    "Stands in for `AgentInference` behind `LocalAgent`: each call renders the whole conversations and calls `model.generate`"
    def __init__(self, model, tokenizer):
        self.model, self.tokenizer, self.name, self.prompt = model.eval(), tokenizer, 'plain-generate', None
    @torch.no_grad()
    def generate(self, conversations, tools=None, max_new_tokens=128, temperature=0.0):
        tok = self.tokenizer
        tok.padding_side = 'left'
        enc = tok(render_chats(tok, conversations, tools, add_generation_prompt=True), add_special_tokens=False, padding=True,
                  return_tensors='pt').to(self.model.device)
        kw = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else dict(do_sample=False)
        seqs = self.model.generate(**enc, max_new_tokens=max_new_tokens, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **kw)
        res = []
        for i, row in enumerate(seqs[:, enc['input_ids'].shape[1]:].tolist()):
            ended = tok.eos_token_id in row
            n = row.index(tok.eos_token_id) + 1 if ended else len(row)
            res.append({'text': tok.decode(row[:n - 1] if ended else row[:n], skip_special_tokens=True), 'prompt_tokens': int(enc['attention_mask'][i].sum()),
                        'completion_tokens': n, 'finish_reason': 'stop' if ended else 'length', 'token_ids': row[:n]})
        return res

class Profile:
    "Seconds in the model's forward passes (prefill / decode) and in the prefix cache's bookkeeping, while installed"
    def __init__(self, model):
        self.model, self.s = model, {'prefill': 0.0, 'decode': 0.0, 'cache layout': 0.0, 'cache keep': 0.0, 'generate': 0.0}
        self.n = {'prefill calls': 0, 'prefill tokens': 0, 'decode steps': 0, 'decode rows': 0}
        self.cuda, self.in_step = next(model.parameters()).is_cuda, False
    def sync(self):
        "Wait for the GPU (not while a CUDA graph is being captured), so that a forward pass's time is its own"
        if self.cuda and not torch.cuda.is_current_stream_capturing(): torch.cuda.synchronize()
    def _timed(self, f, key):
        "`f`, its seconds added to `key` less the forward passes it made (those count as prefill or decode)"
        @functools.wraps(f)
        def g(*a, **k):
            t0, fwd0 = time.perf_counter(), self.s['prefill'] + self.s['decode']
            try: return f(*a, **k)
            finally: self.s[key] += time.perf_counter() - t0 - (self.s['prefill'] + self.s['decode'] - fwd0 if key != 'generate' else 0.0)
        return g
    def __enter__(self):
        fwd = self.model.forward
        @functools.wraps(fwd)            # the signature stays the model's: `generate` reads it (e.g. whether it takes logits_to_keep)
        def forward(*a, **k):
            if self.in_step: return fwd(*a, **k)             # a static decoder's step: timed as a whole below
            self.sync(); t0 = time.perf_counter(); out = fwd(*a, **k); self.sync(); dt = time.perf_counter() - t0
            x, mask = k.get('input_ids', a[0] if a else None), k.get('attention_mask')
            if x.shape[1] > 1:
                self.s['prefill'] += dt; self.n['prefill calls'] += 1
                self.n['prefill tokens'] += int(mask[:, -x.shape[1]:].sum()) if mask is not None else x.numel()
            else: self.s['decode'] += dt; self.n['decode steps'] += 1; self.n['decode rows'] += x.shape[0]
            return out
        self.model.forward = forward
        step = StaticDecoder.step
        @functools.wraps(step)
        def static_step(dec, x, pos):
            self.sync(); t0, self.in_step = time.perf_counter(), True
            try: return step(dec, x, pos)
            finally:
                self.in_step = False; self.sync()
                self.s['decode'] += time.perf_counter() - t0; self.n['decode steps'] += 1; self.n['decode rows'] += x.shape[0]
        StaticDecoder.step = static_step
        self._saved = (PrefixCache.batch, PrefixCache.keep, AgentInference.generate, PlainGenerate.generate, step)
        PrefixCache.batch, PrefixCache.keep = self._timed(PrefixCache.batch, 'cache layout'), self._timed(PrefixCache.keep, 'cache keep')
        AgentInference.generate = self._timed(AgentInference.generate, 'generate')
        PlainGenerate.generate = self._timed(PlainGenerate.generate, 'generate')
        return self
    def __exit__(self, *exc):
        del self.model.forward
        PrefixCache.batch, PrefixCache.keep, AgentInference.generate, PlainGenerate.generate, StaticDecoder.step = self._saved

def play(agent, a, seeds, turns)->tuple[list, float]:
    "The episodes of `seeds` x `--group` in lock-step through the engine; (trajectories, wall seconds)"
    jobs = [(None, None, s) for s in seeds for _ in range(a.group)]
    t0 = time.perf_counter()
    trajs = run_episodes([make(ENV) for _ in jobs], agent, jobs, RolloutSpec(max_episode_steps=turns, record_tokens=True))
    return trajs, time.perf_counter() - t0

def summary(trajs, wall, **extra)->dict:
    toks = [len(s.token_ids or []) for t in trajs for s in t.steps]
    errors = [t.metadata['error']['message'] for t in trajs if 'error' in t.metadata]
    if errors: raise RuntimeError(f"{len(errors)} episodes failed: {errors[0]}")
    return {'episodes': len(trajs), 'turns': len(toks), 'generated_tokens': sum(toks), 'wall_s': wall, 'tokens_per_s': sum(toks) / wall,
            'episodes_per_s': len(trajs) / wall, 'solved': sum(bool(t.outcome.success) for t in trajs), **extra}

def profiled(agent, model, a, seeds, turns, cache=None)->dict:
    "Play the episodes with the forward passes and the cache's bookkeeping timed (a perf_counter per call: no measurable cost)"
    with Profile(model) as p: trajs, wall = play(agent, a, seeds, turns)
    p.s['outside generate'] = wall - p.s['generate']
    extra = {'seconds': p.s, 'counts': p.n}
    if cache is not None:
        st = cache.stats
        extra.update(prompt_reused=st['reused'] / max(1, st['reused'] + st['encoded']), prompt_tokens_encoded=st['encoded'], prompt_tokens_reused=st['reused'],
                     one_row_per_episode=sum(_extends(t) for t in trajs))
    return summary(trajs, wall, **extra)

def runtime(model, tok, tools, a, seeds, turns, static=False)->dict:
    inf = AgentInference(model, tok, name='policy', static_cache=static)
    return profiled(inf.create_agent(None, a.max_new_tokens, a.temperature, tools=tools), model, a, seeds, turns, inf.cache)

def _extends(t)->bool:
    "Whether each turn's prompt ids extend the previous turn's prompt and sampled ids (the episode trains as one row)"
    return all(list(b.prompt_token_ids[:len(a.prompt_token_ids) + len(a.token_ids)]) == list(a.prompt_token_ids) + list(a.token_ids)
               for a, b in zip(t.steps, t.steps[1:]))

def plain(model, tok, tools, a, seeds, turns)->dict:
    return profiled(LocalAgent(PlainGenerate(model, tok), None, a.max_new_tokens, a.temperature, tools=tools), model, a, seeds, turns)

def load(a, tmp:Path):
    "The prepared real model (or --tiny: a tiny model trained on a few arith-medium demonstrations) and its tokenizer"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if a.tiny:
        from knowlyr_lab.trainer.sft import oracle_trajectories, render_corpus
        from knowlyr_lab.trainer.tiny import make_tiny_model
        model, tok = make_tiny_model(render_corpus(oracle_trajectories(ENV, seeds=range(8)), tools=env_tools(ENV)), vocab_size=512, hidden_size=64)
        return model.to(a.device, getattr(torch, a.dtype)), tok, 'tiny'
    from knowlyr_lab.trainer.real import prepare_real_model
    path = prepare_real_model(quiet=True)
    model, tok = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, a.dtype)).to(a.device), AutoTokenizer.from_pretrained(path)
    return model, tok, path.name

SIDES = {'plain generate': plain, 'runtime': runtime, 'runtime, static cache': functools.partial(runtime, static=True)}

def _where(p:dict, res:dict)->str:
    "The machine a run measured"
    if res.get('device', 'cpu') != 'cpu':
        return f"{res['device']} ({res.get('gpu')}), host {p.get('cpu')}, {p.get('cpu_count')} cores"
    return f"{p.get('cpu')}, {p.get('cpu_count')} cores, {p.get('cpu_capability')} kernels, torch threads {p.get('torch_threads')}"

def markdown(res:dict)->str:
    p, s, med = res['provenance'], res['settings'], res['median']
    rows = [f"| {r['side']} | {r['repeat']} | {r['episodes']} | {r['turns']} | {r['generated_tokens']:,} | {r['wall_s']:.1f} | "
            f"{r['tokens_per_s']:.1f} | {r['episodes_per_s']:.3f} | {r['solved']} |" for r in res['runs']]
    sec = lambda k: (lambda r: r['seconds'][k])
    parts = (('prefill forward passes', sec('prefill')), ('decode forward passes (static cache: whole steps)', sec('decode')),
             ('prefix cache: layout, lookups', sec('cache layout')), ('prefix cache: keeping keys and values', sec('cache keep')),
             ('rest of generate (render, tokenise, sample, decode text)', lambda r: r['seconds']['generate'] - r['seconds']['prefill']
              - r['seconds']['decode'] - r['seconds']['cache layout'] - r['seconds']['cache keep']),
             ('outside generate (engine, envs, recorder, parsing)', sec('outside generate')))
    sides = list(dict.fromkeys(r['side'] for r in res['runs']))
    first = [next(r for r in res['runs'] if r['side'] == side) for side in sides]
    cnt = lambda r: (f"{r['counts']['prefill calls']} prefill calls, {r['counts']['prefill tokens']:,} tokens encoded; "
                     f"{r['counts']['decode steps']} decode steps, {r['counts']['decode rows']:,} row-steps, "
                     f"{1000 * r['seconds']['decode'] / max(1, r['counts']['decode steps']):.1f} ms a step")
    ratios = [f"**{side} / plain generate (medians): {med[side]['ratio_tokens_per_s']:.2f}x generated tokens/s, "
              f"{med[side]['ratio_episodes_per_s']:.2f}x episodes/s** ({med[side]['tokens_per_s']:,.1f} tokens/s, "
              f"{med[side]['episodes_per_s']:.3f} episodes/s)." for side in sides if side != 'plain generate']
    return '\n'.join([
        f"# Rollouts on the real model: the runtime against plain `generate` ({res['model']})", '',
        f"{res['started']}, {_where(p, res)}, commit {p.get('commit')}{' (dirty)' if p.get('dirty') else ''}, Python {p.get('python')}, "
        f"torch {p['packages'].get('torch')}, transformers {p['packages'].get('transformers')}. Load average at the start: "
        f"{res['load_average']}.", '',
        f"Settings: {ENV}, {s['tasks']} tasks x {s['group']} episodes (GRPO groups), at most {s['turns']} turns, {s['max_new_tokens']} "
        f"new tokens per turn, temperature {s['temperature']}, {s['repeats']} run(s) per side, alternating. Command: "
        f"`{res['command']}`.", '',
        '| side | run | episodes | turns | generated tokens | wall s | tokens/s | episodes/s | solved |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|', *rows, '',
        f"Plain generate (median): {med['plain generate']['tokens_per_s']:,.1f} tokens/s, "
        f"{med['plain generate']['episodes_per_s']:.3f} episodes/s.", '', *ratios, '',
        "## Where the time goes (each side's first run; forward passes and the cache's bookkeeping timed in the run)", '',
        '| part | ' + ' | '.join(f'{side} s | share' for side in sides) + ' |', '|---|' + '---:|---:|' * len(sides),
        *[f"| {name} | " + ' | '.join(f"{f(r):.2f} | {100 * f(r) / r['wall_s']:.0f}%" for r in first) + ' |' for name, f in parts], '',
        *[f"{side}: {cnt(r)}." for side, r in zip(sides, first)], '',
        *[f"{side}: prompt tokens taken from the cache {100 * r['prompt_reused']:.0f}% ({r['prompt_tokens_reused']:,} reused, "
          f"{r['prompt_tokens_encoded']:,} encoded); episodes whose every turn's prompt extends the previous prompt and sampled ids "
          f"token for token (one training row each): {r['one_row_per_episode']} of {r['episodes']}." for side, r in zip(sides, first)
          if 'prompt_reused' in r], ''])

def main(argv=None)->int:
    ap = argparse.ArgumentParser('rollout_real_model.py', description=__doc__.split('\n\n')[0])
    ap.add_argument('--tasks', type=int, default=4, help='env seeds (GRPO groups) (default: %(default)s)')
    ap.add_argument('--group', type=int, default=4, help='episodes per task (default: %(default)s)')
    ap.add_argument('--turns', type=int, default=3, help='steps per episode at most (default: %(default)s)')
    ap.add_argument('--max-new-tokens', type=int, default=48, help='new tokens per turn at most (default: %(default)s)')
    ap.add_argument('--temperature', type=float, default=1.0, help='sampling temperature, both sides (default: %(default)s)')
    ap.add_argument('--repeats', type=int, default=1, help='runs per side, alternating (default: %(default)s)')
    ap.add_argument('--device', default='cpu', help="where the model runs: 'cpu', 'cuda' (default: %(default)s)")
    ap.add_argument('--dtype', default='float32', help="the model's weights on every side: 'float32', 'bfloat16' (default: %(default)s)")
    ap.add_argument('--static-cache', action='store_true',
                    help='a third side: the runtime decoding over a static cache (a CUDA graph per step on a GPU)')
    ap.add_argument('--tiny', action='store_true', help='a tiny model: checks the script, writes nothing')
    ap.add_argument('--write-results', action='store_true', help='write the results .json and .md (see --out)')
    ap.add_argument('--out', default=str(Path(__file__).with_name('rollout_real_model.results.json')),
                    help='the results file (the .md beside it) (default: %(default)s)')
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    from knowlyr_lab.provenance import provenance
    started = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    load_avg = ', '.join(f'{x:.1f}' for x in os.getloadavg())
    model, tok, name = load(a, Path(tempfile.mkdtemp()))
    prov = provenance(seed=0, tokenizer=tok)   # with the template every side renders
    model.eval()
    tools, sides = env_tools(ENV), ['plain generate', 'runtime'] + ['runtime, static cache'] * a.static_cache
    seeds = list(range(1000, 1000 + a.tasks))
    print(f"# {name} on {a.device}: {a.tasks} tasks x {a.group} episodes, {a.turns} turns, {a.max_new_tokens} new tokens, "
          f"T {a.temperature}; load average {load_avg}")
    for side in sides: SIDES[side](model, tok, tools, a, [0], 1)        # warm-up, not counted
    runs = []
    for k in range(a.repeats):
        for side in sides:
            r = {'side': side, 'repeat': k + 1, **SIDES[side](model, tok, tools, a, seeds, a.turns)}
            runs.append(r)
            print(f"{side:22} run {k + 1}: {r['generated_tokens']} tokens in {r['wall_s']:.1f} s = {r['tokens_per_s']:.1f} tokens/s, "
                  f"{r['episodes_per_s']:.3f} episodes/s")
    for r in runs: print(f"{r['side']:22} run {r['repeat']}:", json.dumps({k: round(v, 2) for k, v in r['seconds'].items()}), r['counts'])
    med = {side: {k: statistics.median(r[k] for r in runs if r['side'] == side) for k in ('tokens_per_s', 'episodes_per_s')}
           for side in sides}
    for side in sides[1:]:
        for k in ('tokens_per_s', 'episodes_per_s'): med[side][f'ratio_{k}'] = med[side][k] / med['plain generate'][k]
        print(f"{side} / plain generate: {med[side]['ratio_tokens_per_s']:.2f}x tokens/s, {med[side]['ratio_episodes_per_s']:.2f}x episodes/s")
    cuda = next(model.parameters()).is_cuda
    res = {'benchmark': 'rollout_real_model', 'model': name, 'started': started, 'load_average': load_avg, 'device': a.device,
           'gpu': torch.cuda.get_device_name(0) if cuda else None,
           'command': ' '.join(['python', 'experiments/benchmarks/rollout_real_model.py', *(argv if argv is not None else sys.argv[1:])]),
           'settings': {k: v for k, v in vars(a).items() if k not in ('write_results', 'out')}, 'provenance': prov, 'runs': runs, 'median': med}
    if a.write_results and not a.tiny:
        out = Path(a.out)
        out.write_text(json.dumps(res, indent=1, default=str)); out.with_suffix('').with_suffix('.results.md').write_text(markdown(res))
        print(out)
    else: print(markdown(res))
    return 0

if __name__ == '__main__':
    sys.exit(main())

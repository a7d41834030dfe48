"""Generated tokens/s of a local model playing 16 maze episodes one after another vs in lock-step.

    python experiments/benchmarks/rollout_throughput.py                 # 16 episodes, ~1-2 min on 2 cores
    python experiments/benchmarks/rollout_throughput.py --episodes 32 --hidden 256 --layers 4

`collect` runs episodes of an agent that can act on a batch (`LocalAgent.act_batch`) in lock-step: one `generate`
per turn for all live episodes (`batch_size`). The same code path with `batch_size=1` plays them one after another.
Both runs use the same tiny Qwen2-style model (built locally by `make_tiny_model`, trained on nothing: every turn
generates `--max-new-tokens` tokens, so both runs generate about the same number of tokens), the same seeds and
greedy decoding. Tokens are counted from `AgentInference.generate`'s own `completion_tokens`.

The KV cache: within a turn `generate` keeps it; across turns `AgentInference.cache` (a `PrefixCache`) keeps each
episode's keys and values, so a new turn encodes only what follows the cached prefix (the reply and the observation).
Each layout runs with the prefix cache off (`prefix_cache=0`: every turn re-encodes the whole conversation) and on,
in the same process, so the table shows what the cache saves. The script also times one forward pass over a late
turn's full prompts (the prefill the cache avoids) and prints its share of an uncached lock-step turn.

There is no reference implementation: knowlyr 0.1.x had no batched local rollouts (its trainer's rollouts were
sequential calls). The goal (issue 15) is lock-step >= 5x the tokens/s of sequential episodes.
"""
import argparse
import datetime
import json
import os
import platform
import tempfile
import time

import torch
import transformers

from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.serving import AgentInference
from knowlyr_lab.trainer.data import env_tools
from knowlyr_lab.trainer.sft import oracle_trajectories, render_corpus
from knowlyr_lab.trainer.tiny import make_tiny_model, save_tiny_model

ENV = 'knowlyr/maze-easy'

def build_model(path, hidden, layers):
    trajs = oracle_trajectories(ENV, seeds=range(16))
    m, t = make_tiny_model(render_corpus(trajs, tools=env_tools(ENV)), vocab_size=512, hidden_size=hidden, num_layers=layers)
    return save_tiny_model(m, t, path)

def counted(inf):
    "Wrap `inf.generate` to count calls, generated tokens and wall time"
    gen, c = inf.generate, {'calls': 0, 'tokens': 0, 'seconds': 0.0, 'prompt_tokens': 0}
    def generate(*a, **k):
        t0 = time.perf_counter(); out = gen(*a, **k); c['seconds'] += time.perf_counter() - t0
        c['calls'] += 1; c['tokens'] += sum(o['completion_tokens'] for o in out); c['prompt_tokens'] += sum(o['prompt_tokens'] for o in out)
        return out
    inf.generate = generate
    return c

def run(path, episodes, batch, steps, new_tokens, prefix_cache):
    inf = AgentInference.from_pretrained(path, prefix_cache=prefix_cache)
    c = counted(inf)
    agent = inf.create_agent(max_new_tokens=new_tokens)
    t0 = time.perf_counter()
    trajs = collect(ENV, agent, episodes, max_episode_steps=steps, batch_size=batch, progress=False)
    wall = time.perf_counter() - t0
    reuse = inf.cache.stats['reused'] / max(1, inf.cache.stats['reused'] + inf.cache.stats['encoded'])
    return {'batch_size': batch, 'prefix_cache': prefix_cache, 'prompt_reused': round(reuse, 3), 'episodes': len(trajs), 'steps': sum(len(t.steps) for t in trajs), 'generate_calls': c['calls'],
            'tokens': c['tokens'], 'wall_s': round(wall, 2), 'generate_s': round(c['seconds'], 2),
            'tokens_per_s': round(c['tokens'] / wall, 1), 'prompt_tokens_per_turn': round(c['prompt_tokens'] / max(1, sum(len(t.steps) for t in trajs)), 1)}

@torch.no_grad()
def prefill_share(path, episodes, steps, new_tokens):
    "Seconds of one forward pass over a late turn's prompts vs one whole turn (prefill + decode), batch of `episodes`"
    inf = AgentInference.from_pretrained(path, prefix_cache=0)
    trajs = collect(ENV, inf.create_agent(max_new_tokens=new_tokens), episodes, max_episode_steps=steps, batch_size=episodes, progress=False)
    from knowlyr_lab.chat import to_messages
    chats = [to_messages(t)[:-1] for t in trajs]                   # the conversation before the last assistant turn
    tok, tools = inf.tokenizer, env_tools(ENV)
    tok.padding_side = 'left'
    enc = tok([inf.render(c, tools) for c in chats], return_tensors='pt', padding=True, add_special_tokens=False)
    def best(f, n=3):
        ts = []
        for _ in range(n): t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
        return min(ts)
    pre = best(lambda: inf.model(**enc))
    turn = best(lambda: inf.generate(chats, tools, new_tokens))
    return {'prompt_tokens': int(enc['input_ids'].shape[1]), 'prefill_s': round(pre, 3), 'turn_s': round(turn, 3), 'prefill_share': round(pre / turn, 3)}

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--episodes', type=int, default=16)
    ap.add_argument('--max-episode-steps', type=int, default=6)
    ap.add_argument('--max-new-tokens', type=int, default=32)
    ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--layers', type=int, default=2)
    ap.add_argument('--json')
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"# {datetime.date.today()}  {platform.node()}  {platform.machine()}  {os.cpu_count()} cpus  torch {torch.__version__}  "
          f"transformers {transformers.__version__}  Python {platform.python_version()}")
    print(f"# {ENV}, {a.episodes} episodes x {a.max_episode_steps} steps, {a.max_new_tokens} new tokens per turn, "
          f"tiny model hidden {a.hidden} x {a.layers} layers, greedy")
    with tempfile.TemporaryDirectory() as d:
        path = build_model(f'{d}/m', a.hidden, a.layers)
        run(path, a.episodes, a.episodes, 2, a.max_new_tokens, 0)     # warm-up (first-call costs), not counted
        runs = {(layout, cache): run(path, a.episodes, 1 if layout == 'sequential' else a.episodes, a.max_episode_steps, a.max_new_tokens, cache)
                for cache in (0, 64) for layout in ('sequential', 'lock-step')}
        kv = prefill_share(path, a.episodes, a.max_episode_steps, a.max_new_tokens)
    print(f"{'':12}{'prefix cache':>13}{'episodes':>9}{'steps':>7}{'generate calls':>16}{'tokens':>8}{'wall s':>8}{'tokens/s':>10}{'prompt tok/turn':>17}{'reused':>8}")
    for (name, cache), r in runs.items():
        print(f"{name:12}{'on' if cache else 'off':>13}{r['episodes']:>9}{r['steps']:>7}{r['generate_calls']:>16}{r['tokens']:>8}{r['wall_s']:>8}"
              f"{r['tokens_per_s']:>10}{r['prompt_tokens_per_turn']:>17}{r['prompt_reused']:>8.0%}")
    ratios = {cache: runs['lock-step', cache]['tokens_per_s'] / runs['sequential', 0]['tokens_per_s'] for cache in (0, 64)}
    same = runs['sequential', 64]['tokens_per_s'] / runs['sequential', 0]['tokens_per_s']
    print(f"lock-step / sequential tokens/s (sequential without the prefix cache): {ratios[0]:.1f}x without the prefix cache, "
          f"{ratios[64]:.1f}x with it (goal >= 5x); the prefix cache alone makes sequential episodes {same:.2f}x; "
          f"lock-step / sequential, both with the cache: {runs['lock-step', 64]['tokens_per_s'] / runs['sequential', 64]['tokens_per_s']:.1f}x")
    print(f"prefill of a late turn's {kv['prompt_tokens']}-token prompts (batch {a.episodes}), no prefix cache: {kv['prefill_s']} s of a "
          f"{kv['turn_s']} s turn ({100 * kv['prefill_share']:.0f}%)")
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'runs': [dict(layout=k[0], **r) for k, r in runs.items()], 'ratios': ratios, 'kv': kv, 'args': vars(a)}, f, indent=1)

if __name__ == '__main__':
    main()

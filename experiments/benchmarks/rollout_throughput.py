"""Generated tokens/s of a local model playing 16 maze episodes one after another vs in lock-step.

    python experiments/benchmarks/rollout_throughput.py                 # 16 episodes, ~1-2 min on 2 cores
    python experiments/benchmarks/rollout_throughput.py --episodes 32 --hidden 256 --layers 4

`collect` runs episodes of an agent that can act on a batch (`LocalAgent.act_batch`) in lock-step: one `generate`
per turn for all live episodes (`batch_size`). The same code path with `batch_size=1` plays them one after another.
Both runs use the same tiny Qwen2-style model (built locally by `make_tiny_model`, trained on nothing: every turn
generates `--max-new-tokens` tokens, so both runs generate about the same number of tokens), the same seeds and
greedy decoding. Tokens are counted from `AgentInference.generate`'s own `completion_tokens`.

The KV cache: `generate` keeps the cache within one turn; across turns the conversation so far is encoded again
(prefill). The script times that prefill on its own (one forward pass over the batch's prompts) and prints its share
of the turn, the number that bounds what reusing the shared prefix across turns could save here.

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

from knowlyr_lab.hub.collect import collect
from knowlyr_lab.trainer.data import env_tools
from knowlyr_lab.trainer.inference import AgentInference
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

def run(path, episodes, batch, steps, new_tokens):
    inf = AgentInference.from_pretrained(path)
    c = counted(inf)
    agent = inf.create_agent(max_new_tokens=new_tokens)
    t0 = time.perf_counter()
    trajs = collect(ENV, agent, episodes, max_episode_steps=steps, batch_size=batch, progress=False)
    wall = time.perf_counter() - t0
    return {'batch_size': batch, 'episodes': len(trajs), 'steps': sum(len(t.steps) for t in trajs), 'generate_calls': c['calls'],
            'tokens': c['tokens'], 'wall_s': round(wall, 2), 'generate_s': round(c['seconds'], 2),
            'tokens_per_s': round(c['tokens'] / wall, 1), 'prompt_tokens_per_turn': round(c['prompt_tokens'] / max(1, sum(len(t.steps) for t in trajs)), 1)}

@torch.no_grad()
def prefill_share(path, episodes, steps, new_tokens):
    "Seconds of one forward pass over a late turn's prompts vs one whole turn (prefill + decode), batch of `episodes`"
    inf = AgentInference.from_pretrained(path)
    trajs = collect(ENV, inf.create_agent(max_new_tokens=new_tokens), episodes, max_episode_steps=steps, batch_size=episodes, progress=False)
    from knowlyr_lab.trajectory import to_messages
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
        seq = run(path, a.episodes, 1, a.max_episode_steps, a.max_new_tokens)
        lock = run(path, a.episodes, a.episodes, a.max_episode_steps, a.max_new_tokens)
        kv = prefill_share(path, a.episodes, a.max_episode_steps, a.max_new_tokens)
    print(f"{'':12}{'episodes':>9}{'steps':>7}{'generate calls':>16}{'tokens':>8}{'wall s':>8}{'tokens/s':>10}{'prompt tok/turn':>17}")
    for name, r in (('sequential', seq), ('lock-step', lock)):
        print(f"{name:12}{r['episodes']:>9}{r['steps']:>7}{r['generate_calls']:>16}{r['tokens']:>8}{r['wall_s']:>8}{r['tokens_per_s']:>10}{r['prompt_tokens_per_turn']:>17}")
    ratio = lock['tokens_per_s'] / seq['tokens_per_s']
    print(f"lock-step / sequential tokens/s: {ratio:.1f}x (goal >= 5x)")
    print(f"prefill of a late turn's {kv['prompt_tokens']}-token prompts (batch {a.episodes}): {kv['prefill_s']} s of a {kv['turn_s']} s turn "
          f"({100 * kv['prefill_share']:.0f}%): the most that reusing the KV cache across turns could save per turn here")
    if a.json:
        with open(a.json, 'w') as f: json.dump({'sequential': seq, 'lock_step': lock, 'ratio': ratio, 'kv': kv, 'args': vars(a)}, f, indent=1)

if __name__ == '__main__':
    main()

"""Training throughput on realistic agent data: knowlyr-lab's SFT/DPO trainers vs TRL's on the same tiny Qwen2, data,
masking, batch, truncation and epochs, measured in one run.

    python experiments/benchmarks/trainer_vs_trl.py [--repeats 3] [--max-length 1024] [--only sft|dpo] [--padded] [--profile]

Data: every agent log among the recorder's fixtures (/work/shared/fixtures/agent_logs, 15 formats) converted with
`knowlyr_lab.recorder.convert.convert`, plus expert rollouts of six tasks (maze easy/medium/hard, wordle easy/medium,
the customer-support conversation), each env's tool schemas in a system message. Lengths run from ~60 to 30k tokens;
both trainers truncate at --max-length (keep the start). Samples whose assistant turns all start past --max-length are
left out of both datasets (ours would skip them, TRL would train on zero label tokens).

SFT: loss on assistant tokens only in both (TRL assistant_only_loss=True, ours mask_observations=True). TRL pads each
batch (its default; padding_free needs flash attention); ours packs padding-free. DPO: a log's (or rollout's) own
completion preferred over its first half (a run cut short); both precompute the reference log-probs.

Prints real (non-pad) tokens/s of each over one epoch (the same samples) and the ratio ours/TRL (median of --repeats,
runs interleaved, each run printed as it ends). CPU, fp32, no gradient checkpointing. --profile runs cProfile on one
epoch of each and prints where the time went.
"""
import argparse
import cProfile
import datetime
import functools
import io
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
import warnings

warnings.filterwarnings('ignore')
print = functools.partial(print, flush=True)
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false'); os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_VERBOSITY', 'error')
import torch

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.trainer.data import to_chat, tokenize_chat
from knowlyr_lab.trainer.dpo import DPOConfig, DPOTrainer
from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer, env_tools, oracle_trajectories
from knowlyr_lab.trainer.tiny import make_tiny_model, train_tokenizer

FIXTURES = os.environ.get('KNOWLYR_AGENT_LOGS', '/work/shared/fixtures/agent_logs')
TASKS = {'knowlyr/maze-easy': 12, 'knowlyr/maze-medium': 12, 'knowlyr/maze-hard': 8, 'knowlyr/wordle-easy': 12,
         'knowlyr/wordle-medium': 8, 'knowlyr/conversation': 8}

def clean(msgs):
    "Uniform message dicts (role, content, tool_calls with string arguments): what both trainers and Arrow take"
    out = []
    for m in msgs:
        tcs = [{'type': 'function', 'function': {'name': t['function']['name'], 'arguments': t['function']['arguments']
                if isinstance(t['function']['arguments'], str) else json.dumps(t['function']['arguments'])}} for t in m.get('tool_calls') or []]
        out.append({'role': m['role'], 'content': m.get('content') or '', 'tool_calls': tcs or None})
    return out

def chats():
    "Chats (lists of messages) of the converted real logs and the multi-task rollouts, and where each came from"
    out = []
    for t in convert(FIXTURES):
        if t.steps: out.append((f'log:{t.source.format}', clean(to_chat(t)['messages'])))
    for env_id, n in TASKS.items():
        tools = env_tools(env_id)
        system = {'role': 'system', 'content': 'You can call these tools:\n' + '\n'.join(json.dumps(x['function']) for x in tools)}
        for t in oracle_trajectories(env_id, range(n)): out.append((env_id, [system] + clean(to_chat(t)['messages'])))
    return out

def keep(tok, msgs, max_length):
    "The sample has a label token within max_length"
    s = tokenize_chat(tok, {'messages': msgs})
    return any(k >= 0 for k in s['step'][1:max_length])

def build(args):
    data = chats()
    base = train_tokenizer()
    tok = train_tokenizer([base.apply_chat_template(m, tokenize=False) for _, m in data[::2]], vocab_size=args.vocab)
    data = [(w, m) for w, m in data if keep(tok, m, args.max_length)]
    pairs = []
    for _, m in data:
        first = next(i for i, x in enumerate(m) if x['role'] == 'assistant')
        comp = m[first:]
        cut = [k for k, x in enumerate(comp) if x['role'] == 'assistant'][max(1, sum(x['role'] == 'assistant' for x in comp) // 2):]
        if cut: pairs.append({'prompt': m[:first], 'chosen': comp, 'rejected': comp[:cut[0]]})   # the run cut short at half its turns
    return tok, data, pairs

def lengths(tok, data):
    return sorted(len(tokenize_chat(tok, {'messages': m})['input_ids']) for _, m in data)

class Counter:
    "Wraps a collator: counts the real (attention-mask) tokens TRL trains on"
    def __init__(self, collate): self.collate, self.n = collate, 0
    def __call__(self, feats):
        b = self.collate(feats)
        self.n += int(b['attention_mask'].sum())
        return b

def model(args, tok): return make_tiny_model(tokenizer=tok, hidden_size=args.hidden, num_layers=2, max_position=args.max_length + 8, seed=0)[0]

def ours_sft(args, tok, data, packing=True):
    tr = SFTTrainer(SFTConfig(output_dir=tempfile.mkdtemp(), num_epochs=1, batch_size=args.batch, learning_rate=1e-3, packing=packing,
                              progress_bar=False, max_length=args.max_length, mixed_precision='no', logging_steps=10**9, seed=42),
                    model(args, tok), tok, train_data=[{'messages': m} for _, m in data])
    t0 = time.perf_counter(); tr.train(); dt = time.perf_counter() - t0
    return tr._tokens / dt

def trl_sft(args, tok, data):
    import trl
    from datasets import Dataset
    cfg = trl.SFTConfig(output_dir=tempfile.mkdtemp(), num_train_epochs=1, per_device_train_batch_size=args.batch, learning_rate=1e-3,
                        assistant_only_loss=True, packing=False, use_cpu=True, bf16=False, gradient_checkpointing=False,
                        report_to=[], logging_steps=10**9, save_strategy='no', max_length=args.max_length, dataloader_num_workers=0,
                        disable_tqdm=True, lr_scheduler_type='cosine', warmup_steps=0, seed=42)
    t = trl.SFTTrainer(model=model(args, tok), args=cfg, train_dataset=Dataset.from_list([{'messages': m} for _, m in data]), processing_class=tok)
    t.data_collator = c = Counter(t.data_collator)
    t0 = time.perf_counter(); t.train(); dt = time.perf_counter() - t0
    return c.n / dt

def ours_dpo(args, tok, pairs):
    tr = DPOTrainer(DPOConfig(output_dir=tempfile.mkdtemp(), num_epochs=1, batch_size=args.batch // 2, learning_rate=1e-4, progress_bar=False,
                              max_length=args.max_length, mixed_precision='no', logging_steps=10**9, seed=42), model(args, tok), tok, train_data=pairs)
    tr.compute_reference()            # as TRL precomputes in its constructor: not part of the timed epoch
    t0 = time.perf_counter(); tr.train(); dt = time.perf_counter() - t0
    return tr._tokens / dt

def trl_dpo(args, tok, pairs):
    import trl
    from datasets import Dataset
    cfg = trl.DPOConfig(output_dir=tempfile.mkdtemp(), num_train_epochs=1, per_device_train_batch_size=args.batch // 2, learning_rate=1e-4,
                        use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], logging_steps=10**9, save_strategy='no',
                        max_length=args.max_length, precompute_ref_log_probs=True, disable_tqdm=True, beta=0.1, seed=42, dataloader_num_workers=0)
    t = trl.DPOTrainer(model=model(args, tok), args=cfg, train_dataset=Dataset.from_list(pairs), processing_class=tok)
    t.data_collator = c = Counter(t.data_collator)    # the reference log-probs were precomputed in the constructor
    t0 = time.perf_counter(); t.train(); dt = time.perf_counter() - t0
    return c.n / dt

def profile(fn, *a):
    pr = cProfile.Profile(); pr.enable(); fn(*a); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats('tottime').print_stats(14)
    print('\n'.join(l for l in s.getvalue().splitlines() if l.strip())[:4000])

def header(args, tok, data, pairs):
    import accelerate
    import transformers
    import trl
    L = lengths(tok, data)
    print(f"# {datetime.date.today()}  {platform.node()}  {platform.processor() or platform.machine()}  {os.cpu_count()} cpus  "
          f"torch {torch.__version__}  transformers {transformers.__version__}  trl {trl.__version__}  accelerate {accelerate.__version__}  "
          f"python {platform.python_version()}")
    src = {}
    for w, _ in data: src[w.split(':')[0]] = src.get(w.split(':')[0], 0) + 1
    print(f"# data: {len(data)} chats ({', '.join(f'{k} {v}' for k, v in sorted(src.items()))}), {len(pairs)} DPO pairs; "
          f"tokens per chat min {L[0]} median {L[len(L) // 2]} p90 {L[int(len(L) * .9)]} max {L[-1]} (truncated at {args.max_length}); "
          f"model hidden {args.hidden}, 2 layers, vocab {len(tok)}; batch {args.batch} (DPO {args.batch // 2} pairs), 1 epoch")

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeats', type=int, default=3); ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--vocab', type=int, default=2048); ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--max-length', type=int, default=1024); ap.add_argument('--only', choices=['sft', 'dpo'], default=None)
    ap.add_argument('--padded', action='store_true', help='also time our SFT with padded batches (packing=False)')
    ap.add_argument('--profile', action='store_true', help='cProfile one epoch of each trainer instead of timing')
    args = ap.parse_args()
    torch.manual_seed(0); torch.set_num_threads(max(1, torch.get_num_threads()))
    tok, data, pairs = build(args)
    header(args, tok, data, pairs)
    if args.profile:
        for name, fn, a in [('ours SFT', ours_sft, (args, tok, data)), ('TRL SFT', trl_sft, (args, tok, data)),
                            ('ours DPO', ours_dpo, (args, tok, pairs)), ('TRL DPO', trl_dpo, (args, tok, pairs))]:
            if args.only and args.only.upper() not in name: continue
            print(f"\n## profile: {name}"); profile(fn, *a)
        sys.exit(0)
    if args.only in (None, 'sft'):
        r = {'packed': [], 'padded': [], 'trl': []}
        for k in range(args.repeats):
            r['packed'].append(ours_sft(args, tok, data)); r['trl'].append(trl_sft(args, tok, data))
            if args.padded: r['padded'].append(ours_sft(args, tok, data, False))
            print(f"  run {k + 1}: SFT tokens/s ours {r['packed'][-1]:.0f}, TRL {r['trl'][-1]:.0f}" + (f", ours padded {r['padded'][-1]:.0f}" if args.padded else ''))
        m = {k: statistics.median(v) for k, v in r.items() if v}
        print(f"SFT tokens/s  ours {m['packed']:.0f}  TRL {m['trl']:.0f}  ratio ours/TRL {m['packed'] / m['trl']:.2f}"
              + (f"  (ours padded {m['padded']:.0f}, ratio {m['padded'] / m['trl']:.2f})" if args.padded else ''))
    if args.only in (None, 'dpo'):
        r = {'ours': [], 'trl': []}
        for k in range(args.repeats):
            r['ours'].append(ours_dpo(args, tok, pairs)); r['trl'].append(trl_dpo(args, tok, pairs))
            print(f"  run {k + 1}: DPO tokens/s ours {r['ours'][-1]:.0f}, TRL {r['trl'][-1]:.0f}")
        m = {k: statistics.median(v) for k, v in r.items()}
        print(f"DPO tokens/s  ours {m['ours']:.0f}  TRL {m['trl']:.0f}  ratio ours/TRL {m['ours'] / m['trl']:.2f}")

"""Training throughput: knowlyr-lab's SFT/DPO trainers vs TRL 1.x on the same tiny model, data, masking, batch and steps.

    python experiments/benchmarks/trainer_vs_trl.py [--steps 20] [--batch 8] [--repeats 3]

SFT: expert maze trajectories (chat + tool schemas), loss on assistant tokens only in both (TRL: assistant_only_loss=True;
ours: mask_observations=True). TRL pads each batch (its default; padding_free needs flash attention); ours packs
padding-free (and, for reference, also runs padded). DPO: expert vs random-walk trajectories as conversational
preference pairs; both precompute the reference log-probs. Prints real (non-pad) tokens/s of each and the ratio
ours/TRL (median of --repeats runs). CPU, fp32, no gradient checkpointing in both.
"""
import argparse, json, os, statistics, sys, tempfile, time, warnings, random
warnings.filterwarnings('ignore')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false'); os.environ.setdefault('HF_HUB_OFFLINE', '1')
import torch

from knowlyr_lab.trainer.tiny import make_tiny_model, save_tiny_model
from knowlyr_lab.trainer.sft import SFTTrainer, SFTConfig, oracle_trajectories, env_tools, render_corpus
from knowlyr_lab.trainer.dpo import DPOTrainer, DPOConfig
from knowlyr_lab.trajectory import to_messages
from knowlyr_lab.registry import make
from knowlyr_lab.wrappers import RecorderWrapper

def records(n):
    trajs = oracle_trajectories('knowlyr/maze-easy', range(n))
    tools = env_tools('knowlyr/maze-easy')
    return trajs, tools

def random_traj(seed, n=6):
    env, rng = RecorderWrapper(make('knowlyr/maze-easy')), random.Random(seed)
    ts = env.reset(seed=seed)
    for _ in range(n):
        if ts.done: break
        ts = env.step({'tool': 'move', 'params': {'direction': rng.choice(['north', 'west', 'south', 'east'])}})
    return env.get_trajectory()

def clean(msgs):
    "TRL's datasets want uniform message dicts: arguments as dicts, no None"
    out = []
    for m in msgs:
        d = {'role': m['role'], 'content': m.get('content') or ''}
        if m.get('tool_calls'): d['tool_calls'] = [{'type': 'function', 'function': {'name': t['function']['name'], 'arguments': json.loads(t['function']['arguments'])}} for t in m['tool_calls']]
        out.append(d)
    return out

def real_tokens_sft(trainer, steps, batch):
    return sum(len(s['input_ids']) for s in trainer.samples) * steps * batch / len(trainer.samples)

def bench_sft(args, base, tools, trajs):
    from datasets import Dataset
    import trl
    res = {'ours_packed': [], 'ours_padded': [], 'trl': []}
    n_real = None
    for r in range(args.repeats):
        for packing in (True, False):
            m, tok = make_tiny_model(tokenizer=base[1], hidden_size=args.hidden, num_layers=2)
            tr = SFTTrainer(SFTConfig(output_dir=tempfile.mkdtemp(), max_steps=args.steps, num_epochs=100, batch_size=args.batch, learning_rate=1e-3,
                                      packing=packing, progress_bar=False, max_length=2048, mixed_precision='no', logging_steps=10**9),
                            m, tok, train_data=trajs, tools=tools)
            t0 = time.perf_counter(); tr.train(); dt = time.perf_counter() - t0
            n_real = real_tokens_sft(tr, args.steps, args.batch)
            res['ours_packed' if packing else 'ours_padded'].append(n_real / dt)
        m, tok = make_tiny_model(tokenizer=base[1], hidden_size=args.hidden, num_layers=2)
        ds = Dataset.from_list([{'messages': clean(to_messages(t)), 'tools': tools} for t in trajs])
        cfg = trl.SFTConfig(output_dir=tempfile.mkdtemp(), max_steps=args.steps, per_device_train_batch_size=args.batch, learning_rate=1e-3,
                            assistant_only_loss=True, packing=False, use_cpu=True, bf16=False, gradient_checkpointing=False,
                            report_to=[], logging_steps=10**9, save_strategy='no', max_length=2048, dataloader_num_workers=0,
                            disable_tqdm=True, lr_scheduler_type='cosine', warmup_steps=0, seed=42)
        t = trl.SFTTrainer(model=m, args=cfg, train_dataset=ds, processing_class=tok)
        t0 = time.perf_counter(); t.train(); dt = time.perf_counter() - t0
        res['trl'].append(n_real / dt)
    return {k: statistics.median(v) for k, v in res.items()}

def bench_dpo(args, base, tools, trajs):
    from datasets import Dataset
    import trl
    pairs = []
    for i, t in enumerate(trajs):
        good, bad = clean(to_messages(t)), clean(to_messages(random_traj(i)))
        pairs.append({'prompt': good[:1], 'chosen': good[1:], 'rejected': bad[1:]})
    res = {'ours': [], 'trl': []}
    for r in range(args.repeats):
        m, tok = make_tiny_model(tokenizer=base[1], hidden_size=args.hidden, num_layers=2)
        tr = DPOTrainer(DPOConfig(output_dir=tempfile.mkdtemp(), max_steps=args.steps, num_epochs=100, batch_size=args.batch // 2, learning_rate=1e-4,
                                  progress_bar=False, max_length=2048, mixed_precision='no', logging_steps=10**9), m, tok,
                        train_data=[{**p, 'tools': tools} for p in pairs], tools=tools)
        per_pair = statistics.mean(len(p['chosen']['input_ids']) + len(p['rejected']['input_ids']) for p in tr.pairs)
        n_real = per_pair * args.steps * (args.batch // 2)
        t0 = time.perf_counter(); tr.train(); dt = time.perf_counter() - t0
        res['ours'].append(n_real / dt)
        m, tok = make_tiny_model(tokenizer=base[1], hidden_size=args.hidden, num_layers=2)
        ds = Dataset.from_list([{**p, 'tools': tools} for p in pairs])
        cfg = trl.DPOConfig(output_dir=tempfile.mkdtemp(), max_steps=args.steps, per_device_train_batch_size=args.batch // 2, learning_rate=1e-4,
                            use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], logging_steps=10**9, save_strategy='no',
                            max_length=2048, precompute_ref_log_probs=True, disable_tqdm=True, beta=0.1, seed=42)
        t = trl.DPOTrainer(model=m, args=cfg, train_dataset=ds, processing_class=tok)
        t0 = time.perf_counter(); t.train(); dt = time.perf_counter() - t0
        res['trl'].append(n_real / dt)
    return {k: statistics.median(v) for k, v in res.items()}

if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=20); ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--repeats', type=int, default=3); ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--episodes', type=int, default=64); ap.add_argument('--only', choices=['sft', 'dpo'], default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    trajs, tools = records(args.episodes)
    base = make_tiny_model(render_corpus(trajs[:32], tools=tools), vocab_size=512, hidden_size=args.hidden)
    if args.only in (None, 'sft'):
        s = bench_sft(args, base, tools, trajs)
        print(f"SFT tokens/s  ours packed {s['ours_packed']:.0f}  ours padded {s['ours_padded']:.0f}  TRL {s['trl']:.0f}  "
              f"ratio packed/TRL {s['ours_packed'] / s['trl']:.2f}  padded/TRL {s['ours_padded'] / s['trl']:.2f}")
    if args.only in (None, 'dpo'):
        d = bench_dpo(args, base, tools, trajs)
        print(f"DPO tokens/s  ours {d['ours']:.0f}  TRL {d['trl']:.0f}  ratio ours/TRL {d['ours'] / d['trl']:.2f}")

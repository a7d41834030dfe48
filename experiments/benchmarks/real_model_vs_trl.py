"""The reference real model (SmolLM2-135M-Instruct, `knowlyr_lab.trainer.real`): seconds per LoRA SFT step, ours vs TRL's
SFTTrainer on the same model, LoRA settings, batch and data, measured in one run; and generation tokens/s of
`AgentInference.generate` vs plain `model.generate` on the same prompts.

    python experiments/benchmarks/real_model_vs_trl.py [--steps 6] [--batch 8] [--repeats 2] [--new-tokens 32] [--profile]

Data: expert demonstrations of knowlyr/arith-easy, rendered by the chat layer in SmolLM2's fallback format (tool list
in the system turn, the call as `<tool_call>` JSON): each sample is the first user turn (prompt) and the first
assistant turn (completion). Ours trains on chats (labels on the assistant turn), TRL on the same text as
prompt/completion pairs with completion_only_loss; both LoRA r=16, alpha=32 on q/k/v/o, fp32, constant lr 2e-3,
padded batches, no gradient checkpointing. A step's time is the median over --steps steps after one warm-up step;
runs are interleaved (--repeats). Prints the ratio TRL/ours (> 1: ours faster) and writes nothing else: copy the
printed block into real_model_vs_trl.results.md with the date. `--profile` then runs two more steps of each under
`torch.profiler` and prints the operators that took the most CPU time (self time, both steps and their setup).
"""
import argparse
import functools
import os
import statistics
import tempfile
import time
import warnings

warnings.filterwarnings('ignore')
print = functools.partial(print, flush=True)
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false'); os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_VERBOSITY', 'error')
import torch

from knowlyr_lab.agents import ExpertAgent
from knowlyr_lab.chat import render_chat
from knowlyr_lab.provenance import provenance
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.serving import AgentInference
from knowlyr_lab.trainer.data import env_tools, to_chat
from knowlyr_lab.trainer.real import prepare_real_model
from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer

ENV = 'knowlyr/arith-easy'
LORA = dict(r=16, lora_alpha=32, target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj'], lora_dropout=0.0)

class StepTimer:
    "Wall time of each optimiser step (a TRL callback and a hook for ours)"
    def __init__(self): self.t, self.times = None, []
    def tick(self):
        now = time.perf_counter()
        if self.t is not None: self.times.append(now - self.t)
        self.t = now

def data(n):
    trajs = collect(ENV, ExpertAgent(), n, seed=0, progress=False)
    tools = env_tools(ENV)
    chats = []
    for i, t in enumerate(trajs):
        c = to_chat(t, f'demo[{i}]', tools=tools)
        first = next(k for k, m in enumerate(c['messages']) if m['role'] == 'assistant')
        chats.append({**c, 'messages': c['messages'][:first + 1], 'step_rewards': c['step_rewards'][:1]})
    return chats, tools

def ours(path, chats, args):
    cfg = SFTConfig(model_name_or_path=str(path), output_dir=tempfile.mkdtemp(), use_lora=True, lora_r=16, lora_alpha=32,
                    learning_rate=2e-3, lr_scheduler='constant', batch_size=args.batch, max_steps=args.steps + 1, logging_steps=1,
                    mixed_precision='no', progress_bar=False, packing=False, max_length=1024, seed=0)
    tr = SFTTrainer(cfg, train_data=chats)
    timer = StepTimer(); log = tr._log
    def hooked(row):                            # one metrics row per optimiser step (logging_steps=1)
        timer.tick(); return log(row)
    tr._log = hooked; timer.tick()
    tr.train()
    return statistics.median(timer.times[1:])   # the first step warms up

def trl_run(path, tok, chats, tools, args):
    import trl
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, TrainerCallback
    rows = []
    for c in chats:
        prompt = render_chat(tok, c['messages'][:-1], tools, add_generation_prompt=True)
        full = render_chat(tok, c['messages'], tools)
        rows.append({'prompt': prompt, 'completion': full[len(prompt):]})
    timer = StepTimer()
    class CB(TrainerCallback):
        def on_step_begin(self, *a, **k): timer.tick()
    cfg = trl.SFTConfig(output_dir=tempfile.mkdtemp(), max_steps=args.steps + 1, per_device_train_batch_size=args.batch, learning_rate=2e-3,
                        lr_scheduler_type='constant', logging_steps=1, report_to=[], use_cpu=True, bf16=False, gradient_checkpointing=False,
                        completion_only_loss=True, max_length=1024, save_strategy='no', disable_tqdm=True, seed=0, dataloader_num_workers=0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    t = trl.SFTTrainer(model=model, args=cfg, train_dataset=Dataset.from_list(rows), processing_class=tok,
                       peft_config=LoraConfig(task_type='CAUSAL_LM', **LORA), callbacks=[CB()])
    t.train(); timer.tick()
    return statistics.median(timer.times[1:])

def generation(path, chats, tools, args):
    inf = AgentInference.from_pretrained(path, prefix_cache=0)
    convs = [c['messages'][:1] for c in chats[:args.batch]]
    inf.model.generation_config.suppress_tokens = [inf.tokenizer.eos_token_id]     # every row generates all --new-tokens
    t = time.perf_counter(); outs = inf.generate(convs, tools, args.new_tokens); ours_s = time.perf_counter() - t
    tok = inf.tokenizer; tok.padding_side = 'left'
    enc = tok([inf.render(c, tools) for c in convs], add_special_tokens=False, return_tensors='pt', padding=True)
    t = time.perf_counter()
    with torch.no_grad(): inf.model.generate(**enc, max_new_tokens=args.new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
    plain_s = time.perf_counter() - t
    n = sum(o['completion_tokens'] for o in outs)
    return n / ours_s, args.batch * args.new_tokens / plain_s

def profiled(label, fn):
    "Run `fn()` under torch.profiler and print the 12 operators with the most self CPU time"
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof: fn()
    ev = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in ev)
    print(f"profile, {label}: {total / 1e6:.1f} s of operator self time")
    for e in ev[:12]: print(f"  {e.key:<42} {e.self_cpu_time_total / 1e6:7.2f} s  {e.self_cpu_time_total / total:6.1%}  x{e.count}")

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('--steps', type=int, default=6); ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--repeats', type=int, default=2); ap.add_argument('--new-tokens', type=int, default=32)
    ap.add_argument('--profile', action='store_true')
    args = ap.parse_args()
    path = prepare_real_model(quiet=True)
    chats, tools = data(args.batch * (args.steps + 2))
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path)
    p = provenance(0, tokenizer=tok)
    print(f"machine: {p['cpu']} ({p['cpu_count']} cores, torch kernels {p['cpu_capability']}, {p['torch_threads']} threads); "
          f"torch {p['packages']['torch']}, transformers {p['packages']['transformers']}, trl {p['packages']['trl']}, peft {p['packages']['peft']}; "
          f"commit {str(p['commit'])[:10]}")
    ours_t, trl_t = [], []
    for r in range(args.repeats):
        ours_t.append(ours(path, chats, args)); print(f"run {r}: ours {ours_t[-1]:.2f} s/step")
        trl_t.append(trl_run(path, tok, chats, tools, args)); print(f"run {r}: TRL  {trl_t[-1]:.2f} s/step")
    o, t = statistics.median(ours_t), statistics.median(trl_t)
    print(f"LoRA SFT, batch {args.batch}: ours {o:.2f} s/step, TRL {t:.2f} s/step, ratio TRL/ours {t / o:.2f}x")
    if args.profile:
        two = argparse.Namespace(**{**vars(args), 'steps': 1})
        profiled('ours, 2 steps', lambda: ours(path, chats, two)); profiled('TRL, 2 steps', lambda: trl_run(path, tok, chats, tools, two))
    g_ours, g_plain = generation(path, chats, tools, args)
    print(f"generation, batch {args.batch} x {args.new_tokens} new tokens: AgentInference {g_ours:.1f} tok/s, plain generate {g_plain:.1f} tok/s, "
          f"ratio {g_ours / g_plain:.2f}x")

if __name__ == '__main__': main()

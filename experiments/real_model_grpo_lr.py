"""Experiment 05's GRPO collapse, checked against the learning rate: seed 0 of experiment 05 (SmolLM2-135M-Instruct, 8
LoRA SFT steps of 8 arith-medium demonstrations, the same 32 held-out tasks), then `online_grpo` from that SFT
checkpoint once per learning rate given (5 updates of 4 episodes x 2 tasks, T = 0.7, full fine-tuning, no KL), fp32.
Prints one JSON line per rate: greedy held-out success before and after, and the mean reward of each update.

    python experiments/real_model_grpo_lr.py 5e-5 5e-6 1e-6 [--device cuda]

A few minutes on a GPU; on two CPU cores about 15 minutes per rate. Results: real_model_grpo_lr.results.md."""
import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from knowlyr_lab.recipes import online_grpo
from knowlyr_lab.tasks import held_out_tasks, suite_tasks
from knowlyr_lab.trainer.real import prepare_real_model
from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer, oracle_trajectories

ENV = 'knowlyr/arith-medium'

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('lrs', type=float, nargs='+')
    ap.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    a = ap.parse_args()
    out, t0 = Path(tempfile.mkdtemp(prefix='grpo-lr-')), time.time()
    path = prepare_real_model(quiet=True)
    demos = oracle_trajectories(ENV, range(64))
    grpo_tasks = suite_tasks(ENV, range(1_000_000, 1_000_010))
    held = held_out_tasks(ENV, 32, [t.task for t in demos] + grpo_tasks, start=50_000_000)   # experiment 05's held-out tasks
    tr = SFTTrainer(SFTConfig(model_name_or_path=str(path), output_dir=str(out / 'sft'), use_lora=True, lora_r=16, lora_alpha=32, learning_rate=2e-3,
                              lr_scheduler='constant', batch_size=8, max_steps=8, logging_steps=1, tools_from_env=ENV, mixed_precision='no',
                              progress_bar=False, max_length=1024, packing=False, seed=0), train_data=demos)
    tr.train()
    sft = tr.save_model(out / 'final')
    for lr in a.lrs:
        g = online_grpo(sft, ENV, held, updates=5, num_generations=4, tasks_per_step=2, temperature=0.7, learning_rate=lr, beta=0.0,
                        max_completion_length=48, max_episode_steps=4, seed=0, task_seed_offset=1_000_000, output_dir=out / f'grpo-{lr:g}', device=a.device)
        print(json.dumps({'lr': lr, 'before': g['before'].summary()['success_rate'], 'after': g['after'].summary()['success_rate'],
                          'reward_per_update': [round(x, 3) for x in g['curve']], 'seconds': round(g['seconds']), 'total_s': round(time.time() - t0)}), flush=True)

if __name__ == '__main__': main()

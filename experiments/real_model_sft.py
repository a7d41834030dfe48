"""LoRA SFT of the reference real model (SmolLM2-135M-Instruct, template as shipped) on expert demonstrations of
knowlyr/arith-easy through the documented path (SFTTrainer -> save -> policy_agent -> evaluate_agent), evaluated
greedily on held-out tasks that differ from the training tasks by content (checked strictly). Prints one JSON line with
the result, its Wilson CI, timings and provenance.

    python experiments/real_model_sft.py [--steps 60] [--batch 8] [--n-train 320] [--n-eval 40] [--seed 0]

The defaults are issue 23's acceptance run (about 1-2 hours on 2 CPU cores: a step of 8 chats of ~600 tokens through
a 135M model); tests/test_real_model.py runs the same under the `long` flag."""
import argparse
import json
import tempfile
import time
from pathlib import Path

from knowlyr_lab.agents import ExpertAgent
from knowlyr_lab.demo import DemoConfig
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.provenance import provenance
from knowlyr_lab.recipes import policy_agent
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.trainer.real import prepare_real_model
from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer

ENV = 'knowlyr/arith-easy'

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('--steps', type=int, default=60); ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--n-train', type=int, default=320); ap.add_argument('--n-eval', type=int, default=40)
    ap.add_argument('--lr', type=float, default=2e-3); ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix='real-sft-'))
    path = prepare_real_model(quiet=True)
    cfg = DemoConfig.sized('ci', n_train_tasks=a.n_train, n_eval_tasks=a.n_eval)
    train = cfg.train_tasks(); held = cfg.eval_tasks(train)
    demos = collect(ENV, ExpertAgent(), tasks=[t['id'] for t in train], seed=a.seed, progress=False)
    tr = SFTTrainer(SFTConfig(model_name_or_path=str(path), output_dir=str(out / 'sft'), use_lora=True, learning_rate=a.lr,
                              lr_scheduler='constant', batch_size=a.batch, max_steps=a.steps, logging_steps=1, tools_from_env=ENV,
                              mixed_precision='no', progress_bar=False, max_length=1024, seed=a.seed, packing=False), train_data=demos)
    t0 = time.time(); tr.train(); train_s = time.time() - t0
    final = tr.save_model(out / 'final')
    t0 = time.time()
    res = evaluate_agent(policy_agent(final, max_new_tokens=64), ENV, tasks=held, max_episode_steps=4, batch_size=len(held),
                         train_tasks=train, strict=True, progress=False)
    s = res.summary()
    print(json.dumps({'env': ENV, 'steps': a.steps, 'batch': a.batch, 'lr': a.lr, 'n_train': a.n_train, 'seed': a.seed,
                      'held_out_success': f"{round(s['success_rate'] * s['n_episodes'])}/{s['n_episodes']}",
                      'success_rate': s['success_rate'], 'ci95': [s['success_low'], s['success_high']],
                      'loss_first_last': [tr.history[0].get('loss'), tr.history[-1].get('loss')],
                      'train_s': round(train_s), 's_per_step': round(train_s / a.steps, 1), 'eval_s': round(time.time() - t0),
                      'provenance': provenance(a.seed, tokenizer=tr.tokenizer)}, default=str))

if __name__ == '__main__': main()

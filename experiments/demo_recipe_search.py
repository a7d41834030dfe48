"""Recipe search for the demo: the demo's data and evaluation (experiment 1 at size `small`: 24,000 expert
demonstrations of knowlyr/arith-easy, 300 fingerprint-disjoint held-out tasks, greedy), with one recipe setting
changed per run: model width/depth/heads, peak rate, warm-up, batch. The demonstrations are collected once and reused
(they do not depend on the seed). Each run appends one JSON line to --results: the variant, the seed, torch's kernel
level, training seconds, held-out success at every checkpoint and the training loss every 250 steps, with provenance.

    python experiments/demo_recipe_search.py '{"seed": 3, "lr": 1e-3, "warmup": 0.05}' lr1e3w-s3 [--out runs/recipe-search]

Variant keys: seed, hidden, layers, heads, lr, warmup, bs, epochs, sched, wd, save (checkpoint every n steps)."""
import argparse
import json
import time
from pathlib import Path

from knowlyr_lab.chat import PromptFormat, choose_format
from knowlyr_lab.demo import DemoConfig, collect_demonstrations, export_sft
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.provenance import provenance
from knowlyr_lab.recipes import policy_agent
from knowlyr_lab.trainer.data import load_records
from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer, render_corpus
from knowlyr_lab.trainer.tiny import make_tiny_model


def prepare(cfg:DemoConfig, data:Path)->Path:
    "The demo's SFT rows, collected and exported once"
    p = data / 'sft' / 'train.jsonl'
    if not p.exists(): export_sft(collect_demonstrations(cfg, cfg.train_tasks(), data)['path'], data / 'sft')
    return p

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('variant'); ap.add_argument('name')
    ap.add_argument('--out', default='runs/recipe-search')
    ap.add_argument('--results', default=str(Path(__file__).with_name('demo_recipe_search.results.jsonl')))
    a = ap.parse_args()
    v = json.loads(a.variant); seed = v.get('seed', 0)
    cfg = DemoConfig(seed=seed)
    p = prepare(cfg, Path(a.out) / 'data')
    train = cfg.train_tasks(); ev = cfg.eval_tasks(train)
    out = Path(a.out) / a.name
    t0 = time.time()
    sample = [r for _, r in load_records(p)[:50]]
    model, tok = make_tiny_model(render_corpus(sample, tools=[], system_prompt=None), vocab_size=cfg.vocab_size, hidden_size=v.get('hidden', 128),
                                 num_layers=v.get('layers', 2), num_heads=v.get('heads', 4), seed=seed, save_dir=out / 'untrained', family='llama')
    PromptFormat(None, [], choose_format(tok)).save(out / 'untrained')
    prov = provenance(seed, tokenizer=tok)   # before training: with the template its chats render with
    tr = SFTTrainer(SFTConfig(output_dir=str(out / 'sft'), num_epochs=v.get('epochs', 1), learning_rate=v.get('lr', 3e-3),
                              batch_size=v.get('bs', 8), lr_scheduler=v.get('sched', 'linear'), warmup_ratio=v.get('warmup', 0.0),
                              weight_decay=v.get('wd', 0.0), logging_steps=10, save_steps=v.get('save', 500), save_total_limit=0,
                              max_length=1024, seed=seed, progress_bar=False, mixed_precision='no'),
                    model, tok, train_data=p, tools=[])
    tr.train(); train_s = time.time() - t0
    curve = []
    for q in sorted((out / 'sft').glob('checkpoint-*'), key=lambda q: int(q.name.split('-')[1])):
        step = int(q.name.split('-')[1])
        r = evaluate_agent(policy_agent(q / 'model', cfg.max_new_tokens, name=f'step {step}'), cfg.env_id, tasks=ev, max_episode_steps=cfg.eval_max_episode_steps,
                           seeds=[seed], batch_size=len(ev))
        curve.append((step, round(r.summary()['success_rate'], 3)))
    losses = [round(h['loss'], 4) for h in tr.history if 'loss' in h][::25]
    row = {'name': a.name, 'variant': v, 'seed': seed, 'cpu_capability': prov['cpu_capability'], 'train_s': round(train_s),
           'curve': curve, 'loss_every_250': losses, 'provenance': prov}
    print(json.dumps(row), flush=True)
    with open(a.results, 'a') as f: f.write(json.dumps(row) + '\n')

if __name__ == '__main__': main()

#!/usr/bin/env python
"""Peak memory and time of ONE GRPO update on the reference real model (SmolLM2-135M-Instruct,
`knowlyr_lab.trainer.real`): log-probs from full-vocabulary logits at every position (the computation before issue 38)
against log-probs at the completion tokens only, from hidden states, the LM head a chunk at a time (`GRPOTrainer._logps`
now). Same episodes, same settings; the ratio old / new is printed.

    python experiments/benchmarks/grpo_update_memory.py                        # the real model (a GPU when there is one)
    python experiments/benchmarks/grpo_update_memory.py --tiny                 # a tiny model: checks the script, results to a temp folder
    python experiments/benchmarks/grpo_update_memory.py --tasks-per-step 4 --num-generations 8 --turns 0

Episodes: expert demonstrations of knowlyr/arith-medium (experiment 05's env), rendered with the env's tool list, cut
to their first `--turns` assistant turns (1: the one-turn episodes of experiment 05; 0: the whole demonstration). Each
of the `--tasks-per-step` groups holds `--num-generations` copies of one task's episode with rewards 1, 0, 1, 0, ...,
so every group has signal and both variants train on every episode. One offline update (`train_offline`, stopped
after its first optimiser step): tokenizing, the forward and backward pass over all episodes in one micro-batch
(`--gradient-accumulation-steps` splits it), the AdamW step; `beta = 0` and one iteration, so no reference or old
log-probs (as in experiment 05).

Each variant runs in a fresh Python process (this script with --variant) that loads the model, builds the trainer,
then measures the update alone: on a GPU the peak of `torch.cuda.max_memory_allocated` above what was allocated before
the update; on the CPU the peak resident set size above the RSS before the update (the kernel's high-water mark,
VmHWM, reset just before the update through /proc/self/clear_refs, so loading the model does not count; where that
reset is refused, `ru_maxrss`, which then includes the load). Time: wall seconds of the update (CUDA synchronised).
The old computation is written here (`full_vocabulary_logps`), not kept in the library.

Writes grpo_update_memory.results.json and .md beside this script (a --tiny run: in a temp folder unless --output)
with the measurements, the settings and `knowlyr_lab.provenance`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false'); os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_VERBOSITY', 'error')

ENV = 'knowlyr/arith-medium'
VARIANTS = {'full': 'full-vocabulary logits at every position (before issue 38)',
            'completion': 'completion tokens only, LM head in chunks (GRPOTrainer._logps)'}

def parse_args(argv=None):
    p = argparse.ArgumentParser('grpo_update_memory.py', description=__doc__.split('\n\n')[0])
    p.add_argument('--tiny', action='store_true', help='a tiny model (checks the script; results to a temp folder unless --output)')
    p.add_argument('--tasks-per-step', type=int, default=8, help='groups in the update (default: %(default)s)')
    p.add_argument('--num-generations', type=int, default=8, help='episodes per group (default: %(default)s)')
    p.add_argument('--turns', type=int, default=1, help='assistant turns per episode; 0: the whole demonstration (default: %(default)s)')
    p.add_argument('--gradient-accumulation-steps', type=int, default=1, help='micro-batches of the update (default: %(default)s)')
    p.add_argument('--mixed-precision', default=None, help="'bf16' or 'no' (default: bf16 on a GPU, no on the CPU)")
    p.add_argument('--logps-chunk-size', type=int, default=1024, help='positions through the LM head at once, new path (default: %(default)s)')
    p.add_argument('--only', choices=tuple(VARIANTS), action='append', help='run only this variant (repeatable; default: both)')
    p.add_argument('--output', help='results file (.json; the .md goes beside it)')
    p.add_argument('--variant', choices=tuple(VARIANTS), help=argparse.SUPPRESS)   # a child process: measure one variant
    p.add_argument('--model', help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.tiny: a.tasks_per_step, a.num_generations = min(a.tasks_per_step, 2), min(a.num_generations, 4)
    return a

def groups(a)->tuple[list[dict], list]:
    "The update's offline groups (records with prompt, completions, rewards) and the env's tool list"
    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trainer.data import env_tools, to_chat
    tools, recs = env_tools(ENV), []
    for i, t in enumerate(collect(ENV, ExpertAgent(), a.tasks_per_step, seed=0, progress=False)):
        msgs = to_chat(t, f'demo[{i}]', tools=tools)['messages']
        first = next(k for k, m in enumerate(msgs) if m['role'] == 'assistant')
        asst = [k for k, m in enumerate(msgs) if m['role'] == 'assistant']
        end = asst[a.turns - 1] + 1 if 0 < a.turns <= len(asst) else len(msgs)
        recs.append({'prompt': msgs[:first], 'completions': [msgs[first:end]] * a.num_generations, 'tools': tools,
                     'rewards': [float(k % 2 == 0) for k in range(a.num_generations)]})
    return recs, tools

def model_folder(a, tmp:Path)->Path:
    "The prepared real model, or (--tiny) a tiny model trained on these episodes' text, saved to `tmp`"
    if not a.tiny:
        from knowlyr_lab.trainer.real import prepare_real_model
        return prepare_real_model()
    from knowlyr_lab.trainer.data import to_chat
    from knowlyr_lab.trainer.sft import render_corpus
    from knowlyr_lab.trainer.tiny import make_tiny_model
    recs, tools = groups(a)
    chats = [to_chat({'messages': r['prompt'] + r['completions'][0], 'tools': tools}) for r in recs]
    make_tiny_model(render_corpus(chats, tools=tools), vocab_size=512, hidden_size=64, save_dir=tmp / 'tiny')
    return tmp / 'tiny'

def full_vocabulary_logps(self, model, b:dict)->tuple:
    "The computation before issue 38: the logits of every position, full vocabulary, then a float32 log-softmax"
    from knowlyr_lab.trainer.losses import token_logps
    with self.autocast():
        logits = model(input_ids=b['input_ids'], attention_mask=b['attention_mask'], use_cache=False).logits
    return token_logps(logits, b['labels'], self.config.temperature)

def _rss_now()->int:
    "Resident set size of this process now, bytes"
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')

def _reset_peak()->bool:
    "Reset the kernel's RSS high-water mark (VmHWM) of this process; False where that is refused"
    try:
        with open('/proc/self/clear_refs', 'w') as f: f.write('5')
        return True
    except OSError: return False

def _peak_rss(reset:bool)->int:
    "The RSS high-water mark, bytes: VmHWM after a reset, else ru_maxrss (the whole life of the process)"
    import resource
    if reset:
        for line in open('/proc/self/status'):
            if line.startswith('VmHWM:'): return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def measure(a)->dict:
    "One variant, in this (fresh) process: the update's peak memory above the memory before it, and its seconds"
    import torch

    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    cuda = torch.cuda.is_available()
    recs, tools = groups(a)
    cfg = GRPOConfig(model_name_or_path=a.model, output_dir=tempfile.mkdtemp(prefix='grpo-update-memory-'), tasks_per_step=a.tasks_per_step,
                     num_generations=a.num_generations, max_steps=1, num_epochs=1, learning_rate=1e-6, lr_scheduler='constant',
                     gradient_accumulation_steps=a.gradient_accumulation_steps, max_length=4096, temperature=0.5,
                     mixed_precision=a.mixed_precision or ('bf16' if cuda else 'no'), logps_chunk_size=a.logps_chunk_size,
                     progress_bar=False, seed=0)
    if a.variant == 'full': GRPOTrainer._logps = full_vocabulary_logps
    tr = GRPOTrainer(cfg, tools=tools)
    step, shape = tr._step, {}
    def timed_step(specs):
        if cuda: torch.cuda.synchronize()
        t0 = time.perf_counter(); row = step(specs)
        if cuda: torch.cuda.synchronize()
        shape.update(seconds=time.perf_counter() - t0, padded_positions=int(tr._batch['tensors']['input_ids'].numel()),
                     scored_positions=int(tr._batch['tensors']['mask'].sum()), episodes=int(tr._batch['tensors']['input_ids'].shape[0]))
        return row
    tr._step = timed_step
    if cuda: tr.model.to(tr.accelerator.device)                   # the weights are not the update's memory
    if cuda: torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); before = torch.cuda.memory_allocated()
    else: before, reset = _rss_now(), _reset_peak()
    rows = tr.train_offline(recs, stop_at=1)
    if cuda: torch.cuda.synchronize(); peak, method = torch.cuda.max_memory_allocated() - before, 'torch.cuda.max_memory_allocated'
    else: peak, method = _peak_rss(reset) - before, 'VmHWM (reset before the update)' if reset else 'ru_maxrss (includes loading the model)'
    return {'variant': a.variant, 'what': VARIANTS[a.variant], 'peak_bytes': peak, 'memory_method': method, **shape, 'loss': rows[0]['loss'],
            'groups_with_signal': rows[0]['groups_with_signal'], 'device': str(tr.accelerator.device), 'mixed_precision': cfg.mixed_precision,
            'vocab_size': tr.accelerator.unwrap_model(tr.model).config.vocab_size}

def child(a, variant:str, model:Path)->dict:
    "Run `variant` in a fresh process (this script); its one JSON line"
    args = [sys.executable, __file__, '--variant', variant, '--model', str(model), '--tasks-per-step', str(a.tasks_per_step),
            '--num-generations', str(a.num_generations), '--turns', str(a.turns), '--logps-chunk-size', str(a.logps_chunk_size),
            '--gradient-accumulation-steps', str(a.gradient_accumulation_steps)] + (['--mixed-precision', a.mixed_precision] if a.mixed_precision else [])
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode: raise RuntimeError(f"variant {variant} failed (status {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])

def markdown(res:dict)->str:
    "The results as a short report"
    gib = lambda b: f"{b / 2**30:.2f}"
    rows = [f"| {v['variant']} | {v['what']} | {gib(v['peak_bytes'])} | {v['seconds']:.2f} | {v['episodes']} | {v['padded_positions']:,} | "
            f"{v['scored_positions']:,} |" for v in res['variants'].values()]
    p = res['provenance']
    ratio = ' '.join(f"{k}: {v:.2f}x." for k, v in res.get('ratio_full_over_completion', {}).items())
    return '\n'.join([f"# One GRPO update: peak memory and time ({res['model']})", '',
                      f"{res['started']}, {res['device']}, commit {p.get('commit')}{' (dirty)' if p.get('dirty') else ''}, torch "
                      f"{p['packages'].get('torch')}, transformers {p['packages'].get('transformers')}. Settings: "
                      + ', '.join(f"{k}={v}" for k, v in res['settings'].items()) + '.', '',
                      '| variant | log-probs | peak above start (GiB) | seconds | episodes | positions (padded) | scored |',
                      '|---|---|---|---|---|---|---|', *rows, '', f"Ratio full / completion: {ratio}", '',
                      f"Memory: {next(iter(res['variants'].values()))['memory_method']}. Command: `{res['command']}`.", ''])

def main(argv=None)->int:
    a = parse_args(argv)
    if a.variant:
        print(json.dumps(measure(a))); return 0
    from transformers import AutoTokenizer

    from knowlyr_lab.provenance import provenance
    from knowlyr_lab.trainer.real import RealModelMissing
    started = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    tmp = Path(tempfile.mkdtemp(prefix='grpo-update-memory-'))
    out = Path(a.output) if a.output else (tmp if a.tiny else Path(__file__).parent) / 'grpo_update_memory.results.json'
    try: model = model_folder(a, tmp)
    except RealModelMissing as e:
        print(f"grpo_update_memory.py: {e}", file=sys.stderr); return 2
    prov = provenance(seed=0, tokenizer=AutoTokenizer.from_pretrained(model))   # with the template the variants render
    res = {'benchmark': 'grpo_update_memory', 'tiny': a.tiny, 'started': started, 'model': 'tiny' if a.tiny else model.name,
           'device': prov.get('cuda') or prov.get('cpu'), 'command': ' '.join(['python', 'experiments/benchmarks/grpo_update_memory.py', *(argv or sys.argv[1:])]),
           'settings': {k: v for k, v in vars(a).items() if k not in ('output', 'variant', 'model', 'only')}, 'provenance': prov, 'variants': {}}
    for v in a.only or list(VARIANTS):
        print(f"{v} ...", file=sys.stderr, flush=True)
        res['variants'][v] = child(a, v, model)
    if len(res['variants']) == 2:
        f, c = res['variants']['full'], res['variants']['completion']
        res['ratio_full_over_completion'] = {'peak memory': f['peak_bytes'] / max(c['peak_bytes'], 1), 'time': f['seconds'] / max(c['seconds'], 1e-9)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1)); out.with_suffix('.md').write_text(markdown(res))
    for v in res['variants'].values(): print(f"{v['variant']}: peak {v['peak_bytes'] / 2**30:.2f} GiB above start, {v['seconds']:.2f} s ({v['what']})")
    if 'ratio_full_over_completion' in res: print('full / completion: ' + ', '.join(f"{k} {x:.2f}x" for k, x in res['ratio_full_over_completion'].items()))
    print(out)
    return 0

if __name__ == '__main__': sys.exit(main())

"""Trainer integration tests: the OpenAI SDK against `serve` (tool calls, streaming, n choices), kill-and-resume of SFT in
a real process and of online GRPO, DDP with two CPU processes, zero gradient from observation tokens on a rendered
agent chat, and the training/inference format round trip."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from knowlyr_lab.chat import parse_reply
from knowlyr_lab.config import ConfigError
from knowlyr_lab.serving import AgentInference
from knowlyr_lab.trainer.data import to_chat, tokenize_chat
from knowlyr_lab.trainer.losses import step_weighted_ce
from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer, env_tools, oracle_trajectories, render_corpus
from knowlyr_lab.trainer.tiny import make_tiny_model, save_tiny_model
from knowlyr_lab.trainer.train_config import resolve_precision

ROOT = Path(__file__).resolve().parent.parent

@pytest.fixture(scope='module')
def maze():
    trajs = oracle_trajectories('knowlyr/maze-easy', range(12))
    tools = env_tools('knowlyr/maze-easy')
    model, tok = make_tiny_model(render_corpus(trajs[:4], tools=tools), vocab_size=512, hidden_size=64)
    return trajs, tools, model, tok

def test_observation_tokens_get_zero_gradient(maze):
    trajs, tools, model, tok = maze
    s = tokenize_chat(tok, to_chat(trajs[0], tools=tools))
    ids, labels = torch.tensor([s['input_ids']]), torch.tensor([s['labels']])
    logits = model(input_ids=ids).logits
    logits.retain_grad()
    step_weighted_ce(logits, labels).backward()
    g = logits.grad[0].abs().sum(-1)                    # position t predicts token t+1
    pred_masked = torch.tensor([l == -100 for l in s['labels'][1:]] + [True])
    assert g[pred_masked].sum().item() == 0.0
    assert (g[~pred_masked] > 0).all()
    text_of_scored = tok.decode([i for i, l in zip(s['input_ids'], s['labels']) if l != -100])
    assert 'You moved' not in text_of_scored and '<tool_call>' in text_of_scored

def test_training_format_round_trips_through_the_parser(maze):
    trajs, tools, model, tok = maze
    s = tokenize_chat(tok, to_chat(trajs[1], tools=tools))
    for k in range(trajs[1].steps.__len__()):
        reply = tok.decode([i for i, st in zip(s['input_ids'], s['step']) if st == k], skip_special_tokens=True)
        thought, calls = parse_reply(reply)
        a = trajs[1].steps[k].action
        assert calls == [{'tool': a.tool, 'params': a.params}]

def test_openai_sdk_streams_and_gets_n_choices(maze):
    "stream=True: SSE chunks the SDK assembles into the non-streamed reply; n=3: three choices (distinct when sampling)"
    openai = pytest.importorskip('openai')
    _, _, _, tok = maze
    srv = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny').serve()
    try:
        client = openai.OpenAI(base_url=srv.url, api_key='local', max_retries=0)
        msgs = [{'role': 'user', 'content': 'You are at row 0, col 0. Where is the goal?'}]
        whole = client.chat.completions.create(model='tiny', messages=msgs, max_tokens=12)
        chunks = list(client.chat.completions.create(model='tiny', messages=msgs, max_tokens=12, stream=True,
                                                     stream_options={'include_usage': True}))
        assert len(chunks) > 3 and all(c.object == 'chat.completion.chunk' for c in chunks)
        text = ''.join(c.choices[0].delta.content or '' for c in chunks if c.choices)
        assert text == whole.choices[0].message.content and text
        assert chunks[0].choices[0].delta.role == 'assistant'
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
        assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
        three = client.chat.completions.create(model='tiny', messages=msgs, max_tokens=12, n=3, temperature=1.0, seed=7)
        assert [c.index for c in three.choices] == [0, 1, 2]
        assert len({c.message.content for c in three.choices}) == 3            # sampled: three different replies
        assert whole.usage.completion_tokens < three.usage.completion_tokens <= 3 * 12   # usage counts every choice
        again = client.chat.completions.create(model='tiny', messages=msgs, max_tokens=12, n=3, temperature=1.0, seed=7, stream=True)
        got = {}
        for c in again:
            for ch in c.choices: got[ch.index] = got.get(ch.index, '') + (ch.delta.content or '')
        assert got == {c.index: c.message.content for c in three.choices}        # same seed, same samples, streamed
        greedy = client.chat.completions.create(model='tiny', messages=msgs, max_tokens=12, n=2)
        assert greedy.choices[0].message.content == greedy.choices[1].message.content == whole.choices[0].message.content
        for bad in (0, 17):
            with pytest.raises(openai.BadRequestError, match="'n' must be an integer from 1 to 16"):
                client.chat.completions.create(model='tiny', messages=msgs, max_tokens=4, n=bad)
    finally:
        srv.shutdown(); srv.server_close()

RESUME_SCRIPT = textwrap.dedent('''
    import sys, time, torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from knowlyr_lab.trainer.sft import SFTTrainer, SFTConfig, oracle_trajectories, env_tools
    model_dir, out, slow = sys.argv[1], sys.argv[2], sys.argv[3] == '1'
    model, tok = AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
    cfg = SFTConfig(output_dir=out, num_epochs=3, learning_rate=3e-3, batch_size=4, save_steps=1, save_total_limit=50,
                    progress_bar=False, max_length=1024, resume_from_checkpoint='latest', logging_steps=1)
    tr = SFTTrainer(cfg, model, tok, train_data=oracle_trajectories('knowlyr/maze-easy', range(12)), tools=env_tools('knowlyr/maze-easy'))
    if slow:  # slow each step down so the parent can kill us mid-run
        orig = tr.save_checkpoint
        def save():
            d = orig(); time.sleep(0.5); return d
        tr.save_checkpoint = save
    tr.train()
    tr.accelerator.unwrap_model(tr.model).save_pretrained(out + '/final')
''')

@pytest.mark.slow
def test_kill_and_resume_gives_the_same_weights(maze, tmp_path):
    trajs, tools, _, tok = maze
    model, _ = make_tiny_model(tokenizer=tok, hidden_size=64)
    mdir = save_tiny_model(model, tok, tmp_path / 'init')
    script = tmp_path / 'train.py'; script.write_text(RESUME_SCRIPT)
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    # uninterrupted
    subprocess.run([sys.executable, str(script), str(mdir), str(tmp_path / 'full'), '0'], check=True, env=env, capture_output=True)
    # killed with SIGKILL after a few checkpoints, then resumed from the latest one
    out = tmp_path / 'killed'
    p = subprocess.Popen([sys.executable, str(script), str(mdir), str(out), '1'], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while time.time() - t0 < 300 and not (out / 'checkpoint-3' / 'trainer_state.json').exists(): time.sleep(0.05)
    p.send_signal(signal.SIGKILL); p.wait()
    assert not (out / 'final').exists(), "the run finished before it was killed"
    subprocess.run([sys.executable, str(script), str(mdir), str(out), '0'], check=True, env=env, capture_output=True)
    from transformers import AutoModelForCausalLM
    a = AutoModelForCausalLM.from_pretrained(tmp_path / 'full' / 'final')
    b = AutoModelForCausalLM.from_pretrained(out / 'final')
    init = AutoModelForCausalLM.from_pretrained(mdir)
    assert max((x - y).abs().max().item() for x, y in zip(a.parameters(), b.parameters())) < 1e-6
    assert max((x - y).abs().max().item() for x, y in zip(a.parameters(), init.parameters())) > 1e-3
    # every step logged once (the killed run may have logged steps after its last checkpoint; the resumed run logs them again)
    steps = [json.loads(l)['step'] for l in open(out / 'metrics.jsonl')]
    full = [json.loads(l) for l in open(tmp_path / 'full' / 'metrics.jsonl')]
    assert steps == [r['step'] for r in full] == list(range(1, len(full) + 1))

@pytest.mark.slow
def test_online_grpo_resumes_at_its_update(maze, tmp_path):
    "Online GRPO stopped and resumed: it rolls out the saved update's successors (not update 0 again), mid-update from the saved batch, same weights, every update's row"
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    trajs, tools, _, tok = maze
    def run(out, stop_at=None, **kw):
        cfg = GRPOConfig(output_dir=str(out), env_id='knowlyr/maze-easy', num_generations=2, tasks_per_step=2, max_steps=4, num_iterations=2,
                         max_completion_length=12, max_invalid_actions=1, temperature=1.0, learning_rate=1e-2, save_steps=1,
                         save_total_limit=0, progress_bar=False, mixed_precision='no', seed=0, **kw)
        tr = GRPOTrainer(cfg, make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, tools=tools)
        seen, roll = [], tr.rollout
        tr.rollout = lambda seeds: seen.extend(seeds) or roll(seeds)
        rows = tr.train(stop_at)
        return tr, seen, rows
    full, seen, rows = run(tmp_path / 'full')
    assert seen == [0, 1, 2, 3] and len(rows) == 2 and full.state['step'] == 4
    for stop, want in ((3, []), (2, [2, 3])):        # 3: inside update 1 (its batch is in the checkpoint); 2: between updates
        out = tmp_path / f'stop{stop}'
        assert run(out, stop_at=stop)[1] == [0, 1, 2, 3][:2 * ((stop + 1) // 2)]
        resumed, seen, again = run(out, resume_from_checkpoint=str(out / f'checkpoint-{stop}'))
        assert seen == want, (stop, seen)
        key = lambda rs: [(r['reward'], r['groups_with_signal'], None if r['loss'] != r['loss'] else r['loss']) for r in rs]   # nan: a skipped update
        assert key(again) == key(rows), (stop, key(again), key(rows))   # every update's row, those before the checkpoint included
        for a, b in zip(full.model.parameters(), resumed.model.parameters()): assert (a - b).abs().max().item() < 1e-6
        steps = [json.loads(l)['step'] for l in open(out / 'metrics.jsonl')]
        assert steps == [1, 2, 3, 4]

def test_gradient_checkpointing_trains_to_the_same_weights(maze, tmp_path):
    "Recomputing activations in the backward pass changes memory, not the maths: same init, same data -> same weights"
    trajs, tools, _, tok = maze
    model, _ = make_tiny_model(tokenizer=tok, hidden_size=64)
    mdir = save_tiny_model(model, tok, tmp_path / 'init')
    from transformers import AutoModelForCausalLM
    finals = {}
    for gc in (False, True):
        m = AutoModelForCausalLM.from_pretrained(mdir)
        tr = SFTTrainer(SFTConfig(output_dir=str(tmp_path / f'gc{gc}'), num_epochs=1, batch_size=4, learning_rate=1e-2, max_length=2048,
                                  gradient_checkpointing=gc, progress_bar=False, mixed_precision='no', seed=0),
                        m, tok, train_data=trajs[:8], tools=tools)
        tr.train()
        if gc: assert m.is_gradient_checkpointing
        finals[gc] = [p.detach().clone() for p in m.parameters()]
    init = list(AutoModelForCausalLM.from_pretrained(mdir).parameters())
    assert max((a - b).abs().max().item() for a, b in zip(finals[False], finals[True])) < 1e-5
    assert max((a - b).abs().max().item() for a, b in zip(finals[False], init)) > 1e-3

DDP_SCRIPT = textwrap.dedent('''
    import sys, json
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from knowlyr_lab.trainer.sft import SFTTrainer, SFTConfig, oracle_trajectories, env_tools
    from knowlyr_lab.trainer.dpo import DPOTrainer, DPOConfig
    from knowlyr_lab.chat import to_messages
    kind, model_dir, out = sys.argv[1:4]
    model, tok = AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
    tools, trajs = env_tools('knowlyr/maze-easy'), oracle_trajectories('knowlyr/maze-easy', range(10))
    # 10 records in global batches of 3: the last batch has one record, so the second process trains on a stand-in
    common = dict(output_dir=out, num_epochs=1, learning_rate=3e-3, batch_size=3, progress_bar=False, max_length=1024,
                  mixed_precision='no', logging_steps=1, seed=0)
    if kind == 'sft':
        tr = SFTTrainer(SFTConfig(gradient_accumulation_steps=2, **common), model, tok, train_data=trajs, tools=tools)
    elif kind == 'dpo':
        msgs = [to_messages(t) for t in trajs]
        pairs = [{'prompt': m[:1], 'chosen': m[1:], 'rejected': m[1:3]} for m in msgs]   # rejected: stops after one step
        tr = DPOTrainer(DPOConfig(**common), model, tok, train_data=pairs, tools=tools)
    else:
        from knowlyr_lab.trainer.grpo import GRPOTrainer
        from knowlyr_lab.trainer.grpo_groups import GRPOConfig
        # 3 groups of 3 per update: 9 sequences split 5/4; per-sequence ('grpo') normalisation, 2 iterations (clipping), KL
        cfg = GRPOConfig(tasks_per_step=3, num_generations=3, loss_type='grpo', num_iterations=2, beta=0.04,
                         env_id='knowlyr/maze-easy', max_steps=4, max_episode_steps=3, max_completion_length=24, **common)
        # a reward with variance in every group (an untrained model fails every maze): updates are skipped without signal
        tr = GRPOTrainer(cfg, model, tok, tools=tools, episode_reward_fn=(lambda t: float(len(t.model_dump_json()) % 7)) if kind == 'grpo-online' else None)
    if kind == 'grpo':
        msgs = [to_messages(t) for t in trajs[:6]]
        tr.train_offline([{'prompt': m[:1], 'completions': [m[1:], m[1:3], m[1:2]], 'rewards': [[1.0, 0.2, 0.0], [0.0, 1.0, 0.5]][i % 2]}
                          for i, m in enumerate(msgs)])
    elif kind == 'grpo-online':
        seen, roll = [], tr.rollout
        tr.rollout = lambda seeds: seen.extend(seeds) or roll(seeds)
        tr.train()
    else: tr.train()
    rank = tr.accelerator.process_index
    if kind == 'grpo-online': json.dump({'seen': seen, 'history': tr.history}, open(f'{out}/rank{rank}.json', 'w'))
    if tr.accelerator.is_main_process:
        tr.accelerator.unwrap_model(tr.model).save_pretrained(out + '/final')
        json.dump({'world': tr.accelerator.num_processes, 'history': tr.history}, open(out + '/run.json', 'w'))
    tr.accelerator.wait_for_everyone(); tr.accelerator.end_training()   # leave the gloo process group before exit (exiting inside it aborted a rank now and then)
''')

def _torchrun(tmp_path, tok, kind, runs=('one', 'two')):
    "Run DDP_SCRIPT `kind` in one process ('one') and under torchrun with two ('two'); returns the initial model's dir"
    import socket
    model, _ = make_tiny_model(tokenizer=tok, hidden_size=64)
    mdir = save_tiny_model(model, tok, tmp_path / 'init')
    script = tmp_path / 'ddp.py'; script.write_text(DDP_SCRIPT)
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'OMP_NUM_THREADS': '1'}
    if 'one' in runs:
        r = subprocess.run([sys.executable, str(script), kind, str(mdir), str(tmp_path / 'one')], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
    with socket.socket() as so: so.bind(('127.0.0.1', 0)); port = so.getsockname()[1]
    r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_addr', '127.0.0.1',
                        '--master_port', str(port), str(script), kind, str(mdir), str(tmp_path / 'two')],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return mdir

@pytest.mark.slow
@pytest.mark.parametrize('kind', ['sft', 'dpo', 'grpo'])
def test_two_cpu_processes_train_like_one(maze, tmp_path, kind):
    "DDP over gloo (torchrun, 2 CPU processes): each process trains on its slice of the global batch; same steps, same weights"
    trajs, tools, _, tok = maze
    mdir = _torchrun(tmp_path, tok, kind)
    one, two = (json.loads((tmp_path / d / 'run.json').read_text()) for d in ('one', 'two'))
    assert (one['world'], two['world']) == (1, 2)
    assert len(one['history']) == len(two['history']) > 1
    for a, b in zip(one['history'], two['history']): assert abs(a['loss'] - b['loss']) < 1e-4, (a, b)
    from transformers import AutoModelForCausalLM
    a, b, init = (AutoModelForCausalLM.from_pretrained(p) for p in (tmp_path / 'one' / 'final', tmp_path / 'two' / 'final', mdir))
    # the whole update, not the largest element: Adam can turn float-level gradient noise on a near-zero gradient into an lr-sized step
    moved = torch.sqrt(sum(((x - y) ** 2).sum() for x, y in zip(a.parameters(), init.parameters())))
    apart = torch.sqrt(sum(((x - y) ** 2).sum() for x, y in zip(a.parameters(), b.parameters())))
    assert moved > 0.1 and apart < 1e-4 * moved, (moved.item(), apart.item())   # measured: 1.3 vs 2e-6
    if kind == 'grpo': assert all(abs(x[k] - y[k]) < 1e-5 for x, y in zip(one['history'], two['history']) for k in ('kl', 'clip_ratio'))

@pytest.mark.slow
def test_online_grpo_splits_rollouts_across_processes(maze, tmp_path):
    "Online GRPO under torchrun: each process rolls out its share of the tasks; both update on the whole gathered batch"
    trajs, tools, _, tok = maze
    _torchrun(tmp_path, tok, 'grpo-online', runs=('two',))
    r0, r1 = (json.loads((tmp_path / 'two' / f'rank{k}.json').read_text()) for k in (0, 1))
    assert r0['seen'] == [0, 2, 3, 5] and r1['seen'] == [1, 4]          # 2 updates x 3 tasks, tasks k, k+2, ... per process
    same = lambda h: [{k: v for k, v in r.items() if k != 'tokens_per_s'} for r in h]   # tokens/s: each process's own clock
    assert len(r0['history']) == 4 and same(r0['history']) == same(r1['history'])   # 2 updates x 2 iterations; same batch, loss, metrics
    assert all(h['completion_tokens'] > 0 and not h['skipped'] for h in r0['history'])

def test_bf16_autocast_trains_on_cpu(maze, tmp_path):
    "mixed_precision='bf16' runs the forward under bf16 autocast (CPU supports it): losses near fp32's, not equal, and falling"
    trajs, tools, _, tok = maze
    mdir = save_tiny_model(make_tiny_model(tokenizer=tok, hidden_size=64)[0], tok, tmp_path / 'init')
    from transformers import AutoModelForCausalLM
    runs = {}
    for mp in ('no', 'bf16'):
        tr = SFTTrainer(SFTConfig(output_dir=str(tmp_path / mp), num_epochs=2, batch_size=4, learning_rate=1e-2, max_length=2048,
                                  logging_steps=1, progress_bar=False, mixed_precision=mp, seed=0),
                        AutoModelForCausalLM.from_pretrained(mdir), tok, train_data=trajs[:8], tools=tools)
        tr.train()
        runs[mp] = [h['loss'] for h in tr.history if 'loss' in h]
        assert tr.precision == mp
    assert runs['bf16'][0] != runs['no'][0] and abs(runs['bf16'][0] - runs['no'][0]) < 0.05 * runs['no'][0], runs
    assert runs['bf16'][-1] < runs['bf16'][0] - 1.0, runs                        # 6.26 -> 4.23 in four steps
    if not torch.cuda.is_available():   # accelerate would take fp16 on a CPU and silently train fp32: we say so
        with pytest.warns(UserWarning, match="'fp16' needs a CUDA device"):
            tr = SFTTrainer(SFTConfig(output_dir=str(tmp_path / 'fp16'), mixed_precision='fp16'), tr.model, tok)
        assert tr.precision == 'no'
    with pytest.raises(ValueError, match="'fp8' is not"): resolve_precision('fp8')

def _sft_on(maze, tmp_path, name, mp, **kw):
    "An SFT trainer of precision `mp` on a fresh tiny model, writing to tmp_path/name"
    trajs, tools, _, tok = maze
    mdir = save_tiny_model(make_tiny_model(tokenizer=tok, hidden_size=64)[0], tok, tmp_path / f'{name}-init')
    from transformers import AutoModelForCausalLM
    return SFTTrainer(SFTConfig(output_dir=str(tmp_path / name), num_epochs=2, batch_size=4, learning_rate=1e-2, logging_steps=1,
                                progress_bar=False, mixed_precision=mp, seed=0, **kw),
                      AutoModelForCausalLM.from_pretrained(mdir), tok, train_data=trajs[:8], tools=tools)

def _forward_dtypes(tr)->set:
    "Dtypes of the first layer's q_proj outputs over tr.train()"
    seen = set()
    tr.model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda mod, i, o: seen.add(o.dtype))
    tr.train()
    return seen

def test_trainers_of_two_precisions_share_a_process(maze, tmp_path):
    "A bf16 trainer made before an fp32 one still trains in bf16 (nothing global is reset), and accelerate holds no precision"
    bf, fp = _sft_on(maze, tmp_path, 'bf', 'bf16'), _sft_on(maze, tmp_path, 'fp', 'no')
    assert _forward_dtypes(bf) == {torch.bfloat16} and _forward_dtypes(fp) == {torch.float32}
    assert bf.accelerator.mixed_precision == fp.accelerator.mixed_precision == 'no'
    assert (bf.precision, fp.precision) == ('bf16', 'no') and not bf.scaler.is_enabled()

def test_fp16_scales_the_loss_and_resumes_the_scale(maze, tmp_path):
    "fp16 (forced on a CPU, whose autocast has it): fp16 forward, the loss scaled, finite falling losses; a checkpoint keeps the scaler"
    tr = _sft_on(maze, tmp_path, 'half', 'no', save_steps=2)
    tr.precision = 'fp16'                    # resolve_precision maps fp16 to 'no' without CUDA; the loop itself runs anywhere
    assert _forward_dtypes(tr) == {torch.float16} and tr.scaler.is_enabled()
    losses = [h['loss'] for h in tr.history]
    assert all(map(lambda v: v == v and abs(v) != float('inf'), losses)) and losses[-1] < losses[0], losses
    scale = tr.scaler.get_scale()
    again = _sft_on(maze, tmp_path, 'half', 'no', save_steps=2, resume_from_checkpoint='latest')
    again.precision = 'fp16'
    again.train()
    assert again.scaler.get_scale() == scale and again.state['step'] == tr.state['step']   # the last checkpoint's scale

def _tb_scalars(run_dir):
    "Scalars of every TensorBoard event file under run_dir: {tag: [(step, value)]} (TFRecord framing, Event protos)"
    import struct

    from tensorboardX.proto import event_pb2
    out = {}
    for f in Path(run_dir).rglob('events.out.tfevents.*'):
        data, i = f.read_bytes(), 0
        while i < len(data):
            (n,) = struct.unpack('<Q', data[i:i + 8]); ev = event_pb2.Event.FromString(data[i + 12:i + 12 + n]); i += 12 + n + 4
            for v in ev.summary.value: out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out

def _wandb_history(run_dir):
    "History rows of an offline W&B run (its .wandb file: LevelDB-style log of 32 KiB blocks holding Record protos)"
    import struct

    from wandb.proto import wandb_internal_pb2 as pb
    (f,) = Path(run_dir).glob('wandb/offline-run-*/run-*.wandb')
    data, i, buf, rows = f.read_bytes(), 7, b'', []             # 7-byte file header ':W&B' + magic + version
    assert data[:4] == b':W&B'
    while i + 7 <= len(data):
        if 32768 - i % 32768 < 7: i += 32768 - i % 32768; continue   # a block's tail too short for a header is padding
        _, n, kind = struct.unpack('<IHB', data[i:i + 7]); i += 7
        if kind == 0 and n == 0: break
        buf += data[i:i + n]; i += n
        if kind in (1, 4):                                      # FULL or LAST chunk: a whole record
            r = pb.Record.FromString(buf); buf = b''
            if r.WhichOneof('record_type') == 'history': rows.append({it.key or '/'.join(it.nested_key): json.loads(it.value_json) for it in r.history.item})
    return rows

def test_metrics_reach_wandb_offline(maze, tmp_path, monkeypatch):
    "report_to=['wandb'] (wandb installed; offline mode, no network): every logged row is in the run's history at its step"
    pytest.importorskip('wandb', reason='wandb is in the dev extra')
    for k, v in {'WANDB_MODE': 'offline', 'WANDB_DIR': str(tmp_path), 'WANDB_SILENT': 'true'}.items(): monkeypatch.setenv(k, v)
    trajs, tools, _, tok = maze
    tr = SFTTrainer(SFTConfig(output_dir=str(tmp_path / 'run'), num_epochs=1, batch_size=2, logging_steps=1, progress_bar=False,
                              report_to=['wandb'], max_length=2048, seed=0),
                    make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, train_data=trajs[:6], tools=tools)
    tr.train()
    logged = [h for h in tr.history if 'loss' in h]
    t0 = time.time()
    while len(hist := _wandb_history(tmp_path)) < len(logged) and time.time() - t0 < 60: time.sleep(0.5)   # wandb-core writes the run file after finish() returns
    assert len(logged) == 3 and [h['step'] for h in hist] == [h['step'] for h in logged], hist
    assert all(abs(a['loss'] - b['loss']) < 1e-6 and a['lr'] == b['lr'] for a, b in zip(hist, logged))

def test_metrics_reach_tensorboard(maze, tmp_path):
    "report_to=['tensorboard'] (tensorboard or tensorboardX installed): every logged loss is in the event files at its step"
    pytest.importorskip('tensorboardX', reason='tensorboardX is in the dev extra')
    trajs, tools, _, tok = maze
    tr = SFTTrainer(SFTConfig(output_dir=str(tmp_path / 'run'), num_epochs=1, batch_size=2, logging_steps=1, progress_bar=False,
                              report_to=['tensorboard'], max_length=2048, seed=0),
                    make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, train_data=trajs[:6], tools=tools)
    tr.train()
    logged = [(h['step'], h['loss']) for h in tr.history if 'loss' in h]
    tb = _tb_scalars(tmp_path / 'run')
    assert len(logged) == 3 and [s for s, _ in tb['loss']] == [s for s, _ in logged]
    assert all(abs(a - b) < 1e-5 for (_, a), (_, b) in zip(tb['loss'], logged))
    assert 'lr' in tb and (tmp_path / 'run' / 'metrics.jsonl').read_text().count('"loss"') == 3
    tr.state['step'] = 4; tr._log({'loss': 0.5}); tr.metrics.close()        # train() closed the writers; a later row reopens them
    again = _tb_scalars(tmp_path / 'run')['loss']                       # nothing lost, nothing overwritten by the new writer
    want = sorted(logged + [(4, 0.5)])
    assert [s for s, _ in sorted(again)] == [s for s, _ in want] and all(abs(a[1] - b[1]) < 1e-5 for a, b in zip(sorted(again), want))
    with pytest.raises(ConfigError, match="report_to must be one of 'wandb', 'tensorboard'"): SFTConfig(output_dir=str(tmp_path / 'x'), report_to=['mlflw'])

"""Where GRPO spends compute (issue 38, item 3): log-probs only at the completion tokens (the same numbers as full
logits), no update at all for a batch without reward signal, dynamic sampling of further rounds of tasks, and a
reference model placed and run like the policy. Tiny models and faked rollouts: seconds each."""
import copy
import tempfile

import pytest
import torch
import transformers as T

from knowlyr_lab.rollout.spec import RolloutSpec
from knowlyr_lab.trainer.data import env_tools, to_chat
from knowlyr_lab.trainer.grpo import GRPOTrainer
from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors
from knowlyr_lab.trainer.losses import token_logps
from knowlyr_lab.trainer.sft import oracle_trajectories, render_corpus
from knowlyr_lab.trainer.tiny import make_tiny_model

ENV = 'knowlyr/maze-easy'
G = 2

@pytest.fixture(scope='module')
def maze():
    trajs, tools = oracle_trajectories(ENV, range(4), RolloutSpec(max_episode_steps=4)), env_tools(ENV)
    _, tok = make_tiny_model(render_corpus(trajs, tools=tools), vocab_size=256, hidden_size=32)
    return trajs, tools, tok

def trainer(tok, tools, **kw):
    cfg = dict(output_dir=tempfile.mkdtemp(), env_id=ENV, num_generations=G, tasks_per_step=2, max_steps=1, learning_rate=1e-2,
               weight_decay=0.1, progress_bar=False, mixed_precision='no', seed=0)
    torch.manual_seed(0)
    return GRPOTrainer(GRPOConfig(**{**cfg, **kw}), make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, tools=tools,
                       episode_reward_fn=lambda t: REWARD(t.metadata['seed'], t.metadata['member']))

def fake_rollout(tr, trajs, seen):
    "Rollouts without a model: G copies of an oracle trajectory per seed, marked with seed and member (what the reward reads)"
    def rollout(seeds):
        seen.extend(seeds)
        return [[trajs[s % len(trajs)].model_copy(deep=True, update={'metadata': {'seed': s, 'member': j}}) for j in range(G)] for s in seeds]
    tr.rollout = rollout

REWARD = None
@pytest.fixture
def reward():
    "Set the rewards of (seed, member) for one test"
    def set_(fn):
        global REWARD
        REWARD = fn
    yield set_
    set_(None)

def old_logps(model, b, temperature):
    "The computation before issue 38: full-vocabulary logits at every position"
    return token_logps(model(input_ids=b['input_ids'], attention_mask=b['attention_mask'], use_cache=False).logits, b['labels'], temperature)

# -- log-probs ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('turns', ['single', 'multi'])
def test_logps_equal_full_vocabulary_and_project_only_completion_positions(maze, turns):
    "Same log-probs, mask and gradients as full logits (single- and multi-turn episodes, several chunks); the LM head sees only scored positions"
    trajs, tools, tok = maze
    tr = trainer(tok, tools, temperature=0.7, logps_chunk_size=5)
    chats = [to_chat(t, tools=tools) for t in trajs[:3]]
    if turns == 'single':           # the task and the first tool call: a one-turn episode
        first = lambda c: next(k for k, m in enumerate(c['messages']) if m['role'] == 'assistant')
        chats = [{**c, 'messages': c['messages'][:first(c) + 1], 'step_rewards': c['step_rewards'][:1]} for c in chats]
    b = group_tensors(tr, chats, 3)[0]
    mask = b['labels'][:, 1:] != -100
    spans = ((mask[:, 1:] & ~mask[:, :-1]).sum(1) + mask[:, 0])
    assert (spans == 1).all() if turns == 'single' else (spans >= 3).all()     # one assistant turn, or several
    model = tr.model
    old, old_mask = old_logps(model, b, 0.7)
    g_old = torch.autograd.grad(old.sum(), list(model.parameters()))
    rows = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, o: rows.append(i[0].reshape(-1, i[0].shape[-1]).shape[0]))
    try: new, new_mask = tr._logps(model, b)
    finally: hook.remove()
    g_new = torch.autograd.grad(new.sum(), list(model.parameters()))
    assert torch.equal(new_mask, old_mask)
    assert (new - old).abs().max().item() < 1e-5
    assert max(((a - c).abs().max() / a.abs().max().clamp(min=1e-6)).item() for a, c in zip(g_old, g_new)) < 1e-5   # relative: summed over ~100 tokens
    n = int(mask.sum())
    assert sum(rows) == n + 2 * b['input_ids'].shape[0]    # the scored positions, plus the forward's one position per row and its check
    assert max(rows) <= max(5, b['input_ids'].shape[0])    # a chunk at a time
    assert n < 0.5 * mask.numel()                          # most positions are prompt and observations: never projected

@pytest.mark.parametrize('family', ['gemma2', 'cohere', 'granite'])
def test_logps_follow_logit_transforms_after_the_head(maze, family):
    "Gemma's soft-capping, Cohere's and Granite's scaling happen after the LM head: the log-probs still equal full logits'"
    trajs, tools, tok = maze
    tr = trainer(tok, tools, temperature=0.7, logps_chunk_size=4)     # `_logps` reads its accelerator and config, not its model
    small = dict(vocab_size=97, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                 head_dim=8, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    cls, extra = {'gemma2': ('Gemma2', {'final_logit_softcapping': 0.5}), 'cohere': ('Cohere', {'logit_scale': 3.0}),
                  'granite': ('Granite', {'logits_scaling': 0.25})}[family]
    torch.manual_seed(0)
    model = getattr(T, f'{cls}ForCausalLM')(getattr(T, f'{cls}Config')(**small, **extra))
    ids = torch.randint(3, 97, (3, 12)); labels = ids.clone(); labels[:, :5] = -100; labels[1, 8:10] = -100
    b = {'input_ids': ids, 'attention_mask': torch.ones_like(ids), 'labels': labels}
    with torch.no_grad(): old, _ = old_logps(model, b, 0.7); new, _ = tr._logps(model, b)
    assert (new - old).abs().max().item() < 1e-5

def test_logps_refuse_a_model_whose_logits_are_not_its_head(maze):
    "A config that claims a scaling its model does not apply (MPT's logit_scale is such a field): refused, not trained on"
    trajs, tools, tok = maze
    tr = trainer(tok, tools)
    b = group_tensors(tr, [to_chat(t, tools=tools) for t in trajs[:2]], 2)[0]
    tr.model.config.logit_scale = 3.0
    with pytest.raises(ValueError, match="not its LM head's output"): tr._logps(tr.model, b)

# -- batches without signal --------------------------------------------------------------------------------------

@pytest.mark.parametrize('mode', ['online', 'offline'])
def test_batch_without_signal_makes_no_step(maze, reward, mode):
    "Every group's rewards equal: no forward (policy or reference), no optimiser or scheduler step, weights bit-identical, recorded as skipped"
    trajs, tools, tok = maze
    reward(lambda seed, member: float(seed % 2))               # each group all 0 or all 1
    tr = trainer(tok, tools, beta=0.1)
    tr.ref_model = copy.deepcopy(tr.model)
    calls = {'policy': 0, 'ref': 0}
    tr.model.register_forward_pre_hook(lambda *a: calls.__setitem__('policy', calls['policy'] + 1))
    tr.ref_model.register_forward_pre_hook(lambda *a: calls.__setitem__('ref', calls['ref'] + 1))
    before = [p.detach().clone() for p in tr.model.parameters()]
    seen = []
    if mode == 'online':
        fake_rollout(tr, trajs, seen)
        row = tr.train()[0]
    else:
        row = tr.train_offline([{'prompt': [{'role': 'user', 'content': 'Go.'}], 'completions': ['north', 'south'], 'rewards': [r, r]} for r in (0, 1)])[0]
    assert calls == {'policy': 0, 'ref': 0}
    assert all(torch.equal(a, p) for a, p in zip(before, tr.model.parameters()))
    assert len(tr.optimizer.state) == 0 and tr.scheduler.scheduler.last_epoch == 0   # AdamW never stepped, nor the schedule
    assert (row['skipped'], row['skipped_updates'], row['groups'], row['groups_with_signal'], row['completion_tokens']) == (True, 1, 2, 0, 0)
    assert row['reward'] == 0.5 and row['sampling_rounds'] == 1 and row['loss'] != row['loss']   # NaN: no loss was computed
    assert tr.history[-1]['skipped'] and tr.state['step'] == 1

def test_groups_without_signal_are_dropped_before_the_update(maze, reward):
    "A batch with one group with signal and one without trains on the first only; the step is taken"
    trajs, tools, tok = maze
    reward(lambda seed, member: float(seed == 1 and member == 0))
    tr = trainer(tok, tools)
    fake_rollout(tr, trajs, [])
    before = [p.detach().clone() for p in tr.model.parameters()]
    row = tr.train()[0]
    assert (row['groups'], row['groups_with_signal'], row['skipped']) == (2, 1, False)
    assert tr._batch['tensors']['input_ids'].shape[0] == G                       # the rows of one group
    assert not all(torch.equal(a, p) for a, p in zip(before, tr.model.parameters()))

# -- dynamic sampling --------------------------------------------------------------------------------------------

def test_dynamic_sampling_rolls_out_new_tasks_until_enough_signal(maze, reward):
    "Rounds of tasks_per_step new tasks until min_groups_with_signal have signal; round 0 is the update's own tasks"
    trajs, tools, tok = maze
    reward(lambda seed, member: float(seed >= 3 and member == 0))
    tr = trainer(tok, tools, max_steps=2, min_groups_with_signal=2, max_sampling_rounds=4)
    seen = []
    fake_rollout(tr, trajs, seen)
    rows = tr.train()
    # 2 updates: round r of update u plays block r * 2 + u of 2 tasks; update 0: blocks 0 (seeds 0, 1), 2 (4, 5): 2 groups with signal
    # update 1: block 1 (seeds 2, 3): one group with signal; block 3 (6, 7): two more
    assert seen == [0, 1, 4, 5, 2, 3, 6, 7]
    assert [(r['groups'], r['groups_with_signal'], r['sampling_rounds'], r['skipped']) for r in rows] == [(4, 2, 2, False), (4, 3, 2, False)]
    assert tr._batch['tensors']['input_ids'].shape[0] == 2 * G                   # at most tasks_per_step groups are trained on

def test_dynamic_sampling_stops_at_max_rounds(maze, reward):
    "Too little signal after max_sampling_rounds: the update trains on what it has; none at all: it is skipped, and said so"
    trajs, tools, tok = maze
    reward(lambda seed, member: float(seed == 3 and member == 0))
    tr = trainer(tok, tools, min_groups_with_signal=2, max_sampling_rounds=2)
    seen = []
    fake_rollout(tr, trajs, seen)
    row = tr.train()[0]
    assert seen == [0, 1, 2, 3] and (row['groups'], row['groups_with_signal'], row['sampling_rounds'], row['skipped']) == (4, 1, 2, False)
    reward(lambda seed, member: 1.0)
    tr = trainer(tok, tools, min_groups_with_signal=1, max_sampling_rounds=3)
    seen = []
    fake_rollout(tr, trajs, seen)
    row = tr.train()[0]
    assert seen == [0, 1, 2, 3, 4, 5]
    assert (row['groups'], row['groups_with_signal'], row['sampling_rounds'], row['skipped'], row['skipped_updates']) == (6, 0, 3, True, 1)

# -- the reference model -----------------------------------------------------------------------------------------

def test_reference_is_placed_and_run_like_the_policy(maze, reward):
    "The reference copy: the policy's device and dtype, eval mode, no gradient, and its forward under the policy's autocast (bf16 here)"
    trajs, tools, tok = maze
    reward(lambda seed, member: float(member == 0))
    tr = trainer(tok, tools, beta=0.1, mixed_precision='bf16')
    fake_rollout(tr, trajs, [])
    tr.train(stop_at=0)                      # the reference made, the policy prepared; no update yet
    ref, pol = tr.ref_model, tr.model
    assert ref is not None and not ref.training and not any(p.requires_grad for p in ref.parameters())
    pdev, pdt = next(pol.parameters()).device, next(pol.parameters()).dtype
    assert all(p.device == pdev and p.dtype == pdt for p in ref.parameters()) and pdev == tr.accelerator.device
    b = {k: v.to(pdev) for k, v in group_tensors(tr, [to_chat(t, tools=tools) for t in trajs[:2]], 2)[0].items()}
    pol.eval()
    with torch.no_grad(): lp_pol, _ = tr._logps(pol, b); lp_ref, _ = tr._logps(ref, b)
    assert torch.equal(lp_pol, lp_ref)       # the same weights, run alike: the same numbers (fp32 vs bf16 differ by ~1e-2)

@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_reference_follows_the_policy_to_the_gpu(maze, reward):
    "A policy given on the CPU is moved to the GPU by accelerate; its reference copy goes with it (else: a device mismatch at the KL)"
    trajs, tools, tok = maze
    reward(lambda seed, member: float(member == 0))
    tr = trainer(tok, tools, beta=0.1)
    fake_rollout(tr, trajs, [])
    row = tr.train()[0]
    assert next(tr.ref_model.parameters()).device.type == 'cuda' and row['kl'] == row['kl']

# -- the benchmark -----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_update_memory_benchmark_runs_on_a_tiny_model(tmp_path):
    "experiments/benchmarks/grpo_update_memory.py --tiny: both variants in fresh processes, same episodes, a ratio, provenance"
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / 'r.json'
    r = subprocess.run([sys.executable, str(root / 'experiments' / 'benchmarks' / 'grpo_update_memory.py'), '--tiny', '--output', str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    full, comp = res['variants']['full'], res['variants']['completion']
    assert (full['episodes'], full['padded_positions'], full['scored_positions']) == (comp['episodes'], comp['padded_positions'], comp['scored_positions'])
    assert full['peak_bytes'] > 0 and comp['peak_bytes'] > 0 and abs(full['loss'] - comp['loss']) < 1e-4   # same episodes, same update
    assert res['ratio_full_over_completion']['peak memory'] > 0 and res['provenance']['commit'] and out.with_suffix('.md').exists()
    tpl = res['provenance']['chat_template']        # trn10: taken without the tokenizer, it named no template
    assert tpl and tpl['name_or_path'].endswith('tiny') and tpl['sha256'], res['provenance']

def test_output_head_tolerates_rounding_and_refuses_scaling(maze):
    """The head check compares a recomputed logit row with the forward's: a matmul of another shape rounds differently
    (experiment 03 died on a reference model whose logits differed by rounding at AVX-512 kernels), scaling does not"""
    from knowlyr_lab.trainer.grpo_updates import output_head
    _, _, tok = maze
    torch.manual_seed(0)
    model = make_tiny_model(tokenizer=tok, hidden_size=32)[0].eval()
    h = torch.randn(3, 32) * 20                               # large hidden states: large logits, large rounding
    with torch.no_grad(): logits = model.get_output_embeddings()(h)
    rounded = logits * (1 + 3e-6 * torch.randn_like(logits))    # several ulps per logit, as another kernel gives
    assert torch.equal(output_head(model, h, rounded)(h), logits)
    with pytest.raises(ValueError, match='not its LM head'):
        output_head(model, h, logits * 0.98)                  # a scaled head is not the LM head
    with pytest.raises(ValueError, match='not its LM head'):
        output_head(model, h, torch.tanh(logits / 3) * 3)     # nor a soft-capped one

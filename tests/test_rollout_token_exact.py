"""Token-exact, fast local rollouts (issue 38 item 2): the sampler is softmax(logits / T) whatever the model's
generation config says, GRPO trains on the token ids the policy sampled, and the members of a group share one
prefill of their prompt. Fast tests on a tiny model; the `real` one runs on SmolLM2 (tests/test_real_model.py
explains the flag): the log-probs recorded while sampling equal the trainer's own log-probs of the ids it trains on."""
import tempfile

import pytest
import torch


@pytest.fixture(scope='module')
def tiny():
    from knowlyr_lab.trainer.tiny import make_tiny_model
    return make_tiny_model(hidden_size=32)

def test_generation_config_sampling_defaults_are_ignored(tiny):
    "A checkpoint whose generation_config asks for top_k=1, min_p and a repetition penalty is still sampled from softmax(logits / T)"
    from transformers import GenerationConfig

    from knowlyr_lab.serving import AgentInference
    model, tok = tiny
    saved = model.generation_config
    model.generation_config = GenerationConfig(top_k=1, min_p=0.9, repetition_penalty=10.0, min_new_tokens=3, eos_token_id=tok.eos_token_id)
    try:
        inf = AgentInference(model, tok, prefix_cache=0)
        outs = inf.generate([[{'role': 'user', 'content': 'Go east.'}]] * 256, max_new_tokens=2, temperature=0.7, seed=1)
    finally: model.generation_config = saved
    with torch.no_grad(): logits = model(torch.tensor([outs[0]['prompt_token_ids']])).logits[0, -1]
    first = [o['token_ids'][0] for o in outs]
    assert len(set(first)) > 1, "every draw was the most likely token: a top-k of 1 was applied"
    ref = torch.log_softmax(logits / 0.7, -1)
    assert torch.allclose(torch.tensor([o['token_logprobs'][0] for o in outs]), ref[first], atol=1e-4)

def test_grpo_trains_on_the_sampled_ids(tiny):
    "An online GRPO member's training row is the prompt ids the model saw and the ids it sampled, not a re-rendering"
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors
    model, tok = tiny
    tr = GRPOTrainer(GRPOConfig(output_dir=tempfile.mkdtemp(), env_id='knowlyr/maze-easy', num_generations=2, tasks_per_step=1, max_steps=1,
                                max_completion_length=12, max_episode_steps=2, progress_bar=False), model, tok)
    group = tr.rollout([0])[0]
    members = [tr._score(t) for t in group]
    for t, m in zip(group, members):
        assert all(s.token_ids and s.prompt_token_ids for s in t.steps)
        trained = [i for s in m['samples'] for i, l in zip(s['input_ids'], s['labels']) if l != -100]
        assert trained == [i for s in t.steps for i in s.token_ids]                 # the sampled ids, every one, in order
        assert m['samples'][0]['input_ids'][:len(t.steps[0].prompt_token_ids)] == t.steps[0].prompt_token_ids
    b, *_ = group_tensors(tr, members, len(members))
    assert int((b['labels'] != -100).sum()) == sum(len(s.token_ids) for t in group for s in t.steps)


def test_a_group_prefills_its_prompt_once(tiny):
    "Two tasks x three episodes: each task's prompt is encoded once, every row then only its last token; same first tokens as alone"
    from knowlyr_lab.serving import AgentInference
    model, tok = tiny
    inf = AgentInference(model, tok)
    chats = [[{'role': 'system', 'content': 'You walk a maze. Call move(direction) to move one cell, submit() at the goal.'},
              {'role': 'user', 'content': f'The goal is {d}, three rooms away, past the blue door.'}] for d in ('north', 'south')]
    batch = [c for c in chats for _ in range(3)]
    outs = inf.generate(batch, max_new_tokens=3, logprobs=0)
    prompts = [o['prompt_token_ids'] for o in outs]
    shared = next(k for k, (a, b) in enumerate(zip(prompts[0], prompts[3])) if a != b)
    assert inf.cache.stats['encoded'] == shared + (len(prompts[0]) - 1 - shared) + (len(prompts[3]) - 1 - shared) + 6
    alone = [AgentInference(model, tok, prefix_cache=0).generate([c], max_new_tokens=3, logprobs=0)[0] for c in batch]
    assert [o['token_ids'] for o in outs] == [o['token_ids'] for o in alone]
    got, want = ([x['logprob'] for o in r for x in o['logprobs']] for r in (outs, alone))
    assert torch.allclose(torch.tensor(got), torch.tensor(want), atol=1e-4)      # the model's numbers, not only its argmax

def test_a_later_turn_reuses_the_conversation_exactly(tiny):
    "Turn 2 encodes only what follows the cached turn 1, and its log-probs are those of encoding the whole conversation"
    from knowlyr_lab.serving import AgentInference
    model, tok = tiny
    inf = AgentInference(model, tok)
    chats = [[{'role': 'user', 'content': f'Go {d}, then report what you see.'}] for d in ('east', 'west', 'north')]
    first = inf.generate(chats, max_new_tokens=6, temperature=1.0, seed=0)
    turn2 = [c + [{'role': 'assistant', 'content': o['text']}, {'role': 'user', 'content': 'A wall. Go on.'}] for c, o in zip(chats, first)]
    before = dict(inf.cache.stats)
    again = inf.generate(turn2, max_new_tokens=6, logprobs=0)
    fresh = AgentInference(model, tok, prefix_cache=0).generate(turn2, max_new_tokens=6, logprobs=0)
    assert inf.cache.stats['reused'] - before['reused'] > sum(o['prompt_tokens'] for o in first)
    assert [o['token_ids'] for o in again] == [o['token_ids'] for o in fresh]
    got, want = ([x['logprob'] for o in r for x in o['logprobs']] for r in (again, fresh))
    assert torch.allclose(torch.tensor(got), torch.tensor(want), atol=1e-4)

@pytest.mark.real
def test_real_model_recorded_logprobs_are_the_trainers(tmp_path):
    "SmolLM2 plays arith-medium groups at T=0.7; the trainer's log-probs of the rows it trains on equal those recorded while sampling"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig, group_tensors
    from knowlyr_lab.trainer.real import prepare_real_model
    path = prepare_real_model(quiet=True)
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    tr = GRPOTrainer(GRPOConfig(output_dir=str(tmp_path), env_id='knowlyr/arith-medium', num_generations=2, tasks_per_step=1, max_steps=1,
                                max_completion_length=24, max_episode_steps=2, temperature=0.7, mixed_precision='no', progress_bar=False),
                 model, tok)
    torch.manual_seed(0)
    group = tr.rollout([3])[0]
    members = [tr._score(t) for t in group]
    b, *_ = group_tensors(tr, members, len(members))
    with torch.no_grad(): lp, mask = tr._logps(tr.model.eval(), {k: b[k] for k in ('input_ids', 'attention_mask', 'labels')})
    recorded = torch.tensor([[x if x is not None else 0.0 for x in s['logprobs'][1:]] + [0.0] * (b['input_ids'].shape[1] - len(s['logprobs']))
                             for m in members for s in m['samples']])
    assert mask.sum() == sum(len(s.token_ids) for t in group for s in t.steps)      # every sampled token is trained, nothing else
    assert (lp - recorded)[mask].abs().max() < 2e-3

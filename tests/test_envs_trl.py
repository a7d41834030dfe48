"A knowlyr env as TRL's `environment_factory`: the contract TRL reads (reset, tool methods, get_reward), and a few GRPO steps with TRL's own trainer."
import inspect
import os

import pytest
from transformers.utils import get_json_schema

from knowlyr_lab.envs.trl import KnowlyrTRLEnv, as_environment_factory, environment_rows


def trl_tools(cls):
    "The tool methods exactly as TRL's GRPOTrainer finds them (trl/trainer/grpo_trainer.py, 1.16)"
    return [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if n not in ('reset', 'get_reward') and not n.startswith('_')]


def play_expert(env):
    while not env.done:
        a = env.env.unwrapped.oracle_action()
        getattr(env, a['tool'])(**a['params'])
    return env.get_reward()


def test_arith_easy_acceptance():
    Env = as_environment_factory('knowlyr/arith-easy')
    env = Env()
    obs = env.reset(task_id='arith-easy-s3')
    assert isinstance(obs, str) and obs.splitlines()[-1] == 'Expression: 377 + 483'
    assert play_expert(env) == 1.0
    assert sorted(trl_tools(Env)) == ['add', 'multiply', 'submit', 'subtract']
    for name in trl_tools(Env):
        fn = get_json_schema(getattr(env, name))['function']
        assert fn['name'] == name and fn['description']
        props = fn['parameters']['properties']
        assert all(p['type'] == 'integer' and p['description'] for p in props.values())
        assert fn['parameters']['required'] == sorted(props) if name != 'submit' else ['answer']


def test_every_task_verified_and_reset_reuses_the_instance():
    Env = as_environment_factory('knowlyr/arith-medium')
    env = Env()                                           # TRL pools instances: one object, many episodes
    rows = environment_rows('knowlyr/arith-medium', 6)
    assert [r['task_id'] for r in rows] == [f'arith-medium-s{i}' for i in range(6)]
    exprs = []
    for row in rows:
        exprs.append(env.reset(**row).splitlines()[-1])
        assert env.get_reward() == 0.0 and not env.done
        assert play_expert(env) == 1.0
    assert len(set(exprs)) == 6
    env.reset(**rows[0])
    env.submit(answer=-1)
    assert env.get_reward() == 0.0 and env.done
    assert env.add(a=1, b=2).startswith('The episode is over') and len(env.calls) == 1
    with pytest.raises(ValueError, match="unknown arith task 'nope'"):
        env.reset(task_id='nope')


def test_other_envs_and_bad_calls():
    Maze = as_environment_factory('knowlyr/maze-easy')
    assert issubclass(Maze, KnowlyrTRLEnv) and sorted(trl_tools(Maze)) == ['look', 'move', 'submit']
    schema = get_json_schema(Maze.move)['function']['parameters']['properties']['direction']
    from knowlyr_lab.envs.maze import DIRS
    assert schema['enum'] == list(DIRS) and schema['type'] == 'string'
    m = Maze()
    m.reset(seed=1)
    assert play_expert(m) == 1.0
    arith = as_environment_factory('knowlyr/arith-easy')()
    arith.reset(task_id='arith-easy-s0')
    assert arith.add(a='x', b=1).startswith('Error:') and not arith.done


def test_every_registered_env_has_trl_readable_tools():
    "Every registered env becomes a class whose tool methods match its schemas, as get_json_schema reads them"
    from knowlyr_lab.core import schema_name, schema_params
    from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient
    from knowlyr_lab.registry import env_spec, list_envs, make
    for env_id in list_envs():
        cls = env_spec(env_id).load()
        if isinstance(cls, type) and issubclass(cls, (OpenEnvClient, AgentGymClient)): continue   # clients other tests registered for servers they stopped
        Env = as_environment_factory(env_id)
        env = make(env_id)
        want = {schema_name(s): schema_params(s) for s in env.tool_schemas}
        env.close()
        assert sorted(trl_tools(Env)) == sorted(want), env_id
        for name, params in want.items():
            got = get_json_schema(getattr(Env, name))['function']['parameters']
            assert set(got['properties']) == set(params.get('properties', {})), (env_id, name)
            assert sorted(got.get('required', [])) == sorted(params.get('required', [])), (env_id, name)


@pytest.mark.slow
def test_grpo_trainer_trains_on_the_environment(tmp_path):
    "TRL's own GRPOTrainer on CPU (transformers generation, no vLLM): tool calls reach the env, get_reward scores them, the policy moves"
    os.environ['TRL_EXPERIMENTAL_SILENCE'] = '1'
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template

    from knowlyr_lab.trainer.tiny import make_tiny_model, train_tokenizer

    Base = as_environment_factory('knowlyr/arith-easy')
    made = []
    class Env(Base):                                      # records every instance TRL builds
        def __init__(self): super().__init__(); made.append(self)

    # one expert episode, rendered with the tools exactly as TRL renders them into the prompt
    ex = Base()
    msgs = [{'role': 'user', 'content': ex.reset(task_id='arith-easy-s0')}]
    while not ex.done:
        a = ex.env.unwrapped.oracle_action()
        out = getattr(ex, a['tool'])(**a['params'])
        msgs += [{'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': a['tool'], 'arguments': a['params']}}]},
                 {'role': 'tool', 'name': a['tool'], 'content': out}]
    schemas = [get_json_schema(getattr(ex, n)) for n in trl_tools(Base)]
    tok = train_tokenizer(chat_template=qwen3_chat_template)
    text = tok.apply_chat_template(msgs, tools=schemas, tokenize=False)
    tok = train_tokenizer([text], chat_template=qwen3_chat_template)
    model, tok = make_tiny_model(tokenizer=tok, seed=0)
    ids = tok([text], return_tensors='pt').input_ids
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(120):                                  # fit the episode so that the policy calls tools at all
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward(); opt.step(); opt.zero_grad()
    assert loss.item() < 0.1
    before = {k: v.detach().clone() for k, v in model.named_parameters()}

    ds = Dataset.from_list(environment_rows('knowlyr/arith-easy', 1) * 8)
    cfg = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, max_steps=3, per_device_train_batch_size=4, num_generations=4,
                     max_completion_length=128, gradient_checkpointing=False, report_to='none', logging_steps=1, save_strategy='no',
                     learning_rate=1e-4, seed=0, temperature=1.0)
    trainer = GRPOTrainer(model=model, processing_class=tok, args=cfg, train_dataset=ds, environment_factory=Env)
    trainer.train()
    logs = [h for h in trainer.state.log_history if 'loss' in h]
    print('\n' + '\n'.join(str({k: round(h[k], 3) for k in ('loss', 'grad_norm', 'tools/call_frequency', 'reward', 'reward_std')}) for h in logs))
    assert len(logs) == 3 and all('rewards/Env/mean' in h for h in logs)
    calls = [c for e in made for c in e.calls]
    assert calls and {c['tool'] for c in calls} <= {'add', 'subtract', 'multiply', 'submit'}
    assert any(h['tools/call_frequency'] > 0 for h in logs) and any(h['reward'] > 0 for h in logs)
    assert any(c['tool'] == 'submit' and c['observation'] == 'Correct.' for c in calls)
    assert any(h['grad_norm'] > 0 for h in logs)
    assert any(not torch.equal(before[k], v) for k, v in model.named_parameters())

"""One prompt for training and inference (issue 12, item 2).

A tiny policy is trained on expert episodes of an env whose instruction says nothing about the task: what to do is only
in the env's reset observation. The trained policy must then succeed equally through the three ways a researcher runs
it: `collect` (the library's rollout engine), a hand-written loop that feeds the env's own observations to the model,
and `serve` driven by the real `openai` client. If the training chats rendered the instruction instead of the reset
observation as the first user turn (the bug this guards against), the policy would learn a prompt that no hand-written
loop or client sends, and these checks fail."""
import random

import pytest

from knowlyr_lab.core import AgentEnv, TimeStep, Verdict, tool_schema

INSTRUCTION = "Submit the code you are shown."

class CodeEnv(AgentEnv):
    "The reset observation shows a one-digit code; `submit(code)` it. The instruction alone does not say which"
    @property
    def tool_schemas(self): return [tool_schema('submit', 'Submit the code', {'code': {'type': 'integer'}}, ['code'])]
    def _reset(self, task=None, seed=None):
        self.code = random.Random(f'code-{seed}').randint(0, 9)
        return TimeStep(f"{INSTRUCTION} The code is {self.code}.", info={'task': {'id': f'code-s{seed}', 'instruction': INSTRUCTION}})
    def _task_content(self): return self.code
    def _step(self, tool, params):
        ok = params['code'] == self.code
        return TimeStep('Correct.' if ok else 'Wrong.', float(ok), terminated=True, verdict=Verdict(success=ok))
    def oracle_action(self): return {'tool': 'submit', 'params': {'code': self.code}}

SEEDS = list(range(1000, 1020))

def _train(out):
    "A tiny policy SFT'd on 300 expert episodes (recorded by the library's engine) with the SFT recipe, saved with its prompt card"
    from knowlyr_lab.agents import ExpertAgent
    from knowlyr_lab.recipes import train_sft_policy
    from knowlyr_lab.rollout.collect import collect
    demos = collect(CodeEnv, ExpertAgent(), 300, seed=0, progress=False)
    assert all(t.outcome.success for t in demos) and demos[0].task.initial_observation.startswith(INSTRUCTION + ' The code is')
    # 240 optimiser steps at 3e-3 on a 128-wide model: enough to learn to copy one digit (measured ~90% at 200 steps)
    return train_sft_policy(demos, out, num_epochs=13, batch_size=16, learning_rate=3e-3)['path']   # no tool list

@pytest.fixture(scope='module')
def policy(tmp_path_factory): return _train(tmp_path_factory.mktemp('policy'))

def _episode(seed, reply):
    "A hand-written loop: the env's own observations in, the model's tool calls out"
    env = CodeEnv(); ts = env.reset(seed=seed)
    msgs = [{'role': 'user', 'content': ts.observation}]
    while not ts.done:
        call = reply(msgs)
        ts = env.step(call if call is not None else 'no tool call')
        if call is not None:
            msgs += [{'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c', 'type': 'function',
                      'function': {'name': call['tool'], 'arguments': __import__('json').dumps(call['params'])}}]},
                     {'role': 'tool', 'tool_call_id': 'c', 'content': ts.observation}]
    return bool(ts.verdict and ts.verdict.success)

def _check(policy):
    "Success through the rollout engine, a hand-written loop and serve + openai: high and identical episode by episode"
    import json

    import openai

    from knowlyr_lab.chat import PromptFormat, parse_reply
    from knowlyr_lab.rollout.engine import run_episodes
    from knowlyr_lab.serving import AgentInference
    inf = AgentInference.from_pretrained(policy)
    card = PromptFormat.load(policy)
    # 1. the library's rollout engine (what collect and evaluate_agent use), seeded like the loops below
    agent = inf.create_agent(max_new_tokens=24)
    engine = [bool(t.outcome.success) for t in run_episodes([CodeEnv() for _ in SEEDS], agent, [(i, None, s) for i, s in enumerate(SEEDS)])]
    # 2. a hand-written loop over the model
    def local(msgs):
        _, calls = parse_reply(inf.generate([msgs], card.tools, max_new_tokens=24)[0]['text'])
        return calls[0] if calls else None
    hand = [_episode(s, local) for s in SEEDS]
    # 3. serve + the openai SDK
    srv = inf.serve()
    try:
        client = openai.OpenAI(base_url=srv.url, api_key='not-needed')
        def remote(msgs):
            # a client sends the env's tool schemas; serve renders the prompt as the model's card says (no tool list here)
            m = client.chat.completions.create(model='policy', messages=msgs, tools=CodeEnv().tool_schemas, max_tokens=24, temperature=0).choices[0].message
            if m.tool_calls: return {'tool': m.tool_calls[0].function.name, 'params': json.loads(m.tool_calls[0].function.arguments)}
            return None
        served = [_episode(s, remote) for s in SEEDS]
    finally: srv.shutdown()
    assert sum(engine) >= 0.8 * len(SEEDS), f"the trained policy should solve most tasks: {sum(engine)}/{len(SEEDS)}"
    assert engine == hand == served, (engine, hand, served)

def test_same_success_through_collect_hand_loop_and_serve(policy): _check(policy)

def test_openai_sdk_reply_shape(policy):
    "Through the SDK: a tool call with finish_reason tool_calls and usage; text without tools; a bad request is a 400"
    import json

    import openai

    from knowlyr_lab.serving import AgentInference
    srv = AgentInference.from_pretrained(policy, name='tiny-code').serve()
    try:
        client = openai.OpenAI(base_url=srv.url, api_key='local', max_retries=0)
        assert [m.id for m in client.models.list().data] == ['tiny-code']
        env = CodeEnv(); ts = env.reset(seed=SEEDS[0])
        msgs = [{'role': 'user', 'content': ts.observation}]
        r = client.chat.completions.create(model='tiny-code', messages=msgs, tools=CodeEnv().tool_schemas, max_tokens=24, temperature=0)
        ch = r.choices[0]
        assert ch.finish_reason == 'tool_calls' and ch.message.tool_calls[0].function.name == 'submit'
        assert set(json.loads(ch.message.tool_calls[0].function.arguments)) == {'code'}
        assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 10
        assert client.chat.completions.create(model='tiny-code', messages=msgs, max_tokens=8).choices[0].message.tool_calls is None
        with pytest.raises(openai.BadRequestError): client.chat.completions.create(model='tiny-code', messages=[], max_tokens=4)
    finally: srv.shutdown(); srv.server_close()

def test_check_fails_without_the_reset_observation(tmp_path, monkeypatch):
    "The old bug, put back: chats open with the instruction only, so the policy never sees the code and the check fails"
    import knowlyr_lab.chat_messages as C
    monkeypatch.setattr(C, 'first_user_turn', lambda task: task.instruction)   # the chat layer's to_messages reads it
    with pytest.raises(AssertionError): _check(_train(tmp_path))

"EnvStepper driven headless by setting traits and clicking its buttons (never by reading Output capture)"
import html

import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.registry import list_envs
from knowlyr_lab.rollout.spec import RolloutSpec
from knowlyr_lab.trajectory import trajectory_score
from knowlyr_lab.widgets import EnvStepper


def progress(step, ctx):
    ok = step.action is not None and step.action.tool == 'move' and not step.observation.is_error
    return ctx.timestep.reward + (0.1 if ok else -0.1), {'rules': 0.1 if ok else -0.1, 'outcome': ctx.timestep.reward}

def test_expert_maze_episode_by_clicks():
    w = EnvStepper('knowlyr/maze-hard', ExpertAgent(), spec=RolloutSpec(step_reward_fn=progress))
    w.task_picker.value = w.task_picker.options[4]
    w.reset_button.click()
    assert w.session.trajectory.task.id == w.task_picker.options[4]
    for _ in range(3): w.step_button.click()
    assert len(w.session.trajectory) == 3 and 'rules: +0.100' in w.reward.value
    w.run_button.click()
    t = w.session.trajectory
    assert t.outcome.success is True and w.step_button.disabled and 'success' in w.status.value
    assert len(t) == t.task.metadata['optimal_steps']
    assert sum(s.reward for s in t.steps) == pytest.approx(1.0 + 0.1 * (len(t) - 1) - 0.1)   # step rewards: outcome + shaping
    assert t.reward == trajectory_score(t)                                                     # the episode's score

def test_human_typed_episode_and_errors():
    w = EnvStepper('knowlyr/maze-easy', plot=False)
    w.seed.value = 5
    w.reset_button.click()
    env = w.session.base.unwrapped
    while True:  # a human following the oracle by typing its moves
        a = env.oracle_action()
        w.action_text.value = 'submit' if a['tool'] == 'submit' else f"move(direction='{a['params']['direction']}')"
        w.step_button.click()
        if w.session.done: break
    assert w.session.trajectory.outcome.success is True and w.session.trajectory.agent.name == 'human'
    w.step_button.click()  # after the end: the button is disabled in the UI; a programmatic click reports the error
    assert 'EnvDoneError' in w.status.value or w.step_button.disabled

def test_random_agent_stepped_to_budget():
    w = EnvStepper('knowlyr/maze-hard', RandomAgent(), RolloutSpec(max_episode_steps=6), plot=False)
    w.reset_button.click(); w.run_button.click()
    assert w.session.done and len(w.session.trajectory) <= 6

@pytest.mark.skipif('knowlyr/sandbox' not in list_envs(), reason="the knowlyr/sandbox env is not registered in this checkout")
def test_sandbox_episode_by_clicks():
    from knowlyr_lab.registry import make
    env = make('knowlyr/sandbox')
    w = EnvStepper(env, plot=False)
    w.reset_button.click()
    assert w.session.started, html.unescape(w.status.value)
    names = [s['function']['name'] if 'function' in s else s['name'] for s in env.tool_schemas]
    tool = next(n for n in ('list_dir', 'shell', 'file_read') if n in names)
    w.action_text.value = {'list_dir': "list_dir(path='.')", 'shell': "shell(command='ls')", 'file_read': "file_read(path='README.md')"}[tool]
    w.step_button.click()
    assert len(w.session.trajectory) == 1 and w.session.trajectory.steps[0].action.tool == tool
    w.action_text.value = 'submit' if 'submit' in names else 'finish'
    w.step_button.click()
    assert w.session.done and 'done after 2 steps' in w.status.value
    env.close()

def test_reset_clears_the_previous_episodes_reward_plot(monkeypatch):
    "#27: after reset the panel said 'step 0' under the last episode's 6-step curve"
    import knowlyr_lab.widgets as kw
    shown = []                                                   # what the plot area holds, as the Output would
    monkeypatch.setattr(kw, 'display', lambda fig: shown.append(len(fig.data[0].x) if fig.data else 0))
    w = EnvStepper('knowlyr/maze-medium', ExpertAgent(), spec=RolloutSpec(step_reward_fn=progress))
    monkeypatch.setattr(w.plot, 'clear_output', lambda wait=False: shown.clear())
    w.reset_button.click()
    for _ in range(3): w.step_button.click()
    assert shown == [3]
    w.reset_button.click()
    assert w.status.value.startswith('step 0') and shown == [], shown     # no curve of the old episode under 'step 0'
    w.step_button.click()
    assert shown == [1]

def test_typed_invalid_tool_call_earns_no_reward():
    "#27: a typed invalid call earned +0.571 under the generic PRM ('new call' and 'no regression' credited an error)"
    from knowlyr_lab.reward.engine import make_reward_fn
    w = EnvStepper('knowlyr/maze-medium', spec=RolloutSpec(step_reward_fn=make_reward_fn('generic')), plot=False)
    w.reset_button.click()
    for typed in ("jump(x=1)", "move(direction='up')"):
        w.action_text.value = typed; w.step_button.click()
        st = w.session.last_step
        assert st.observation.is_error and st.reward <= 0, (typed, st.reward, st.reward_details)
    w.action_text.value = "look"; w.step_button.click()
    assert w.session.last_step.reward > 0                                 # a valid call still earns its credit


def test_drift_viewer_on_a_recorded_store(tmp_path):
    "Rows recorded by the proxy's recorder into a store; the viewer lists the drifting row first and marks its split token"
    from knowlyr_lab.chat import render_chat
    from knowlyr_lab.drift_viewer import DriftViewer
    from knowlyr_lab.serving import ExchangeRecorder
    from knowlyr_lab.trainer.tiny import train_tokenizer
    tok = train_tokenizer()
    ids = lambda text: tok(text, add_special_tokens=False)['input_ids']
    rec = ExchangeRecorder(tmp_path / 'store')
    for q in ('Go east.', 'Go west.'):
        msgs = [{'role': 'user', 'content': q}]
        prompt = ids(render_chat(tok, msgs, add_generation_prompt=True))
        reply = ids('The quick brown fox.<|im_end|>')
        if q == 'Go west.':                                  # the model sampled a merged token as two pieces
            k = next(k for k, i in enumerate(reply) if len(tok.decode([i])) > 2)
            s = tok.decode([reply[k]])
            reply = reply[:k] + ids(s[:1]) + ids(s[1:]) + reply[k + 1:]
        out = {'prompt_token_ids': prompt, 'token_ids': reply, 'logprobs': None, 'finish_reason': 'stop'}
        rec.record(msgs, None, [out], [{'role': 'assistant', 'content': 'The quick brown fox.'}], 0.0, 1.0)
    rec.flush()
    v = DriftViewer(tok, rec.store)
    assert v.summary.value == '1 of 2 recorded rows drift'
    assert v.picker.options[0][0].endswith(': retokenization') and v.picker.options[1][0].endswith(': no drift')
    assert 'cause: <b>retokenization</b>' in v.diff.value and v.diff.value.count('#f8c4c4') >= 2
    v.picker.value = 1
    assert 'match the chat template' in v.diff.value

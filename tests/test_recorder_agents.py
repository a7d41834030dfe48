"Coding-agent log adapters (OpenHands, SWE-agent, mini-swe-agent, Claude Code, Codex CLI, Gemini CLI, Aider) on small hand-made fixtures and on the real samples in tests/fixtures/agent_logs."
import json
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowlyr_lab.recorder.agent_steps import steps_usage
from knowlyr_lab.recorder.base import RecorderError, get_adapter
from knowlyr_lab.recorder.report import ConversionReport

FIX = Path(__file__).parent / 'fixtures' / 'recorder'
REAL = Path(__file__).parent / 'fixtures' / 'agent_logs'
FORMATS = ['openhands', 'openhands-sdk', 'swe-agent', 'mini-swe-agent', 'claude-code', 'codex-cli', 'gemini-cli', 'aider', 'rovo-dev', 'iswe']

def conv(path, fmt=None, report=None):
    path = Path(path); r = report or ConversionReport()
    return list(get_adapter(fmt or path.parent.name).convert(path, r)), r

def obs(s): return s.observation.content if s.observation else None

# ---------------------------------------------------------------- OpenHands V0

def test_openhands_pairs_by_cause_not_order():
    (t,), r = conv(FIX / 'openhands' / 'trajectory.json')
    a, b, c, fin = t.steps
    assert (a.action.tool, a.action.call_id, a.action.params) == ('execute_bash', 'toolu_A', {'command': 'cat app.py'})
    assert obs(a).startswith('def add') and a.observation.exit_code == 0        # its result came second
    assert obs(b).startswith('def test_add') and b.action.call_id == 'toolu_B'
    assert (a.thought, b.thought) == ('Let me look at both files first.', None)  # one thought per response
    assert (a.usage.input, a.usage.cached, b.usage) == (1200, 1000, None)        # usage once per response
    assert {a.metadata['response_id'], b.metadata['response_id']} == {'chatcmpl-r1'}
    assert (c.observation.exit_code, c.observation.is_error) == (1, True)
    assert c.thought == 'The test fails; fix the bug.'                            # empty args.thought -> model message
    assert fin.action.tool == 'finish' and fin.observation is None and fin.metadata['no_result_expected']
    assert (t.outcome.submitted, t.outcome.success) == (True, None)               # finishing is not succeeding
    assert t.task.instruction == 'Fix the failing test in app.py' and t.agent.model == 'claude-3-5-sonnet-20241022'
    assert [u['record_type'] for u in t.metadata['unmapped']] == ['observation:agent_state_changed'] and t.metadata['unmapped'][0]['why']
    assert a.t_start is not None and a.t_end > a.t_start

def test_openhands_eval_pairs_layout_and_resolver():
    (t,), _ = conv(FIX / 'openhands' / 'eval_pairs_output.jsonl')
    assert (t.task.id, t.outcome.success, t.metadata['success_source']) == ('ProntoQA_7', True, 'test_result')
    run, msg, fin = t.steps
    assert obs(run) == "'B'" and run.thought == 'Run the logic engine.'
    assert (msg.action, msg.thought, obs(msg)) == (None, 'The answer is B.', 'Please continue.')   # user follow-up answers the text turn
    (t,), _ = conv(FIX / 'openhands' / 'resolver_output.jsonl')
    s1, s2, fin = t.steps
    assert (obs(s1), s1.observation.exit_code, s2.observation.exit_code) == ('\r\nroot@bcd3959393a1:/workspace # ', 0, 2)
    assert abs(sum(s.usage.cost for s in t.steps) - t.metadata['usage_total']['cost']) < 1e-12   # one cost per LLM call
    assert t.outcome.success is True and 'LLM' in t.metadata['success_source'] and t.outcome.submitted
    assert t.task.id == 'acme/widgets#5'

# ---------------------------------------------------------------- OpenHands SDK (V1)

def test_openhands_sdk_cumulative_usage_and_orphans():
    (t,), r = conv(FIX / 'openhands-sdk' / 'events.jsonl')
    a1, a2, a3 = t.steps
    assert (obs(a1), obs(a2)) == ('README.md\ntests', 'tests/test_a.py:3')        # paired by tool_call_id
    assert (a1.usage.input, a1.usage.output, a2.usage) == (1000, 50, None)
    assert (a3.usage.input, a3.usage.output, a3.usage.cached) == (1300, 40, 900)  # difference of two counters
    assert a3.observation.exit_code == 1                                          # from observation.metadata
    assert steps_usage(t.steps)['input'] == t.metadata['usage_total']['input'] == 2300
    assert t.outcome.terminated and t.task.instruction == 'List the repo and count the tests.'
    (u,) = t.metadata['unmapped']
    assert u['record_type'] == 'ObservationEvent' and 'not in the log' in u['why']

# ---------------------------------------------------------------- SWE-agent

def test_swe_agent_function_calling_traj():
    (t,), r = conv(FIX / 'swe-agent' / 'acme__widgets-1.traj')
    assert [s.action.tool for s in t.steps] == ['find_file', 'edit', 'submit']
    assert [s.action.call_id for s in t.steps] == ['call_1', 'call_2', None]
    assert t.steps[1].action.params == {'search': 'def f()', 'replace': 'def f():'}
    assert t.steps[0].metadata['execution_time'] == 0.28 and t.steps[0].metadata['state']['working_dir'] == '/repo'
    assert (t.task.id, t.agent.model) == ('acme__widgets-1', 'gpt-4o')
    assert (t.outcome.submitted, t.outcome.success) == (True, None)               # submitted, resolution unknown
    whys = {u['record_type']: u['why'] for u in t.metadata['unmapped']}
    assert set(whys) == {'history:demonstration', 'history:assistant', 'history:user'}
    # totals only: nothing invented per step, everything unattributed
    assert t.metadata['usage_unattributed'] == t.metadata['usage_total'] == {'input': 7141, 'output': 243, 'cost': 0.0195}
    assert all(s.usage is None for s in t.steps)

def test_swe_agent_v0_and_resolution_report(tmp_path):
    src = FIX / 'swe-agent' / 'acme__pointer-2.traj'
    (t,), _ = conv(src)
    assert [s.action.tool for s in t.steps] == ['bash', 'open'] and t.steps[1].metadata['state'] == {'open_file': 'Pointer.java', 'working_dir': '/repo'}
    assert (t.outcome.submitted, t.outcome.truncated, t.outcome.success) == (True, True, None)   # 'submitted (exit_cost)'
    shutil.copy(src, tmp_path / src.name)
    (tmp_path / 'acme__pointer-2_result.json').write_text(json.dumps({'instance_id': 'acme__pointer-2', 'resolved': False}))
    (t,), _ = conv(tmp_path / src.name, 'swe-agent')
    assert (t.outcome.submitted, t.outcome.success) == (True, False)              # submitted AND not resolved
    assert t.metadata['success_source'].endswith('acme__pointer-2_result.json')

# ---------------------------------------------------------------- mini-swe-agent

def test_mini_swe_agent_steps_usage_and_report(tmp_path):
    src = FIX / 'mini-swe-agent' / 'django__django-10999.traj.json'
    (t,), _ = conv(src)
    ls, fmt_err, sub = t.steps
    assert ls.action.params == {'command': 'ls django/utils | grep dateparse'} and ls.thought == 'THOUGHT: Find the file.'
    assert ls.observation.exit_code == 0
    assert fmt_err.action is None and fmt_err.metadata['format_error'] and 'EXACTLY ONE action' in obs(fmt_err)
    assert sub.observation.content.startswith('diff --git')
    assert abs(steps_usage(t.steps)['cost'] - t.metadata['usage_total']['cost']) < 1e-12
    assert (ls.usage.input, ls.usage.output, ls.usage.reasoning) == (1000, 50, 7)
    assert t.outcome.success is None and t.outcome.submitted
    shutil.copy(src, tmp_path / src.name)
    (tmp_path / 'run.json').write_text(json.dumps({'resolved_ids': ['x__y-1'], 'unresolved_ids': ['django__django-10999']}))
    (t,), _ = conv(tmp_path / src.name, 'mini-swe-agent')
    assert (t.outcome.submitted, t.outcome.success) == (True, False)

def test_mini_swe_agent_legacy_list():
    (t,), _ = conv(FIX / 'mini-swe-agent' / 'github_issue.traj.json')
    (s,) = t.steps
    assert s.action.params == {'command': 'cat missing_colon.py'} and s.observation.exit_code == 1
    assert t.task.instruction.startswith('Please solve this issue')

# ---------------------------------------------------------------- Claude Code

def test_claude_code_split_responses_parallel_calls_sidechains():
    main, side = (t := conv(FIX / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'))[0]
    r = t[1]
    read, bash, task, text, edit = main.steps
    assert read.thought == 'Two independent reads.\n\nI will read both files.' and bash.thought is None
    assert (read.usage.output, read.usage.input, bash.usage) == (95, 1103, None)   # last usage of msg_1, once
    assert (obs(read), obs(bash), bash.observation.is_error) == ('     1\u2192# Demo', 'npm ERR! missing script: test', True)
    assert (text.action, obs(text)) == (None, 'Thanks. Add a test script.')
    assert edit.metadata.get('unanswered') is True                              # the log ends before its result
    assert main.metadata['summaries'] == ['Update the README']
    assert side.metadata['parent_tool_call_id'] == 'toolu_3' and side.task.instruction == 'List the npm scripts in package.json'
    assert [s.action.tool for s in side.steps if s.action] == ['Read'] and obs(task) == 'Only a dev script.'
    assert (r.counts['user']['mapped'], r.counts['user:repeat']['mapped']) == (7, 1)   # the record written twice: read once, the repeat counted
    assert r.counts['file-history-snapshot'] == {'mapped': 0, 'unmapped': 1, 'quarantined': 0}

# ---------------------------------------------------------------- Codex CLI

@pytest.mark.parametrize('name', ['rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl',
                                  'rollout-2025-09-19T09-02-12-01996135-afde-7911-97f0-d863511eca56.jsonl'])
def test_codex_usage_matches_cumulative_total(name):
    (t,), r = conv(FIX / 'codex-cli' / name)
    tot = t.metadata['usage_total']
    assert steps_usage(t.steps) == {**tot}                                       # each count once, on its response
    assert 'usage_unattributed' not in t.metadata

def test_codex_parallel_calls_and_exit_codes():
    (t,), r = conv(FIX / 'codex-cli' / 'rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl')
    a, b, final = t.steps
    assert (a.action.call_id, obs(a), a.observation.exit_code) == ('call_A', '{"scripts": {}}', 0)
    assert (b.action.call_id, b.observation.exit_code) == ('call_B', 2)
    assert a.thought == 'Check the build script and the logs.' and b.thought is None
    assert (a.usage.input, b.usage, final.usage.input) == (1000, None, 1300)
    assert final.action is None and final.thought == 'A type error: TS2304.'
    assert t.task.instruction == 'Why does the build fail?' and t.outcome.terminated
    assert r.counts['event_msg:agent_message']['mapped'] == 1                   # the mirror is accounted for
    assert r.counts['event_msg:token_count']['unmapped'] == 1                   # rate limits only
    (t,), r = conv(FIX / 'codex-cli' / 'rollout-2025-09-19T09-02-12-01996135-afde-7911-97f0-d863511eca56.jsonl')
    assert [s.action.tool for s in t.steps] == ['shell', 'apply_patch'] and t.steps[1].observation.exit_code == 0
    assert r.counts['world_state']['unmapped'] == 1 and not t.outcome.terminated

# ---------------------------------------------------------------- Gemini CLI

def test_gemini_upserts_messages_and_reads_inline_results():
    (t,), r = conv(FIX / 'gemini-cli' / 'session-2026-04-23T12-52-0ab84937.jsonl')
    r1, r2, w, final = t.steps
    assert [s.action.tool for s in (r1, r2, w)] == ['read_file', 'read_file', 'write_file']  # tool calls from the later write
    assert (obs(r1), obs(r2)) == ('# Demo bot', '[project]\nname = "bot"')
    assert (r1.usage.input, r1.usage.output, r1.usage.reasoning, r2.usage) == (13906, 491, 306, None)
    assert (w.usage.input, w.usage.output) == (20050, 400)                       # + tool prompt, + thoughts
    assert w.observation.is_error and w.metadata['status'] == 'cancelled'
    assert final.action is None and final.thought.startswith('I stopped')
    assert [u['record_type'] for u in t.metadata['unmapped']] == ['message:info']
    n_lines = len((FIX / 'gemini-cli' / 'session-2026-04-23T12-52-0ab84937.jsonl').read_text().splitlines())
    assert r.totals['mapped'] + r.totals['unmapped'] == n_lines == 9              # one per line, superseded writes included
    (t,), _ = conv(FIX / 'gemini-cli' / 'session-2026-03-27T10-19-8a20078e.json')
    assert [s.action.tool if s.action else None for s in t.steps] == ['read_file', None] and t.steps[0].thought.startswith('**Plan**')

# ---------------------------------------------------------------- Aider

def test_aider_sessions_edits_and_results():
    s1, s2 = conv(FIX / 'aider' / 'demo__.aider.chat.history.md')[0]
    fix, user, rename = s1.steps
    assert s1.task.instruction == 'Fix the greeting typo in app.py\nand keep the style.'
    assert fix.action.params == {'path': 'app.py', 'search': 'print("helo")', 'replace': 'print("hello")'}
    assert fix.thought == "I'll fix the typo.\n\n#### Plan"                      # a heading in the reply, not user input
    assert (obs(fix), fix.observation.is_error) == ('Applied edit to app.py', False)
    assert (fix.usage.input, fix.usage.output, fix.usage.cost) == (2400, 104, 0.00042)
    assert obs(user) == 'Also rename helper() in util.py'
    assert rename.observation.is_error and 'util.py' in obs(rename)              # the SEARCH block did not match
    assert rename.usage.cached == 1100
    assert s1.metadata['commands'] == [{'command': '/add util.py', 'output': 'Added util.py to the chat'}]
    assert s1.agent.model == 'openrouter/openai/gpt-4o-mini' and s1.steps[0].t_start is not None
    (whole,) = s2.steps
    assert whole.action.params == {'path': 'NOTES.md', 'content': 'hello'} and s2.agent.model == 'openai/qwen3:32b'

# ---------------------------------------------------------------- malformed input, accounting, garbage

JSONL = {'openhands': 'eval_pairs_output.jsonl', 'openhands-sdk': 'events.jsonl', 'claude-code': '7f3c2a10-0000-4000-8000-000000000001.jsonl',
         'codex-cli': 'rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl', 'gemini-cli': 'session-2026-04-23T12-52-0ab84937.jsonl'}

@pytest.mark.parametrize('fmt', list(JSONL))
def test_malformed_line_is_quarantined_and_conversion_goes_on(fmt, tmp_path):
    src = FIX / fmt / JSONL[fmt]
    lines = src.read_text().splitlines()
    k = len(lines) // 2
    bad = tmp_path / fmt / src.name; bad.parent.mkdir()
    bad.write_text('\n'.join(lines[:k] + ['{"type": "user", "oops": '] + lines[k:]) + '\n')
    good, rg = conv(src, fmt)
    got, rb = conv(bad, fmt, ConversionReport(quarantine=tmp_path / 'q.jsonl'))
    assert rb.totals['quarantined'] == 1 and rb.errors == [f'{bad}:{k + 1}: not valid JSON (Expecting value at column 27)'] or rb.errors[0].startswith(f'{bad}:{k + 1}: ')
    assert sum(len(t.steps) for t in got) == sum(len(t.steps) for t in good)    # nothing else lost
    assert json.loads((tmp_path / 'q.jsonl').read_text())['line'] == k + 1
    with pytest.raises(RecorderError): conv(bad, fmt, ConversionReport(strict=True))

@pytest.mark.parametrize('fmt', ['openhands-sdk', 'claude-code', 'codex-cli', 'gemini-cli'])
def test_every_line_is_accounted_for(fmt):
    src = FIX / fmt / JSONL[fmt]
    _, r = conv(src, fmt)
    t = r.totals
    assert t['mapped'] + t['unmapped'] + t['quarantined'] == sum(1 for l in src.read_text().splitlines() if l.strip())

@given(text=st.text(max_size=300), fmt=st.sampled_from(FORMATS), suffix=st.sampled_from(['.json', '.jsonl', '.traj', '.md']))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_garbage_never_raises(text, fmt, suffix, tmp_path_factory):
    p = tmp_path_factory.mktemp('g') / f'x{suffix}'
    p.write_text(text)
    r = ConversionReport()
    list(get_adapter(fmt).convert(p, r))
    assert r.n_errors == r.totals['quarantined'] + sum(r.failed.values())

def _paths(o, pre=()):
    "Every path (tuple of keys/indices) inside a JSON value"
    yield pre
    if isinstance(o, dict):
        for k, v in o.items(): yield from _paths(v, pre + (k,))
    elif isinstance(o, list):
        for j, v in enumerate(o): yield from _paths(v, pre + (j,))

@given(data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_wrongly_typed_fields_never_raise(data, tmp_path_factory):
    "Replace one value anywhere in a fixture record by a value of another type: conversion must not crash"
    fmt = data.draw(st.sampled_from(list(JSONL) + ['swe-agent', 'mini-swe-agent']))
    src = FIX / fmt / JSONL[fmt] if fmt in JSONL else sorted((FIX / fmt).iterdir())[0]
    lines = src.read_text().splitlines() if fmt in JSONL else [json.dumps(json.loads(src.read_text()))]
    i = data.draw(st.integers(0, len(lines) - 1))
    rec = json.loads(lines[i])
    ps = [p for p in _paths(rec) if p]
    p = data.draw(st.sampled_from(ps))
    o = rec
    for k in p[:-1]: o = o[k]
    o[p[-1]] = data.draw(st.sampled_from([None, 7, 'x', [], {}, [1, 'a'], {'a': None}]))
    lines[i] = json.dumps(rec)
    f = tmp_path_factory.mktemp('w') / src.name
    f.write_text('\n'.join(lines) + '\n')
    r = ConversionReport()
    list(get_adapter(fmt).convert(f, r))

# ---------------------------------------------------------------- the shared real samples

def _real_files():
    out = []
    for d in ['openhands', 'openhands-sdk', 'swe-agent', 'mini-swe-agent', 'claude-code', 'codex-cli', 'gemini-cli']:
        for p in sorted((REAL / d).iterdir()):
            head = p.read_bytes()[:65536].decode('utf-8', 'replace')
            fmt = next((f for f in FORMATS if get_adapter(f).detect(p, head)), None)
            if fmt: out.append(pytest.param(p, fmt, id=f'{d}/{p.name}'))
    return out

@pytest.mark.parametrize('path,fmt', _real_files())
def test_real_sample(path, fmt):
    trajs, r = conv(path, fmt)
    assert trajs and r.totals['quarantined'] == 0, r.errors
    assert sum(len(t.steps) for t in trajs) > 0
    for t in trajs:
        for s in t.steps:
            if s.action is not None and s.observation is None:   # a call without result must say why
                assert s.metadata.get('no_result_expected') or s.metadata.get('unanswered'), (t.task.id, s.index)
        assert all(u['why'] for u in t.metadata.get('unmapped', []))
        tot = t.metadata.get('usage_total')
        if tot:   # steps + unattributed == the log's own totals, field by field
            have, rest = steps_usage(t.steps), t.metadata.get('usage_unattributed') or {}
            for k, v in tot.items(): assert abs(have.get(k, 0) + rest.get(k, 0) - v) < 1e-6, (k, have, rest, tot)

def test_real_samples_known_facts():
    (t,), _ = conv(REAL / 'mini-swe-agent' / 'django__django-10999.traj.json', 'mini-swe-agent')
    assert (t.outcome.submitted, t.outcome.success) == (True, False)            # sb-cli report lists it as unresolved
    (t,), _ = conv(REAL / 'mini-swe-agent' / 'django__django-16255.traj.json', 'mini-swe-agent')
    assert t.outcome.success is True
    (t,), _ = conv(REAL / 'swe-agent' / 'marshmallow-code__marshmallow-1867.traj', 'swe-agent')
    assert len(t.steps) == 11 and t.steps[-1].action.tool == 'submit'            # the seed read 0 steps here
    (t,), _ = conv(REAL / 'codex-cli' / 'rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl', 'codex-cli')
    assert len([s for s in t.steps if s.action]) == 118 and steps_usage(t.steps)['input'] == t.metadata['usage_total']['input']

# ---------------------------------------------------------------- SWE-bench experiment submissions (Rovo Dev, iSWE)

def test_rovo_dev_pairs_returns_per_tool_and_reads_result_file(tmp_path):
    src = FIX / 'rovo-dev' / 'acme__csv-7'
    (t,), r = conv(src)
    opn, bash, done = t.steps
    assert (opn.action.tool, opn.action.params, opn.observation.content) == ('open_files', {'file_paths': ['loader.py']}, 'Successfully opened loader.py')
    assert bash.observation.content.startswith('1 passed')          # returned before open_files' result: paired by tool, not by order
    assert done.action is None and t.outcome.success is None and t.metadata.get('success_source') is None
    shutil.copy(src, tmp_path / src.name)
    (tmp_path / 'acme__csv-7_result.json').write_text(json.dumps({'instance_id': 'acme__csv-7', 'resolved': False}))
    (t,), _ = conv(tmp_path / src.name, 'rovo-dev')
    assert t.outcome.success is False

def test_iswe_phases_calls_edits_and_usage():
    (t,), r = conv(FIX / 'iswe' / 'acme__csv-7.yaml')
    assert [s.action.tool if s.action else None for s in t.steps] == ['get_file_info', None, None, 'edit_file']
    assert t.steps[0].action.params == {'file_path': 'loader.py'} and t.steps[0].observation.content.startswith('--- Observation ---')
    assert [s.metadata['phase'] for s in t.steps] == ['localization', 'localization', 'editing', 'editing']
    assert sum(s.usage.output for s in t.steps if s.usage) == 70                # one tokens_usage_info entry per model turn
    assert (t.outcome.submitted, t.outcome.success) == (True, None)
    assert r.totals == {'mapped': sum(r.counts[k]['mapped'] for k in r.counts), 'unmapped': 0, 'quarantined': 0}

def test_claude_code_subagent_file_gives_only_sidechains(tmp_path):
    "A sub-agent log (<session>/subagents/agent-*.jsonl) holds only sidechain records: no empty main trajectory"
    lines = [l for l in (FIX / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl').read_text().splitlines() if '"isSidechain": true' in l]
    p = tmp_path / 'agent-1.jsonl'; p.write_text('\n'.join(lines) + '\n')
    (t,), r = conv(p, 'claude-code')
    assert t.task.id.endswith('/sidechain-1') and [s.action.tool for s in t.steps if s.action] == ['Read']
    assert r.totals['mapped'] == len(lines)
    q = tmp_path / 'agent-2.jsonl'; q.write_text('\n'.join(lines) + '\n')        # a second sub-agent of the session
    (u,), _ = conv(q, 'claude-code')
    assert u.id != t.id and t.id.endswith('/agent-1/sidechain-1') and u.id.endswith('/agent-2/sidechain-1')
    assert t.metadata['parent_session'] == u.metadata['parent_session'] == t.id.split('/')[0]

def test_openhands_eval_flat_history_with_swe_bench_report(tmp_path):
    "The 2024-06+ evaluation layout: a flat event history per line, the verdict in test_result.report"
    events = json.loads((FIX / 'openhands' / 'trajectory.json').read_text())
    rec = {'instance_id': 'acme__app-3', 'instruction': events[0]['args']['content'], 'history': events,
           'metadata': {'agent_class': 'CodeActAgent', 'llm_config': {'model': 'claude-3-5-sonnet-20241022'}},
           'test_result': {'git_patch': 'diff --git a/app.py b/app.py', 'report': {'resolved': False}},
           'metrics': {'accumulated_cost': 0.5, 'accumulated_token_usage': {'prompt_tokens': 4300, 'completion_tokens': 95, 'cache_read_tokens': 1000}}}
    p = tmp_path / 'output.jsonl'; p.write_text(json.dumps(rec) + '\n')
    assert get_adapter('openhands').detect(p, p.read_text()[:65536])
    (t,), r = conv(p, 'openhands')
    assert (t.task.id, len(t.steps), t.outcome.success, t.outcome.submitted) == ('acme__app-3', 4, False, True)
    assert t.task.instruction == 'Fix the failing test in app.py'              # the first user message is the task, not a step
    assert t.metadata['usage_total'] == {'input': 4300, 'output': 95, 'cached': 1000, 'reasoning': 0, 'cost': 0.5}
    # the three model responses account for every token; only the cost is not per response
    assert t.metadata['usage_unattributed'] == {'input': 0, 'output': 0, 'cached': 0, 'reasoning': 0, 'cost': 0.5}

def test_openhands_runtime_recall_is_not_a_step(tmp_path):
    events = json.loads((FIX / 'openhands' / 'trajectory.json').read_text())
    events[1:1] = [{'id': 1, 'timestamp': '2025-01-27T22:44:56.95', 'source': 'user', 'message': 'Retrieving content for: Fix', 'action': 'recall', 'args': {'recall_type': 'workspace_context', 'query': 'Fix'}},
                   {'id': 2, 'timestamp': '2025-01-27T22:44:56.97', 'source': 'environment', 'message': 'Added workspace context', 'cause': 1, 'observation': 'recall', 'content': 'Added workspace context', 'extras': {}}]
    p = tmp_path / 'trajectory.json'; p.write_text(json.dumps(events))
    (t,), r = conv(p, 'openhands')
    assert [s.action.tool for s in t.steps] == ['execute_bash', 'str_replace_editor', 'execute_bash', 'finish']
    assert {u['record_type'] for u in t.metadata['unmapped']} == {'action:recall', 'observation:recall', 'observation:agent_state_changed'}

# ---------------------------------------------------------------- accounting under mutation (issue 14): one count per input line

EVENT_LOGS = {'claude-code': [FIX / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl', *sorted((REAL / 'claude-code').glob('*.jsonl'))],
              'codex-cli': sorted((FIX / 'codex-cli').glob('*.jsonl')) + sorted((REAL / 'codex-cli').glob('*.jsonl')),
              'gemini-cli': [FIX / 'gemini-cli' / 'session-2026-04-23T12-52-0ab84937.jsonl', REAL / 'gemini-cli' / 'gemini.jsonl'],
              'openhands-sdk': [FIX / 'openhands-sdk' / 'events.jsonl', REAL / 'openhands-sdk' / 'events.jsonl']}
ODD = [None, 7, 'x', [], {}, [1, 'a'], {'a': None}, {'type': 'tool_result', 'tool_use_id': 'nope', 'content': 'x'}]

def _mutate(rng, lines):
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines)); rec = json.loads(lines[i])
        ps = [p for p in _paths(rec) if p]
        p = rng.choice(ps); o = rec
        for k in p[:-1]: o = o[k]
        if rng.random() < 0.15 and isinstance(o, dict): del o[p[-1]]
        else: o[p[-1]] = rng.choice(ODD)
        lines[i] = json.dumps(rec)
    return lines

def test_event_logs_count_each_line_once(tmp_path):
    "Mutated event logs (wrong types, missing fields, orphan blocks): mapped + unmapped + quarantined == lines, always"
    rng, bad = random.Random(14), []
    for k in range(80):
        fmt = rng.choice(sorted(EVENT_LOGS)); src = rng.choice(EVENT_LOGS[fmt])
        lines = _mutate(rng, [l for l in src.read_text().splitlines() if l.strip()])
        f = tmp_path / f'm{k}.jsonl'; f.write_text('\n'.join(lines) + '\n')
        r = ConversionReport()
        list(get_adapter(fmt).convert(f, r))
        t = r.totals
        if t['mapped'] + t['unmapped'] + t['quarantined'] != len(lines): bad.append((fmt, src.name, r.summary().to_dict('records')))
        assert r.n_errors == t['quarantined'] + sum(getattr(r, 'failed', {}).values())
    assert not bad, bad[:3]

"""The recorder loses nothing, leaf by leaf: every scalar of every structured fixture log reaches the output (the
trajectory JSON or the side file), or its path is on a short per-format list of leaves re-expressed (a role that
became a step's shape, a JSON string parsed into params) or dropped on purpose, each with its reason."""
import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from knowlyr_lab.recorder.convert import FormatDetectionError, convert, detect_format
from knowlyr_lab.recorder.report import ConversionReport
from knowlyr_lab.recorder.values import parse_time

FIXTURES = Path(__file__).parent / 'fixtures'
REAL = FIXTURES / 'agent_logs'

def conv(path, fmt=None):
    return list(convert(path, format=fmt, report=ConversionReport(), redact=False))

# ---------------------------------------------------------------- fields the last audit found lost

def test_openhands_keeps_the_cache_write_tokens():
    (t,), = [conv(REAL / 'openhands' / 'basic.json')]
    assert [s.metadata.get('cache_write_tokens') for s in t.steps if s.usage] == [3482, 1158]

def test_openhands_sdk_keeps_security_risk_and_call_origin():
    (t,) = conv(REAL / 'openhands-sdk' / 'events.jsonl')
    calls = [s for s in t.steps if s.action]
    assert {s.metadata.get('security_risk') for s in calls} == {'UNKNOWN'}
    assert {s.metadata.get('tool_call_origin') for s in calls} == {'completion'}

def test_mini_swe_agent_keeps_the_run_config_and_the_raw_response():
    (t,) = conv(REAL / 'mini-swe-agent' / 'django__django-10999.traj.json')
    assert t.metadata['config']['environment']['image'].endswith('django_1776_django-10999:latest')
    r = t.steps[0].metadata['response']
    assert r['provider'] == 'Google' and r['choices'][0]['message']['reasoning'].startswith('**Reflecting on the Bug**')

def test_claude_code_keeps_each_records_uuid_parent_and_time():
    (t, *_) = conv(REAL / 'claude-code' / '1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl')
    recs = t.metadata['records']
    lines = [json.loads(x) for x in (REAL / 'claude-code' / '1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl').open()]
    want = [{'uuid': r['uuid'], 'parentUuid': r['parentUuid'], 'timestamp': r['timestamp']}
            for r in lines if r.get('type') in ('user', 'assistant') and not r.get('isSidechain')]
    assert recs == want

def test_cassette_keeps_the_http_exchange_but_no_cookie():
    (t,) = conv(REAL / 'openai-chat' / 'test_openai_tool_output.yaml')
    h = [s.metadata['http'] for s in t.steps if 'http' in s.metadata]
    assert len(h) == 2 and h[0]['request']['uri'] == 'https://api.openai.com/v1/chat/completions'
    assert h[0]['response']['headers']['openai-processing-ms'] == ['348'] and h[0]['response']['status']['code'] == 200
    assert 'cookie' not in h[1]['request']['headers'] and '__cf_bm' not in t.model_dump_json()
    assert h[0]['request']['parsed_body']['tool_choice'] == 'required' and 'messages' not in h[0]['request']['parsed_body']

def test_anthropic_messages_keeps_the_thinking_signature_beside_its_thinking():
    (t,) = conv(FIXTURES / 'recorder' / 'anthropic-messages' / 'test_anthropic_tool_with_thinking.yaml')
    (s,) = [s for s in t.steps if s.metadata.get('thinking')]
    assert s.metadata['thinking_signatures'][0].startswith('EqEECkYICxgCKkAo3UA4')
    t, _ = conv(FIXTURES / 'recorder' / 'anthropic-messages' / 'conversations.jsonl')
    assert [s.metadata.get('thinking_signatures') for s in t.steps][:2] == [['EqQBCkYIBxgCKkBx'], None]

def test_claude_code_keeps_signature_stop_reason_service_tier_and_the_structured_result():
    (t, *_) = conv(FIXTURES / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl')
    s = t.steps[0]
    assert s.thought.startswith('Two independent reads.') and s.metadata['thinking_signatures'] == ['x']
    assert (s.metadata['stop_reason'], s.metadata['service_tier']) == ('tool_use', 'standard')
    assert [x.metadata.get('stop_reason') for x in t.steps if x.action is None][-1] == 'end_turn'
    tur = [x.metadata['tool_use_result'] for x in t.steps if 'tool_use_result' in x.metadata]
    assert {'type': 'text', 'file': {'filePath': '/path/to/Demo/README.md', 'content': '# Demo'}} in tur
    assert 'Error: npm ERR! missing script: test' in tur

def _rebuild(step, steps)->object:
    "A step's toolUseResult put back together from what it kept and where the rest is (tool_use_result_refs)"
    tur = copy.deepcopy(step.metadata.get('tool_use_result'))
    def value(where):
        m = re.fullmatch(r'(.*)\{steps\[(\d+)\]\.(.*)\}(.*)', where)     # held by an earlier step of the trajectory
        s, where = (steps[int(m.group(2))], f'{m.group(1)}{{{m.group(3)}}}{m.group(4)}') if m else (step, where)
        obs, params = s.observation.content, s.action.params
        if where.startswith('{params.'):
            v = params
            for k in re.findall(r'[^.\[\]]+', where[8:-1]): v = v[int(k) if isinstance(v, list) else k]
            return v
        if where == '{observation, line numbers removed}':
            return '\n'.join(m.group(1) for x in obs.split('\n') if (m := re.match(r' *\d+(?:→|\t)(.*)$', x)))
        return where.replace('{observation}', obs)
    for path, where in step.metadata.get('tool_use_result_refs', {}).items():
        if not path: return value(where)
        *up, last = [int(k) if k.isdigit() else k for k in re.findall(r'[^.\[\]]+', path)]
        d = tur
        for k in up: d = d[k]
        d[last] = value(where)
    return tur

@pytest.mark.parametrize('name', ['5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl', '1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl'])
def test_claude_code_keeps_the_tool_use_result_without_repeating_the_observation(name):
    "The structured result is kept less the values the step holds already, each named with where it is"
    p = REAL / 'claude-code' / name
    ts = conv(p)
    recs = {r['message']['content'][0]['tool_use_id']: r['toolUseResult'] for r in map(json.loads, p.open())
            if 'toolUseResult' in r and isinstance(r['message']['content'], list)}
    steps = [s for t in ts for s in t.steps if 'tool_use_result' in s.metadata or 'tool_use_result_refs' in s.metadata]
    assert len(steps) == len(recs) and sum('tool_use_result_refs' in s.metadata for s in steps) >= 2
    for t in ts:
        for s in t.steps:
            if s in steps: assert _rebuild(s, t.steps) == recs[s.action.call_id], s.action.call_id
    full = sum(len(t.model_dump_json()) for t in ts)
    for t in ts:
        for s in t.steps: s.metadata.pop('tool_use_result', None); s.metadata.pop('tool_use_result_refs', None)
    assert full < 1.25 * sum(len(t.model_dump_json()) for t in ts)      # was 1.56: a Read's file, twice


def test_claude_code_multiedit_names_the_read_that_holds_the_original_file():
    "A MultiEdit's originalFileContents (3.7 kB) repeated the file an earlier Read of the whole file holds"
    p = REAL / 'claude-code' / '5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl'
    (t, *_) = conv(p)
    (s,) = [s for s in t.steps if s.action and s.action.tool == 'MultiEdit']
    read = t.steps[10]
    assert read.action.tool == 'Read' and read.action.params['file_path'] == s.action.params['file_path']
    assert 'originalFileContents' not in s.metadata['tool_use_result']
    assert s.metadata['tool_use_result_refs']['originalFileContents'] == '{steps[10].observation, line numbers removed}'
    tur = next(r['toolUseResult'] for r in map(json.loads, p.open()) if 'toolUseResult' in r
               and isinstance(r['message']['content'], list) and r['message']['content'][0].get('tool_use_id') == s.action.call_id)
    assert _rebuild(s, t.steps) == tur and 'structuredPatch' in s.metadata['tool_use_result']     # the diff: kept


def test_codex_keeps_turn_settings_turn_marks_session_time_and_message_phase():
    (t,) = conv(FIXTURES / 'recorder' / 'codex-cli' / 'rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl')
    assert t.metadata['timestamp'] == '2026-02-23T19:34:25.500Z'
    assert t.metadata['turn_contexts'] == [{'timestamp': '2026-02-23T19:34:27.000Z', 'turn_id': 't1', 'cwd': '/repo',
        'approval_policy': 'on-request', 'sandbox_policy': {'type': 'workspace-write'}, 'model': 'gpt-5.3-codex'}]
    assert [(e['type'], e['turn_id']) for e in t.metadata['turn_events']] == [('task_started', 't1'), ('task_complete', 't1')]
    assert t.metadata['turn_events'][0]['model_context_window'] == 258400
    assert t.steps[-1].metadata['phase'] == 'final_answer' and 'phase' not in t.steps[0].metadata
    (t,) = conv(FIXTURES / 'recorder' / 'codex-cli' / 'rollout-2025-09-19T09-02-12-01996135-afde-7911-97f0-d863511eca56.jsonl')
    (c,) = t.metadata['turn_contexts']
    assert (c['effort'], c['summary'], c['sandbox_policy']) == ('high', 'auto', {'mode': 'danger-full-access'})

def test_codex_keeps_a_turn_context_only_when_its_settings_change():
    (t,) = conv(REAL / 'codex-cli' / 'test_conversation_codex.jsonl')     # 19 turn_context records, all alike
    assert len(t.metadata['turn_contexts']) == 1

def test_codex_records_a_setting_a_later_turn_context_removes(tmp_path):
    "A turn context without a setting the one before had: recorded as removed, not read as if it still held"
    src = FIXTURES / 'recorder' / 'codex-cli' / 'rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl'
    recs = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    i, first = next((i, r) for i, r in enumerate(recs) if r.get('type') == 'turn_context')
    first['payload']['user_instructions'] = 'be brief'
    later = json.loads(json.dumps(first))
    later['timestamp'] = '2026-02-23T19:34:28.000Z'
    later['payload'] = {k: v for k, v in first['payload'].items() if k not in ('user_instructions', 'sandbox_policy')}
    again = json.loads(json.dumps(first)); again['timestamp'] = '2026-02-23T19:34:29.000Z'    # put back as it was
    recs[i + 1:i + 1] = [later, again]
    p = tmp_path / src.name
    p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    (t,) = conv(p, 'codex-cli')
    c0, c1, c2 = t.metadata['turn_contexts']
    assert c0['user_instructions'] == 'be brief' and 'removed' not in c0
    assert c1 == {'timestamp': '2026-02-23T19:34:28.000Z', 'turn_id': 't1', 'removed': ['sandbox_policy', 'user_instructions']}
    assert c2 == {'timestamp': '2026-02-23T19:34:29.000Z', 'turn_id': 't1', 'sandbox_policy': {'type': 'workspace-write'},
                  'user_instructions': 'be brief'}


def test_gemini_keeps_message_ids_times_ui_fields_and_the_model_of_each_message():
    (t,) = conv(FIXTURES / 'recorder' / 'gemini-cli' / 'session-2026-04-23T12-52-0ab84937.jsonl')
    assert t.task.metadata == {'message_id': 'u-1', 'timestamp': '2026-04-23T12:53:05.283Z'}
    assert t.steps[0].metadata['thought_times'] == ['2026-04-23T12:53:07.916Z']
    (t,) = conv(REAL / 'gemini-cli' / 'gemini.jsonl')
    assert t.task.metadata['display'] == '/init'
    assert [s.metadata['model'] for s in t.steps if 'model' in s.metadata] == ['gemini-3.1-pro-preview']
    w = next(s for s in t.steps if s.action and s.action.tool == 'write_file')
    assert (w.metadata['display_name'], sorted(w.metadata['result_display'])) == ('WriteFile', [
        'diffStat', 'fileDiff', 'fileName', 'filePath', 'isNewFile', 'originalContent'])   # newContent: the call's content
    assert w.metadata['description'] == 'Writing to GEMINI.md'
    assert [s.metadata['user_message_id'] for s in t.steps if 'user_message_id' in s.metadata][-1] == \
        '231038fa-bbfb-4b43-9a30-b8b7fcf54895'

def test_openhands_keeps_event_ids_times_and_the_action_fields():
    (t,) = conv(REAL / 'openhands' / 'basic.json')
    assert t.task.metadata['task_event'] == {'id': 0, 'timestamp': '2025-01-27T22:44:56.900854', 'timeout': 120}
    e, fin = t.steps
    assert (e.metadata['timeout'], e.metadata['impl_source'], e.metadata['response_created']) == (120, 'oh_aci', 1738046713)
    assert e.metadata['translated_ipython_code'].startswith("print(file_editor(**{'command': 'create'")
    assert e.metadata['observation_event_id'] == 4 and 'result_impl_source' not in e.metadata    # the action's, again
    assert e.metadata['formatted_output'] == 'File created successfully at: /workspace/game_2048.py'  # not the diff
    assert fin.metadata['response_created'] == 1738046718
    (t,) = conv(REAL / 'openhands' / 'wrong_initial_state.json')
    assert [s.metadata.get('confirmation_state') for s in t.steps][1] == 'confirmed'
    (t,) = conv(FIXTURES / 'recorder' / 'openhands' / 'trajectory.json')          # two calls of one response
    assert [s.metadata.get('response_created') for s in t.steps][:2] == [1738048613, None]    # once per response
    t = conv(REAL / 'openhands' / 'logic_reasoning_ProntoQA__output.jsonl')[0]
    assert t.task.metadata['task_event'] == {'id': 0, 'timestamp': '2024-05-29T10:42:13.877632'}
    assert [s.metadata['user_event_id'] for s in t.steps if 'user_event_id' in s.metadata] == [9]
    assert [s.metadata.get('observation_event_id') for s in t.steps if s.action and s.observation][:2] == [4, 6]
    assert [s.metadata.get('event_id') for s in t.steps if not s.action][:1] == [7]       # an agent message

def test_openhands_sdk_keeps_the_ids_and_times_of_events_that_are_no_step():
    (t,) = conv(FIXTURES / 'recorder' / 'openhands-sdk' / 'events.jsonl')
    assert t.task.metadata == {'task_event': {'id': 'm0', 'timestamp': '2026-06-16T05:39:19.000000'}}
    assert [(u['key'], u['id'], u.get('value')) for u in t.metadata['state_updates']] == [
        ('execution_status', 'u0', 'running'), ('stats', 's1000', None), ('stats', 's2300', None),
        ('execution_status', 'u1', 'finished')]
    assert t.metadata['state_updates'][0]['timestamp'] == '2026-06-16T05:39:18.000000'
    assert [s.metadata.get('observation_event_id') for s in t.steps if s.action] == ['o1', 'o2', 'o3']

def test_smolagents_keeps_the_model_id():
    t, *_ = conv(FIXTURES / 'recorder' / 'smolagents' / 'parallel-calls.jsonl')
    assert (t.metadata['model_id'], t.agent.model) == ('gpt-4o', None)    # the agent's model: what the responses name

# ---------------------------------------------------------------- thinking the API needs back: empty text, redacted

def _cc_with(tmp_path, edit):
    src = FIXTURES / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
    recs = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    recs = edit(recs)
    p = tmp_path / src.name
    p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    return conv(p, 'claude-code')

def test_claude_code_keeps_the_signature_of_an_empty_thinking_block_and_redacted_thinking_data(tmp_path):
    "Claude Code writes thinking with empty text when it is hidden; the signature (and a redacted block's data) is what the API takes back"
    def edit(recs):
        (r,) = [r for r in recs if r.get('uuid') == 'u2']
        r['message']['content'] = [{'type': 'thinking', 'thinking': '', 'signature': 'sig-empty'},
                                   {'type': 'redacted_thinking', 'data': 'EncData=='}]
        last = [r for r in recs if r.get('type') == 'assistant'][-1]     # a response of an empty thinking block only
        alone = json.loads(json.dumps(last)); alone['uuid'] = 'u-alone'; alone['parentUuid'] = last['uuid']
        alone['message'].update(id='msg_alone', content=[{'type': 'thinking', 'thinking': '', 'signature': 'sig-alone'}])
        return recs + [alone]
    (t, *_) = _cc_with(tmp_path, edit)
    s = t.steps[0]
    assert (s.metadata['thinking_signatures'], s.metadata['redacted_thinking']) == (['sig-empty'], ['EncData=='])
    assert s.thought.startswith('[redacted thinking]')
    assert [x.metadata.get('thinking_signatures') for x in t.steps][-1] == ['sig-alone']

def test_anthropic_messages_keeps_the_signature_of_an_empty_thinking_block_and_redacted_thinking_data(tmp_path):
    conv_ = {'id': 'hidden-1', 'messages': [
        {'role': 'user', 'content': 'Two plus two?'},
        {'role': 'assistant', 'content': [{'type': 'thinking', 'thinking': '', 'signature': 'sig-a'},
                                          {'type': 'redacted_thinking', 'data': 'EmwKAhgBEgy3va3p'},
                                          {'type': 'text', 'text': 'Four.'}]},
        {'role': 'user', 'content': 'And three plus three?'},
        {'role': 'assistant', 'content': [{'type': 'thinking', 'thinking': '', 'signature': 'sig-b'}]}]}
    p = tmp_path / 'conversations.jsonl'
    p.write_text(json.dumps(conv_) + '\n')
    (t,) = conv(p, 'anthropic-messages')
    m = [s.metadata for s in t.steps]
    assert (m[0]['thinking_signatures'], m[0]['redacted_thinking']) == (['sig-a'], ['EmwKAhgBEgy3va3p'])
    assert [x.get('thinking_signatures') for x in m][-1] == ['sig-b']


SECRET = 'ghp_x7Yzx7Yzx7Yzx7Yzx7Yzx7Yzx7Yzx7Yzx7Yz'

def _plant_cc(rec):
    if isinstance(rec.get('toolUseResult'), dict): rec['toolUseResult']['stdout'] = f'GH_TOKEN={SECRET}'; return True

def _plant_codex(rec):
    if rec.get('type') == 'turn_context': rec['payload']['user_instructions'] = f'use GH_TOKEN={SECRET}'; return True

def _plant_gemini(rec):
    for tc in rec.get('toolCalls') or []: tc['resultDisplay'] = {'fileDiff': f'+GH_TOKEN={SECRET}'}; return True

def _plant_openhands(rec):
    if isinstance(rec.get('extras'), dict): rec['extras']['formatted_output_and_error'] = f'GH_TOKEN={SECRET}'; return True
    if isinstance(rec.get('args'), dict) and 'translated_ipython_code' in rec['args']:
        rec['args']['translated_ipython_code'] = f"print('GH_TOKEN={SECRET}')"; return True

PLANTED = {'claude-code': ('recorder/claude-code/7f3c2a10-0000-4000-8000-000000000001.jsonl', _plant_cc),
           'codex-cli': ('recorder/codex-cli/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl',
                         _plant_codex),
           'openhands': ('agent_logs/openhands/basic.json', _plant_openhands),
           'gemini-cli': ('recorder/gemini-cli/session-2026-04-23T12-52-0ab84937.jsonl', _plant_gemini)}

@pytest.mark.parametrize('fmt', PLANTED)
def test_a_secret_in_a_newly_kept_field_is_redacted(fmt, tmp_path):
    "The fields kept since the audit come from the records, which are redacted as they are read"
    name, plant = PLANTED[fmt]
    src, dst = FIXTURES / name, tmp_path / Path(name).name
    array = src.suffix == '.json'                                   # a JSON array of events, or JSON lines
    recs = json.loads(src.read_text()) if array else [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    assert sum(bool(plant(r)) for r in recs) >= 1
    dst.write_text(json.dumps(recs) if array else ''.join(json.dumps(r) + '\n' for r in recs))
    side = tmp_path / 'side.jsonl'
    ts = list(convert(dst, format=fmt, report=ConversionReport(side_file=side), redact=False))
    assert SECRET in ''.join(t.model_dump_json() for t in ts)      # the field is kept ...
    side.unlink(missing_ok=True)
    ts = list(convert(dst, format=fmt, report=ConversionReport(side_file=side), redact=True))
    out = ''.join(t.model_dump_json() for t in ts) + (side.read_text() if side.exists() else '')
    assert SECRET not in out and 'ghp_' in json.dumps(recs)         # ... and redacted

# ---------------------------------------------------------------- the audit: every leaf, every structured fixture log

# A leaf's last key among these is a discriminator: its value became the shape of a step (a call, a result, a turn).
SHAPE = {'type', 'role', 'kind', 'from', 'object'}
# Per format: leaf paths (a trailing * takes the subtree) whose values reach no output, with the reason. Entries that
LISTED = {
    'anthropic-messages': {
        '[].messages[].usage.input_tokens': 're-expressed: usage.input counts the cache reads and writes too',
    },
    'openai-chat': {
        'interactions[].request.headers.cookie[]': 'dropped: a credential header',
        'response.usage.total_tokens': 're-expressed: usage.input + usage.output',
    },
    'claude-code': {
        '[].message.usage.cache_creation_input_tokens': 're-expressed: summed into usage.input',
        '[].message.usage.cache_creation.*': 're-expressed: the cache writes split by lifetime, summed into usage.input',
        '[].requestId': 'kept per call step (request_id); a text turn has none',
        '[].userType': 'dropped: always "external"',
        '[].toolUseResult': "re-expressed: an error result is 'Error: ' and the observation (tool_use_result_refs)",
        '[].toolUseResult.file.content': ("re-expressed: a Read's file text is its observation less the line numbers "
                                          '(tool_use_result_refs)'),
        '[].toolUseResult.originalFileContents': ("re-expressed: a MultiEdit's file before the edit is an earlier Read's "
                                                  'observation less the line numbers (tool_use_result_refs)'),
    },
    'codex-cli': {
        '[].timestamp': ('dropped: the write time of a record that is no step of its own (reasoning and text written '
                         'before a call, token counts, event mirrors, a turn context that changed nothing, the '
                         'session_meta record); session start, turn marks and changed turn contexts keep theirs'),
        '[].payload.info.*': 're-expressed: the cumulative token counts are diffed into per-step usage and usage_total',
        '[].payload.rate_limits.*': 'dropped: the account rate-limit state, nothing about the episode',
        '[].payload.encrypted_content': 'dropped: encrypted reasoning, unreadable',
        '[].payload.message': 'dropped: an event_msg mirror of a response_item text',
    },
    'gemini-cli': {
        '*tokens.*': 're-expressed: per-message tokens are the step usage (total and tool are sums)',
    },
    'mini-swe-agent': {
        '[].content': 're-expressed: an assistant message is the thought and the command',
        'messages[].content': 're-expressed: an assistant message is the thought and the command',
        'trajectory_format': 'dropped: the file version, read to pick the layout',
    },
    'openhands': {
        '*message': 'dropped: the human-readable summary of an event (its content is kept)',
        '*action': 're-expressed: a user message is the task or a user step',
        '*observation': "re-expressed: an observation 'null' is no observation",
        '[].source': 're-expressed: user events are the task or user steps',
        '[].tool_call_metadata.model_response.usage.total_tokens': 're-expressed: usage.input + usage.output',
    },
    'openhands-sdk': {
        '[].source': 're-expressed: user events are the task',
        '[].key': 're-expressed: a state update is the outcome or the usage',
        '[].value': 're-expressed: the execution status is the outcome',
        '[].value.usage_to_metrics.*': 're-expressed: the cumulative counts are diffed into per-step usage',
    },
    'smolagents': {
        '[].intermediate_steps[].content[].text': "re-expressed: 'Calling tools:' text is the steps' calls",
    },
    'swe-agent': {
        'environment': 'dropped: the environment name (main/swe_main), read to pick the layout',
        'history[].agent': 'dropped: the agent name (main/primary) of each message',
        'history[].content': 're-expressed: the history turns are the trajectory steps',
    },
    'iswe': {
        '*trajectory[].content': 're-expressed: an assistant turn is the thought and the call',
    },
}

def _load(p):
    s = p.read_text(errors='replace')
    if p.suffix in ('.yaml', '.yml'): return yaml.safe_load(s)
    try: return json.loads(s)
    except ValueError: pass
    try: return [json.loads(x) for x in s.splitlines() if x.strip()]
    except ValueError: return None     # a text format (Aider, Rovo Dev, ReAct): checked line by line elsewhere

def _leaves(x, path=''):
    "(path, value) of each scalar; a string holding a JSON object or list is read into (tool arguments)"
    if isinstance(x, dict):
        for k, v in x.items(): yield from _leaves(v, f'{path}.{k}' if path else str(k))
    elif isinstance(x, list):
        for v in x: yield from _leaves(v, path + '[]')
    elif isinstance(x, str) and x[:1] in '[{' and isinstance(y := _json(x), (dict, list)): yield from _leaves(y, path)
    else: yield path, x

def _json(s):
    try: return json.loads(s)
    except ValueError: return None

def _values(x, strs:set, nums:set):
    if isinstance(x, dict):
        for k, v in x.items(): strs.add(str(k)); _values(v, strs, nums)
    elif isinstance(x, list):
        for v in x: _values(v, strs, nums)
    elif isinstance(x, str):
        strs.update((x, x.strip()))
        if x[:1] in '[{' and (y := _json(x)) is not None: _values(y, strs, nums)
    elif isinstance(x, (int, float)) and not isinstance(x, bool): nums.add(float(x))

def _reaches(v, strs, nums, big)->bool:
    if v is None or isinstance(v, bool): return True
    if isinstance(v, (int, float)): return float(v) in nums or str(v) in big
    s = str(v).strip()
    if not s or s in strs or s in big: return True
    t = parse_time(s) if re.match(r'\d{4}-\d\d-\d\d', s) else None
    return t is not None and any(abs(t - n) < 1e-3 for n in nums)

def _listed(fmt, path)->bool:
    if path.rsplit('.', 1)[-1].rstrip('[]') in SHAPE: return True
    for pat in LISTED.get(fmt, {}):
        if pat.endswith('*') and pat.startswith('*'):
            if pat[1:-1] in path: return True
        elif pat.endswith('*'):
            if path.startswith(pat[:-1]): return True
        elif pat.startswith('*'):
            if path.endswith(pat[1:]): return True
        elif path == pat: return True
    return False

def lost_leaves(path, fmt, tmp_path, change=lambda ts: ts)->dict:
    "Leaf path -> a sample value, for each leaf of `path` whose value reaches no output and is not listed"
    doc = _load(path)
    side = tmp_path / 'side.jsonl'
    side.unlink(missing_ok=True)
    ts = change(list(convert(path, format=fmt, report=ConversionReport(side_file=side), redact=False)))
    strs, nums = set(), set()
    for t in ts: _values(t.model_dump(mode='json'), strs, nums)
    if side.exists():
        for x in side.read_text().splitlines(): _values(json.loads(x), strs, nums)
    big = '\x00'.join(strs)
    return {p: repr(v)[:60] for p, v in _leaves(doc) if not _listed(fmt, p) and not _reaches(v, strs, nums, big)}

def _structured_logs():
    for root in (REAL, FIXTURES / 'recorder'):
        for p in sorted(root.rglob('*')):
            if not p.is_file() or p.suffix == '.md': continue
            try: fmt = detect_format(p)
            except FormatDetectionError: continue      # a run report, a README
            if _load(p) is not None: yield p, getattr(fmt, 'name', fmt)

LOGS = list(_structured_logs())

def test_the_audit_reads_every_structured_format():
    assert {f for _, f in LOGS} >= {'openhands', 'openhands-sdk', 'swe-agent', 'mini-swe-agent', 'claude-code',
                                    'codex-cli', 'gemini-cli', 'openai-chat', 'anthropic-messages', 'toolbench',
                                    'agentgym', 'smolagents', 'iswe'}

@pytest.mark.parametrize('path,fmt', LOGS, ids=[f'{p.parent.parent.name}/{p.parent.name}/{p.name}' for p, _ in LOGS])
def test_every_leaf_reaches_the_output_or_is_listed(path, fmt, tmp_path):
    assert lost_leaves(path, fmt, tmp_path) == {}

def test_a_leaf_removed_from_the_output_fails_the_audit(tmp_path):
    p = REAL / 'swe-agent' / 'marshmallow-code__marshmallow-1867.traj'
    assert lost_leaves(p, 'swe-agent', tmp_path) == {}
    def drop(ts):
        for t in ts: t.metadata['replay_config']['env']['repo'].pop('base_commit')
        return ts
    assert lost_leaves(p, 'swe-agent', tmp_path, drop) == {'replay_config.env.repo.base_commit': "'bfd2593d4b416122e30cdefe0c72d322ef471611'"}

def test_each_listed_path_is_a_leaf_of_its_formats_logs():
    seen = {}
    for p, fmt in LOGS: seen.setdefault(fmt, set()).update(q for q, _ in _leaves(_load(p)))
    for fmt, pats in LISTED.items():
        for pat in pats:
            core = pat.strip('*')
            assert any(core in q for q in seen[fmt]), (fmt, pat)

"Odd but plausible values in real logs: each record is converted or quarantined alone, never a whole session"
from pathlib import Path

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

ODD = Path(__file__).parent / 'fixtures' / 'recorder_odd'


def test_claude_code_task_with_a_non_string_prompt_keeps_the_session():
    "A Task tool_use whose input.prompt is a dict dropped the whole session (AttributeError on .strip())"
    rep = ConversionReport()
    ts = list(convert(ODD / 'claude_code_task_prompt_dict.jsonl', format='claude-code', report=rep))
    assert len(ts) == 1 and len(ts[0].steps) >= 2 and not rep.failed
    task = next(s for s in ts[0].steps if s.action and s.action.tool == 'Task')
    assert isinstance(task.action.params['prompt'], dict)          # the odd value itself is kept as it was


def test_a_byte_order_mark_is_read_past():
    "A JSON array saved with a UTF-8 BOM (Windows editors) was not detected, and with the format forced gave no steps"
    from knowlyr_lab.recorder.convert import detect
    bom = ODD / 'openai_chat_bom.json'
    assert bom.read_bytes()[:3] == b'\xef\xbb\xbf'
    assert detect(bom).format == 'openai-chat'
    rep = ConversionReport()
    ts = list(convert(bom, report=rep))
    assert len(ts) == 1 and ts[0].steps and not rep.failed and rep.totals['quarantined'] == 0


def test_a_cut_off_array_is_reported_on_one_line_without_its_text():
    "ijson's error quotes the document on the lines after the first: only the first line is kept"
    rep = ConversionReport()
    ts = list(convert(ODD / 'openai_chat_cut_off.json', format='openai-chat', report=rep))
    assert len(ts) == 1                                              # the items before the cut are kept
    reasons = [str(e) for e in rep.errors]
    assert any('not valid JSON after item 2 (parse error: premature EOF)' in r for r in reasons), reasons
    assert not any('\n' in r or 'right here' in r for r in reasons)
    o = ts[0].outcome                                                # and its one conversation is marked cut off
    assert o.truncated and not o.terminated and 'not valid JSON after item 2' in o.reason, o


def test_a_cut_off_openhands_export_is_truncated(tmp_path):
    "An OpenHands event array cut mid-event gave a trajectory with truncated=False (only the error said otherwise)"
    whole = (Path(__file__).parent / 'fixtures' / 'recorder' / 'openhands' / 'trajectory.json').read_bytes()
    cut = tmp_path / 'trajectory.json'
    cut.write_bytes(whole[:len(whole) * 2 // 3])
    for p, want in ((Path(__file__).parent / 'fixtures' / 'recorder' / 'openhands' / 'trajectory.json', False), (cut, True)):
        rep = ConversionReport()
        ts = list(convert(p, format='openhands', report=rep))
        assert len(ts) == 1 and ts[0].outcome.truncated is want, (p, ts[0].outcome)
    assert 'not valid JSON after item' in ts[0].outcome.reason and ts[0].steps


def test_a_file_name_that_is_not_utf8_does_not_stop_the_batch(tmp_path):
    "Writing the quarantine line for `caf\\xe9.jsonl` raised UnicodeEncodeError and the whole convert stopped (rc=2)"
    import os
    import shutil
    good = ODD / 'openai_chat_cut_off.json'
    d = tmp_path / 'logs'; d.mkdir()
    shutil.copy(good, d / 'good.json')
    bad = os.path.join(os.fsencode(d), b'caf\xe9.json')          # latin-1 bytes: not UTF-8
    shutil.copy(good, os.fsdecode(bad))
    rep = ConversionReport(quarantine=tmp_path / 'q.jsonl')
    ts = list(convert(d, format='openai-chat', report=rep)); rep.close()
    assert any(t.source.path.endswith('good.json') for t in ts)      # the good file is converted
    lines = (tmp_path / 'q.jsonl').read_text(encoding='utf-8').splitlines()
    assert lines and all(line.startswith('{') for line in lines)     # and every quarantine line was written


def test_codex_turn_aborted_then_a_completed_turn_ends_the_session(tmp_path):
    "An aborted first turn made a later, completed session `truncated=True, reason='turn aborted'`"
    (t,) = convert(ODD / 'codex_abort_then_complete.jsonl', format='codex-cli', report=ConversionReport())
    assert (t.outcome.terminated, t.outcome.truncated, t.outcome.reason) == (True, False, None)
    lines = (ODD / 'codex_abort_then_complete.jsonl').read_text().splitlines()
    cut = tmp_path / 'rollout-cut.jsonl'; cut.write_text('\n'.join(lines[:4]) + '\n')   # stopped at its aborted turn
    (u,) = convert(cut, format='codex-cli', report=ConversionReport())
    assert (u.outcome.truncated, u.outcome.reason) == (True, 'turn aborted')


def test_openai_refusal_only_message_is_a_step():
    "An assistant message with `content: null` and a `refusal` text produced no step: the refusal vanished"
    from knowlyr_lab.recorder.chat import convert_messages
    r = ConversionReport()
    t = convert_messages('openai-chat', 'x.json', r, [{'role': 'user', 'content': 'how do I pick a lock?'},
                                                      {'role': 'assistant', 'content': None, 'refusal': "I can't help."}])
    assert [(s.thought, s.metadata.get('refusal')) for s in t.steps] == [("I can't help.", True)]
    t2 = convert_messages('openai-chat', 'x.json', r, [{'role': 'user', 'content': 'q'},
                                                       {'role': 'assistant', 'content': "I can't help.", 'refusal': "I can't help."}])
    assert [s.thought for s in t2.steps] == ["I can't help."]          # not written twice


def test_claude_code_blocks_are_kept_or_accounted_for(tmp_path):
    "document blocks, redacted_thinking and bare-string blocks vanished while their records counted as mapped"
    import json
    base = {'parentUuid': None, 'isSidechain': False, 'userType': 'external', 'cwd': '/p', 'sessionId': 's9',
            'version': '1.0.98', 'timestamp': '2025-09-03T00:47:19.293Z'}
    recs = [dict(base, type='user', uuid='u1', message={'role': 'user', 'content': [
                {'type': 'text', 'text': 'read this'}, {'type': 'document', 'source': {'type': 'text', 'data': 'DOC'}}]}),
            dict(base, type='assistant', uuid='u2', parentUuid='u1', message={'role': 'assistant', 'id': 'm1', 'content': [
                {'type': 'redacted_thinking', 'data': 'ENC'}, 'bare words', {'type': 'text', 'text': 'done'}]})]
    p = tmp_path / 's9.jsonl'; p.write_text('\n'.join(map(json.dumps, recs)) + '\n')
    (t,) = convert(p, format='claude-code', report=ConversionReport())
    assert [s.thought for s in t.steps] == ['[redacted thinking]\n\nbare words\n\ndone']
    assert [u['record']['type'] for u in t.metadata['unmapped']] == ['document']     # kept with its reason


def test_old_swe_bench_report_gives_unresolved_instances_an_outcome():
    "The older results.json ({applied: [...], resolved: [...]}) left applied-but-unresolved instances without an outcome"
    from knowlyr_lab.recorder.convert import _outcomes_of
    o = {}
    _outcomes_of({'applied': ['a', 'b'], 'resolved': ['a'], 'generated': ['a', 'b', 'c']}, o, 'results.json')
    assert {k: v['resolved'] for k, v in o.items()} == {'a': True, 'b': False, 'c': False}


def test_reconverting_our_own_output_keeps_its_redaction_history(tmp_path):
    "Converting a converted file again reset metadata.redactions ({'openai_key': 1} -> {})"
    import json

    from knowlyr_lab.recorder.redact import Redactor
    from knowlyr_lab.trajectory_io import write_trajectories
    msgs = [{'role': 'user', 'content': 'use sk-proj-abcdefghijklmnopqrstuvwxyz0123 please'},
            {'role': 'assistant', 'content': 'ok'}]
    src = tmp_path / 'chat.json'; src.write_text(json.dumps(msgs))
    (t,) = convert(src, format='openai-chat', report=ConversionReport(), redact=Redactor())
    assert t.metadata['redactions'] == {'openai_key': 1}
    write_trajectories([t], tmp_path / 'ours.jsonl')
    (u,) = convert(tmp_path / 'ours.jsonl', report=ConversionReport(), redact=Redactor())
    assert u.metadata['redactions'] == {'openai_key': 1}


def test_rovo_dev_rst_heading_inside_a_tool_return_stays_in_it():
    "A line of = (an RST heading) inside a fenced TOOL RETURN split the block: the rest went to unmapped"
    r = ConversionReport()
    (t,) = convert(ODD / 'rovo_rst_heading', format='rovo-dev', report=r)
    obs = t.steps[0].observation.content
    assert obs.endswith('Django is a framework.') and 'Introduction' in obs
    assert r.totals['unmapped'] == 0 and not t.metadata.get('unmapped')


def test_images_keep_their_place():
    "Codex user_message.images and a Gemini tool result's inlineData part vanished"
    from knowlyr_lab.recorder.gemini_cli import _gm_result
    (t,) = convert(ODD / 'codex_abort_then_complete.jsonl', format='codex-cli', report=ConversionReport())
    assert t.task.instruction == 'do A\n\n[image]'
    res = {'result': [{'functionResponse': {'response': {'output': 'saved'}}}, {'inlineData': {'mimeType': 'image/png', 'data': 'AAA'}}]}
    assert _gm_result(res) == ('saved\n[image/png]', False)


def test_redact_config_errors_name_the_file_and_the_entry(tmp_path):
    "A bad --redact-config said 'TypeError: ... unexpected keyword argument' or 'missing )' without file or entry"
    import subprocess
    import sys
    log = ODD / 'openai_chat_bom.json'
    for text, want in (('patterns:\n  - name: mine\n    regex: "abc("\n', "patterns[0] ('mine'): missing )"),
                       ('patterns:\n  - {name: mine, regex: "x+", bogus: 1}\n', "patterns[0]: unknown field(s) ['bogus']"),
                       ('patterns: [1]\n', "patterns[0]: expected a mapping"), ('- 1\n', 'expected a mapping')):
        cfg = tmp_path / 'rc.yaml'; cfg.write_text(text)
        r = subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.recorder', 'convert', str(log), '-o', str(tmp_path / 'o.jsonl'),
                            '--no-progress', '--redact-config', str(cfg)], capture_output=True, text=True)
        assert r.returncode != 0 and f"{cfg}: " in r.stderr and want in r.stderr, r.stderr
        assert 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_token_in_a_folder_name_does_not_reach_the_trajectory(tmp_path):
    "source.path (and ids made of the file's path) kept a token that only the folder name held"
    import shutil
    tok = 'ghp_' + 'R8fJ2kLmQ9zXc4VbN7tY1uIoP3aSdF6gH0jK'
    d = tmp_path / tok; d.mkdir()
    shutil.copy(Path(__file__).parent / 'fixtures' / 'recorder' / 'openhands' / 'trajectory.json', d / 'trajectory.json')
    rep = ConversionReport()
    ts = list(convert(d / 'trajectory.json', format='openhands', report=rep))
    assert len(ts) == 1 and ts[0].steps
    assert tok not in ts[0].model_dump_json() and rep.redactions.get('github_token'), ts[0].source
    assert tok in list(convert(d / 'trajectory.json', format='openhands', redact=False))[0].source.path   # asked not to


def test_a_quarantined_record_keeps_no_secret_inside_its_json_arguments(tmp_path):
    "A record quarantined whole kept a secret that sat inside a JSON string (tool arguments): its quotes escaped twice"
    import json
    args = json.dumps({'command': 'curl -d "{\\"token\\": \\"Zq81LmWx0pTr9k\\"}" https://x'})
    bad = {'messages': 'not a list', 'request': {'tool_calls': [{'function': {'name': 'shell', 'arguments': args}}]}}
    p = tmp_path / 'log.jsonl'; p.write_text(json.dumps(bad) + '\n')
    rep = ConversionReport(quarantine=tmp_path / 'quarantine.jsonl')
    assert list(convert(p, format='openai-chat', report=rep)) == []
    rep.close()
    q = (tmp_path / 'quarantine.jsonl').read_text()
    assert 'Zq81LmWx0pTr9k' not in q and rep.redactions == {'secret_assignment': 1}
    raw = json.loads(q)['raw']['request']['tool_calls'][0]['function']['arguments']
    assert json.loads(raw)['command'].startswith('curl -d') and raw.startswith('{"command": ')   # still its JSON, same layout


def test_a_link_back_up_does_not_read_a_folder_again(tmp_path):
    "A symlink to a parent folder made every file under it convert 41 times (until the kernel's link limit)"
    from knowlyr_lab.recorder.convert import iter_log_files
    (tmp_path / 'logs' / 'sub').mkdir(parents=True)
    (tmp_path / 'logs' / 'sub' / 'a.jsonl').write_text('{}\n')
    (tmp_path / 'logs' / 'sub' / 'up').symlink_to('..')
    skipped = []
    assert [p.name for p in iter_log_files(tmp_path / 'logs', skipped)] == ['a.jsonl']
    assert [s['why'] for s in skipped] == ['a directory already read (a link)']
    assert len(list(iter_log_files([tmp_path / 'logs', tmp_path / 'logs' / 'sub']))) == 1    # a folder named twice
    rep = ConversionReport()
    src = Path(__file__).parent / 'fixtures' / 'recorder' / 'openhands' / 'trajectory.json'
    (tmp_path / 'logs' / 'sub' / 'trajectory.json').write_bytes(src.read_bytes())
    assert len(list(convert(tmp_path / 'logs', format='openhands', report=rep))) == 1


# wrongly typed values that do not stop a record: kept as before, and now each reported (file, line, field)
AGENT_LOGS = Path(__file__).parent / 'fixtures' / 'agent_logs'


def _claude_log(tmp_path)->Path:
    "A Claude Code session whose assistant message (line 2) has content 12345 and timestamp 'yesterday'"
    import json
    def rec(i, typ, content, ts):
        return {'parentUuid': f'u{i - 1}' if i else None, 'isSidechain': False, 'sessionId': 's1', 'type': typ,
                'uuid': f'u{i}', 'timestamp': ts, 'message': {'id': f'm{i}', 'role': typ, 'content': content}}
    recs = [rec(0, 'user', 'fix the bug', '2025-01-01T00:00:00Z'), rec(1, 'assistant', 12345, 'yesterday'),
            rec(2, 'user', 'thanks', '2025-01-01T00:00:02Z')]
    p = tmp_path / 's1.jsonl'
    p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    return p


def test_claude_code_wrong_types_are_reported_with_file_line_and_field(tmp_path):
    "content 12345 became the thought '12345' and timestamp 'yesterday' no time, with no warning at all"
    p = _claude_log(tmp_path)
    rep = ConversionReport()
    ts = list(convert(p, report=rep))
    step = ts[0].steps[0]
    assert (step.thought, step.t_start) == ('12345', None)           # the data is kept as before
    assert rep.totals['quarantined'] == 0 and not rep.failed and rep.n_warnings == 2
    assert rep.warning_lines() == [f"{p}:2: message.content: 12345 (int) is not text: kept as the text '12345'",
                                   f"{p}:2: timestamp: 'yesterday' (str) is not a time: the step keeps no time"]


def test_the_cli_prints_wrong_types_and_still_converts(tmp_path):
    "`knowlyr-recorder convert` and `validate` say each one on a line; neither fails for it"
    import io

    from rich.console import Console

    from knowlyr_lab.cli import recorder as cli
    p = _claude_log(tmp_path)
    buf = io.StringIO()
    assert cli.main(['convert', str(p), '-o', str(tmp_path / 'o.jsonl'), '--no-progress'],
                    Console(file=buf, width=300)) == 0
    out = ' '.join(buf.getvalue().split())
    assert f"warning: {p}:2: message.content: 12345 (int) is not text" in out, out
    assert f"warning: {p}:2: timestamp: 'yesterday' (str) is not a time" in out, out
    buf = io.StringIO()
    assert cli.main(['validate', str(p)], Console(file=buf, width=300)) == 0
    out = buf.getvalue()
    assert f"warning: {p}:2 [assistant]: timestamp: 'yesterday'" in out and '0 error(s), 2 warning(s)' in out, out


def test_a_chat_message_time_of_the_wrong_type_is_reported(tmp_path):
    "The chat adapters had no per-record guard: the warning said 'a field of the record', not which message and field"
    import json
    p = tmp_path / 'chat.json'
    p.write_text(json.dumps([{'role': 'user', 'content': 'add 2 and 3'},
                             {'role': 'assistant', 'content': 'five', 'timestamp': 'yesterday'}]))
    rep = ConversionReport()
    ts = list(convert(p, format='openai-chat', report=rep))
    assert ts[0].steps[-1].thought == 'five' and ts[0].steps[-1].t_start is None
    assert rep.warning_lines() == [f"{p}: messages[1].timestamp: 'yesterday' (str) is not a time: the step keeps no time"]


def test_a_chat_call_log_names_the_message_and_the_response_field(tmp_path):
    "A litellm call log (line 2): a system prompt, a message time, the response's usage and the call's time"
    import json
    ok = {'messages': [{'role': 'user', 'content': 'hi'}]}
    bad = {'messages': [{'role': 'system', 'content': 12345}, {'role': 'user', 'content': 'hi'},
                        {'role': 'assistant', 'content': 'hello', 'timestamp': 'yesterday'}],
           'response': {'choices': [{'message': {'role': 'assistant', 'content': 'done'}, 'finish_reason': 'stop'}],
                        'usage': {'prompt_tokens': 'n/a', 'completion_tokens': 3}},
           'timestamp': 'soon'}
    p = tmp_path / 'calls.jsonl'
    p.write_text(json.dumps(ok) + '\n' + json.dumps(bad) + '\n')
    rep = ConversionReport()
    ts = list(convert(p, format='openai-chat', report=rep))
    assert len(ts) == 2 and ts[1].task.metadata['system'] == '12345' and ts[1].steps[-1].usage.output == 3
    assert rep.totals['quarantined'] == 0 and not rep.failed
    assert sorted(rep.warning_lines()) == sorted([
        f"{p}:2: response.usage.prompt_tokens: 'n/a' (str) is not a count: counted as 0",
        f"{p}:2: messages[0].content: 12345 (int) is not text: kept as the text '12345'",
        f"{p}:2: messages[2].timestamp: 'yesterday' (str) is not a time: the step keeps no time",
        f"{p}:2: timestamp: 'soon' (str) is not a time: the step keeps no time"])


def test_a_cassette_names_the_interaction_and_the_field(tmp_path):
    "An Anthropic cassette: a tool result's content 12345 in a request, an input token count 'n/a' in a response"
    import yaml
    uri = 'https://api.anthropic.com/v1/messages'
    use = {'role': 'assistant', 'content': [{'type': 'tool_use', 'id': 'tu1', 'name': 'calc', 'input': {'x': 1}}]}
    h1 = [{'role': 'user', 'content': 'compute'}]
    h2 = h1 + [use, {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 'tu1', 'content': 12345}]}]
    def call(msgs, body): return {'request': {'uri': uri, 'parsed_body': {'messages': msgs}},
                                  'response': {'status': 200, 'parsed_body': body}}
    its = [call(h1, {'id': 'm1', 'type': 'message', 'content': use['content'], 'stop_reason': 'tool_use'}),
           call(h2, {'id': 'm2', 'type': 'message', 'content': [{'type': 'text', 'text': 'done'}],
                     'stop_reason': 'end_turn', 'usage': {'input_tokens': 'n/a', 'output_tokens': 2}})]
    p = tmp_path / 'calc.yaml'
    p.write_text(yaml.safe_dump({'interactions': its}))
    rep = ConversionReport()
    (t,) = convert(p, format='anthropic-messages', report=rep)
    assert t.steps[0].observation.content == '12345' and t.steps[-1].thought == 'done'
    assert rep.warning_lines() == [
        f"{p}: interactions[1].request.messages[2].content[0].content: 12345 (int) is not text: kept as the text '12345'",
        f"{p}: interactions[1].response.parsed_body.usage.input_tokens: 'n/a' (str) is not a count: counted as 0"]


def test_toolbench_names_the_message_and_the_field(tmp_path):
    "A ToolBench function result whose content is a number (kept as text)"
    import json
    msgs = [{'role': 'user', 'content': 'add'},
            {'role': 'assistant', 'content': None, 'function_call': {'name': 'add', 'arguments': '{"a": 1}'}},
            {'role': 'function', 'name': 'add', 'content': 12345}]
    p = tmp_path / 'answer.json'
    p.write_text(json.dumps({'answer_generation': {'train_messages': [msgs], 'finish_type': 'give_answer'}}))
    rep = ConversionReport()
    (t,) = convert(p, format='toolbench', report=rep)
    assert t.steps[0].observation.content == '12345'
    assert rep.warning_lines() == [f"{p}: train_messages[0][2].content: 12345 (int) is not text: kept as the text '12345'"]


def test_openhands_task_message_of_the_wrong_type_keeps_the_episode(tmp_path):
    "A user message whose content was a number lost the whole episode (Task.instruction failed validation)"
    import json
    events = json.loads((AGENT_LOGS / 'openhands' / 'basic.json').read_text())
    assert events[0]['action'] == 'message' and events[0]['source'] == 'user'
    events[0]['args']['content'] = 12345
    p = tmp_path / 'trajectory.json'
    p.write_text(json.dumps(events))
    rep = ConversionReport()
    ts = list(convert(p, format='openhands', report=rep))
    assert len(ts) == 1 and not rep.failed and ts[0].task.instruction == '12345'
    assert rep.n_warnings == 1 and '12345 (int) is not text' in rep.warning_lines()[0]

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

"""Recorder fidelity (issue 39 item 8): what real logs lost in silence, one test per case; each failed before its fix.

The fixtures are in tests/fixtures/recorder_fidelity/ (see its README.md): small files in the shapes of the real
samples (tests/fixtures/agent_logs/, /work/shared/fixtures/LOG-FORMATS.md), each holding the case it tests.
"""
import json
import shutil
from pathlib import Path

import pytest

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder import reading
from knowlyr_lab.recorder.convert import convert, validate
from knowlyr_lab.recorder.report import ConversionReport

FID = Path(__file__).parent / 'fixtures' / 'recorder_fidelity'
REAL = Path(__file__).parent / 'fixtures' / 'agent_logs'

def conv(path, fmt=None, **kw):
    r = ConversionReport()
    return list(convert(path, format=fmt, report=r, redact=False, **kw)), r

def dump(t): return t.model_dump_json()

# ---------------------------------------------------------------- OpenHands SDK: a tool error given as a string

def test_sdk_string_error_is_an_error_observation():
    (t,), r = conv(FID / 'sdk-string-error.jsonl', 'openhands-sdk')
    view = t.steps[0]
    assert view.action.tool == 'str_replace_editor'
    assert view.observation.is_error is True
    assert view.observation.content.startswith('Invalid `path` parameter: /workspace/config.yaml')
    assert r.totals['quarantined'] == 0

# ---------------------------------------------------------------- the report: mapped only when nothing was dropped

def test_report_counts_a_partly_mapped_record_as_unmapped_and_keeps_it():
    "An observation whose text is in no field the adapter reads is not 'mapped': counted unmapped, kept whole, warned"
    (t,), r = conv(FID / 'sdk-string-error.jsonl', 'openhands-sdk')
    assert r.counts['ObservationEvent'] == {'mapped': 1, 'unmapped': 1, 'quarantined': 0}
    kept = [u for u in t.metadata['unmapped'] if u['record_type'] == 'ObservationEvent']
    assert kept[0]['record']['observation']['result_text'] == '/srv/app/config.yaml' and kept[0]['why'].startswith('partly mapped')
    assert kept[0]['line'] == 5
    assert any(w['line'] == 5 and 'partly mapped' in w['reason'] for w in r.warnings)

# ---------------------------------------------------------------- aider: the LLM history after a reset, empty replies

def test_aider_llm_history_keeps_the_prompt_after_a_context_reset():
    (t,), r = conv(FID / 'reset__.aider.llm.history', 'aider')
    users = [s for s in t.steps if s.metadata.get('observation_from') == 'user']
    assert [s.observation.content for s in users] == ['Now add a module docstring to app.py']   # sent twice, one turn
    assert users[0].metadata['context_reset'] is True
    assert t.steps[-1].thought == 'Added the docstring: "Greets the user."'

def test_aider_llm_history_empty_response_is_no_blank_step():
    (t,), r = conv(FID / 'reset__.aider.llm.history', 'aider')
    blank = [s.index for s in t.steps if s.action is None and not s.thought and s.observation is None]
    assert blank == []
    assert r.counts['llm_response'] == {'mapped': 2, 'unmapped': 1, 'quarantined': 0}
    assert [(u['record_type'], u['line'], u['why']) for u in t.metadata['unmapped']] == [('llm_response', 38, 'empty model response')]

# ---------------------------------------------------------------- aider: the chat history's commit lines

def test_aider_chat_keeps_commit_lines_of_a_multi_file_edit():
    (t,), r = conv(FID / 'multi-edit__.aider.chat.history.md', 'aider')
    model, train = t.steps
    assert (model.action.params['path'], train.action.params['path']) == ('src/model.py', 'src/train.py')
    assert model.observation.content.endswith('Applied edit to src/model.py')
    for s in (model, train): assert s.metadata['commit'] == {'sha': 'bf98f22', 'message': 'chore: create initial project structure'}
    rest = model.metadata['cli_output']
    assert 'Commit bf98f22 chore: create initial project structure' in rest and 'mkdir data' in rest and 'Tokens: 2.1k sent' in rest

# ---------------------------------------------------------------- iSWE: the model name

def test_iswe_keeps_the_model_and_the_configs():
    (t,), r = conv(FID / 'acme__csv-9.yaml', 'iswe')
    assert t.agent.model == 'aws-claude-opus-4-5'
    assert t.metadata['editing']['editing_instance_config']['params']['edit_format'] == 'merge_conflict'
    assert 'models' not in t.metadata                                          # both phases ran the same model

# ---------------------------------------------------------------- Codex: a session cut off after an earlier turn completed

def test_codex_session_cut_off_in_a_later_turn_is_truncated():
    (t,), r = conv(FID / 'rollout-cut-off.jsonl', 'codex-cli')
    assert (t.outcome.terminated, t.outcome.truncated) == (False, True)
    assert 'task_complete' in t.outcome.reason
    assert t.steps[-1].action.params == {'cmd': 'grep -n TS2304 build.log'} and t.steps[-1].metadata.get('unanswered')

def test_codex_complete_session_is_still_terminated():
    (t,), _ = conv(REAL / 'codex-cli' / 'rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl', 'codex-cli')
    assert (t.outcome.terminated, t.outcome.truncated) == (True, False)

# ---------------------------------------------------------------- Claude Code: two sessions in one file

def test_claude_code_two_sessions_become_two_trajectories():
    trajs, r = conv(FID / 'two-sessions.jsonl', 'claude-code')
    assert [t.id for t in trajs] == ['0b1e7c52-1111-4aaa-8aaa-000000000001', '0b1e7c52-2222-4bbb-8bbb-000000000002']
    a, b = trajs
    assert (a.task.instruction, b.task.instruction) == ('What does setup.py install?', 'Run the tests')
    assert [s.action.tool for s in a.steps if s.action] == ['Read'] and [s.action.tool for s in b.steps if s.action] == ['Bash']
    assert b.steps[0].observation.content == '3 passed' and b.steps[-1].thought == 'All 3 tests pass.'
    assert r.totals['quarantined'] == 0

# ---------------------------------------------------------------- text formats cut off mid-record

@pytest.mark.parametrize('name,fmt,line', [('cut__.aider.chat.history.md', 'aider', 8), ('cut-react.txt', 'react-text', 4),
                                            ('acme__csv-8', 'rovo-dev', 26)])
def test_text_log_cut_off_mid_record_is_marked(name, fmt, line):
    trajs, r = conv(FID / name, fmt)
    assert trajs[-1].outcome.truncated and not trajs[-1].outcome.terminated
    assert f'line {line}' in trajs[-1].outcome.reason
    assert [(w['path'], w['line']) for w in r.warnings] == [(str(FID / name), line)]

def test_aider_llm_history_cut_after_a_call_is_marked(tmp_path):
    p = tmp_path / '.aider.llm.history'
    text = (FID / 'reset__.aider.llm.history').read_text()
    cut = text[:text.rindex('LLM RESPONSE')]                                 # the last call's response never came
    p.write_text(cut)
    (t,), r = conv(p, 'aider')
    assert t.outcome.truncated and [w['line'] for w in r.warnings] == [cut.count('\n', 0, cut.rindex('TO LLM')) + 1]
    assert r.warnings[0]['reason'] == 'the file stops mid-record: a TO LLM call with no LLM RESPONSE'

def test_yaml_cut_mid_line_warns(tmp_path):
    p = tmp_path / 'acme__csv-9.yaml'
    text = (FID / 'acme__csv-9.yaml').read_text()
    p.write_text(text[:text.index('got a patch') + 3])                        # cut inside a value: still valid YAML
    _, r = conv(p, 'iswe')
    assert r.warnings and r.warnings[0]['path'] == str(p) and r.warnings[0]['line'] == text[:text.index('got a patch')].count('\n') + 1

# ---------------------------------------------------------------- duplicate JSON keys

def test_duplicate_key_warns_with_file_line_and_key():
    (t,), r = conv(FID / 'duplicate-keys.jsonl', 'codex-cli')
    assert [(w['path'], w['line']) for w in r.warnings] == [(str(FID / 'duplicate-keys.jsonl'), 11)]
    assert "duplicate key 'call_id'" in r.warnings[0]['reason']
    assert t.steps[0].action.call_id == 'call_A'                              # the last value, as every parser keeps
    assert any(f.level == 'warning' and f.line == 11 and 'call_id' in f.message for f in validate(FID / 'duplicate-keys.jsonl'))

def test_duplicate_key_in_a_whole_json_file_is_located(tmp_path):
    p = tmp_path / 'msgs.json'
    p.write_text('[\n {"role": "user", "content": "hi"},\n {"role": "assistant",\n  "content": "a", "content": "b"}\n]\n')
    r = ConversionReport()
    assert reading.read_json(p, r)[1]['content'] == 'b'
    assert [(w['line'], "'content'" in w['reason']) for w in r.warnings] == [(3, True)]

def test_duplicate_key_check_stays_off_the_slow_path_for_real_logs(monkeypatch):
    "Compact writers (Claude Code, Codex) come back byte for byte: no line is parsed a second time"
    def slow(*a, **k): raise AssertionError('a clean line was re-parsed for duplicate keys')
    monkeypatch.setattr(reading, 'duplicate_keys', slow)
    for p in [*(REAL / 'claude-code').glob('*.jsonl'), *(REAL / 'codex-cli').glob('rollout-*.jsonl')]:
        n = sum(1 for _ in reading.iter_jsonl(p, ConversionReport()))
        assert n > 0

# ---------------------------------------------------------------- the output inside the folder being converted

def test_output_inside_the_input_folder_is_never_read_back(tmp_path):
    logs = tmp_path / 'logs'; logs.mkdir()
    shutil.copy(FID / 'two-sessions.jsonl', logs / 'two-sessions.jsonl')
    out = logs / 'out.jsonl'
    for _ in range(2):                                                        # the second run finds the first one's output
        rc = cli.main(['convert', str(logs), '-o', str(out), '--no-progress'])
        assert rc == 0
        rows = [json.loads(l) for l in out.read_text().splitlines()]
        assert [r['id'] for r in rows] == ['0b1e7c52-1111-4aaa-8aaa-000000000001', '0b1e7c52-2222-4bbb-8bbb-000000000002']
    trajs, r = conv(logs, exclude=[out])
    assert len(trajs) == 2 and r.skipped == [{'path': str(out), 'why': "this run's own output, not read back"}]

# ---------------------------------------------------------------- one bad byte costs only itself

def test_latin1_and_nul_bytes_keep_the_step():
    (t,), r = conv(FID / 'bad-bytes.jsonl', 'claude-code')
    read, answer = t.steps
    assert read.action.tool == 'Read' and read.observation.content == "install_requires=['requests'] # caf\ufffd"
    assert answer.thought == 'It installs requests.\x00'
    assert r.counts['user']['mapped'] == 2 and r.counts['assistant']['mapped'] == 2
    fixes = [(i['line'], i['record_type']) for i in r.issues]
    assert fixes == [(2, '(bytes)'), (3, '(bytes)'), (4, '(bytes)')]          # each repair located; no record lost

def test_latin1_byte_in_a_text_log_keeps_the_file():
    (s1, s2), r = conv(FID / 'latin1__.aider.chat.history.md', 'aider')
    assert s1.task.instruction == 'Fix the greeting typo in app.py\nand keep the style (caf\ufffd).'
    assert [(i['line'], i['record_type']) for i in r.issues] == [(9, '(bytes)')]

"""Numbers orjson would change: the recorder keeps an integer past 64 bits exact, writes a NaN or an infinity as null with
a warning naming file, line and field (in tool-call arguments too), quarantines, naming the
field, a record holding an integer past Python's 4,300 digits (tool-call arguments holding one keep their text, warned);
a normal log is unchanged"""
import hashlib
import json
from pathlib import Path

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

FX = Path(__file__).parent / 'fixtures' / 'recorder'
CLAUDE = FX / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
CHAT_ARRAY = FX / 'openai-chat' / 'fncall-llm-message.json'
CHAT_JSONL = FX / 'openai-chat' / 'conversations.jsonl'
BIG = 123456789012345678901234567890


def _convert(path, fmt):
    rep = ConversionReport()
    return list(convert(path, format=fmt, report=rep)), rep


def _params(ts, key='timeout'):
    return [s.action.params[key] for t in ts for s in t.steps if s.action and key in s.action.params]


def _planter(name:str, source:Path, old:str, new:str):
    "A fixture writer `name` (the tests' id): `source` copied into tmp_path, its first `old` replaced by `new` % value"
    def plant(tmp_path, value:str):
        p = tmp_path / source.name
        text = source.read_text()
        p.write_text(text.replace(old, new % value, 1))
        assert p.read_text() != text
        return p
    plant.__name__ = name
    return plant


_claude = _planter('_claude', CLAUDE, '"description": "Run tests"}', '"description": "Run tests", "timeout": %s}')
_chat_array_args = _planter('_chat_array_args', CHAT_ARRAY, '\\"security_risk\\": \\"LOW\\"}',
                             '\\"security_risk\\": \\"LOW\\", \\"timeout\\": %s}')
# the number as a raw value of the third message (item 3), not inside an arguments string
_chat_array_raw = _planter('_chat_array_raw', CHAT_ARRAY, '"tool_calls": [', '"timeout": %s, "tool_calls": [')
_chat_jsonl_args = _planter('_chat_jsonl_args', CHAT_JSONL, '{\\"cmd\\": \\"pytest -q\\"}', '{\\"cmd\\": \\"pytest -q\\", \\"timeout\\": %s}')


@pytest.mark.parametrize('value', [BIG, 2**64, -2**63 - 1, 18446744073709551615])
@pytest.mark.parametrize('plant, fmt', [(_claude, 'claude-code'), (_chat_array_args, 'openai-chat'),
                                        (_chat_jsonl_args, 'openai-chat')])
def test_an_integer_past_64_bits_is_kept_exact(tmp_path, plant, fmt, value):
    "orjson read 123456789012345678901234567890 as 1.2345678901234568e+29: converted silently, value changed"
    ts, rep = _convert(plant(tmp_path, str(value)), fmt)
    got = _params(ts)
    assert got == [value] and type(got[0]) is int, got
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    assert f'"timeout":{value}' in ''.join(t.model_dump_json() for t in ts)     # and written exactly


def test_a_json_array_with_a_wide_integer_keeps_every_item(tmp_path):
    "The array reader stopped at item 3 with 'not valid JSON after item 2 (parse error: integer overflow)'"
    whole, _ = _convert(CHAT_ARRAY, 'openai-chat')
    ts, rep = _convert(_chat_array_raw(tmp_path, str(BIG)), 'openai-chat')
    assert not rep.errors, rep.errors
    assert len(ts) == 1 and len(ts[0].steps) == len(whole[0].steps) and not ts[0].outcome.truncated


@pytest.mark.parametrize('plant, source, fmt, where, col', [      # in a record itself (in tool-call arguments: below)
    (_claude, CLAUDE, 'claude-code', ':6: field message.content[0].input.timeout holds ', ''),
    # item 3 starts at line 10; the number, at line 13 column 16, is located as in a whole document
    (_chat_array_raw, CHAT_ARRAY, 'openai-chat', ':13: item 3: field timeout holds ', ' at column 16')])
def test_an_integer_past_the_digit_limit_is_quarantined_by_name(tmp_path, plant, source, fmt, where, col):
    "A 5000-digit integer failed the file or lost a step with Python's ValueError; raising the limit is process-wide"
    p = plant(tmp_path, '9' * 5000)
    whole, _ = _convert(source, fmt)
    ts, rep = _convert(p, fmt)
    assert [str(e) for e in rep.errors] == [f"{p}{where}an integer of 5000 digits{col}, past Python's limit of 4300"], rep.errors
    assert rep.totals['quarantined'] == 1 and not rep.failed
    assert _params(ts) == [] and len(ts) == len(whole)                    # the record is out, the rest kept
    assert sum(len(t.steps) for t in ts) == sum(len(t.steps) for t in whole) - 1


def _steps(ts): return sum(len(t.steps) for t in ts)


@pytest.mark.parametrize('plant, source, where', [
    (_chat_array_args, CHAT_ARRAY, ': messages[2].tool_calls[0].function.arguments: '),
    (_chat_jsonl_args, CHAT_JSONL, ':3: messages[1].tool_calls[0].function.arguments: ')])
def test_an_integer_past_the_digit_limit_in_tool_call_arguments_keeps_the_call_with_its_text(tmp_path, plant, source, where):
    "parse_arguments let UnheldNumber out: the record was quarantined, where every string field keeps its text, warned"
    p = plant(tmp_path, '9' * 5000)
    whole, _ = _convert(source, 'openai-chat')
    ts, rep = _convert(p, 'openai-chat')
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    assert len(ts) == len(whole) and _steps(ts) == _steps(whole)                  # every step kept
    (s,) = [s for t in ts for s in t.steps if s.action and '9' * 5000 in str(s.action.params)]
    assert list(s.action.params) == ['_raw'] and s.action.params['_raw'].endswith('"timeout": %s}' % ('9' * 5000))
    assert s.metadata['bad_arguments'] is True and s.action.tool in {a.tool for t in whole for a in
                                                                      (x.action for x in t.steps) if a}
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}{where}') and w.endswith("(str) as tool-call arguments: field timeout holds an integer of "
                                                      "5000 digits, past Python's limit of 4300 (kept as text)"), w


@pytest.mark.parametrize('value', ['NaN', 'Infinity', '-Infinity', '1e400'])
@pytest.mark.parametrize('plant, source, fmt, where, field, col', [
    (_claude, CLAUDE, 'claude-code', ':6: ', 'message.content[0].input.timeout', ''),
    (_chat_array_raw, CHAT_ARRAY, 'openai-chat', ':13: item 3: ', 'timeout', ' at column 16')])   # (the number's place)
def test_a_nan_or_infinity_in_a_record_is_written_null_and_warned(tmp_path, plant, source, fmt, where, field, col, value):
    "json.dumps writes NaN/Infinity: the whole record (a step) was quarantined for it; now kept, null, one warning"
    p = plant(tmp_path, value)
    whole, _ = _convert(source, fmt)
    ts, rep = _convert(p, fmt)
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    assert len(ts) == len(whole) and _steps(ts) == _steps(whole)         # every record kept
    assert rep.warning_lines() == [f'{p}{where}field {field} holds {value}{col}, a number JSON cannot write (written as null)']
    if plant is _claude:
        assert _params(ts) == [None] and '"timeout":null' in ''.join(t.model_dump_json() for t in ts)


@pytest.mark.parametrize('value', ['NaN', 'Infinity', '1e400'])
@pytest.mark.parametrize('plant, source, where', [
    (_chat_array_args, CHAT_ARRAY, ': messages[2].tool_calls[0].function.arguments: '),
    (_chat_jsonl_args, CHAT_JSONL, ':3: messages[1].tool_calls[0].function.arguments: ')])
def test_arguments_holding_a_nan_keep_their_params_with_null(tmp_path, plant, source, where, value):
    "Every parameter of such a call was lost as structured data (kept only as the _raw string, flagged bad_arguments)"
    p = plant(tmp_path, value)
    whole, _ = _convert(source, 'openai-chat')
    ts, rep = _convert(p, 'openai-chat')
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    assert len(ts) == len(whole) and _steps(ts) == _steps(whole)
    (s,) = [s for t in ts for s in t.steps if s.action and 'timeout' in s.action.params]
    assert s.action.params['timeout'] is None and '_raw' not in s.action.params and 'bad_arguments' not in s.metadata
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}{where}') and w.endswith(
        f'(str) as tool-call arguments: field timeout holds {value}, a number JSON cannot write (written as null)'), w


@pytest.mark.parametrize('path, fmt', [(CLAUDE, 'claude-code'), (CHAT_ARRAY, 'openai-chat'), (CHAT_JSONL, 'openai-chat')])
def test_a_normal_log_converts_as_before(path, fmt):
    "The fixtures hold no wide number: their trajectories are byte-identical to main's (digest recorded from main)"
    ts, rep = _convert(path, fmt)
    text = ''.join(t.model_dump_json() for t in ts).replace(str(FX), 'FX')     # the same wherever the checkout is
    assert 'FX/' in text
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert digest == DIGESTS[path.name], digest


DIGESTS = {'7f3c2a10-0000-4000-8000-000000000001.jsonl': '716d138f2a9d146aeff3433481527052d141c2375a9ada3004817e070c1676e0',
           'fncall-llm-message.json': 'a47ab8527697d479563edd6f498ee29e7cccbfab453161933aef9cf250885a9e',
           'conversations.jsonl': 'd48a1cb13b76ed95232ddbf7667b4e2e7ee2c1e766a32d1b0993ad4fe8c183e5'}


# a command with `\"` inside JSON arguments is escaped twice in its record: the redaction opens the arguments string
# (page 20aa `_nested_json`) to find the secret, and writes the string back
ESCAPED_CMD = ['bash', '-lc', 'curl -d "{\\"token\\": \\"Zq81LmWx0pTr9k\\"}" https://x']


@pytest.mark.parametrize('kept', ['unmapped', 'quarantined'])
def test_redacting_arguments_keeps_a_wide_integer_exact(tmp_path, kept):
    "The redaction re-read arguments with orjson: an unmapped record's string was rewritten with \"n\":1.2345678901234568e+29"
    from knowlyr_lab.recorder.redact import default_redactor
    args = json.dumps({'command': ESCAPED_CMD, 'n': BIG})
    p = tmp_path / 'rollout-2025-01-01T00-00-00-x.jsonl'
    recs = [{'timestamp': '2025-01-01T00:00:00Z', 'type': 'session_meta', 'payload': {'id': 's1', 'cwd': '/x'}},
            {'timestamp': '2025-01-01T00:00:01Z', 'type': 'response_item',
             'payload': {'type': 'message', 'role': 'user', 'content': [{'type': 'input_text', 'text': 'post it'}]}},
            {'timestamp': '2025-01-01T00:00:02Z', 'type': 'response_item',   # a type codex-cli does not map
             'payload': {'type': 'mystery_call', 'name': 'shell', 'arguments': args, 'call_id': 'c1'}}]
    p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    rep = ConversionReport(scrub=default_redactor(), quarantine=tmp_path / 'q.jsonl')
    (t,) = convert(p, format='codex-cli', report=rep)
    if kept == 'unmapped': written = t.metadata['unmapped'][0]['record']['arguments']
    else:                                          # the same record through the quarantine file
        rep.bad_record(p, 3, 'planted', recs[2]['payload'])
        written = json.loads((tmp_path / 'q.jsonl').read_text().splitlines()[-1])['raw']['arguments']
    assert 'Zq81LmWx0pTr9k' not in written and '[REDACTED' in written
    assert written == args.replace('Zq81LmWx0pTr9k', '[REDACTED:secret_assignment]')    # the int exact, layout kept
    assert json.loads(written)['n'] == BIG


class _Scanned(str):
    "A text that adds up how many characters its `count` calls scan"
    scanned = 0
    def count(self, sub, start=0, end=None):
        _Scanned.scanned += (len(self) if end is None else end) - start
        return str.count(self, sub, start, end)


def test_an_array_read_past_a_wide_integer_counts_its_lines_in_one_pass(tmp_path, monkeypatch):
    "Each item's line was counted from the file's start: quadratic, a 40,000-item event log took 77 s"
    import knowlyr_lab.recorder.json_items as ji
    item = json.dumps({'id': 0, 'args': {'command': 'ls', 'timeout': 30}}, indent=1)       # 7 lines
    p = tmp_path / 'events.json'
    p.write_text('[\n{"id": 1, "trace": %d},\n' % BIG + ',\n'.join([item] * 2000 + ['{"cost": NaN}']) + '\n]')
    read = ji.read_text                    # the real reader; its text counts the characters its newlines cost
    monkeypatch.setattr(ji, 'read_text', lambda path: _Scanned(read(path)))
    _Scanned.scanned, rep = 0, ConversionReport()
    got = list(ji.iter_json_items(p, rep))
    assert [k for k, _ in got] == list(range(1, 2003)) and got[0][1]['trace'] == BIG and got[-1][1] == {'cost': None}
    assert rep.warning_lines() == [f'{p}:{3 + 7 * 2000}: item 2002: field cost holds NaN at column 10, a number JSON '
                                   'cannot write (written as null)']
    assert 0 < _Scanned.scanned <= len(p.read_text()), _Scanned.scanned          # each character scanned once at most


def test_a_nan_in_a_smolagents_row_keeps_its_key_as_null(tmp_path):
    "The adapter dropped every None of the row's own fields: a NaN warned 'written as null' left no key at all"
    src = (FX / 'smolagents' / 'parallel-calls.jsonl').read_text().splitlines(keepends=True)
    p = tmp_path / 'parallel-calls.jsonl'
    p.write_text(src[0].replace('{', '{"x_temp": NaN, ', 1) + ''.join(src[1:]))
    whole, _ = _convert(FX / 'smolagents' / 'parallel-calls.jsonl', 'smolagents')
    ts, rep = _convert(p, 'smolagents')
    assert not rep.errors and len(ts) == len(whole) and _steps(ts) == _steps(whole), rep.errors
    assert 'x_temp' in ts[0].metadata and ts[0].metadata['x_temp'] is None, ts[0].metadata.keys()
    assert rep.warning_lines() == [f'{p}:1: field x_temp holds NaN, a number JSON cannot write (written as null)']
    assert '"x_temp":null' in ts[0].model_dump_json()


def test_an_array_read_past_a_wide_integer_keeps_the_items_before_a_later_syntax_error(tmp_path):
    "A syntax error after the wide integer cut the file 'after item 1': the readable items 2..4 were lost"
    from knowlyr_lab.recorder.json_items import iter_json_items
    p = tmp_path / 'events.json'
    p.write_text('[\n{"id": 1},\n{"id": 2, "trace": %d},\n{"id": 3},\n{"id": 4}\n{"id": 5}\n]' % BIG)   # no comma after 4
    rep = ConversionReport()
    got = list(it := iter_json_items(p, rep))
    assert got == [(1, {'id': 1}), (2, {'id': 2, 'trace': BIG}), (3, {'id': 3}), (4, {'id': 4})], got
    assert it.cut == "not valid JSON after item 4 (Expecting ',' delimiter at line 6 column 1)", it.cut
    assert [str(e) for e in rep.errors] == [f'{p}:6: {it.cut}'] and rep.failed == {'(document)': 1}

def test_wide_int_prefilter_answers_as_the_regular_expression():
    "wide_int's translate-and-find prefilter never changes the regular expression's answer (bytes and str, digit-heavy text)"
    import random

    from knowlyr_lab.recorder.json_numbers import WIDE_INT, wide_int
    rng = random.Random(7)
    for alphabet in ('0123456789-', '01-', '9-a ', '0123456789-é"'):
        for _ in range(20_000):
            s = ''.join(rng.choice(alphabet) for _ in range(rng.randrange(0, 48)))
            want = WIDE_INT.search(s.encode()) is not None
            assert wide_int(s) == want and wide_int(s.encode()) == want, s


def test_a_nan_in_a_whole_document_is_warned_at_its_line_and_column(tmp_path):
    "A .traj (one JSON document) holding NaN was warned by field only ('{p}: field info...'): no line to look at"
    src = FX / 'swe-agent' / 'acme__widgets-1.traj'
    p = tmp_path / src.name
    p.write_text(src.read_text().replace('"instance_cost": 0.0195', '"instance_cost": NaN', 1))
    ts, rep = _convert(p, 'swe-agent')
    whole, _ = _convert(src, 'swe-agent')
    assert not rep.errors and len(ts) == len(whole) and _steps(ts) == _steps(whole), rep.errors
    line = p.read_text().splitlines().index('   "instance_cost": NaN,') + 1
    assert line == 128 and rep.warning_lines() == [
        f'{p}:128: field info.model_stats.instance_cost holds NaN at column 21, a number JSON cannot write (written as null)']


def test_an_integer_past_the_digit_limit_in_a_whole_document_is_refused_at_its_line(tmp_path):
    "The file's error named the field but no line"
    src = FX / 'swe-agent' / 'acme__widgets-1.traj'
    p = tmp_path / src.name
    p.write_text(src.read_text().replace('"instance_cost": 0.0195', '"instance_cost": ' + '9' * 5000, 1))
    ts, rep = _convert(p, 'swe-agent')
    assert ts == [] and [str(e) for e in rep.errors] == [f'{p}:128: field info.model_stats.instance_cost holds an integer '
                                                         "of 5000 digits at column 21, past Python's limit of 4300"], rep.errors


@pytest.mark.parametrize('tail, why', [(',\n]', 'Expecting value at line 4 column 1'),
                                       (',\n,\n{"id": 3}]', 'Expecting value at line 4 column 1'),
                                       ('\n{"id": 3}]', "Expecting ',' delimiter at line 4 column 1")])
def test_the_array_read_past_a_wide_integer_refuses_what_json_refuses(tmp_path, tail, why):
    "Past a wide integer the array reader took a trailing comma ([..., {...},\\n]) as the array's end: no error"
    from knowlyr_lab.recorder.json_items import iter_json_items
    p = tmp_path / 'events.json'
    p.write_text('[\n{"id": 1, "trace": %d},\n{"id": 2}' % BIG + tail)
    with pytest.raises(json.JSONDecodeError): json.loads(p.read_text())
    rep = ConversionReport()
    got = list(it := iter_json_items(p, rep))
    assert got == [(1, {'id': 1, 'trace': BIG}), (2, {'id': 2})], got        # every item before the error kept
    assert it.cut == f'not valid JSON after item 2 ({why})', it.cut
    assert [str(e) for e in rep.errors] == [f'{p}:4: {it.cut}'] and rep.failed == {'(document)': 1}


def test_a_nan_in_an_array_item_is_warned_at_its_own_line_and_column(tmp_path):
    "The warning gave the item's first line and no column: a NaN deep in a pretty-printed item had to be searched for"
    from knowlyr_lab.recorder.json_items import iter_json_items
    p = tmp_path / 'events.json'
    p.write_text('[\n{"id": 1},\n{"id": 2,\n "args": {\n  "t": 0.5,\n  "cost": NaN}}, {"id": 3, "w": -Infinity},\n'
                 '  {"id": 4,\n   "n": %s}\n]' % ('9' * 5000))
    rep = ConversionReport()
    got = list(iter_json_items(p, rep))
    assert got == [(1, {'id': 1}), (2, {'id': 2, 'args': {'t': 0.5, 'cost': None}}), (3, {'id': 3, 'w': None})], got
    assert rep.warning_lines() == [  # item 2 starts at line 3; item 3 mid-line 6, after item 2
        f'{p}:6: item 2: field args.cost holds NaN at column 11, a number JSON cannot write (written as null)',
        f'{p}:6: item 3: field w holds -Infinity at column 33, a number JSON cannot write (written as null)']
    assert [str(e) for e in rep.errors] == [f"{p}:8: item 4: field n holds an integer of 5000 digits at column 9, past "
                                            "Python's limit of 4300"], rep.errors


@pytest.mark.parametrize('source, fmt, old', [(CHAT_JSONL, 'openai-chat', 'call_a'), (CHAT_ARRAY, 'openai-chat',
                         'toolu_01AaHKJphyeTw3GFp4Xgiekv'), (FX / 'openhands' / 'trajectory.json', 'openhands', 'toolu_A')])
def test_a_call_id_past_the_digit_limit_keeps_its_record_with_the_id_as_text(tmp_path, source, fmt, old):
    "An id of 5000 digits quarantined the whole record (a conversation, an event): ids are names, kept as their text"
    p = tmp_path / source.name
    p.write_text(source.read_text().replace(f'"{old}"', '9' * 5000))      # the call's id and its result's, as integers
    whole, _ = _convert(source, fmt)
    ts, rep = _convert(p, fmt)
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    shape = lambda ts: [(s.action and s.action.tool, s.observation and s.observation.content) for t in ts for s in t.steps]
    assert shape(ts) == shape(whole)                                    # every step kept, its result paired by the id
    (s,) = [s for t in ts for s in t.steps if s.action and s.action.call_id == '9' * 5000]
    assert s.observation is not None and [s.action.call_id for t in whole for s in t.steps if s.action and
                                          s.action.call_id == old] == [old]
    ws = rep.warning_lines()
    assert ws and all(w.startswith(f'{p}:') and "id holds an integer of 5000 digits" in w and w.endswith(
        "past Python's limit of 4300 (kept as text)") for w in ws), ws


def test_an_agentgym_row_id_past_the_digit_limit_keeps_its_row(tmp_path):
    "The row (a whole trajectory) was quarantined for its id; its `item_id` names the task, the id is kept as text"
    src = FX / 'agentgym-sharegpt' / 'webshop_fncall.jsonl'
    lines = src.read_text().splitlines(keepends=True)
    p = tmp_path / src.name
    p.write_text(lines[0].replace('{"conversations"', '{"id": %s, "conversations"' % ('9' * 5000), 1) + ''.join(lines[1:]))
    whole, _ = _convert(src, 'agentgym')
    ts, rep = _convert(p, 'agentgym')
    assert not rep.errors and [t.task.id for t in ts] == [t.task.id for t in whole] and _steps(ts) == _steps(whole)
    assert rep.warning_lines() == [f"{p}:1: field id holds an integer of 5000 digits, past Python's limit of 4300 "
                                   "(kept as text)"]


def test_json_whitespace_and_the_digit_limit_words_are_each_defined_once():
    "datasets._WS copied json_items._WS; the digit-limit words are one public function (page 21b's exit code uses it too)"
    from knowlyr_lab.recorder import chat_builder, datasets, json_items, json_numbers
    assert chat_builder.past_digit_limit is json_numbers.past_digit_limit
    assert datasets.JSON_WS is json_items.JSON_WS and not hasattr(datasets, '_WS') and not hasattr(json_items, '_WS')
    with pytest.raises(json_numbers.UnheldNumber) as e: json_numbers.loads_json('{"n": %s}' % ('9' * 5000))
    assert str(e.value) == 'field n holds ' + json_numbers.past_digit_limit('9' * 5000)


def test_an_openhands_cause_past_the_digit_limit_pairs_with_its_event_id(tmp_path):
    "The event id of 5000 digits was kept as text but the observation's `cause` (the same id) quarantined the result"
    src = Path(__file__).parent / 'fixtures' / 'agent_logs' / 'openhands' / 'basic.json'
    evs = json.loads(src.read_text())
    (act,) = [e for e in evs if e.get('action') == 'edit' and any(o.get('cause') == e['id'] for o in evs)]
    big = '9' * 5000
    p = tmp_path / src.name
    p.write_text(src.read_text().replace(f'"id": {act["id"]},', f'"id": {big},', 1).replace(f'"cause": {act["id"]}',
                                                                                             f'"cause": {big}', 1))
    whole, _ = _convert(src, 'openhands')
    ts, rep = _convert(p, 'openhands')
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    shape = lambda ts: [(s.action and s.action.tool, s.observation and s.observation.content) for t in ts for s in t.steps]
    assert shape(ts) == shape(whole) and any(o for _, o in shape(ts))                  # the edit's result, paired
    assert [w.split(': ')[2].split(' holds')[0] for w in rep.warning_lines()] == ['field id', 'field cause']
    assert all(w.endswith("past Python's limit of 4300 (kept as text)") for w in rep.warning_lines())


@pytest.mark.parametrize('args', ['{"order_id": %s}', '{"order": %s}', '{"ids": [%s]}'])
def test_an_id_named_argument_past_the_digit_limit_keeps_the_arguments_raw(tmp_path, args):
    "The record-id rule reached tool arguments: order_id's integer became a string and the call read as ok"
    args = args % ('9' * 5000)
    msgs = [{'role': 'user', 'content': 'cancel it'},
            {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function',
             'function': {'name': 'cancel', 'arguments': args}}]},
            {'role': 'tool', 'tool_call_id': 'c1', 'content': 'ok'}]
    p = tmp_path / 'chat.jsonl'
    p.write_text(json.dumps({'messages': msgs}) + '\n')
    (t,), rep = _convert(p, 'openai-chat')
    s = t.steps[0]
    assert (s.action.params, s.metadata.get('bad_arguments')) == ({'_raw': args}, True)    # raw, as any other name
    assert s.observation.content == 'ok' and not rep.errors
    (w,) = rep.warning_lines()
    assert "as tool-call arguments: field " in w and w.endswith("past Python's limit of 4300 (kept as text)"), w


def test_a_claude_code_message_held_as_a_string_keeps_a_call_id_past_the_digit_limit_as_text(tmp_path):
    "A message written as a JSON string was read as a value (ids=None): its call was lost and its result unpaired"
    lines = []
    for ln in CLAUDE.read_text().splitlines():
        ln = ln.replace('"toolu_1"', '9' * 5000)                   # the call's id and its result's, as integers
        if '"uuid": "u4"' in ln:                                   # the assistant record holding the call
            i = ln.index('"message": ') + len('"message": ')
            ln = ln[:i] + json.dumps(ln[i:-1]) + '}'               # its message as JSON text
        lines.append(ln)
    p = tmp_path / CLAUDE.name
    p.write_text('\n'.join(lines) + '\n')
    whole, _ = _convert(CLAUDE, 'claude-code')
    ts, rep = _convert(p, 'claude-code')
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    shape = lambda ts: [(s.action and s.action.tool, s.observation and s.observation.content)
                        for t in ts for s in t.steps]
    assert shape(ts) == shape(whole)                                # every step kept, the result paired by the id
    (s,) = [s for t in ts for s in t.steps if s.action and s.action.call_id == '9' * 5000]
    assert s.action.tool == 'Read' and s.observation is not None
    assert any(f'{p}:5: message: ' in w and 'as a message: field content[0].id holds an integer of 5000 digits' in w
               and w.endswith('(kept as text)') for w in rep.warning_lines()), rep.warning_lines()


def test_a_swe_agent_replay_config_held_as_a_string_keeps_an_id_past_the_digit_limit_as_text(tmp_path):
    "replay_config as a JSON string (its usual form) was read as a value: an id of 5000 digits dropped the config"
    src = Path(__file__).parent / 'fixtures' / 'agent_logs' / 'swe-agent' / '6e44b9__sweagenttestrepo-1c2844.traj'
    d = json.loads(src.read_text())
    d['replay_config']['problem_statement']['id'] = 'PLACEHOLDER'
    d['replay_config'] = json.dumps(d['replay_config'])
    p = tmp_path / src.name
    p.write_text(json.dumps(d).replace('\\"PLACEHOLDER\\"', '9' * 5000))
    (t,), rep = _convert(p, 'swe-agent')
    assert not rep.errors and t.task.id == '9' * 5000, rep.errors
    assert t.task.metadata['problem_statement']['id'] == '9' * 5000 and 'agent' in t.metadata['replay_config']
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}: replay_config: ') and w.endswith(                  # the file and the field named
        "(str) as the replay config: field problem_statement.id holds an integer of 5000 digits, "
        "past Python's limit of 4300 (kept as text)"), w


@pytest.mark.parametrize('key', ['cause', 'timeout'])
def test_a_cause_outside_an_openhands_event_is_a_number_like_any_other(tmp_path, key):
    "id_field took `cause` for an id in every format: a tool argument `cause` of 5000 digits was kept as text, warned as an id"
    p = _planter('_claude_arg', CLAUDE, '"description": "Run tests"}', '"description": "Run tests", "%s": %s}')(
        tmp_path, (key, '9' * 5000))
    ts, rep = _convert(p, 'claude-code')
    assert [str(e) for e in rep.errors] == [f"{p}:6: field message.content[0].input.{key} holds an integer of 5000 digits, "
                                            "past Python's limit of 4300"], rep.errors
    assert rep.totals['quarantined'] == 1 and not any('kept as text' in w for w in rep.warning_lines()), rep.warning_lines()

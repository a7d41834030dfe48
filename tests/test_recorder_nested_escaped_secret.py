"""A secret survives in no spelling a JSON writer gives it, in a quarantined line or a trajectory.

An openai-chat tool call's `arguments` is a JSON string inside the JSON line, so `json.dumps` writes a non-ASCII
password there as `p\\\\u00e4ssw\\\\u00f6rd99X` (each escape escaped again), and a writer that escapes `/` writes it
`\\\\/`; Go's encoding/json writes `&<>` as `\\u0026 \\u003c \\u003e`. On main the rules read one level only and
known values were looked for in the escapes of non-ASCII and `"'\\/` only, one level deep, so such a line went to
quarantine.jsonl with the secret in it, even where the file gave the value away whole and the trajectories lost it.
(`\\\\"` and `\\\\\\\\` at the second level: the assertions of nbs/20e_recorder_propagate.ipynb.)"""
import json

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.redact import default_redactor
from knowlyr_lab.recorder.report import ConversionReport


def _chat(i, q):
    return json.dumps({'id': f'ep-{i}', 'messages': [{'role': 'user', 'content': q},
                                                     {'role': 'assistant', 'content': 'done'}]})


def _tool_line(args, inner=json.dumps):
    "An assistant tool call whose `arguments` `inner` wrote, the line written by `json.dumps` (ASCII)"
    rec = {'id': 'ep-0', 'messages': [{'role': 'user', 'content': 'go'}, {'role': 'assistant', 'content': None,
           'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'login', 'arguments': inner(args)}}]}]}
    return json.dumps(rec)


def _slashed(args):                 # a writer that escapes `/` as `\/` (PHP's json_encode)
    return json.dumps(args).replace('/', '\\/')


def _convert(tmp_path, lines):
    log, q = tmp_path / 'episodes.jsonl', tmp_path / 'quarantine.jsonl'
    log.write_text('\n'.join(lines) + '\n')
    with ConversionReport(quarantine=q) as r: out = list(convert(log, format='openai-chat', report=r))
    return r, out, [json.loads(x)['raw'] for x in q.read_text().splitlines()]


# (arguments, the value, its kind, the writer of the arguments)
CASES = {'password-non-ascii': ({'password': 'pässwörd99X'}, 'pässwörd99X', 'secret_assignment', json.dumps),
         'flag-non-ascii': ({'cmd': 'run --password pässwörd99X'}, 'pässwörd99X', 'cli_secret_flag', json.dumps),
         'password-slash': ({'password': 'Zq8/vN3xR7x9'}, 'Zq8/vN3xR7x9', 'secret_assignment', _slashed)}


@pytest.mark.parametrize('whole_too', [False, True], ids=['cut-only', 'also-whole'])
@pytest.mark.parametrize('name', list(CASES))
def test_a_secret_in_a_cut_tool_call_is_redacted_from_quarantine_and_trajectories(tmp_path, name, whole_too):
    args, value, kind, inner = CASES[name]
    cut = _tool_line(args, inner)[:-3]                                  # malformed: quarantined as its raw text
    lines = [cut, _chat(1, f'why did {value} fail?')]
    if whole_too: lines.insert(0, _tool_line(args, inner))             # the same record whole: its arguments parsed
    r, out, raws = _convert(tmp_path, lines)
    assert r.totals['quarantined'] == 1
    raw = raws[0]
    assert f'[REDACTED:{kind}]' in raw, raw
    spelled = json.dumps(inner(value))[3:-3]                           # the value at the second level, as written
    assert spelled not in raw and value[-4:] not in raw, raw
    for t in out: assert value not in t.model_dump_json() and json.dumps(value)[1:-1] not in t.model_dump_json()
    assert out[-1].task.instruction == f'why did [REDACTED:{kind}] fail?'


GO = {'go-amp-lt': (r'Zq8\u0026vN3\u003cxR7x', 'Zq8&vN3<xR7x'),
      'go-and-non-ascii': (r'Zq8\u00e4vN3\u003CxR7x', 'Zq8ävN3<xR7x'),
      'a-letter-escaped': (r'\u005Aq8vN3xR7x9', 'Zq8vN3xR7x9')}


@pytest.mark.parametrize('name', list(GO))
def test_a_value_with_any_character_escaped_is_redacted_as_read(name):
    spelled, value = GO[name]
    line = 'API_KEY="' + spelled + '"'
    assert default_redactor().redact_as_read(line) == ('API_KEY="[REDACTED:secret_assignment]"',
                                                       {'secret_assignment': 1})


@pytest.mark.parametrize('name', list(GO))
def test_a_go_escaped_secret_in_a_quarantined_line_is_redacted_there_and_in_trajectories(tmp_path, name):
    spelled, value = GO[name]
    bad = '{"id": "ep-0", "messages": "export API_KEY=\\"' + spelled + '\\""'     # malformed
    r, out, raws = _convert(tmp_path, [bad, _chat(1, f'why did {value} fail?')])
    assert raws == ['{"id": "ep-0", "messages": "export API_KEY=\\"[REDACTED:secret_assignment]\\""']
    assert out[0].task.instruction == 'why did [REDACTED:secret_assignment] fail?'
    assert r.redactions['secret_assignment'] >= 2


def test_redact_as_read_reads_json_in_json():
    "the rules read a line at each level: a tool call's arguments, with Go's `\\u0026` in them too"
    args = json.dumps({'cmd': 'run --password pässwörd99X', 'password': 'Zq8&vN3<xR7x'}).replace('&', '\\u0026')
    line = json.dumps({'arguments': args})
    assert default_redactor().redact_as_read(line) == (
        json.dumps({'arguments': json.dumps({'cmd': 'run --password [REDACTED:cli_secret_flag]',
                                             'password': '[REDACTED:secret_assignment]'})}),
        {'cli_secret_flag': 1, 'secret_assignment': 1})

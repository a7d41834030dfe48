"""A value a record gave away is redacted from the file's later records whole, in any spelling (issue rec40).

1. A rule matching only a known value's start (`password: Hunter2 horse battery9`: the assignment rule stops at the
   space) replaced that start first, so the value was no longer found and its rest stayed in the trajectory and in the
   quarantine file. Known values are now redacted before the rules run.
2. A text spelling one of the value's letters as a JSON escape (`\\u006d`) was never asked for it: the prefilter
   (`KnownValues.within`) looked for the value's literal part in the text as written only.
3. A value holding a lone surrogate (read from a record that escaped it) was not found where a text spells it `\\udc80`.
"""
import json

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

SPACED = 'Hunter2 horse battery9'                # a password the assignment rule reads only up to its first space
KEY = 'Zq8vN3xR7tL2pW9kQ4m'


def _chat(i:int, *contents, calls=None)->str:
    "One openai-chat conversation: a user message per content, an assistant's reply (with `calls`)"
    msgs = [{'role': 'user', 'content': c} for c in contents]
    msgs.append({'role': 'assistant', 'content': None if calls else 'ok', **({'tool_calls': calls} if calls else {})})
    if calls: msgs.append({'role': 'tool', 'tool_call_id': calls[0]['id'], 'content': 'ok'})
    return json.dumps({'id': f'ep-{i}', 'messages': msgs})


def _converted(tmp_path, lines:list[str])->tuple[str, str, str]:
    "(trajectories, report texts, quarantine file) of converting `lines` as an openai-chat log"
    p = tmp_path / 'log.jsonl'
    p.write_text('\n'.join(lines) + '\n')
    r = ConversionReport(quarantine=tmp_path / 'q.jsonl')
    out = ''.join(t.model_dump_json() for t in convert(p, format='openai-chat', report=r)); r.close()
    q = tmp_path / 'q.jsonl'
    return out, json.dumps([r.warnings, r.issues, r.errors]), q.read_text() if q.exists() else ''


def _near(text:str, part:str)->str:
    "Where `part` stands in `text`, for the failure's message"
    i = text.find(part)
    return text[max(0, i - 80):i + 80]


def _bad(content:str)->str:
    "A malformed line (cut short) quoting `content`"
    return '{"id": "broken", "messages": [{"role": "user", "content": "' + content + '"'


def test_a_rule_matching_a_known_values_start_leaves_none_of_it(tmp_path):
    login = {'id': 'c1', 'type': 'function', 'function': {'name': 'login', 'arguments': {'password': SPACED}}}
    out, said, q = _converted(tmp_path, [_chat(1, 'log in', calls=[login]), _bad(f'password: {SPACED}'),
                                         _chat(2, f'password: {SPACED} works?')])
    assert out.count('"ep-') == 2 and q.count('broken') == 1, (out, q)
    for text in (out, said, q):                               # no character of it: 'horse battery9' was left
        assert 'horse' not in text and 'battery9' not in text, _near(text, 'horse')


def test_a_letter_escaped_hides_no_known_value(tmp_path):
    esc = KEY[:-1] + '\\\\u006d'                  # its last letter as JSON escapes it, in a JSON text (the line's)
    out, said, q = _converted(tmp_path, [_chat(1, f'export API_KEY={KEY}'),
                                         _chat(2, 'the config reads {"k": "' + KEY[:-1] + '\\u006d"}'),
                                         _bad(f'echo {esc}')])
    assert out.count('"ep-') == 2 and q.count('broken') == 1, (out, q)
    assert KEY[:6] not in out + said + q, _near(out + said + q, KEY[:6])


def test_a_value_with_a_lone_surrogate_is_found_where_it_is_escaped(tmp_path):
    "The record that gives the value away is quarantined (a lone surrogate is no UTF-8); the later quote, escaped"
    line = _chat(1, 'export API_KEY=Zq8vN3x\udc80R7tL2pW9k')           # json.dumps escapes the surrogate: \\udc80
    assert '\\udc80' in line
    out, said, q = _converted(tmp_path, [line, _bad('echo Zq8vN3x\\\\udc80R7tL2pW9k')])
    assert q.count('broken') == 1, q
    assert 'Zq8vN3x' not in out + said + q and 'R7tL2pW9k' not in out + said + q, _near(out + said + q, 'R7tL2pW9k')

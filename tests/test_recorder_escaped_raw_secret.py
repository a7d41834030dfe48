"""A quarantined line is kept as its raw JSON text, where `\\u00e4` or `\\/` spell one character: the secret rules read
it as a reader would too, so a secret given away only there is redacted from quarantine.jsonl, and the value is learned
and redacted from the file's trajectories that quote it bare (on main the rules read only the text as written, and
`--password p\\u00e4ssw\\u00f6rd99X` was written to the quarantine file as it was)."""
import json

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

# (as the line spells it, the value, what names it as a secret)
REPROS = {'cli-flag-non-ascii': (r'--password p\u00e4ssw\u00f6rd99X', 'pässwörd99X', '--password '),
          'assignment-non-ascii': (r'API_KEY=p\u00e4ssw\u00f6rd99X', 'pässwörd99X', 'API_KEY='),
          'assignment-slash': (r'API_KEY=Zq8\/vN3xR7x', 'Zq8/vN3xR7x', 'API_KEY=')}
KIND = {'--password ': 'cli_secret_flag', 'API_KEY=': 'secret_assignment'}


def _chat(i, q):
    return json.dumps({'id': f'ep-{i}', 'messages': [{'role': 'user', 'content': q},
                                                     {'role': 'assistant', 'content': 'done'}]}, ensure_ascii=False)


@pytest.mark.parametrize('late', [False, True], ids=['quoted-after', 'quoted-before'])
@pytest.mark.parametrize('name', list(REPROS))
def test_a_secret_json_escaped_in_a_quarantined_line_is_redacted_there_and_later(tmp_path, name, late):
    spelled, value, names = REPROS[name]
    kind = KIND[names]
    bad = '{"id": "ep-0", "messages": "run tool ' + spelled + '"'        # malformed: quarantined as its raw text
    quotes = _chat(1, f'why did {value} fail?')                            # quotes the value bare, nothing names it
    log = tmp_path / 'episodes.jsonl'
    log.write_text('\n'.join([quotes, bad] if late else [bad, quotes]) + '\n')
    q = tmp_path / 'quarantine.jsonl'
    with ConversionReport(quarantine=q) as r: out = list(convert(log, format='openai-chat', report=r))
    assert r.totals['quarantined'] == 1 and len(out) == 1
    raw = json.loads(q.read_text())['raw']
    assert spelled not in raw and value not in raw
    assert raw == '{"id": "ep-0", "messages": "run tool ' + names + f'[REDACTED:{kind}]"'
    t = out[0]
    assert value not in t.model_dump_json()
    assert t.task.instruction == f'why did [REDACTED:{kind}] fail?'
    assert r.redactions[kind] >= 2                         # the quarantined line's, and the quoting trajectory's


def test_a_warning_quoting_a_known_value_with_repr_loses_it(tmp_path):
    "a field_path warning quotes the value as `{v!r}` (`\\'`, `\\x7f`): on main those spellings were not matched"
    v = "Zq8'vN3\"xR7\x7fx9"                              # repr: 'Zq8\'vN3"xR7\x7fx9'
    def rec(i, typ, ts, **kw):
        return {'parentUuid': f'u{i - 1}' if i else None, 'isSidechain': False, 'sessionId': 's1', 'type': typ,
                'uuid': f'u{i}', 'timestamp': ts, 'message': {'id': f'm{i}', 'role': typ, 'content': 'ok'}, **kw}
    p = tmp_path / 's1.jsonl'                                             # a Claude Code session
    recs = [rec(0, 'user', '2025-01-01T00:00:00Z', api_key=v), rec(1, 'assistant', v)]   # the key gives it away
    p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    r = ConversionReport()
    assert len(list(convert(p, report=r))) == 1
    assert r.warning_lines() == [f"{p}:2: timestamp: '[REDACTED:secret_assignment]' (str) is not a time: "
                                 "the step keeps no time"]


def test_a_report_scrubbed_by_a_bare_redactor_reads_the_quarantined_line_as_json_too(tmp_path):
    "`ConversionReport(scrub=Redactor)` (no `CountingScrub`): its `said` runs `redact_as_read` itself"
    from knowlyr_lab.recorder.redact import default_redactor
    log, q = tmp_path / 'episodes.jsonl', tmp_path / 'quarantine.jsonl'
    log.write_text('{"id": "ep-0", "messages": "run tool --password p\\u00e4ssw\\u00f6rd99X"\n' + _chat(1, 'hi') + '\n')
    with ConversionReport(scrub=default_redactor(), quarantine=q) as r: out = list(convert(log, format='openai-chat', report=r))
    assert len(out) == 1 and r.redactions == {'cli_secret_flag': 1}
    raw = json.loads(q.read_text())['raw']
    assert raw == '{"id": "ep-0", "messages": "run tool --password [REDACTED:cli_secret_flag]"'

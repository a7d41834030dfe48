"""A value a file gives away is redacted from what was written as JSON text too, however JSON escaped it: a quarantined
line keeps its raw text (`pässwörd99X` written `p\\u00e4ssw\\u00f6rd99X` by Python's `json.dumps`), and a trajectory
may quote a JSON document holding the value (a trajectory held until its file's end, or one read after)."""
import json

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

PW = 'pässwörd99X'                    # the `--password` flag names it a secret (cli_secret_flag)
ESCAPED = json.dumps(PW)[1:-1]        # p\u00e4ssw\u00f6rd99X
QUOTE = 'Zq8/vN3xR7"tL2\\pW9'         # `/`, `"` and `\`: given away as an `api_key` field (secret_assignment)
ASTRAL = 'k\U0001f511Zq8vN3xR7'       # escaped as a surrogate pair, k\ud83d\udd11Zq8vN3xR7


def _chat(q, a, i=0, **extra):
    msgs = [{'role': 'user', 'content': q}, {'role': 'assistant', 'content': a}]
    return json.dumps({'id': f'ep-{i}', 'messages': msgs, **extra})


GIVEN_AWAY = {PW: (_chat(f'run tool --password {PW}', 'done', 1), 'cli_secret_flag'),
              QUOTE: (_chat('set the key', 'done', 1, api_key=QUOTE), 'secret_assignment'),
              ASTRAL: (_chat(f'run tool --password {ASTRAL}', 'done', 1), 'cli_secret_flag')}


def _convert(tmp_path, *lines):
    log = tmp_path / 'episodes.jsonl'
    log.write_text(''.join(line + '\n' for line in lines))
    q = tmp_path / 'q.jsonl'
    with ConversionReport(quarantine=q) as r: out = list(convert(log, format='openai-chat', report=r))
    return out, r, (q.read_text() if q.exists() else '')


def _quarantined_raw(tmp_path, spelled, gives, late):
    bad = '{"messages": "the pass is ' + spelled + '"'          # malformed: quarantined as its raw text
    out, r, q = _convert(tmp_path, *((bad, gives) if late else (gives, bad)))
    assert len(out) == 1 and r.totals['quarantined'] == 1
    return json.loads(q)['raw']


@pytest.mark.parametrize('late', [True, False], ids=['quarantined-first', 'quarantined-last'])
@pytest.mark.parametrize('secret', [PW, QUOTE, ASTRAL], ids=['non-ascii', 'slash-quote-backslash', 'astral'])
@pytest.mark.parametrize('ascii', [True, False], ids=['ensure_ascii', 'utf-8'])
def test_a_quarantined_line_loses_the_value_as_json_escaped_it(tmp_path, late, secret, ascii):
    gives, kind = GIVEN_AWAY[secret]
    raw = _quarantined_raw(tmp_path, json.dumps(secret, ensure_ascii=ascii)[1:-1], gives, late)
    assert raw == f'{{"messages": "the pass is [REDACTED:{kind}]"'


@pytest.mark.parametrize('late', [True, False], ids=['quarantined-first', 'quarantined-last'])
def test_slash_escaped_and_capital_hex_spellings_are_matched(tmp_path, late):
    spelled = 'Zq8\\/vN3xR7\\"tL2\\\\pW9 and p\\u00E4ssw\\u00F6rd99X'    # `\/`, and hex in capitals
    gives = _chat(f'run tool --password {PW}', 'done', 1, api_key=QUOTE)
    raw = _quarantined_raw(tmp_path, spelled, gives, late)
    assert raw == '{"messages": "the pass is [REDACTED:secret_assignment] and [REDACTED:cli_secret_flag]"'


@pytest.mark.parametrize('late', [True, False], ids=['held', 'read-after'])
def test_a_trajectory_quoting_the_value_as_json_escaped_it_loses_it(tmp_path, late):
    # under a key no rule reads (the assignment rule redacts an escaped "password" itself): the file gave the value away
    quotes = _chat('show the config', f'conf.json: {{"value": "{ESCAPED}", "user": "me"}}')
    gives = GIVEN_AWAY[PW][0]
    out, r, q = _convert(tmp_path, *((quotes, gives) if late else (gives, quotes)))
    assert len(out) == 2 and q == ''
    quoting = next(t for t in out if t.task.instruction == 'show the config')
    text = quoting.model_dump_json()
    assert ESCAPED not in text and PW not in text
    assert quoting.steps[-1].thought == 'conf.json: {"value": "[REDACTED:cli_secret_flag]", "user": "me"}'
    # counted once per occurrence (the answer's step and `metadata['final_answer']`), in both orders
    assert quoting.metadata['redactions'] == {'cli_secret_flag': 2}
    assert r.redactions == {'cli_secret_flag': 3}

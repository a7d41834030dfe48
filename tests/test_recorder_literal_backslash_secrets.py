"""A secret that holds a backslash and an `n`, `t` or `r` as written (`Zq9x\\nTr7Wk2Lm`, a password) is redacted.

The rules read `\\n` in a string as a line break (JSON inside JSON: `ls\\ncurl -u ...`), so a value holding those two
characters ended at them, was too short for its rule, and was written out whole: in a decoded string, and in a
quarantined line's raw text (whose `\\\\n` the prefilter also read as a break), or was cut at them with its tail
written out (`curl -u admin:Zq9x\\nTr7Wk2Lm`). In a JSON document `\\n` is a break, while `\\\\n` may be a backslash and
an n or a break one level down; in other text `\\n` may be either. What any reading finds goes, the longest first, and
what each finds is remembered for the rest of the run."""
import json

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.redact import default_redactor
from knowlyr_lab.recorder.report import ConversionReport

PW = 'Zq9x\\nTr7Wk2Lm'      # as written: a backslash and an n inside the password

@pytest.mark.parametrize('text', [f"db_password: '{PW}' please", f'DB_PASSWORD={PW}', f"password='{PW.replace('n', 't', 1)}'",
                                  f'export API_KEY={PW}', f'{{"command": "export API_KEY={PW}"}}'])
def test_a_value_holding_an_escaped_break_as_written_is_redacted(text):
    out, counts = default_redactor().redact_text(text)
    assert 'Tr7Wk2Lm' not in out and 'Zq9x' not in out and counts, out        # main: unchanged, {}

def test_the_tail_after_an_escaped_break_goes_with_the_head():
    out, _ = default_redactor().redact_text(f'curl -u admin:{PW} https://ci.example.org')
    assert out == 'curl -u admin:[REDACTED:curl_user_password] https://ci.example.org', out   # 975df4bd: kept Tr7Wk2Lm

def test_outside_json_the_word_after_the_break_goes_too():
    out, _ = default_redactor().redact_text("export DB_PASSWORD=abcdefgh12\\npsql -c 'select 1'")
    assert out == "export DB_PASSWORD=[REDACTED:secret_assignment] -c 'select 1'", out

def test_in_a_json_document_an_escaped_break_is_a_break():
    doc = json.dumps({'command': "export DB_PASSWORD=abcdefgh12\npsql -c 'select 1'"})
    out, _ = default_redactor().redact_text(doc)
    assert json.loads(out) == {'command': "export DB_PASSWORD=[REDACTED:secret_assignment]\npsql -c 'select 1'"}, out
    lit = json.dumps({'command': f'export DB_PASSWORD={PW}'})               # a backslash in it: `\\\\n` in the document
    out, _ = default_redactor().redact_text(lit)
    assert 'Tr7Wk2Lm' not in out and 'Zq9x' not in out, out

def test_in_json_a_backslash_before_an_n_is_read_both_ways():
    lit = json.dumps({'command': 'export DB_PASSWORD=abcdefgh12\\nTr7Wk2Lm'})    # a backslash and an n in the password
    seen = {}; out, _ = default_redactor().redact_text(lit, values=seen)
    assert 'Tr7Wk2Lm' not in out and 'abcdefgh12' in seen, (out, seen)        # 975df4bd: kept Tr7Wk2Lm
    deeper = json.dumps({'arguments': json.dumps({'command': 'export DB_PASSWORD=abcdefgh12\npsql -c x'})})
    seen = {}; out, _ = default_redactor().redact_text(deeper, values=seen)   # a break one level down
    assert 'abcdefgh12' not in out and 'abcdefgh12' in seen, (out, seen)      # e0530ee: only abcdefgh12\\npsql known

def test_both_readings_of_a_value_are_remembered_for_elsewhere():
    seen = {}
    default_redactor().redact_text(f'curl -u admin:{PW} https://ci.example.org', values=seen)
    assert {'Zq9x', PW} <= set(seen), seen                 # 975df4bd: only Zq9x

def test_a_quarantined_raw_line_loses_such_a_value(tmp_path):
    line = json.dumps({'messages': [{'role': 'user', 'content': f"db_password: '{PW}' please"}]})
    (tmp_path/'cut.jsonl').write_text(line[:-3] + '\n')                       # cut off: quarantined with its raw text
    with ConversionReport(quarantine=tmp_path/'q.jsonl') as r: list(convert(tmp_path/'cut.jsonl', format='openai-chat', report=r))
    q = (tmp_path/'q.jsonl').read_text()
    assert 'Tr7Wk2Lm' not in q and '[REDACTED:secret_assignment]' in q, q     # main: the whole password

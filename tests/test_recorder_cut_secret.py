"""A report text quotes a bad value cut short (`timestamp: '...' (str) is not a time`). A secret longer than the cut,
given away elsewhere in the file (`API_KEY=...`) or recognisable by its shape, left its first 55-60 characters in the
warning (the report, the CLI's output): whole-value redaction no longer found it. `cut` marks the cut, and
`redact_values` redacts a known value's start before the mark."""
import json

import pytest

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

SEC = 'Zq8vN3xR7tL2pW9kQ4mBa7Hc5Jd2Kf8Lg3Mh6Np9Qr4St7Uv2Wx5Yz8Ab3Cd6Ef9Gh2'        # 70 characters, no known shape


def _rec(uuid, parent, role, content, ts='2025-09-03T00:47:19.293Z'):
    return json.dumps({'parentUuid': parent, 'sessionId': 's1', 'type': role, 'uuid': uuid, 'timestamp': ts,
                       'cwd': '/w', 'message': {'role': role, 'content': content}})


def _session(tmp_path, bad_first:bool, secret=SEC, give_away=True):
    "A Claude Code session whose assistant record has `secret` as its timestamp; a user record says `API_KEY=secret`"
    bad = _rec('u2', 'u1', 'assistant', [{'type': 'text', 'text': 'ok'}], ts=secret)
    key = _rec('u3', 'u2', 'user', f'export API_KEY={secret}' if give_away else 'thanks')
    lines = [_rec('u1', None, 'user', 'hi'), bad, key] if bad_first else [
        _rec('u1', None, 'user', 'hi'), key.replace('"u2"', '"u1"'), bad.replace('"u1"', '"u3"')]
    p = tmp_path / 'session.jsonl'
    p.write_text('\n'.join(lines) + '\n')
    return p


@pytest.mark.parametrize('bad_first', [True, False])
def test_a_cut_value_in_a_warning_keeps_no_start_of_a_secret_given_away(tmp_path, bad_first):
    r = ConversionReport(quarantine=tmp_path / 'q.jsonl')
    ts = list(convert(_session(tmp_path, bad_first), format='claude-code', report=r)); r.close()
    said = json.dumps([r.warnings, r.issues, r.errors, r.warning_lines()])
    assert [w['reason'] for w in r.warnings] == [
        "timestamp: '[REDACTED:secret_assignment]… (str) is not a time: the step keeps no time"], r.warnings
    assert SEC[:8] not in said and not any(SEC[:8] in t.model_dump_json() for t in ts)


@pytest.mark.parametrize('bad_first', [True, False])
def test_the_cli_prints_no_start_of_the_secret(tmp_path, capsys, monkeypatch, bad_first):
    monkeypatch.setenv('COLUMNS', '400')                               # rich wraps no line in two
    out = tmp_path / 'out.jsonl'
    assert cli.main(['convert', str(_session(tmp_path, bad_first)), '-o', str(out), '-f', 'claude-code']) in (0, None)
    printed = capsys.readouterr()
    printed = printed.out + printed.err
    assert 'is not a time' in ' '.join(printed.split())                # the warning is printed ...
    assert SEC[:8] not in ''.join(printed.split())                     # ... without the secret's start
    assert all(SEC[:8] not in f.read_text() for f in tmp_path.glob('out*'))


"""A JSON line cut off mid-string is quarantined with its raw text, redacted as written: there a secret is still
JSON-escaped, and every context rule's value stopped at a backslash. `db_password: 'Zq9"wx\\Tr8...'` cut short went
to quarantine.jsonl as `db_password: '[REDACTED:secret_assignment]\\\\Tr`: the match ended at the escaped backslash and
the rest of the secret (as far as the cut line holds it) was written out; the same after `\\"` in a double-quoted
value, `\\u00e4`, `\\/`, and for `--password`, netrc and key=value forms. A value now goes on through its escapes
(`inside_value`, page 20cb), a token through the escapes of its characters (`_TOKEN_CH`, page 21); a complete line
whose decoded value holds a backslash (`'Qz7Wx5\\Kj4Lm2Vb'`, not redacted at all before) too. The escapes of what
ends a value (`\\u0026`, a closing `\\"`) still end it: nothing after the value is redacted."""
import json

import pytest

from knowlyr_lab.cli import recorder as cli

# the secrets' parts between escapes: none of them may be left in any output
PARTS = ('Qz7', 'Wx5', 'Kj4')


def _chat(content, asst='ok'):
    return json.dumps({'messages': [{'role': 'user', 'content': content}, {'role': 'assistant', 'content': asst}]})


def _cut(line, after='Kj4'):
    "`line` cut off just after the last `after` (inside the secret, past its escapes): its string never closes"
    return line[:line.rindex(after) + len(after)]


CUT_LINES = {   # a line cut inside the secret, each holding at least one escape before the cut
    'single-quoted, \\" and \\\\': _cut(_chat("db_password: 'Qz7\"Wx5\\Kj4Lm2Vb' now")),
    'double-quoted, \\"': _cut(_chat('deploy with password="Qz7\\"Wx5Kj4Lm2" please')),
    'double-quoted, \\\\': _cut(_chat('token: "Qz7Wx5\\\\Kj4Lm2Vb"')),
    '\\u00e4': _cut(_chat('api_key=Qz7\u00e4Wx5Kj4Lm2Vb now')),
    '\\/': _cut(_chat('export API_KEY=Qz7Wx5/Kj4Lm2Vb now').replace('/', '\\/')),
    'key=value, \\\\': _cut(_chat('secret=Qz7Wx5\\Kj4Lm2Vb done')),
    'flag, \\\\': _cut(_chat('psql --password Qz7Wx5\\Kj4Lm2Vb -h db')),
    'curl, \\\\': _cut(_chat('curl -u deploy:Qz7Wx5\\Kj4Lm2Vb https://ci.example.com')),
    'netrc, \\\\': _cut(_chat('machine db.example.com login alice password Qz7Wx5\\Kj4Lm2Vb')),
    'JSON in a message': _cut(_chat(json.dumps({'password': 'Qz7"Wx5\\Kj4Lm2Vb', 'user': 'bob'}))),
    'token, \\/': _cut(_chat('GF token glc_' + 'Qz7Wx5' * 6 + '/Kj4Lm2Vb ok').replace('/', '\\/')),
}
WHOLE_LINES = {   # complete lines: the value is decoded first, and holds a backslash
    'single-quoted backslash': _chat("db_password: 'Qz7Wx5\\Kj4Lm2Vb' now"),
    'quote and backslash': _chat("db_password: 'Qz7\"Wx5\\\\Kj4Lm2Vb' now"),
}


def _convert(tmp_path, capsys, monkeypatch, lines):
    "Every output of `knowlyr-recorder convert` on a log of `lines`: its files by name, and what it printed"
    monkeypatch.setenv('COLUMNS', '400')
    log = tmp_path / 'log.jsonl'
    log.write_text('\n'.join([_chat('hello there'), *lines]) + '\n')
    assert cli.main(['convert', str(log), '-o', str(tmp_path / 'out.jsonl')]) in (0, 3, None)
    printed = capsys.readouterr()
    outs = {f.name: f.read_text() for f in tmp_path.glob('out*')}
    outs['printed'] = printed.out + printed.err
    return outs


@pytest.mark.parametrize('case', [*CUT_LINES, *WHOLE_LINES])
def test_no_part_of_an_escaped_secret_survives(tmp_path, capsys, monkeypatch, case):
    line = CUT_LINES.get(case) or WHOLE_LINES[case]
    assert all(p in line for p in PARTS), line
    outs = _convert(tmp_path, capsys, monkeypatch, [line])
    written = 'out.quarantine.jsonl' if case in CUT_LINES else 'out.jsonl'
    assert written in outs and '[REDACTED:' in outs[written], outs
    assert {k: [p for p in PARTS if p in v] for k, v in outs.items() if any(p in v for p in PARTS)} == {}, outs


@pytest.mark.parametrize('content, kept', [
    (json.dumps({'password': 'Qz7Wx5Kj4Lm', 'next': 'Yv8keep', 'more': 'x' * 20}), ['"next', 'Yv8keep']),
    ('see https://x.example/?access_token=Qz7Wx5Kj4Lm\u0026page=Pg3keep and more text', ['page=Pg3keep']),
    ('db_password: "Qz7Wx5Kj4Lm\\\\" and Yv8keep after', ['Yv8keep']),
])
def test_what_follows_an_escaped_value_is_kept(tmp_path, capsys, monkeypatch, content, kept):
    line = _chat(content)
    if '\\u0026' not in line: line = line.replace('&', '\\u0026')    # as Go's encoding/json writes `&`
    outs = _convert(tmp_path, capsys, monkeypatch, [line[:-30]])      # cut: the raw text is quarantined
    q = outs.get('out.quarantine.jsonl', '')
    assert '[REDACTED:' in q and 'Qz7' not in q and all(k in json.loads(q)['raw'] for k in kept), q

"""A password holding a double quote (`Zq8"vN3xR7x9Pq`) was written whole to the trajectory, the quarantine file and
the CLI's warnings: every context rule's value stopped at the quote, so `--password Zq8"...`, `password: Zq8"...`,
`DB_PASSWORD=Zq8"...` or `{"password": "Zq8\\"..."}` typed in a message matched nothing (three characters are too few
for a value). A quote a value character follows is now part of the value (`QUOTE_INSIDE`), and a value found with
JSON escapes is also known as read (`Zq8\\"...` is `Zq8"...` elsewhere)."""
import json

import pytest

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder.redact import default_redactor

PW = 'Zq8"vN3xR7x9Pq'
AFTER = 'vN3xR7x9Pq'                                        # the part after the quote


def _chat(i, user, asst='done'):
    return json.dumps({'id': f'ep-{i}', 'messages': [{'role': 'user', 'content': user},
                                                     {'role': 'assistant', 'content': asst}]})


def _cc(uuid, parent, role, content, ts='2025-09-03T00:47:19.293Z'):
    return json.dumps({'parentUuid': parent, 'sessionId': 's1', 'type': role, 'uuid': uuid, 'timestamp': ts,
                       'cwd': '/w', 'message': {'role': role, 'content': content}})


CASES = {
    'flag': [_chat(0, f'run mysql --password {PW} now')],
    'flag, single-quoted': [_chat(0, f"run mysql --password '{PW}' now")],
    'flag, double-quoted': [_chat(0, 'run psql --password "Zq8\\"vN3xR7x9Pq" now')],
    'env': [_chat(0, f'export DB_PASSWORD={PW}')],
    'yaml': [_chat(0, f'password: {PW}')],
    'json in a message': [_chat(0, json.dumps({'password': PW}))],
    'quarantined line': [_chat(0, 'hi'), f'{{"id": "ep-1", "messages": [{{"role": "user", "content": "--password {PW}', _chat(2, 'bye')],
    'warning, given away as JSON': [_cc('u1', None, 'user', json.dumps({'password': PW})),
                                    _cc('u2', 'u1', 'assistant', [{'type': 'text', 'text': 'ok'}], ts=PW)],
}


@pytest.mark.parametrize('case', CASES)
def test_no_output_keeps_a_password_with_a_quote(tmp_path, capsys, monkeypatch, case):
    monkeypatch.setenv('COLUMNS', '400')
    log = tmp_path / 'log.jsonl'
    log.write_text('\n'.join(CASES[case]) + '\n')
    fmt = ['-f', 'claude-code'] if case.startswith('warning') else []
    assert cli.main(['convert', str(log), '-o', str(tmp_path / 'out.jsonl'), *fmt]) in (0, 3, None)
    printed = capsys.readouterr()
    outs = {f.name: f.read_text() for f in tmp_path.glob('out*')}
    outs['printed'] = ''.join((printed.out + printed.err).split())
    assert 'out.jsonl' in outs and (case != 'quarantined line' or 'out.quarantine.jsonl' in outs), sorted(outs)
    assert {k: v for k, v in outs.items() if AFTER in v} == {}
    assert '[REDACTED:' in outs.get('out.quarantine.jsonl', outs['out.jsonl'])


@pytest.mark.parametrize('text, kept', [
    ('{"cmd": "psql --password Hx9vLq2Zr8", "x": 1}', '", "x": 1}'),         # the closing quote ends the value
    ('{\\"password\\":\\"hunter2pass\\",\\"user\\":\\"bob\\"}', '\\",\\"user\\":\\"bob\\"}'),   # JSON in JSON
    ("psql --password 'Hx9vLq2Zr8' && ls", "' && ls"),
])
def test_a_closing_quote_still_ends_the_value(text, kept):
    said, counts = default_redactor().redact_text(text)
    assert counts and said.endswith(kept) and '[REDACTED:' in said, said

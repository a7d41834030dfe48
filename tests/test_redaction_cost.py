"""Redacting a file's values from its trajectories costs about the file's size, not trajectories x values (issue rec39).

A file of n conversations that each give away one API key: every key is redacted wherever it appears, and the values
handed to `redact_values` (each made part of a pattern) grow with n, not with n x n as they did when every
trajectory was searched for every value learned so far. Counts values handed on, times nothing."""
import base64
import json
import random

from knowlyr_lab.recorder import scrub
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.known_values import KnownValues
from knowlyr_lab.recorder.report import ConversionReport


def _log(path, n:int, bad:bool=False)->list[str]:
    "An openai-chat log of `n` conversations, each stating a key (and, `bad`, a malformed line quoting it)"
    rng, keys, lines = random.Random(0), [], []
    for i in range(n):
        k = base64.b64encode(rng.randbytes(24)).decode().replace('/', 'x').replace('+', 'y')
        keys.append(k)
        msgs = [{'role': 'user', 'content': f'export API_KEY="{k}" then fix issue #{i}: ' + 'lorem ipsum ' * 20},
                {'role': 'assistant', 'content': f'ran with {k}: src/a.py:12: foo() ' * 3}]
        lines.append(json.dumps({'id': f'ep-{i}', 'messages': msgs}))
        if bad: lines.append('{"id": "broken", "messages": [{"role": "user", "content": "' + f'API_KEY={k}' + '"')
    path.write_text('\n'.join(lines) + '\n')
    return keys


def _spelled_calls(tmp_path, monkeypatch, n:int, bad:bool=False)->tuple[int, int]:
    "Values handed to `redact_values` (each one a part of its pattern), and report texts, converting `n` conversations"
    calls, texts, redact_values = [0], [0], scrub.redact_values
    def redacting(obj, values, *a, **kw):
        calls[0] += len(values)
        if isinstance(obj, list): texts[0] += len(obj)       # a slice of the report's texts (`redact_said`)
        return redact_values(obj, values, *a, **kw)
    monkeypatch.setattr(scrub, 'redact_values', redacting)
    p = tmp_path / f'log{n}{bad}.jsonl'
    keys = _log(p, n, bad)
    r = ConversionReport(quarantine=tmp_path / f'q{n}{bad}.jsonl')
    out = [t.model_dump_json() for t in convert(p, format='openai-chat', report=r)]
    r.close()
    assert len(out) == n and r.redactions.get('secret_assignment', 0) >= 2 * n, r.redactions
    said = json.dumps(r.issues) + (tmp_path / f'q{n}{bad}.jsonl').read_text() if bad else ''
    assert not [k for k in keys if any(k in t for t in out) or k in said]   # every key redacted everywhere
    monkeypatch.setattr(scrub, 'redact_values', redact_values)
    return calls[0], texts[0]


def test_value_patterns_grow_linearly(tmp_path, monkeypatch):
    (small, _), (large, _) = (_spelled_calls(tmp_path, monkeypatch, n) for n in (30, 120))
    # 4x the conversations (and values): about 4x the patterns, where searching each trajectory for every value learned
    # so far made it about 16x
    assert large <= 5 * small, (small, large)
    assert large <= 20 * 120, large


def test_quarantined_lines_cost_linearly(tmp_path, monkeypatch):
    "A malformed line per conversation: what the report says and writes is redacted of the few values it may hold"
    (small, said_small), (large, said_large) = (_spelled_calls(tmp_path, monkeypatch, n, bad=True) for n in (30, 120))
    assert large <= 5 * small, (small, large)
    # each text the report says is redacted of the file's values once at the file's end, not again with each new value
    assert said_large <= 5 * said_small and said_large <= 4 * 2 * 120, (said_small, said_large)


def _session(path, n:int):
    "A Claude Code session (one trajectory) of `n` records, each stating a key of its own"
    rng, lines, parent = random.Random(1), [], None
    for i in range(n):
        k = base64.b64encode(rng.randbytes(24)).decode().replace('/', 'x').replace('+', 'y')
        role = 'user' if i % 2 == 0 else 'assistant'
        content = f'export API_KEY={k}' if role == 'user' else [{'type': 'text', 'text': f'ok, API_KEY={k} set'}]
        lines.append(json.dumps({'parentUuid': parent, 'sessionId': 's1', 'type': role, 'uuid': f'u{i}', 'cwd': '/w',
                                 'timestamp': '2025-09-03T00:47:19.293Z', 'message': {'role': role, 'content': content}}))
        parent = f'u{i}'
    path.write_text('\n'.join(lines) + '\n')


def _indexed(tmp_path, monkeypatch, n:int)->int:
    "Values indexed (`KnownValues._index`) converting a session of `n` records"
    calls, index = [0], KnownValues._index
    def counting(self, v): calls[0] += 1; return index(self, v)
    monkeypatch.setattr(KnownValues, '_index', counting)
    _session(p := tmp_path / f's{n}.jsonl', n)
    r = ConversionReport()
    (t,) = convert(p, format='claude-code', report=r)
    assert r.redactions.get('secret_assignment', 0) >= n - 2, r.redactions
    monkeypatch.setattr(KnownValues, '_index', index)
    return calls[0]


def test_one_long_trajectory_indexes_each_value_a_few_times(tmp_path, monkeypatch):
    "Each record of one trajectory is asked for the values its earlier records gave away: not by indexing them again"
    small, large = (_indexed(tmp_path, monkeypatch, n) for n in (100, 400))
    assert large <= 5 * small and large <= 4 * 400, (small, large)

"""A value first recognised late in a file (`API_KEY=...` in its second episode) is gone from the trajectories of that
file converted before it too: a file's trajectories wait for its end (`HeldTrajectories`), as its quarantine lines do."""
import json
from pathlib import Path

import pytest

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder import convert as convert_mod
from knowlyr_lab.recorder.base import RecorderError
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

TOK = 'Zq8vN3xR7tL2pW9kQ4mB'     # no pattern knows it bare; `API_KEY=` names it a secret


def _chat(q, a, i=0):
    return json.dumps({'id': f'ep-{i}', 'messages': [{'role': 'user', 'content': q}, {'role': 'assistant', 'content': a}]})


def _log(tmp_path, *lines):
    p = tmp_path / 'episodes.jsonl'
    p.write_text(''.join(line + '\n' for line in lines))
    return p


def test_secret_recognised_in_the_second_trajectory_is_gone_from_the_first(tmp_path):
    log = _log(tmp_path, _chat('check the header', f'the header holds {TOK}'), _chat(f'export API_KEY={TOK}', 'done', 1))
    r = ConversionReport()
    out = list(convert(log, report=r))
    assert len(out) == 2
    assert TOK not in out[0].model_dump_json() and TOK not in out[1].model_dump_json()
    assert '[REDACTED:secret_assignment]' in out[0].model_dump_json()
    # counted once per occurrence: the rule's hit in the second; in the first, the bare value in the answer's step
    # and in `metadata['final_answer']`
    assert r.redactions == {'secret_assignment': 3}
    assert [t.metadata['redactions'] for t in out] == [{'secret_assignment': 2}, {'secret_assignment': 1}]


def test_counts_do_not_depend_on_the_order_of_the_trajectories(tmp_path):
    first, second = _chat('check the header', f'the header holds {TOK}'), _chat(f'export API_KEY={TOK}', 'done', 1)
    late, early = ConversionReport(), ConversionReport()
    a = list(convert(_log(tmp_path, first, second), report=late))
    b = list(convert(_log(tmp_path, second, first), report=early))
    assert late.redactions == early.redactions
    same = lambda t: t.model_dump(exclude={'source'})                 # all but the line it was read from
    assert same(a[0]) == same(b[1]) and same(a[1]) == same(b[0])


def test_the_written_file_holds_no_late_secret(tmp_path):
    log = _log(tmp_path, _chat('check the header', f'the header holds {TOK}'), _chat(f'export API_KEY={TOK}', 'done', 1))
    out = tmp_path / 'out.jsonl'
    assert cli.main(['convert', str(log), '-o', str(out)]) in (0, None)
    text = out.read_text()
    assert len(text.splitlines()) == 2 and TOK not in text


def test_trajectories_past_the_memory_bound_wait_in_a_file_and_come_back_the_same(tmp_path, monkeypatch):
    lines = [_chat(f'question {i}', f'answer {i} with {TOK}' if i == 3 else f'answer {i}', i) for i in range(6)]
    log = _log(tmp_path, *lines, _chat(f'API_KEY={TOK}', 'ok', 6))
    kept = [t.model_dump() for t in convert(log)]
    monkeypatch.setattr(convert_mod, 'HELD_BYTES', 1)          # every trajectory but the last waits in the file
    spooled = [t.model_dump() for t in convert(log)]
    assert spooled == kept and len(kept) == 7
    assert TOK not in json.dumps(spooled)


def test_strict_stop_hands_on_what_was_read_before_it(tmp_path):
    log = _log(tmp_path, _chat('a', 'b'), _chat('c', 'd', 1), '{"messages": [')
    got = []
    with pytest.raises(RecorderError):
        for t in convert(log, strict=True): got.append(t)
    assert len(got) == 2


def test_a_value_given_away_by_a_quarantined_last_line_is_gone_from_the_trajectories_before_it(tmp_path):
    log = _log(tmp_path, _chat('check the header', f'the header holds {TOK}'), '{"messages": "API_KEY=' + TOK + '"')
    with ConversionReport(quarantine=tmp_path / 'q.jsonl') as r: out = list(convert(log, report=r))
    assert len(out) == 1 and r.totals['quarantined'] == 1
    assert TOK not in out[0].model_dump_json() and TOK not in (tmp_path / 'q.jsonl').read_text()


FIXTURES = Path(__file__).parent / 'fixtures'


def test_every_fixture_converts_the_same_when_its_trajectories_wait_in_the_file(monkeypatch):
    "The spooled path (JSON out, validated back) changes nothing of what the fixture logs convert to"
    dirs = [d for root in ('agent_logs', 'recorder') for d in sorted((FIXTURES / root).iterdir()) if d.is_dir()]
    def run():
        return {str(d): [t.model_dump() for t in convert(d, report=ConversionReport(max_errors=10**6))] for d in dirs}
    kept = run()
    monkeypatch.setattr(convert_mod, 'HELD_BYTES', 1)
    assert run() == kept and sum(map(len, kept.values())) > 100

"A bad record in a preference file is quarantined with its file, line and field; the DPO export goes on"
import json

import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import Outcome, Step, Task, Trajectory

TS = [Trajectory(id=f'tr-{i}', task=Task(id='t'), steps=[Step(index=0, thought=str(i))], outcome=Outcome(success=i == 0))
      for i in range(2)]
GOOD = '{"chosen":"tr-0","rejected":"tr-1"}'

@pytest.mark.parametrize('line,field', [('[1,2]', 'expected a JSON object'), ('{"chosen":"tr-0","rejected":"tr-1","margin":"big"}', "field 'margin'"),
                                        ('{"chosen":{"steps":"x"},"rejected":"tr-1"}', "field 'chosen.steps'"),
                                        ('{"chosen":"tr-0","rejected":"tr-1","level":"step","step":"1"}', "field 'step'"),
                                        ('{"chosen":[1],"rejected":"tr-1"}', "field 'chosen'")])
def test_bad_preference_record_is_quarantined(tmp_path, line, field):
    p = tmp_path / 'prefs.jsonl'; p.write_text(GOOD + '\n' + line + '\n')
    r = DatasetExporter(TS, preferences=p).export('dpo', tmp_path / 'out')
    assert r.counts == {'train': 1} and r.quarantined == 1
    (q,) = [json.loads(x) for x in (tmp_path / 'out' / 'quarantine.jsonl').read_text().splitlines()]
    assert (q['path'], q['line']) == (str(p), 2) and q['reason'].startswith(f"{p}:2") and field in q['reason']

def test_null_or_zero_margin_is_a_margin_not_an_error(tmp_path):
    prefs = [{'chosen': 'tr-0', 'rejected': 'tr-1', 'margin': None}, {'chosen': 'tr-0', 'rejected': 'tr-1', 'margin': 0}]
    r = DatasetExporter(TS, preferences=prefs).export('dpo', tmp_path / 'out', min_margin=0.0)
    assert r.counts == {'train': 2} and r.quarantined == 0

def _inline(i:int, reward=0.5, **outcome)->dict:
    d = json.loads(Trajectory(id=f'in-{i}', task=Task(id='t'), steps=[Step(index=0, thought=str(i), reward=0.5)],
                              outcome=Outcome(success=i == 0, **outcome)).model_dump_json())
    d['steps'][0]['reward'] = reward          # json.dumps writes NaN / Infinity, which json.loads reads back
    return d

@pytest.mark.parametrize('side,bad', [('chosen', float('nan')), ('chosen', float('inf')), ('rejected', float('-inf'))])
@pytest.mark.parametrize('margin', [None, 1.0])
def test_inline_side_with_nonfinite_reward_is_quarantined(tmp_path, side, bad, margin):
    "An inline side is refused as a trajectory of the input is: before, it was written (inf) or stopped the export (NaN)"
    rec = {'chosen': _inline(0), 'rejected': _inline(1), **({'margin': margin} if margin is not None else {})}
    rec[side] = _inline(0 if side == 'chosen' else 1, bad)
    p = tmp_path / 'prefs.jsonl'; p.write_text(GOOD + '\n' + json.dumps(rec) + '\n')
    r = DatasetExporter(TS, preferences=p).export('dpo', tmp_path / 'out')
    assert r.counts == {'train': 1} and r.quarantined == 1
    (q,) = [json.loads(x) for x in (tmp_path / 'out' / 'quarantine.jsonl').read_text().splitlines()]
    assert q['line'] == 2 and f"field '{side}.steps.0.reward': {bad} is not a finite number" in q['reason']

@pytest.mark.parametrize('kw,why', [({'min_reward': 1.0}, 'below_min_reward'), ({'agents': ['nobody']}, 'agent'),
                                    ({'success_only': True}, 'not_success')])
def test_inline_sides_go_through_the_filter(tmp_path, kw, why):
    "The export's filter applies to a pair's inline sides as to the trajectories it names by id"
    prefs = [{'chosen': _inline(0), 'rejected': _inline(1)}]
    r = DatasetExporter([], preferences=prefs, **kw).export('dpo', tmp_path / 'out')
    assert (r.total, r.skipped) == (0, {f'preference_{why}': 1})
    assert DatasetExporter([], preferences=prefs).export('dpo', tmp_path / 'all').total == 1

def test_failed_inline_side_is_filtered_as_a_failed_trajectory(tmp_path):
    prefs = [{'chosen': _inline(0), 'rejected': _inline(1, invalid='harness timeout')}]
    r = DatasetExporter([], preferences=prefs).export('dpo', tmp_path / 'out')
    assert (r.total, r.skipped) == (0, {'preference_invalid': 1})

def test_preference_line_that_is_not_json_is_quarantined(tmp_path):
    "A line that is not JSON (or not UTF-8) no longer stops the export: quarantined with file, line and reason"
    p = tmp_path / 'prefs.jsonl'; p.write_bytes(GOOD.encode() + b'\n{"chosen": oops\n\xff\xfe\n' + GOOD.encode() + b'\n')
    r = DatasetExporter(TS, preferences=p).export('dpo', tmp_path / 'out')
    assert r.counts == {'train': 2} and r.quarantined == 2
    q = [json.loads(x) for x in (tmp_path / 'out' / 'quarantine.jsonl').read_text().splitlines()]
    assert [(x['path'], x['line']) for x in q] == [(str(p), 2), (str(p), 3)]
    assert q[0]['reason'] == f"{p}:2: preference record is not JSON (Expecting value)" and q[0]['record'] == '{"chosen": oops'
    assert 'not UTF-8' in q[1]['reason'] and q[1]['record'] == '\\xff\\xfe'

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

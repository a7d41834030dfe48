"A record only partly mapped is kept once, whole, counted once, and says which of its pieces had no place (review24)"
import json

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

FX = __import__('pathlib').Path(__file__).parent / 'fixtures'


def _stored(ts, rep): return rep.orphans + [e for t in ts for e in t.metadata.get('unmapped', [])]


def test_a_nemo_gym_item_with_no_place_counts_unmapped_once(tmp_path):
    "An item (a record of its own) of a kind with no place was a part of nothing counted: totals['unmapped'] said 0"
    row = json.loads((FX / 'atif' / 'ng_trajectory_rollouts.jsonl').read_text().splitlines()[0])
    row['ng_trajectory']['invocations'][0]['conversation'].insert(-1, {'type': 'web_search_call', 'id': 'ws1'})
    p = tmp_path / 'rollouts.jsonl'; p.write_text(json.dumps(row) + '\n')
    rep = ConversionReport()
    ts = list(convert(p, format='ng-trajectory', report=rep))
    stored = _stored(ts, rep)
    assert [e['record']['type'] for e in stored] == ['web_search_call'], stored
    assert rep.totals['unmapped'] == 1 and rep.parts == {}, (rep.totals, rep.parts)
    assert rep.counts['item:web_search_call'] == {'mapped': 0, 'unmapped': 1, 'quarantined': 0}

"Step rewards that are not finite numbers (1e999 reads as inf) are quarantined with file, line and field; the export goes on"
import json

import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import Outcome, Step, Task, Trajectory


def _rec(i, rewards, success='true'):
    steps = ','.join(f'{{"index":{k},"thought":"s{k}","action":{{"tool":"edit","params":{{}}}},"reward":{r}}}'
                     for k, r in enumerate(rewards))
    return (f'{{"id":"tr-{i}","task":{{"id":"t{i // 2}","instruction":"Fix"}},"steps":[{steps}],'
            f'"outcome":{{"success":{success}}}}}')

# `success: 1` is coerced by pydantic only: those records take the pydantic path where the others take msgspec's
LINES = [_rec(0, ['0.5']), _rec(1, ['0.2']),                     # good
         _rec(2, ['1e999']), _rec(3, ['1e999', '-1e999']),       # a lone inf (was written as null); inf and -inf (NaN)
         _rec(4, ['0.1', '-1e999'], '1'), _rec(5, ['1e999'], '1'), # the same on the pydantic path
         _rec(6, ['1e308', '1e308']), _rec(7, ['0.9'], '1')]     # finite (their mean overflows, clipped): kept
BAD = {3: 'steps.0.reward', 4: 'steps.0.reward', 5: 'steps.1.reward', 6: 'steps.0.reward'}   # line -> field

@pytest.fixture(scope='module')
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp('inf')
    (d / 't.jsonl').write_text('\n'.join(LINES) + '\n')
    return d

@pytest.mark.parametrize('fmt', ['sft', 'sft-agent', 'openai', 'grpo', 'benchmark', 'dpo', 'verl'])
def test_nonfinite_step_rewards_are_quarantined_and_the_export_goes_on(src, fmt):
    kw = {'min_group': 1} if fmt == 'grpo' else {}
    r = DatasetExporter(src / 't.jsonl').export(fmt, src / fmt, **kw)
    assert (r.read, r.quarantined) == (4, 4)
    q = [json.loads(x) for x in open(src / fmt / 'quarantine.jsonl')]
    assert {x['line']: x['field'] for x in q} == BAD and {x['path'] for x in q} == {str(src / 't.jsonl')}
    for x in q: assert 'is not a finite number' in x['reason'] and f":{x['line']}: field '{x['field']}'" in x['reason']
    if fmt in ('sft', 'sft-agent', 'grpo'):
        rows = [json.loads(x) for p in r.paths.values() for x in open(p)]
        rewards = [v for x in rows for v in x.get('step_rewards', []) + [s['reward'] for s in x.get('steps', [])]]
        assert rows and all(type(v) is float for v in rewards) and (rewards or fmt == 'grpo')
        ids = {x.get('trajectory_id') for x in rows} | {i for x in rows for i in x.get('trajectory_ids', [])}
        assert ids - {None} <= {'tr-0', 'tr-1', 'tr-6', 'tr-7'}

def test_in_memory_input_is_refused_by_place_and_id(tmp_path):
    t = lambda i, r: Trajectory(id=f'tr-{i}', task=Task(id=f't{i}', instruction='Fix'), outcome=Outcome(success=True),
                                steps=[Step(index=0, thought='x', reward=r)])
    r = DatasetExporter([t(0, 0.5), t(1, float('inf')), t(2, float('-inf'))]).export('sft', tmp_path / 'o')
    assert (r.counts, r.quarantined) == ({'train': 1}, 2)
    q = [json.loads(x) for x in open(tmp_path / 'o' / 'quarantine.jsonl')]
    assert [(x['line'], x['field']) for x in q] == [(2, 'steps.0.reward'), (3, 'steps.0.reward')]
    assert "trajectory 'tr-1'" in q[0]['reason']

"Records with an odd member (a number past the digit limit, an empty call id) keep what they can read, warned"
import json
from pathlib import Path

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

AGENTGYM = Path(__file__).parent / 'fixtures' / 'recorder' / 'agentgym-sharegpt' / 'webshop_fncall.jsonl'
BIG = '9' * 5000   # past Python's 4300-digit limit for int()


@pytest.mark.parametrize('as_string', [False, True])
def test_a_huge_integer_outside_the_arguments_keeps_them_read(tmp_path, as_string):
    "A 5000-digit `id` in a fncall turn stored good arguments as {'_raw': text} (double-encoded when a JSON string)"
    rec = json.loads(AGENTGYM.read_text().splitlines()[0])
    turn = json.loads(rec['conversations'][3]['value'])
    args = json.dumps(turn['arguments']) if as_string else turn['arguments']
    rec['conversations'][3]['value'] = json.dumps({**turn, 'arguments': args, 'id': 0}).replace('"id": 0', f'"id": {BIG}')
    p = tmp_path / 'run.jsonl'; p.write_text(json.dumps(rec) + '\n')
    rep = ConversionReport()
    s = list(convert(p, format='agentgym', report=rep))[0].steps[0]
    assert s.action.tool == turn['function_name'] and s.action.params == turn['arguments']
    assert 'bad_arguments' not in s.metadata
    assert len(rep.warning_lines()) == 1 and 'field id holds an integer of 5000 digits' in rep.warning_lines()[0]

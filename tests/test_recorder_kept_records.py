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


def test_an_exit_code_past_the_digit_limit_keeps_the_record_with_a_warning(tmp_path):
    "`exit code: <5000 digits>` in an Observation failed the whole react-text file (ValueError from int())"
    p = tmp_path / 'run.txt'
    p.write_text('Question: q\nThought: t\nAction: bash(cmd="x")\nObservation: exit code: ' + BIG +
                 '\nThought: u\nAction: search(q="y")\nObservation: exit code: 2\nFinal Answer: x\n')
    rep = ConversionReport()
    ts = list(convert(p, format='react-text', report=rep))
    assert not rep.errors and [len(t.steps) for t in ts] == [3]
    s0, s1 = ts[0].steps[:2]
    assert s0.observation.content.endswith(BIG) and s0.observation.exit_code is None and s1.observation.exit_code == 2
    w, = rep.warning_lines()
    assert w.startswith(f'{p}:4: Observation:') and 'exit code of 5000 digits' in w


@pytest.mark.parametrize('cid', ['', 'c1'])
def test_an_empty_call_id_pairs_the_result_by_order(tmp_path, cid):
    "Gemini's OpenAI-compatible endpoint and LM Studio write \"id\": \"\" and \"tool_call_id\": \"\": the result was lost"
    msgs = [{'role': 'user', 'content': 'list files'},
            {'role': 'assistant', 'content': None, 'tool_calls': [{'id': cid, 'type': 'function', 'function': {
                'name': 'shell', 'arguments': '{"command": "ls"}'}}]},
            {'role': 'tool', 'tool_call_id': cid, 'content': 'a.txt'},
            {'role': 'assistant', 'content': 'done'}]
    p = tmp_path / 'chat.jsonl'; p.write_text(json.dumps({'messages': msgs}) + '\n')
    rep = ConversionReport()
    t, = convert(p, format='openai-chat', report=rep)
    s = t.steps[0]
    assert s.action.call_id == (cid or None) and s.observation.content == 'a.txt'
    assert 'unmapped' not in t.metadata and rep.totals['unmapped'] == 0

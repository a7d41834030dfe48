"Tool calls paired with their results in the recorder: by id, by order for id-less calls, never across a turn"
import json

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport


def _call(name, cid):
    c = {'type': 'function', 'function': {'name': name, 'arguments': '{}'}}
    return c if cid is None else {'id': cid, **c}


@pytest.mark.parametrize('cid', [None, ''])
def test_an_unanswered_id_less_call_does_not_take_the_next_turns_result(tmp_path, cid):
    "Two id-less calls, one result, then a new turn: its call's result went to the old turn's open call"
    res = {'role': 'tool', 'content': None} if cid is None else {'role': 'tool', 'tool_call_id': cid}
    msgs = [{'role': 'user', 'content': 'look around'},
            {'role': 'assistant', 'content': None, 'tool_calls': [_call('ls', cid), _call('cat', cid)]},
            {**res, 'content': 'a.txt'},
            {'role': 'assistant', 'content': None, 'tool_calls': [_call('pwd', cid)]},
            {**res, 'content': '/home'},
            {'role': 'assistant', 'content': 'done'}]
    p = tmp_path / 'chat.jsonl'; p.write_text(json.dumps({'messages': msgs}) + '\n')
    rep = ConversionReport()
    t, = convert(p, format='openai-chat', report=rep)
    got = [(s.action.tool, s.observation and s.observation.content) for s in t.steps if s.action]
    assert got == [('ls', 'a.txt'), ('cat', None), ('pwd', '/home')]
    assert 'unmapped' not in t.metadata and rep.totals['unmapped'] == 0

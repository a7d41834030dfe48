"Tool calls paired with their results in the recorder: by id, by order for id-less calls, never across a turn"
import json

import pytest

from knowlyr_lab.recorder.agent_steps import StepLog
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


@pytest.mark.parametrize('cid', [5, 0])
def test_a_numeric_call_id_pairs_its_result(tmp_path, cid):
    "A log writing ids as numbers: the call kept '5' (new_step) but the result looked 5 up (ToolCallPairer), lost"
    msgs = [{'role': 'user', 'content': 'list files'},
            {'role': 'assistant', 'content': None, 'tool_calls': [{**_call('ls', cid)}, {**_call('pwd', cid + 1)}]},
            {'role': 'tool', 'tool_call_id': cid + 1, 'content': '/home'},
            {'role': 'tool', 'tool_call_id': cid, 'content': 'a.txt'}]
    p = tmp_path / 'chat.jsonl'; p.write_text(json.dumps({'messages': msgs}) + '\n')
    rep = ConversionReport()
    t, = convert(p, format='openai-chat', report=rep)
    got = [(s.action.call_id, s.observation and s.observation.content) for s in t.steps]
    assert got == [(str(cid), 'a.txt'), (str(cid + 1), '/home')]
    assert 'unmapped' not in t.metadata and rep.totals['unmapped'] == 0


def test_a_numeric_call_id_pairs_in_a_step_log():
    "The agents' event logs (StepLog) look a result's id up as the call's step keeps it"
    log = StepLog()
    s = log.call('bash', {'cmd': 'ls'}, 7)
    assert log.result(7, 'a.txt') is s and s.observation.content == 'a.txt' and not log.pairer.open_calls


def _convert(tmp_path, msgs):
    p = tmp_path / 'chat.jsonl'; p.write_text(json.dumps({'messages': msgs}) + '\n')
    rep = ConversionReport()
    t, = convert(p, format='openai-chat', report=rep)
    return [(s.action.tool, s.observation and s.observation.content) for s in t.steps if s.action], t, rep


@pytest.mark.parametrize('cid', [None, ''])
def test_id_less_calls_split_by_text_stay_open_until_the_next_message(tmp_path, cid):
    "One message [call, text, call] is read in two parts; the second part closed the first part's call mid-message"
    use = lambda n: {'type': 'tool_use', 'name': n, 'input': {}, **({} if cid is None else {'id': cid})}
    res = lambda c: {'type': 'tool_result', 'content': c, **({} if cid is None else {'tool_use_id': cid})}
    ask = {'role': 'user', 'content': 'look around'}
    split = {'role': 'assistant', 'content': [use('ls'), {'type': 'text', 'text': 'and where am I?'}, use('pwd')]}
    got, t, rep = _convert(tmp_path, [ask, split, {'role': 'user', 'content': [res('a.txt'), res('/home')]},
                                      {'role': 'assistant', 'content': 'done'}])
    assert got == [('ls', 'a.txt'), ('pwd', '/home')]
    assert 'unmapped' not in t.metadata and rep.totals['unmapped'] == 0
    # a new message still closes them: pwd (unanswered) does not take the next message's result
    got, t, rep = _convert(tmp_path, [ask, split, {'role': 'user', 'content': [res('a.txt')]},
                                      {'role': 'assistant', 'content': [use('cat')]},
                                      {'role': 'user', 'content': [res('x = 1')]}, {'role': 'assistant', 'content': 'done'}])
    assert got == [('ls', 'a.txt'), ('pwd', None), ('cat', 'x = 1')]
    assert 'unmapped' not in t.metadata

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


# ------------------------------------------------ a result whose call is not in the log: counted in the totals, once
FX = __import__('pathlib').Path(__file__).parent / 'fixtures'


def _stored(ts, rep): return rep.orphans + [e for t in ts for e in t.metadata.get('unmapped', [])]


def _chat_block(tmp_path):
    "An OpenAI/Anthropic chat user message: the user's text beside a tool_result block whose call is missing"
    msgs = [{'role': 'user', 'content': 'look around'}, {'role': 'assistant', 'content': 'ok'},
            {'role': 'user', 'content': [{'type': 'text', 'text': 'and this?'},
                                         {'type': 'tool_result', 'tool_use_id': 'toolu_9', 'content': 'late'}]}]
    p = tmp_path / 'chat.jsonl'; p.write_text(json.dumps({'messages': msgs}) + '\n')
    return p, 'openai-chat', 'tool result whose call is not in the log'


def _claude_code(tmp_path):
    "A Claude Code user record whose tool_result names a tool_use the session never made"
    src = FX / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
    p = tmp_path / src.name; p.write_text(src.read_text().replace('"tool_use_id": "toolu_2"', '"tool_use_id": "toolu_9"', 1))
    return p, 'claude-code', 'tool_result for a tool_use not in this conversation'


def _ng_trajectory(tmp_path):
    "A NeMo Gym rollout whose conversation holds a function_call_output for a call it never made"
    row = json.loads((FX / 'atif' / 'ng_trajectory_rollouts.jsonl').read_text().splitlines()[0])
    row['ng_trajectory']['invocations'][0]['conversation'].insert(
        -1, {'type': 'function_call_output', 'call_id': 'call-west', 'output': '12', 'status': 'completed'})
    p = tmp_path / 'rollouts.jsonl'; p.write_text(json.dumps(row) + '\n')
    return p, 'ng-trajectory', "call_id 'call-west' names no open call"


def _atif(tmp_path):
    "An ATIF step whose observation holds a result naming no call of the step"
    doc = {'schema_version': 'ATIF-v1.6', 'session_id': 's-1', 'agent': {'name': 'a', 'version': '1'},
           'steps': [{'step_id': 1, 'source': 'user', 'message': 'count'},
                     {'step_id': 2, 'source': 'agent', 'message': 'wc',
                      'tool_calls': [{'tool_call_id': 'c1', 'function_name': 'bash', 'arguments': {'cmd': 'wc'}}],
                      'observation': {'results': [{'source_call_id': 'c1', 'content': '3'},
                                                  {'source_call_id': 'c9', 'content': 'late'}]}}]}
    p = tmp_path / 'run.json'; p.write_text(json.dumps(doc))
    return p, 'atif', "source_call_id 'c9' names no open tool call"


@pytest.mark.parametrize('make', [_chat_block, _claude_code, _ng_trajectory, _atif])
def test_a_result_whose_call_is_missing_counts_in_the_unmapped_totals(tmp_path, make):
    """A result kept as a piece of a counted record went to report.parts only: totals['unmapped'] said 0 (or less)
    while the trajectory's metadata held it"""
    p, fmt, why = make(tmp_path)
    rep = ConversionReport()
    ts = list(convert(p, format=fmt, report=rep))
    stored = _stored(ts, rep)
    lost = [e for e in stored if why in e['why']]
    assert len(lost) == 1, stored                                       # the result, kept once
    assert rep.totals['unmapped'] == len(stored) and rep.parts == {}, (rep.totals, rep.parts, stored)
    assert rep.counts[lost[0]['record_type']]['unmapped'] == 1           # its row in the summary says it
    if fmt in ('openai-chat', 'atif'):   # a piece of a record: the record kept whole, only partly mapped, warned
        assert lost[0]['why'].startswith('partly mapped: ') and any(w.startswith(str(p)) and why in w
                                                                  for w in rep.warning_lines()), rep.warning_lines()
    else:   # an item of its own (NeMo Gym), a Claude Code record holding nothing else: nothing of it mapped
        assert not lost[0]['why'].startswith('partly mapped') and not any(why in w for w in rep.warning_lines())


def test_a_record_holding_a_result_whose_call_is_missing_is_counted_once(tmp_path):
    "The Claude Code record holding the result counts once (unmapped, not mapped as well): every line is counted once"
    p, fmt, _ = _claude_code(tmp_path)
    whole, rep = ConversionReport(), ConversionReport()
    list(convert(FX / 'recorder' / 'claude-code' / p.name, format=fmt, report=whole)); list(convert(p, format=fmt, report=rep))
    assert sum(rep.totals.values()) == sum(whole.totals.values()) == len(p.read_text().splitlines())
    assert (rep.totals['mapped'], rep.totals['unmapped']) == (whole.totals['mapped'] - 1, whole.totals['unmapped'] + 1)

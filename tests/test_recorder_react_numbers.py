"A NaN or infinity in a ReAct action: null with one located warning per number, never a real number nulled instead"
from pathlib import Path

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

MARK = 7340277598046612000   # the integer page 22b put in place of the first NaN or infinity (it puts none now)


def _react(tmp_path, action:str):
    p = tmp_path / 'run.txt'
    p.write_text(f'Question: q\nThought: t\nAction: {action}\nObservation: ok\nFinal Answer: x\n')
    rep = ConversionReport()
    ts = list(convert(p, format='react-text', report=rep))
    return ts[0].steps[0], rep


@pytest.mark.parametrize('q', [hex(MARK), oct(MARK), '7_340_277_598_046_612_000', hex(MARK + 1), f'"{MARK}"'])
def test_a_value_equal_to_a_former_marker_is_read_as_written(tmp_path, q):
    "Page 22b put marker integers in place of each NaN and kept the action raw when a real value could be one; no markers now"
    s, rep = _react(tmp_path, f'search(a=1e400, b=-1e400, q={q})')
    assert s.action.params == {'a': None, 'b': None, 'q': eval(q)} and not s.metadata.get('bad_arguments')
    assert [w.split('field ')[1].split(',')[0] for w in rep.warning_lines()] == ['a holds 1e400', 'b holds -1e400']


def test_a_nan_in_a_json_call_of_a_react_action_is_null_with_its_warning(tmp_path):
    "A call in JSON (read by the tool-call formats' own decoder) takes the same seam as one in a Python call"
    s, rep = _react(tmp_path, '{"name": "search", "arguments": {"q": "NaN", "n": NaN}}')
    assert s.action.tool == 'search' and s.action.params == {'q': 'NaN', 'n': None}
    assert [w.split('field ')[1] for w in rep.warning_lines()] == ['n holds NaN, a number JSON cannot write (written as null)']


def test_the_refusal_phrase_quoted_in_the_action_does_not_read_a_name_as_nan(tmp_path):
    "`NaN` is a name in a Python call (raw, as `search(n=NaN)`); a quoted 'no NaN, no infinity' made it null"
    action = 'search(n=NaN, note="no NaN, no infinity")'
    s, rep = _react(tmp_path, action)
    assert s.action.params == {'_raw': action} and s.metadata.get('bad_arguments')
    assert rep.warning_lines() == []


def test_a_nan_in_a_react_call_is_still_null_with_its_warning(tmp_path):
    s, rep = _react(tmp_path, 'search(q=1, n=1e400)')
    assert s.action.params == {'q': 1, 'n': None}
    assert [w.split(': ', 1)[0] for w in rep.warning_lines()] == [f'{tmp_path / "run.txt"}:3']
    assert 'field n holds 1e400' in rep.warning_lines()[0]   # (as the action writes it)


def test_each_nan_of_one_react_action_gets_its_own_warning(tmp_path):
    "warn_coerced skipped a second note on the same text (by id), so `b` became null with no warning"
    s, rep = _react(tmp_path, 'search({"a": NaN, "b": Infinity})')
    assert s.action.params == {'a': None, 'b': None}
    assert [w.split('field ')[1][:1] for w in rep.warning_lines()] == ['a', 'b']


def test_each_nan_of_openai_tool_call_arguments_gets_its_own_warning(tmp_path):
    import json
    msgs = [{'role': 'user', 'content': 'go'},
            {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {
                'name': 'shell', 'arguments': '{"cmd": "ls", "a": NaN, "b": -Infinity}'}}]},
            {'role': 'tool', 'tool_call_id': 'c1', 'content': 'ok'}]
    p = tmp_path / 'chat.jsonl'; p.write_text(json.dumps({'messages': msgs}) + '\n')
    rep = ConversionReport()
    ts = list(convert(p, format='openai-chat', report=rep))
    assert ts[0].steps[0].action.params == {'cmd': 'ls', 'a': None, 'b': None}
    ws = rep.warning_lines()
    assert len(ws) == 2 and 'field a holds NaN' in ws[0] and 'field b holds -Infinity' in ws[1]
    assert all('messages[1].tool_calls[0].function.arguments' in w for w in ws)


@pytest.mark.parametrize('action', ['search(q={1: 1e400})', 'search({1: 1e400})', 'search(q={(1, 2): 1e400})'])
def test_a_key_that_is_no_string_is_refused_whatever_its_value(tmp_path, action):
    "json_call wrote a NaN's value before checking its key: {1: 1e400} kept the int key, a tuple key failed the whole file"
    s, rep = _react(tmp_path, action)
    assert not rep.errors and not rep.failed, (rep.errors, rep.failed)
    assert s.action.params == {'_raw': action} and s.metadata.get('bad_arguments')    # as with {1: 5}: raw
    assert rep.warning_lines() == []
    same, _ = _react(tmp_path, action.replace('1e400', '5'))
    assert same.action.params == {'_raw': action.replace('1e400', '5')}


@pytest.mark.parametrize('number', ['1e400', '-1E+400', '1.5e999'])
def test_a_react_action_and_a_smolagents_call_say_an_overflowing_number_the_same_way(tmp_path, number):
    "ReAct notes spelled the number as JSON would (`Infinity`), smolagents' as the log wrote it (`1e400`): one wording"
    s, rep = _react(tmp_path, f'search(q="x", n={number})')
    src = Path(__file__).parent / 'fixtures' / 'recorder' / 'smolagents' / 'parallel-calls.jsonl'
    p = tmp_path / src.name
    p.write_text(src.read_text().replace("{'query': 'Paris population'}}}", "{'query': 'Paris population', 'n': %s}}}" % number, 1))
    smol = ConversionReport()
    list(convert(p, format='smolagents', report=smol))
    held = lambda r: [(f.split('.')[-1], n) for w in r.warning_lines() for f, n in [w.split('field ')[1].split(',')[0].split(' holds ')]]
    assert s.action.params == {'q': 'x', 'n': None}
    assert held(rep) == held(smol) == [('n', number)], (rep.warning_lines(), smol.warning_lines())


@pytest.mark.parametrize('body, said', [
    ('{"a": NaN,\n "a": 1,\n "b": 1e400}', ['field b holds 1e400']),                         # an overwritten NaN
    ('{"a": -1e400,\n "a": 1e400,\n "b": -1e400}', ['field a holds 1e400', 'field b holds -1e400']),   # a repeated key
    ('{"a": NaN,\n "q": "x",\n "a": -1e400,\n "z": [1e400]}', ['field a holds -1e400', 'field z[0] holds 1e400'])])
def test_a_nonfinite_number_is_named_as_written_when_a_value_before_it_is_not_handed_over(tmp_path, body, said):
    "_as_written paired written numbers with values by order: a NaN overwritten or a repeated key gave JSON's spelling"
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.report import ConversionReport
    p = tmp_path / 'run.txt'
    p.write_text(f'Question: q\nThought: t\nAction: search\nAction Input: {body}\nObservation: ok\nFinal Answer: x\n')
    rep = ConversionReport(); list(convert(p, format='react-text', report=rep))
    dup = [w for w in rep.warnings if w['record_type'] == '(duplicate key)']   # key 'a' twice: its last value kept
    assert [(w['line'], w['reason']) for w in dup] == [(4, "duplicate key 'a' in one object (the last value is kept)")]
    got = [w['reason'].split('as a ReAct action: ', 1)[1].split(',')[0] for w in rep.warnings if w not in dup]
    assert got == said, rep.warning_lines()


def test_a_nonfinite_number_after_a_multiline_secret_is_warned_at_its_own_file_line(tmp_path):
    "A private key redacted to one line moved the line of every number after it: warned at line 4, written on line 7"
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.report import ConversionReport
    key = ('-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAMwAAAAtzc2gtZWQyNTUxOQ\n'
           '-----END OPENSSH PRIVATE KEY-----')
    p = tmp_path / 'run.txt'
    p.write_text(f'Question: q\nThought: t\nAction: search(k="""{key}""",\n n=1e400)\nObservation: ok\nFinal Answer: x\n')
    rep = ConversionReport(); t, = convert(p, format='react-text', report=rep)
    assert rep.redactions.get('private_key') == 1 and t.steps[0].action.params['n'] is None
    at = next(i for i, x in enumerate(p.read_text().splitlines(), 1) if '1e400' in x)
    assert at == 7 and [w.split(': ', 1)[0] for w in rep.warning_lines()] == [f'{p}:{at}'], rep.warning_lines()


@pytest.mark.parametrize('body, said', [
    ('{"x": 1e400,\n "x": 2e400}', [('x holds 2e400', 2)]),                          # a repeated key: its last value
    ('{"x": 1e400,\n "x": 1,\n "y": 2e400}', [('y holds 2e400', 3)]),                # not the value overwritten
    ('{"x": 1e400,\n "x": 2e400,\n "y": 3e400}', [('x holds 2e400', 2), ('y holds 3e400', 3)]),
    ('{"x": 1,\n "y": NaN,\n "x": 1e400}', [('x holds 1e400', 3), ('y holds NaN', 2)]),   # x keeps its first place
    ('{"x": 1e400,\n "y": 2e400,\n "x": 3e400}', [('x holds 3e400', 3), ('y holds 2e400', 2)]),
    ('{"a": {"x": [1e400],\n "x": -1e400},\n "b": Infinity}', [('a.x holds -1e400', 2), ('b holds Infinity', 3)])])
def test_a_repeated_keys_nonfinite_number_is_named_from_the_value_kept(tmp_path, body, said):
    "written_nonfinite listed every number written, an overwritten one too: the kept value got the first one's spelling"
    p = tmp_path / 'run.txt'
    p.write_text(f'Question: q\nThought: t\nAction: search\nAction Input: {body}\nObservation: ok\nFinal Answer: x\n')
    rep = ConversionReport(); list(convert(p, format='react-text', report=rep))
    dup = [w for w in rep.warnings if w['record_type'] == '(duplicate key)']   # key 'x' twice: its last value kept
    assert [(w['line'], w['reason']) for w in dup] == [(4, "duplicate key 'x' in one object (the last value is kept)")]
    got = [(w['reason'].split('field ', 1)[1].split(',')[0], w['line'] - 3) for w in rep.warnings if w not in dup]
    assert got == said, rep.warning_lines()


def test_a_double_star_dicts_nonfinite_number_is_named_as_written_and_a_keyword_given_twice_is_kept_raw(tmp_path):
    "`**{...}` numbers are named as written; `search(x=1e400, **{\"x\": 2e400})` gives x twice: kept raw (page 00aa)"
    s, rep = _react(tmp_path, 'search(x=1e400, y=2, **{"z": 3e400})')
    assert s.action.params == {'x': None, 'y': 2, 'z': None}
    assert [w.split('field ')[1].split(',')[0] for w in rep.warning_lines()] == ['x holds 1e400', 'z holds 3e400']
    s, rep = _react(tmp_path, call := 'search(x=1e400, y=2, **{"x": 2e400, "z": 3e400})')   # no value lost unsaid
    assert s.action.params == {'_raw': call} and s.metadata['bad_arguments'] is True and rep.warning_lines() == []

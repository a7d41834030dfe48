"An `Action:` whose call spans several lines (a Python call, `tool({json})`, LangChain's fenced JSON blob) is read as a call"
import json

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

F = '`' * 3


def _react(tmp_path, action:str):
    p = tmp_path / 'run.txt'
    p.write_text(f'Question: q\nThought: t\nAction: {action}\nObservation: ok\nFinal Answer: x\n')
    rep = ConversionReport()
    (t,) = convert(p, format='react-text', report=rep)
    return t.steps[0], rep, p


@pytest.mark.parametrize('action, params', [
    ('search(query="SF (CA)",\n       limit=2)', {'query': 'SF (CA)', 'limit': 2}),                # a Python call
    ('search({\n  "query": "SF",\n  "limit": 2\n})', {'query': 'SF', 'limit': 2}),               # tool({json})
    (f'\n{F}json\n{{\n  "action": "search",\n  "action_input": {{"query": "SF"}}\n}}\n{F}', {'query': 'SF'}),
    (f'\n{F}\n{{\n  "action": "search",\n  "action_input": "SF weather"\n}}\n{F}', {'input': 'SF weather'})])   # LangChain
def test_a_multi_line_react_action_is_read_as_a_call(tmp_path, action, params):
    "Only the `Action:` line was read: the call was kept raw ({'_raw': ...}, bad_arguments) and its arguments lost"
    s, rep, _ = _react(tmp_path, action)
    assert (s.action.tool, s.action.params, s.observation.content) == ('search', params, 'ok')
    assert 'bad_arguments' not in s.metadata and not rep.errors and rep.warning_lines() == []


def test_a_nan_in_a_multi_line_action_is_null_warned_at_its_own_line(tmp_path):
    "It was warned at the Action line (3), where the NaN is on line 7"
    s, rep, p = _react(tmp_path, f'\n{F}json\n{{\n  "action": "search",\n  "action_input": {{"n": NaN}}\n}}\n{F}')
    assert s.action.params == {'n': None}
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}:7: Action: ') and w.endswith(
        'as a ReAct action: field action_input.n holds NaN, a number JSON cannot write (written as null)'), w


@pytest.mark.parametrize('action', [f'\n{F}json\n{{"action": "search", "action_input": "x",}}\n{F}',   # not JSON
                                    'search(q="x"\nObservation: (none)'])           # a bracket never closed on its lines
def test_a_multi_line_action_that_does_not_read_stays_raw(tmp_path, action):
    p = tmp_path / 'run.txt'
    p.write_text(f'Question: q\nThought: t\nAction: {action}\nObservation: ok\n')
    (t,) = convert(p, format="react-text", report=ConversionReport())
    assert list(t.steps[0].action.params) == ['_raw'] and t.steps[0].metadata['bad_arguments'] is True


def test_an_agentgym_turn_with_a_multi_line_action_is_read_as_a_call(tmp_path):
    turns = [{'from': 'human', 'value': 'Buy a swimsuit.'},
             {'from': 'gpt', 'value': 'Thought: search it\nAction: search(keywords="swimsuit",\n        max_price=30)'},
             {'from': 'human', 'value': 'Observation: 3 results'}]
    p = tmp_path / 'rows.jsonl'
    p.write_text(json.dumps({'item_id': 'webshop_1', 'conversations': turns}) + '\n')
    (t,) = convert(p, format='agentgym', report=ConversionReport())
    (s,) = [s for s in t.steps if s.action]
    assert (s.action.tool, s.action.params) == ('search', {'keywords': 'swimsuit', 'max_price': 30})


def _run(tmp_path, name:str, text:str):
    p = tmp_path / name
    p.write_text(text)
    rep = ConversionReport()
    (t,) = convert(p, format='react-text', report=rep)
    return t, rep, p


@pytest.mark.parametrize('answer', ['"It is sunny"', '{"city": "SF", "sky": "sunny"}'])
def test_langchain_final_answer_blob_ends_the_run_as_a_final_answer_line(tmp_path, answer):
    "The blob's 'Final Answer' was an Action with no Observation: the run read as cut off and lost final_answer"
    head = 'Question: q\nThought: t\nAction: search(q="SF")\nObservation: sunny\nThought: done\n'
    blob, _, _ = _run(tmp_path, 'blob.txt', head + f'Action:\n{F}json\n{{"action": "Final Answer", "action_input": {answer}}}\n{F}\n')
    line, rep, _ = _run(tmp_path, 'line.txt', head + 'Final Answer: It is sunny\n')
    value = json.loads(answer)
    assert not blob.outcome.truncated and blob.metadata.get('final_answer') == value, (blob.outcome, blob.metadata)
    assert [(s.action.tool, s.action.params) for s in blob.steps][-1] == ('final_answer', {'answer': value})
    assert [s.thought for s in blob.steps] == [s.thought for s in line.steps]
    if isinstance(value, str): assert (blob.outcome, blob.metadata['final_answer']) == (line.outcome, 'It is sunny')
    assert [s.model_dump(exclude={'metadata'}) for s in blob.steps][:-1] == [s.model_dump(exclude={'metadata'})
                                                                            for s in line.steps][:-1]


def test_a_nan_in_langchain_blobs_is_warned_once_at_its_line(tmp_path):
    "A final blob's NaN is null, warned at its line; a call blob that merely quotes 'Final Answer' is read once"
    t, rep, p = _run(tmp_path, 'run.txt', f'Question: q\nThought: t\nAction:\n{F}json\n{{"action": "search", "action_input": '
                     f'{{"q": "Final Answer", "n": NaN}}}}\n{F}\nObservation: ok\nThought: done\nAction: {{"action": '
                     '"Final Answer", "action_input": {"n": -Infinity}}\n')
    assert [(s.action.tool, s.action.params) for s in t.steps] == [('search', {'q': 'Final Answer', 'n': None}),
                                                                  ('final_answer', {'answer': {'n': None}})]
    assert not t.outcome.truncated and t.metadata['final_answer'] == {'n': None}
    assert [(w.split(': ')[0], w.split('field ')[1].split(',')[0]) for w in rep.warning_lines()] == [
        (f'{p}:5', 'action_input.n holds NaN'), (f'{p}:9', 'action_input.n holds -Infinity')], rep.warning_lines()


@pytest.mark.parametrize('blob', ['{"action": "Final Answer"}', '{"action": "Final Answer", "action_input": null}'])
def test_langchain_final_answer_without_input_has_no_answer_text(tmp_path, blob):
    "A final blob with no action_input (or null) gave the final answer {}, a tool call's empty arguments"
    t, rep, _ = _run(tmp_path, 'run.txt', f'Question: what?\nThought: I know.\nAction: {blob}\n')
    assert [(s.action.tool, s.action.params) for s in t.steps] == [('final_answer', {'answer': None})]
    assert 'final_answer' not in t.metadata and not t.outcome.truncated and not rep.errors


@pytest.mark.parametrize('block, text, lines', [
    ('Action', 'search(q="SF",\n       n=[1,\n          1e400],\n       m=-1e400)', [3, 5, 6]),    # a Python call
    ('Action', '\nsearch({\n  "q": "SF",\n  "n": NaN\n})', [3, 6]),     # `Action:` alone on its line: the call after
    ('Action Input', '{\n  "q": "SF",\n  "n": -Infinity\n}', [4, 6])])   # (after `Action: search`, on line 3)
def test_each_nan_of_a_multi_line_react_block_is_warned_at_the_line_that_holds_it(tmp_path, block, text, lines):
    "Every note of a block was warned at the block's first line (its keyword's), wherever its number was"
    p = tmp_path / 'run.txt'
    head = 'Action: search\n' if block == 'Action Input' else ''
    p.write_text(f'Question: q\nThought: t\n{head}{block}: {text}\nObservation: ok\nFinal Answer: x\n')
    rep = ConversionReport()
    (t,) = convert(p, format='react-text', report=rep)
    assert t.steps[0].action.tool == 'search' and None in t.steps[0].action.params.values(), t.steps[0].action
    got = [int(w.split(': ')[0].rsplit(':', 1)[1]) for w in rep.warning_lines()]
    assert [lines[0]] + got == lines and all(f': {block}: ' in w for w in rep.warning_lines()), rep.warning_lines()

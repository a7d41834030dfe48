"""JSON held in a string field (a message, a tool result, a function call, a state, a final answer) is read by the
recorder's one number rule (page 20c `json_text`): a NaN or an infinity is written as null with a warning naming file,
line and field, an integer past 64 bits stays exact; plain `json.loads` let Python's nan into the trajectory silently"""
import json
import math
from pathlib import Path

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

FX = Path(__file__).parent / 'fixtures' / 'recorder'
NAN = float('nan')
BIG = 123456789012345678901234567890


def _nonfinite(o, at=''):
    "Where `o` holds a float that JSON cannot write"
    if isinstance(o, float): return [at] if not math.isfinite(o) else []
    if isinstance(o, dict): return [p for k, v in o.items() for p in _nonfinite(v, f'{at}.{k}')]
    if isinstance(o, (list, tuple)): return [p for i, v in enumerate(o) for p in _nonfinite(v, f'{at}[{i}]')]
    return []


def _lines(src:Path, tmp_path, k:int, change)->Path:
    "`src` copied to tmp_path with its JSON line `k` (1-based) changed by `change(record)`"
    lines = src.read_text().splitlines(keepends=True)
    rec = json.loads(lines[k - 1])
    change(rec)
    lines[k - 1] = json.dumps(rec) + '\n'
    (p := tmp_path / src.name).write_text(''.join(lines))
    return p


def _doc(src:Path, tmp_path, change)->Path:
    "`src` (one JSON document) copied to tmp_path, changed by `change(doc)`"
    doc = json.loads(src.read_text())
    change(doc)
    (p := tmp_path / src.name).write_text(json.dumps(doc, indent=1))
    return p


def _claude(rec):                 # the message written as a JSON string, as some Claude Code versions do
    rec['message']['content'][0]['input']['timeout'] = NAN
    rec['message'] = json.dumps(rec['message'])


def _codex(rec):
    rec['payload']['output'] = json.dumps({'output': 'go 1.22\n', 'metadata': {'exit_code': 0, 'duration_seconds': NAN}})


def _agentgym(rec):
    t = rec['conversations'][3]
    d = json.loads(t['value']); d['arguments']['n'] = NAN; t['value'] = json.dumps(d, indent=2)


def _toolbench_answer(doc):
    doc['answer_generation']['final_answer'] = json.dumps({'return_type': 'give_answer', 'final_answer': NAN})


def _toolbench_result(doc):     # the first result, in every chain that holds it (the chains stay prefixes)
    chains = doc['answer_generation']['train_messages']
    old = chains[-1][3]['content']
    for m in (c[3] for c in chains if len(c) > 3 and c[3]['content'] == old):
        m['content'] = json.dumps({'error': '', 'response': {'t': NAN, 'rows': 3}})


def _swe_state(doc):
    doc['trajectory'][0]['state'] = json.dumps({'open_file': 'n/a', 'working_dir': '/repo', 't': NAN})


def _swe_replay(doc):
    doc['replay_config'] = json.dumps({**doc['replay_config'], 'cost': NAN})


CLAUDE = FX / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
CODEX = FX / 'codex-cli' / 'rollout-2025-09-19T09-02-12-01996135-afde-7911-97f0-d863511eca56.jsonl'
AGENTGYM = FX / 'agentgym-sharegpt' / 'webshop_fncall.jsonl'
TB1, TB2 = FX / 'toolbench' / 'G1_answer__10_ChatGPT_DFS_woFilter_w2.json', FX / 'toolbench' / 'G2_answer__127_ChatGPT_DFS_woFilter_w2.json'
SWE1, SWE2 = FX / 'swe-agent' / 'acme__pointer-2.traj', FX / 'swe-agent' / 'acme__widgets-1.traj'

CASES = [  # (source, format, line to change or None for a whole document, change, warning after the path, kept)
    (CLAUDE, 'claude-code', 6, _claude, ":6: message: ", "as a message: field content[0].input.timeout holds NaN"),
    (CODEX, 'codex-cli', 10, _codex, ":10: payload.output: ", "as a tool result: field metadata.duration_seconds holds NaN"),
    (AGENTGYM, 'agentgym', 1, _agentgym, ":1: conversations[3].value: ", "as a function call: field arguments.n holds NaN"),
    (TB2, 'toolbench', None, _toolbench_answer, ": answer_generation.final_answer: ",
     "as the final answer: field final_answer holds NaN"),
    (TB1, 'toolbench', None, _toolbench_result, ": train_messages[0][3]: ", "as a function result: field response.t holds NaN"),
    (SWE1, 'swe-agent', None, _swe_state, ": trajectory[0].state: ", "as a state: field t holds NaN"),
    (SWE2, 'swe-agent', None, _swe_replay, ": replay_config: ", "as the replay config: field cost holds NaN"),
]


@pytest.mark.parametrize('src, fmt, line, change, where, what', CASES, ids=[c[3].__name__ for c in CASES])
def test_a_nan_in_a_nested_json_string_is_null_and_warned(tmp_path, src, fmt, line, change, where, what):
    "The adapter read the string with json.loads: nan in the trajectory (or NaN in its text), no warning"
    p = _lines(src, tmp_path, line, change) if line else _doc(src, tmp_path, change)
    whole = list(convert(src, format=fmt, report=ConversionReport()))
    rep = ConversionReport()
    ts = list(convert(p, format=fmt, report=rep))
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    assert len(ts) == len(whole) and sum(len(t.steps) for t in ts) == sum(len(t.steps) for t in whole)
    assert [w for t in ts for w in _nonfinite(t.model_dump())] == []
    assert 'NaN' not in ''.join(t.model_dump_json() for t in ts)          # nor as text rewritten from it
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}{where}') and w.endswith(f'{what}, a number JSON cannot write (written as null)'), w


def test_a_wide_integer_in_a_nested_json_string_stays_exact(tmp_path):
    "The same reader keeps an integer past 64 bits exact (here in a Claude Code message written as a string)"
    def change(rec):
        rec['message']['content'][0]['input']['timeout'] = BIG
        rec['message'] = json.dumps(rec['message'])
    rep = ConversionReport()
    ts = list(convert(_lines(CLAUDE, tmp_path, 6, change), format='claude-code', report=rep))
    got = [s.action.params['timeout'] for t in ts for s in t.steps if s.action and 'timeout' in s.action.params]
    assert got == [BIG] and type(got[0]) is int and not rep.errors and not rep.warning_lines(), (got, rep.errors)


def test_an_integer_past_the_digit_limit_in_a_replay_config_string_costs_only_the_config(tmp_path):
    "The string was read with json.loads and its ValueError swallowed: the replay config was dropped without a word"
    def change(doc): doc['replay_config'] = json.dumps(doc['replay_config'])[:-1] + ', "n": ' + '9' * 5000 + '}'
    p = _doc(SWE2, tmp_path, change)
    rep = ConversionReport()
    ts = list(convert(p, format='swe-agent', report=rep))
    assert len(ts) == 1 and len(ts[0].steps) == len(list(convert(SWE2, format='swe-agent', report=ConversionReport()))[0].steps)
    assert [str(e) for e in rep.errors] == [f"{p}: the replay config: field n holds an integer of 5000 digits, past "
                                            "Python's limit of 4300"] and not rep.failed, (rep.errors, rep.failed)


def test_an_integer_past_the_digit_limit_in_a_final_answer_string_keeps_the_file(tmp_path):
    "json.loads's ValueError for the digit limit escaped the adapter: the whole ToolBench file failed"
    p = _doc(TB2, tmp_path, lambda doc: doc['answer_generation'].update(final_answer='{"final_answer": %s}' % ('9' * 5000)))
    rep = ConversionReport()
    ts = list(convert(p, format='toolbench', report=rep))
    assert len(ts) == 1 and not rep.errors and not rep.failed, (rep.errors, rep.failed)
    assert ts[0].metadata['final_answer'].startswith('{"final_answer": 999')           # kept, as text
    (w,) = rep.warning_lines()                                                          # (json_text's note, located)
    assert w.startswith(f"{p}: answer_generation.final_answer: '{{\"final_answer\": 999") and w.endswith(
        "as the final answer: field final_answer holds an integer of 5000 digits, past Python's limit of 4300 (kept as text)"), w


_DIGITS = '9' * 5000
_KEPT_AS_TEXT = "field {} holds an integer of 5000 digits, past Python's limit of 4300 (kept as text)"


def _codex_digits(rec): rec['payload']['output'] = _DIGITS                      # `python -c "print(9**...)"`'s output


def _claude_digits(rec): rec['message'] = '{"role": "user", "n": %s}' % _DIGITS  # not a message: its text


def _swe_state_digits(doc): doc['trajectory'][0]['state'] = '{"open_file": "n/a", "pid": %s}' % _DIGITS


DIGIT_CASES = [  # (source, format, line or None, change, warning after the path, what the string was read as, field in it)
    (CODEX, 'codex-cli', 10, _codex_digits, ':10: payload.output: ', 'as a tool result: ', '(the value)'),
    (CLAUDE, 'claude-code', 6, _claude_digits, ':6: message: ', 'as a message: ', 'n'),
    (SWE1, 'swe-agent', None, _swe_state_digits, ': trajectory[0].state: ', 'as a state: ', 'pid'),
    (TB1, 'toolbench', None, lambda doc: _toolbench_text('{"error": "", "response": %s}' % _DIGITS)(doc),
     ': train_messages[0][3].content: ', 'as a function result: ', 'response'),
    (AGENTGYM, 'agentgym', 1, lambda rec: rec['conversations'][3].update(value='{"function_name": "search", "arguments": '
     '{"n": %s}}' % _DIGITS), ':1: conversations[3].value: ', 'as a function call: ', 'arguments.n'),
]


@pytest.mark.parametrize('src, fmt, line, change, where, what, field', DIGIT_CASES,
                         ids=['codex_output', 'claude_message', 'swe_state', 'toolbench_result', 'agentgym_call'])
def test_an_integer_past_the_digit_limit_in_a_string_kept_as_text_costs_the_value_not_the_record(
        tmp_path, src, fmt, line, change, where, what, field):
    "UnheldNumber escaped these readers (their ValueError catch became a narrower one): the record or step was quarantined"
    p = _lines(src, tmp_path, line, change) if line else _doc(src, tmp_path, change)
    whole = list(convert(src, format=fmt, report=ConversionReport()))
    rep = ConversionReport()
    ts = list(convert(p, format=fmt, report=rep))
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    assert [len(t.steps) for t in ts] == [len(t.steps) for t in whole]
    assert _DIGITS in ''.join(t.model_dump_json() for t in ts)                              # the string, kept as text
    w, *rest = rep.warning_lines()
    assert w.startswith(f'{p}{where}') and w.endswith(what + _KEPT_AS_TEXT.format(field)), w
    assert rest == [], rest
    # Claude Code: the message kept as text lost its call, so the next record's result (all that record holds, nothing
    # of it mapped) is one whose call is missing
    lost = "content[0]: tool_result for a tool_use not in this conversation ('toolu_2')"
    if fmt == 'claude-code': assert lost in [e['why'] for t in ts for e in t.metadata.get('unmapped', [])]


def _codex_text(out):
    def change(rec): rec['payload']['output'] = out                  # a tool's plain output that parses as JSON
    return change


def _toolbench_text(out):
    def change(doc):
        chains = doc['answer_generation']['train_messages']
        old = chains[-1][3]['content']
        for m in (c[3] for c in chains if len(c) > 3 and c[3]['content'] == old): m['content'] = out
    return change


def _toolbench_answer_text(doc): doc['answer_generation']['final_answer'] = '[1, NaN]'


def _agentgym_text(rec): rec['conversations'][3]['value'] = '{"plan": NaN}'       # not a function call


VERBATIM = [  # (source, format, line or None, change, the string kept as it is)
    (CODEX, 'codex-cli', 10, _codex_text('NaN'), 'NaN'),
    (CODEX, 'codex-cli', 10, _codex_text('[1, NaN]'), '[1, NaN]'),
    (TB1, 'toolbench', None, _toolbench_text('[1, -Infinity]'), '[1, -Infinity]'),
    (TB2, 'toolbench', None, _toolbench_answer_text, '[1, NaN]'),
    (AGENTGYM, 'agentgym', 1, _agentgym_text, '{"plan": NaN}'),
]


@pytest.mark.parametrize('src, fmt, line, change, kept', VERBATIM,
                         ids=['codex_nan', 'codex_list', 'toolbench_result', 'toolbench_answer', 'agentgym_turn'])
def test_a_string_kept_verbatim_gets_no_written_as_null_warning(tmp_path, src, fmt, line, change, kept):
    "json_text noted the NaN of a parsed value the caller threw away: 'written as null' of a text kept as it was"
    p = _lines(src, tmp_path, line, change) if line else _doc(src, tmp_path, change)
    rep = ConversionReport()
    ts = list(convert(p, format=fmt, report=rep))
    assert not rep.errors and rep.totals['quarantined'] == 0, rep.errors
    assert json.dumps(kept)[1:-1] in ''.join(t.model_dump_json() for t in ts)          # the text, as it was
    assert rep.warning_lines() == [], rep.warning_lines()


def test_a_nan_in_a_string_whose_value_is_used_is_still_warned(tmp_path):
    "The other side: a Codex output object {output, metadata} is used, its NaN null and warned (as in CASES)"
    p = _lines(CODEX, tmp_path, 10, _codex)
    rep = ConversionReport()
    ts = list(convert(p, format='codex-cli', report=rep))
    assert 'go 1.22\n' in [s.observation.content for t in ts for s in t.steps if s.observation]
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}:10: payload.output: ') and w.endswith(
        'as a tool result: field metadata.duration_seconds holds NaN, a number JSON cannot write (written as null)'), w


def test_an_agentgym_call_holding_an_integer_past_the_digit_limit_stays_a_call_with_its_arguments_as_text(tmp_path):
    "json_text kept the turn as text for the number, so the call was read as ReAct text: a step with no action"
    def change(rec):
        t = rec['conversations'][3]
        d = json.loads(t['value'])
        t['value'] = json.dumps({**d, 'arguments': {**d['arguments'], 'n': 0}}, indent=2).replace(
            '"n": 0', '"n": ' + _DIGITS)
    p = _lines(AGENTGYM, tmp_path, 1, change)
    whole = list(convert(AGENTGYM, format='agentgym', report=ConversionReport()))
    rep = ConversionReport()
    ts = list(convert(p, format='agentgym', report=rep))
    assert not rep.errors and [len(t.steps) for t in ts] == [len(t.steps) for t in whole], rep.errors
    s, w0 = ts[0].steps[0], whole[0].steps[0]
    assert s.action is not None and s.action.tool == w0.action.tool == 'search' and s.thought == w0.thought
    raw = s.action.params['_raw']                                # the arguments, as the turn wrote them
    assert list(s.action.params) == ['_raw'] and raw.startswith('{\n    "keywords": ') and raw.endswith(_DIGITS + '\n  }')
    assert json.loads(raw.replace(_DIGITS, '0')) == {**w0.action.params, 'n': 0}
    assert s.metadata.get('bad_arguments') is True and 'no_action' not in s.metadata
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}:1: conversations[3].value: ') and w.endswith(
        'as a function call: ' + _KEPT_AS_TEXT.format('arguments.n')), w


def test_a_nan_in_an_agentgym_react_turn_is_null_and_warned_at_its_field(tmp_path):
    "The ReAct reader (parse_action) refused the call for its infinity: the step kept {'_raw': text}, no warning"
    p = _lines(AGENTGYM, tmp_path, 1, lambda rec: rec['conversations'][3].update(
        value='Thought: look\nAction: search(keywords="swimsuit", n=1e400)'))
    rep = ConversionReport()
    ts = list(convert(p, format='agentgym', report=rep))
    assert not rep.errors and ts[0].steps[0].action.params == {'keywords': 'swimsuit', 'n': None}, rep.errors
    (w,) = rep.warning_lines()
    assert w.startswith(f"{p}:1: conversations[3].value: 'Thought: look") and w.endswith(
        '(str) as a ReAct action: field n holds 1e400, a number JSON cannot write (written as null)'), w


def test_a_deep_json_object_turn_that_is_no_call_is_read_once_and_kept_as_text(tmp_path):
    "A non-call object turn was parsed twice; the second (stdlib) parse of 1010 nested arrays failed the whole file"
    rec = json.loads(AGENTGYM.read_text().splitlines()[0])
    deep = '{"plan": %s}' % ('[' * 1010 + ']' * 1010)       # orjson reads it; the standard library recurses out
    rec['conversations'][3]['value'] = deep
    p = tmp_path / 'rows.jsonl'; p.write_text(json.dumps(rec) + '\n')
    rep = ConversionReport()
    t, = convert(p, format='agentgym', report=rep)
    s = next(s for s in t.steps if s.thought == deep)
    assert s.action is None and s.metadata['no_action'] and rep.n_errors == 0

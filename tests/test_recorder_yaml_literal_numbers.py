"""YAML logs, Python-literal tool calls and ReAct text actions follow the recorder's one number rule (page 20a): a NaN
or an infinity is written as null with a warning naming file, line (where the reader has one) and field; an integer
past 64 bits stays exact; an integer past Python's 4,300 digits quarantines its record, named, instead of failing the file"""
import math
from pathlib import Path

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

FX = Path(__file__).parent / 'fixtures' / 'recorder'
ISWE = FX / 'iswe' / 'acme__csv-7.yaml'
CASSETTE = FX / 'openai-chat' / 'test_openai_tool_output.yaml'


def _nonfinite(o, at=''):
    "Where `o` holds a float (or a complex) that JSON cannot write"
    if isinstance(o, complex) or isinstance(o, float) and not math.isfinite(o): return [at]
    if isinstance(o, dict): return [p for k, v in o.items() for p in _nonfinite(v, f'{at}.{k}')]
    if isinstance(o, (list, tuple, set)): return [p for i, v in enumerate(o) for p in _nonfinite(v, f'{at}[{i}]')]
    return []


def _convert(path, fmt):
    rep = ConversionReport()
    return list(convert(path, format=fmt, report=rep)), rep


def _steps(ts): return sum(len(t.steps) for t in ts)


def _planted(tmp_path, src:Path, old:str, new:str)->Path:
    "`src` copied into tmp_path with its first `old` replaced by `new`"
    text = src.read_text()
    assert old in text, old
    (p := tmp_path / src.name).write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize('value', ['.nan', '.inf', '-.inf', '.NaN', '1.0e+400'])
def test_a_nan_in_an_iswe_yaml_log_is_null_and_warned_at_its_line(tmp_path, value):
    "read_yaml's safe loader made it Python's nan/inf: in the trajectory's metadata, no warning"
    p = _planted(tmp_path, ISWE, 'localization_time: 4.5', f'localization_time: {value}')
    whole, _ = _convert(ISWE, 'iswe')
    ts, rep = _convert(p, 'iswe')
    assert not rep.errors and len(ts) == 1 and _steps(ts) == _steps(whole), rep.errors
    assert [w for t in ts for w in _nonfinite(t.model_dump())] == []
    assert ts[0].metadata['localization']['localization_time'] is None
    assert rep.warning_lines() == [f'{p}:3: field localization.localization_time holds {value} at column 22, '
                                   'a number JSON cannot write (written as null)']


def test_a_nan_in_a_cassette_is_null_and_warned_at_its_line(tmp_path):
    "The cassette reader (page 22) reads YAML by the same read_yaml"
    p = _planted(tmp_path, CASSETTE, '      model: gpt-4o\n      n: 1\n', '      model: gpt-4o\n      n: .nan\n')
    whole, _ = _convert(CASSETTE, 'openai-chat')
    ts, rep = _convert(p, 'openai-chat')
    assert not rep.errors and len(ts) == len(whole) and _steps(ts) == _steps(whole), rep.errors
    assert [w for t in ts for w in _nonfinite(t.model_dump())] == []
    assert rep.warning_lines() == [f'{p}:22: field interactions[0].request.parsed_body.n holds .nan at column 10, '
                                   'a number JSON cannot write (written as null)']


def test_a_wide_integer_in_a_yaml_log_stays_exact(tmp_path):
    "YAML's integers were exact already; a test keeps them so"
    p = _planted(tmp_path, ISWE, 'localization_time: 4.5', f'localization_time: {2**70}')
    ts, rep = _convert(p, 'iswe')
    assert ts[0].metadata['localization']['localization_time'] == 2**70
    assert not rep.errors and not rep.warning_lines()
    assert f'"localization_time":{2**70}' in ts[0].model_dump_json()


def test_an_integer_past_the_digit_limit_in_a_yaml_log_is_refused_at_its_line(tmp_path):
    "The safe loader's ValueError failed the file: \"adapter 'iswe' failed: ValueError: Exceeds the limit\", no line"
    p = _planted(tmp_path, ISWE, 'localization_time: 4.5', 'localization_time: ' + '9' * 5000)
    ts, rep = _convert(p, 'iswe')
    assert ts == [] and [str(e) for e in rep.errors] == [
        f"{p}:3: field localization.localization_time holds an integer of 5000 digits at column 22, "
        "past Python's limit of 4300"], rep.errors


# Python-literal tool calls (iSWE `<execute_tool>` turns, smolagents `Calling tools: [...]`), read by page 20a's
# literal_tree: ast.literal_eval made 1e400 an infinity and 2j a complex, with no warning
ISWE_CALL = 'get_file_info(file_path="loader.py")'
SMOL = FX / 'smolagents' / 'parallel-calls.jsonl'
SMOL_CALL = "'arguments': {'query': 'Paris population'}"
SMOL_MATH = FX / 'smolagents' / 'gpt-4o__tool-calling__math__head5.jsonl'


def _params(ts, key='n'):
    return [s.action.params[key] for t in ts for s in t.steps if s.action and key in s.action.params]


@pytest.mark.parametrize('value', ['1e400', '-1e400', '1E400', '1+2j', '2j'])
def test_a_nan_in_an_iswe_python_call_is_null_and_warned(tmp_path, value):
    p = _planted(tmp_path, ISWE, ISWE_CALL, f'get_file_info(file_path="loader.py", n={value})')
    whole, _ = _convert(ISWE, 'iswe')
    ts, rep = _convert(p, 'iswe')
    assert not rep.errors and _steps(ts) == _steps(whole), rep.errors
    assert _params(ts) == [None] and [w for t in ts for w in _nonfinite(t.model_dump())] == []
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}: localization.trajectory[2].content: ') and w.endswith(
        f'(str) as a Python call: field n holds {value}, a number JSON cannot write (written as null)'), w


@pytest.mark.parametrize('plant, src, fmt', [
    (lambda v: f'get_file_info(file_path="loader.py", n={v})', ISWE, 'iswe'),
    (lambda v: "'arguments': {'query': 'Paris population', 'n': %s}" % v, SMOL, 'smolagents')])
def test_an_integer_past_64_bits_in_a_python_call_is_kept_and_written_exact(tmp_path, plant, src, fmt):
    p = _planted(tmp_path, src, ISWE_CALL if fmt == 'iswe' else SMOL_CALL, plant(2**70))
    ts, rep = _convert(p, fmt)
    assert _params(ts) == [2**70] and not rep.errors and not rep.warning_lines(), rep.errors
    assert f'"n":{2**70}' in ''.join(t.model_dump_json() for t in ts)


def test_an_integer_past_the_digit_limit_in_an_iswe_call_quarantines_its_message(tmp_path):
    "The parser's SyntaxError made the call {'_raw': ...} without a word"
    p = _planted(tmp_path, ISWE, ISWE_CALL, f'get_file_info(file_path="loader.py", n={"9" * 5000})')
    whole, _ = _convert(ISWE, 'iswe')
    ts, rep = _convert(p, 'iswe')
    assert [str(e) for e in rep.errors] == [f"{p}: localization.trajectory[2]: a Python call: field n holds an integer "
                                            "of 5000 digits, past Python's limit of 4300"], rep.errors
    assert len(ts) == 1 and rep.totals['quarantined'] == 1
    assert _params(whole, 'file_path') == ['loader.py'] and _params(ts, 'file_path') == []     # that call, not the file


@pytest.mark.parametrize('value', ['1e400', '-1e400', '3j'])
def test_a_nan_in_smolagents_tool_calls_is_null_and_warned(tmp_path, value):
    p = _planted(tmp_path, SMOL, SMOL_CALL, "'arguments': {'query': 'Paris population', 'n': %s}" % value)
    whole, _ = _convert(SMOL, 'smolagents')
    ts, rep = _convert(p, 'smolagents')
    assert not rep.errors and _steps(ts) == _steps(whole), rep.errors
    assert _params(ts) == [None] and [w for t in ts for w in _nonfinite(t.model_dump())] == []
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}:1: intermediate_steps[3].content[0].text: ') and w.endswith(
        f'(str) as tool calls: field [0].function.arguments.n holds {value}, a number JSON cannot write '
        '(written as null)'), w


def test_an_integer_past_the_digit_limit_in_smolagents_tool_calls_is_named(tmp_path):
    "The message was refused as \"tool-call message is not 'Calling tools: [...]'\": the number went unnamed"
    p = _planted(tmp_path, SMOL, SMOL_CALL, "'arguments': {'query': 'Paris population', 'n': %s}" % ('9' * 5000))
    ts, rep = _convert(p, 'smolagents')
    assert [str(e) for e in rep.errors] == [f"{p}:1: intermediate_steps[3]: tool calls: field "
                                            "[0].function.arguments.n holds an integer of 5000 digits, past Python's "
                                            "limit of 4300"], rep.errors
    assert len(ts) == 2 and rep.totals['quarantined'] == 1


def test_a_nan_in_a_failed_smolagents_call_is_null_and_warned(tmp_path):
    "The arguments an 'Error executing tool' message quotes are read by the same rule"
    p = _planted(tmp_path, SMOL_MATH, "with arguments {'code': ", "with arguments {'n': 1e400, 'code': ")
    whole, _ = _convert(SMOL_MATH, 'smolagents')
    ts, rep = _convert(p, 'smolagents')
    assert not rep.errors and _steps(ts) == _steps(whole), rep.errors
    assert _params(ts) == [None] and [w for t in ts for w in _nonfinite(t.model_dump())] == []
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}:2: intermediate_steps[') and w.endswith(
        '(str) as the arguments: field n holds 1e400, a number JSON cannot write (written as null)'), w


# Review of the number reading above (page 20a): the work it does, what it folds, what YAML tags it takes
import ast
import random
import re

import yaml

from knowlyr_lab.recorder.json_numbers import UnheldNumber, kept_numbers, literal_value, load_yaml
from knowlyr_lab.recorder.reading import read_yaml


def test_stand_in_texts_split_the_literal_once(monkeypatch):
    "ast.get_source_segment re-split the whole text per number: 8000 `1e400` in a 56 KB call took 77 s"
    calls = []
    for name in ('get_source_segment', '_splitlines_no_ff'):
        real = getattr(ast, name)
        monkeypatch.setattr(ast, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    got = literal_value('[' + ', '.join(['1e400', '-1e400', '1+2j'] * 400) + ']')
    assert [u.text for u in got] == ['1e400', '-1e400', '1+2j'] * 400
    assert len(calls) <= 1, f'{len(calls)} calls that split the whole text'


@pytest.mark.parametrize('seed', range(20))
def test_stand_in_texts_are_the_numbers_as_written_after_non_ascii(seed):
    "Columns are UTF-8 byte offsets: each stand-in's text is its number's source, whatever comes before it"
    rnd = random.Random(seed)
    nums = ['1e400', '-1E400', '2j', '1+2j', '-1e400-3.5j', '-1e999', '7J', '1.5 +\n 2j', '1e400+0j']
    words = ['"é"', "'日本語'", '"\\u2028"', '"😀😀"', '"a\u2028b"', "'ß'", '"\u0085"']
    planted, parts = [], []
    for _ in range(rnd.randint(1, 30)):
        parts.append(rnd.choice(words))
        planted.append(rnd.choice(nums))
        parts.append(planted[-1])
    sep = rnd.choice([', ', ',\n', ',\r\n  ', ', # ö\n'])
    got = literal_value('[' + sep.join(parts) + ']')
    assert [u.text for u in got[1::2]] == planted


def _read(read, text:str)->str:
    "'taken', or the error `read` raises on `text` (object addresses left out)"
    try: read(text)
    except Exception as e: return f'{type(e).__name__}: ' + re.sub('0x[0-9a-f]+', '', str(e))
    return 'taken'


def _taken(read, text:str)->bool: return _read(read, text) == 'taken'


_ATOMS = ['1', '-1', '2.5', '1e400', '-1e400', '+1e400', '2j', '-2j', '1+2j', "'a'", 'f()', 'True', 'x', '(1, 2)',
          '-(1+2j)', "__import__('os').system('id')"]


@pytest.mark.parametrize('op', ['+', '-', '*', '**', '%', '/', '//', '@', '&'])
def test_literal_value_takes_the_operations_literal_eval_takes_and_no_other(op):
    "Any operation with an infinite or complex operand was folded into one null: `1e400-1e400`, `{'x': 1e400 - 5}`,"
    "`2j ** 3`, `'a' % 1e400`, `{'k': 1e400 + foo()}` parsed where literal_eval refused them"
    for a in _ATOMS:
        for b in _ATOMS:
            for text in (f'{a} {op} {b}', f"{{'k': {a}{op}{b}}}", f'[{a} {op} ({b})]'):
                assert _read(literal_value, text) == _read(ast.literal_eval, text), text     # its own words
                if _taken(ast.literal_eval, text): assert _nonfinite(kept_numbers(literal_value(text), [])) == [], text


@pytest.mark.parametrize('text, number', [('1+2j', '1+2j'), ('-1-2j', '-1-2j'), ('1e400+0j', '1e400+0j'),
                                          ('-1e400 - 2.5j', '-1e400 - 2.5j'), ('+1.5+2J', '+1.5+2J'), ('-2j', '-2j'),
                                          ('-(1e400)', '-1e400'), ('-' + '9' * 5000, '-' + '9' * 5000)])
def test_literal_evals_own_number_forms_are_one_stand_in(text, number):
    assert _taken(ast.literal_eval, text) or len(text) > 4300
    assert literal_value(text).text == number


@pytest.mark.parametrize('text', ['-(1+2j)', '--1e400', '+-2j', 'not 1e400', '~2j'])
def test_a_sign_on_anything_but_a_number_is_refused_as_literal_eval_refuses_it(text):
    "`-(1+2j)` was read as one stand-in '-1+2j': another number than the one written"
    assert not _taken(ast.literal_eval, text) and not _taken(literal_value, text)


@pytest.mark.parametrize('value', ['!!int abc', '!!int 1.5', '!!int 09', "!!int ''", '1%s:30' % ('0' * 5000)])
def test_text_no_integer_under_an_int_tag_fails_the_file_at_its_line(tmp_path, value):
    "`x: !!int abc` was a null 'holds abc ..., a number JSON cannot write' (930d1ee failed the file: a ValueError)"
    (p := tmp_path / 'run.yaml').write_text(f'a: 1\nb: {value}\n')
    rep = ConversionReport()
    assert read_yaml(p, rep) is None and not rep.warning_lines()
    (e,) = [str(e) for e in rep.errors]
    assert e.startswith(f'{p}:2: not valid YAML (cannot read ') and ' as an integer (' in e, e


def test_a_decimal_integer_past_the_digit_limit_is_still_named_and_yaml_int_forms_read():
    with pytest.raises(UnheldNumber, match="field b holds an integer of 5000 digits at column 4"):
        load_yaml('a: 1\nb: -%s\n' % ('9' * 5000), [])
    assert load_yaml('h: 0x1F\nb: -0b101\no: 017\ns: 190:20:30\nu: +1_000\nq: !!int "7"\n', []) == dict(
        h=31, b=-5, o=15, s=685230, u=1000, q=7)


@pytest.mark.parametrize('text, field', [('a: &n .nan\n? *n\n: 1\n', 'a'), ('? &n .inf\n: 1\nb: *n\n', 'b'),
                                         ('s: !!set {&n -.inf}\nb: [*n]\n', 'b[0]')])
def test_a_nan_anchored_and_also_a_mapping_key_is_null_as_a_value(text, field):
    "The key's node was read as YAML's float everywhere, so the value was Python's nan or inf, silently"
    got = load_yaml(text, notes := [])
    values = {k: v for k, v in got.items() if not isinstance(v, set)}    # a set's items are its keys
    assert _nonfinite(values) == [] and len(notes) == 1 and notes[0].startswith(f'field {field} holds '), (got, notes)
    plain = yaml.load(text, Loader=yaml.CSafeLoader)
    assert [repr(k) for k in got] == [repr(k) for k in plain]      # the key keeps YAML's float
    assert [repr(k) for v in got.values() if isinstance(v, set) for k in v] == [
        repr(k) for v in plain.values() if isinstance(v, set) for k in v]


def test_mapping_keys_keep_yamls_floats_and_a_too_long_integer_key_is_refused():
    text = '{.inf: 1, a: 3, .inf: 2, .nan: 4, .nan: 5, 1.0e+400: 6}\n'
    assert repr(load_yaml(text, [])) == repr(yaml.load(text, Loader=yaml.CSafeLoader))
    with pytest.raises(UnheldNumber, match='integer of 5000 digits at column 3'):
        load_yaml('? %s\n: 1\n' % ('9' * 5000), [])


def test_a_nan_in_yaml_pairs_is_null_and_warned():
    "An !!omap / !!pairs entry is a tuple, which kept_numbers never walked: the stand-in object itself stayed there"
    got = load_yaml('p: !!pairs [a: .nan, b: [-.inf]]\no: !!omap [.inf: 1, b: 2]\n', notes := [])
    assert got == {'p': [['a', None], ['b', [None]]], 'o': [[None, 1], ['b', 2]]}
    assert [n.split(' holds')[0] for n in notes] == ['field p[0][1]', 'field p[1][1][0]', 'field o[0][0]']


REACT = FX / 'react-text' / 'hotpot.txt'
REACT_CASES = [  # (the action as the log writes it, as planted, its line, the block, the field, its number, the params)
    ('Action 2: lookup[High Plains]', 'Action 2: lookup(term="High Plains", top=1e400)', 9, 'Action', 'top', '1e400',
     {'term': 'High Plains', 'top': None}),
    ('Action 1: search[Colorado orogeny]', 'Action 1: search({"q": "NaN", "n": [1, NaN]})', 5, 'Action', 'n[1]', 'NaN',
     {'q': 'NaN', 'n': [1, None]}),
    ('Action Input: {"query": "capital of France"}', 'Action Input: {"query": "capital of France", "k": -Infinity}', 17,
     'Action Input', 'k', '-Infinity', {'query': 'capital of France', 'k': None}),
]


@pytest.mark.parametrize('old, new, line, block, field, number, params', REACT_CASES, ids=['python', 'json_arg', 'input'])
def test_a_nan_in_a_react_text_action_is_null_and_warned_at_its_line(tmp_path, old, new, line, block, field, number, params):
    "parse_action refuses a call holding NaN or an infinity: the call was kept as {'_raw': text}, flagged, no warning"
    p = _planted(tmp_path, REACT, old, new)
    assert p.read_text().splitlines()[line - 1] == new
    whole, _ = _convert(REACT, 'react-text')
    ts, rep = _convert(p, 'react-text')
    assert not rep.errors and _steps(ts) == _steps(whole), rep.errors
    (s,) = [s for t in ts for s in t.steps if s.metadata.get('line') in (line, line - 1) and s.action.tool != 'final_answer']
    assert s.action.params == params and 'bad_arguments' not in s.metadata, (s.action, s.metadata)
    assert [w for t in ts for w in _nonfinite(t.model_dump())] == []
    (w,) = rep.warning_lines()
    assert w.startswith(f'{p}:{line}: {block}: ') and w.endswith(
        f'(str) as a ReAct action: field {field} holds {number}, a number JSON cannot write (written as null)'), w

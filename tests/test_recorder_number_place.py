"""Where a whole JSON document writes a number the recorder cannot keep (page 20a `_place`): the line and column
each stand-in is given, checked against a naive locator on random documents, and the text it reads to find them"""
import json
import random

from knowlyr_lab.recorder.json_numbers import _place, exact_parsers, loads_json


class _Looked(str):
    "A document that counts the characters `count` and `rfind` are asked to look at"
    looked = 0
    def _span(self, a, b): self.looked += (len(self) if b is None else b) - a
    def count(self, s, a=0, b=None): self._span(a, b); return str.count(self, s, a, b)
    def rfind(self, s, a=0, b=None): self._span(a, b); return str.rfind(self, s, a, b)


def _placed(raw)->list:
    "(text, line, col) of each stand-in of `raw`, in parse order"
    made = []
    json.loads(raw, **exact_parsers(made))
    _place(raw, made)
    return [(u.text, u.line, u.col) for u in made]


def _naive(text:str, at:list)->list:
    "(number, line, col) of each (offset, number) in `at`, counted from the start of `text` each time"
    return [(s, text.count('\n', 0, i) + 1, i - text.rfind('\n', 0, i)) for i, s in at]


_UNHELD = ['NaN', 'Infinity', '-Infinity', '1e400', '-1E+400', '9' * 4400, '-' + '7' * 4301]
_KEPT = ['0', '-12', '3.5', '1e5', '123456789012345678901234567890', 'true', 'null']
_STRINGS = ['"NaN"', '"a \\"NaN\\" b"', '"1e400, Infinity"', '"\\\\"', '"é😀 NaN"', '"\\n"', '""']
_WS = ['', ' ', '\n', '\n  ', ' \n\t', '\r\n']


def _random_doc(rng:random.Random)->tuple[str, list]:
    "A random JSON text and (offset, number) of each number in it the recorder cannot keep, in document order"
    parts, at, size = [], [], 0
    def put(s):
        nonlocal size
        parts.append(s); size += len(s)
    def value(depth):
        put(rng.choice(_WS))
        r = rng.random()
        if depth < 4 and r < 0.2:
            put('['); n = rng.randrange(4)
            for i in range(n): value(depth + 1); put(',' if i < n - 1 else '')
            put(rng.choice(_WS) + ']')
        elif depth < 4 and r < 0.4:
            put('{'); n = rng.randrange(4)
            for i in range(n):
                put(rng.choice(_WS) + rng.choice(_STRINGS[:5] + ['"k"', '"k"']) + rng.choice(_WS) + ':')
                value(depth + 1); put(',' if i < n - 1 else '')
            put(rng.choice(_WS) + '}')
        elif r < 0.65: at.append((size, s := rng.choice(_UNHELD))); put(s)
        else: put(rng.choice(_KEPT + _STRINGS))
        put(rng.choice(_WS))
    value(0)
    return ''.join(parts), at


def test_each_stand_in_is_placed_where_a_naive_locator_finds_it_in_random_documents():
    "Line and column of every stand-in, in str and in bytes (UTF-8, -16, -32), as counted from the start in characters"
    rng, n = random.Random(20), 0
    for _ in range(400):
        text, at = _random_doc(rng)
        want = _naive(text, at)
        assert _placed(text) == want, text[:300]
        assert _placed(text.encode()) == want, text[:300]
        assert _placed(text.encode(rng.choice(['utf-8-sig', 'utf-16', 'utf-16-be', 'utf-32']))) == want, text[:300]
        n += len(at)
    assert n > 150                                          # the documents held stand-ins to place


def test_placing_numbers_reads_each_character_of_a_one_line_document_a_bounded_number_of_times():
    "Each stand-in's column was found by `rfind` back to the line's start: line length x stand-ins characters read"
    pad, k = 20_000, 2_000
    doc = _Looked('{"pad": "' + 'x' * pad + '", "costs": [' + ','.join(['NaN'] * k) + ']}')
    got = _placed(doc)
    assert [c for _, _, c in got] == [pad + 23 + 4 * i for i in range(k)] and {ln for _, ln, _ in got} == {1}
    assert doc.looked <= 2 * len(doc), (doc.looked, len(doc))


def test_placing_numbers_in_many_lines_reads_each_character_a_bounded_number_of_times():
    "The same bound where the numbers sit on lines of their own, some long"
    doc = _Looked('[' + ',\n'.join(('"' + 'y' * 3000 + '", ' if i % 7 == 0 else '') + 'NaN' for i in range(3000)) + ']')
    got = _placed(doc)
    assert [ln for _, ln, _ in got] == list(range(1, 3001)) and doc.looked <= 2 * len(doc), (doc.looked, len(doc))


def test_a_located_note_keeps_its_line_through_loads_json():
    "The column is in the note's text and the line in its `.line` (read_json's warning)"
    notes = []
    assert loads_json(b'{"a": 1,\n  "b": [2, NaN]}', notes, locate=True) == {'a': 1, 'b': [2, None]}
    assert [(n.line, n) for n in notes] == [(2, 'field b[1] holds NaN at column 12, a number JSON cannot write '
                                                '(written as null)')]


def test_a_document_in_bytes_is_located_in_the_characters_json_loads_reads():
    "Bytes were decoded as UTF-8 with 'replace': a BOM or a lone surrogate's 3 bytes shifted the column, UTF-16 not located"
    def where(raw):
        notes = []
        loads_json(raw, notes, locate=True)
        return [(n.line, n[n.index('holds'):n.index(',')]) for n in notes]
    at = [(2, 'holds NaN at column 2')]
    assert where('{"a":\n NaN}'.encode('utf-8-sig')) == at
    assert where('{"a":\n NaN}'.encode('utf-16')) == at
    assert where('{"a":\n NaN}'.encode('utf-16-le')) == at
    assert where(b'\xef\xbb\xbf{"a": NaN}') == [(1, 'holds NaN at column 7')]
    assert where(b'{"\xed\xa0\x80": NaN}') == [(1, 'holds NaN at column 7')]        # one character, as json.loads reads it
    assert where('{"é😀": NaN}'.encode()) == [(1, 'holds NaN at column 8')]

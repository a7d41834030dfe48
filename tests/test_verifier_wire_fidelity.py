"""Issue 39 item 2: the verifier's wire gives the verdict one process would give.

The hidden tests run in the judge's process and the agent's code in the candidate's, so every value a test sees has
crossed the wire. An attacker measured that the crossing changed verdicts both ways: wrong code that fails in one
process passed over the wire (an argument mutated in place, an int subclass whose `==` was lost, an OrderedDict's
order lost, `from m import *` taking the agent's `len`, a third-party module served by a file the agent planted, a
process that died on bad input satisfying `assertRaises(Exception)`), and correct code that passes in one process
failed over it (Decimal, Fraction, dataclass equality, identity and `return self`, sorting in place, an int over
4,300 digits, the task's own exception class, an exception with two builtin bases). Each case here is a small task
verified through the real path (`HiddenTestVerifier`: two bubblewrap sandboxes, the candidate's server and the
judge's runner); every test failed before the wire was made faithful. The bundled tasks' reference fixes and
HumanEval's canonical solutions over the wire: tests/test_verifier_forgery.py."""
import pytest

from knowlyr_lab.coding_tasks import fixed_files, load_coding_tasks
from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.verifiers import HiddenTestVerifier

pytestmark = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the verifier refuses to create sandboxes')

def _test(imports:str, *methods:str)->dict:
    "A hidden test file: `imports`, then one TestCase with `methods` (each a one- or more-line `def test_...`)"
    body = ''.join('    ' + m.replace('\n', '\n    ') + '\n' for m in methods)
    return {'test_hidden.py': f"import unittest\n{imports}\n\nclass T(unittest.TestCase):\n{body}"}

def _verify(repo:dict, tests:dict, files:dict):
    return HiddenTestVerifier(repo, tests, timeout=30).verify(files)

def _passes(repo, tests, files):
    r = _verify(repo, tests, files)
    assert r.success, (r, r.failures, r.errors, r.messages)
    return r

def _fails(repo, tests, files, *failing):
    r = _verify(repo, tests, files)
    assert not r.success and set(failing) <= set(r.failures + r.errors), (r, r.failures, r.errors, r.messages)
    return r

# -- wrong code that passed over the wire but fails in one process --

def test_an_argument_mutated_in_place_is_seen_by_the_test():
    "py-deep-merge's no-mutation test can fail: a merge that writes into `base` is caught; the reference fix passes"
    t = {x.id: x for x in load_coding_tasks()}['py-deep-merge']
    mutating = ('def deep_merge(base, override):\n    for k, v in override.items():\n'
                '        if isinstance(v, dict) and isinstance(base.get(k), dict): deep_merge(base[k], v)\n'
                '        else: base[k] = v\n    return base\n')
    v = t.verifier()
    bad, good = v.verify({'config/merge.py': mutating}), v.verify(fixed_files(t))
    assert bad.failures == ['TestMerge.test_no_mutation'] and bad.tests_passed == 3, (bad, bad.messages)
    assert good.success, (good, good.messages)

SORTER = {'sorter.py': 'def sort_in_place(xs):\n    "Sort `xs` in place; return None"\n'}
SORT_TEST = _test('from sorter import sort_in_place',
                  'def test_sorted(self):\n    xs = [3, 1, 2]\n    self.assertIsNone(sort_in_place(xs))\n    self.assertEqual(xs, [1, 2, 3])',
                  'def test_nested(self):\n    row = [9, 8]\n    xs = [row, [1]]\n    sort_in_place(xs)\n    self.assertIs(xs[1], row)\n'
                  '    self.assertEqual(xs, [[1], [9, 8]])')

def test_sorting_in_place_reaches_the_test():
    "A list sorted in place is sorted in the test's process too (the inner lists stay the test's own objects)"
    _passes(SORTER, SORT_TEST, {'sorter.py': 'def sort_in_place(xs):\n    xs.sort()\n'})
    _fails(SORTER, SORT_TEST, {'sorter.py': 'def sort_in_place(xs):\n    xs = sorted(xs)\n'}, 'T.test_sorted', 'T.test_nested')

COUNTER = {'tally.py': 'def count(xs):\n    return 0\n'}
COUNT_TEST = _test('from tally import count', 'def test_count(self): self.assertEqual(count([1, 2, 3]), 3)',
                   'def test_true(self): self.assertTrue(count([1]) == 1)')

def test_an_int_subclass_keeps_its_own_equality():
    "An int subclass with its own `==` stays the agent's object: compared by identity, never as the plain int it claims to be"
    wrong = 'class Count(int):\n    def __eq__(self, other): return False\n    __hash__ = int.__hash__\n\ndef count(xs):\n    return Count(len(xs))\n'
    _fails(COUNTER, COUNT_TEST, {'tally.py': wrong}, 'T.test_count', 'T.test_true')
    plain = 'class Count(int):\n    "A count; behaves as an int"\n    def describe(self): return "%d items" % self\n\ndef count(xs):\n    return Count(len(xs))\n'
    _passes(COUNTER, COUNT_TEST, {'tally.py': plain})

RANKING = {'rank.py': 'from collections import OrderedDict\n\ndef ranking(scores):\n    return OrderedDict()\n'}
RANK_TEST = _test('from collections import OrderedDict\nfrom rank import ranking',
                  "def test_order(self):\n    self.assertEqual(ranking({'a': 1, 'b': 3, 'c': 2}), OrderedDict([('b', 3), ('c', 2), ('a', 1)]))")

def test_an_ordered_dict_keeps_its_order():
    "OrderedDict equality depends on order: it crosses as an OrderedDict, not a dict"
    right = 'from collections import OrderedDict\n\ndef ranking(s):\n    return OrderedDict(sorted(s.items(), key=lambda kv: -kv[1]))\n'
    wrong = 'from collections import OrderedDict\n\ndef ranking(s):\n    return OrderedDict(sorted(s.items()))\n'
    _passes(RANKING, RANK_TEST, {'rank.py': right})
    _fails(RANKING, RANK_TEST, {'rank.py': wrong}, 'T.test_order')

TOP = {'top.py': '__all__ = ["top3"]\n\ndef top3(xs):\n    "The three largest, largest first"\n    return xs[:3]\n'}
TOP_TEST = _test('from top import *', 'def test_len(self): self.assertEqual(len(top3([5, 1, 4, 2])), 3)',
                 'def test_values(self): self.assertEqual(top3([5, 1, 4, 2]), sorted([5, 1, 4, 2], reverse=True)[:3])',
                 'def test_abs(self): self.assertEqual(abs(top3([-7, 1, 2, 3])[0]), 3)')

def test_a_star_import_does_not_replace_builtins():
    "`from top import *` takes the names the task's module defines; an `__all__` listing len/sorted/abs does not reach the test"
    forged = ('__all__ = ["top3", "len", "sorted", "abs"]\n\ndef top3(xs):\n    return xs[:3]\n\n'
              'def len(x): return 3\n\ndef sorted(xs, reverse=False): return list(xs)\n\ndef abs(x): return 3\n')
    r = _fails(TOP, TOP_TEST, {'top.py': forged}, 'T.test_values', 'T.test_abs')
    assert r.tests_passed == 1, r                                     # len: xs[:3] does have 3 items
    _passes(TOP, TOP_TEST, {'top.py': '__all__ = ["top3"]\n\ndef top3(xs):\n    return sorted(xs, reverse=True)[:3]\n'})

AREA = {'area.py': 'from os.path import *\n\ndef area(r):\n    return 0\n'}   # a star import: its names cannot be read
AREA_TEST = _test('from math import isclose, pi\nfrom area import *', 'def test_area(self): self.assertTrue(isclose(area(1), pi))')

def test_a_star_import_does_not_replace_the_tests_own_names():
    "Where the candidate's `__all__` is used, it cannot replace a name the test bound before (`isclose` here)"
    forged = '__all__ = ["area", "isclose"]\n\ndef area(r):\n    return 0\n\ndef isclose(a, b):\n    return True\n'
    _fails(AREA, AREA_TEST, {'area.py': forged}, 'T.test_area')
    _passes(AREA, AREA_TEST, {'area.py': 'import math\n\n__all__ = ["area"]\n\ndef area(r):\n    return math.pi * r * r\n'})

MEAN = {'stats3.py': 'def mean(xs):\n    return 0\n'}
MEAN_TEST = _test('import math\nfrom stats3 import mean',
                  'def test_mean(self):\n    import numpy\n    self.assertEqual(mean([1, 2, 6]), numpy.mean([1, 2, 6]))',
                  'def test_stdlib(self): self.assertEqual(mean([1, 2, 6]), math.fsum([1, 2, 6]) / 3)')

def test_a_third_party_module_is_never_served_by_the_agent():
    "A module the judge does not have (numpy here) is not imported from the candidate: a planted numpy.py does not answer"
    wrong = 'def mean(xs):\n    return 1\n'
    planted = {'stats3.py': wrong, 'numpy.py': 'def mean(xs):\n    return 1\n'}
    r = _fails(MEAN, MEAN_TEST, planted, 'T.test_mean', 'T.test_stdlib')
    assert 'numpy.py' in r.applied, r.applied                          # applied to the candidate; never imported by the judge
    r = _verify(MEAN, MEAN_TEST, {'stats3.py': 'def mean(xs):\n    return sum(xs) / len(xs)\n'})
    assert 'T.test_stdlib' not in r.failures + r.errors, (r, r.messages)

PARSE = {'num.py': 'def parse(s):\n    return int(s)\n'}
PARSE_TEST = _test('from num import parse', "def test_ok(self): self.assertEqual(parse('12'), 12)",
                   "def test_bad(self):\n    with self.assertRaises(Exception): parse('x')")

def test_a_dead_candidate_fails_the_run():
    "A process that dies on bad input is not an exception a test can expect: the run fails (nothing passes, as in one process)"
    dies = 'import os\n\ndef parse(s):\n    return int(s) if s.isdigit() else os._exit(3)\n'
    r = _fails(PARSE, PARSE_TEST, {'num.py': dies}, 'T.test_bad')
    assert r.tests_passed == 0 and any('stopped answering' in e for e in r.errors), (r, r.errors)
    _passes(PARSE, PARSE_TEST, {})                                     # int('x') raises ValueError: expected

ADD = {'add.py': 'def add(a, b):\n    return a + b\n'}
ADD_TEST = _test('from add import add', 'def test_ok(self): self.assertEqual(add(1, 2), 3)',
                 'def test_object(self):\n    with self.assertRaises(TypeError): add(1, object())',
                 'def test_callable(self):\n    with self.assertRaises(Exception): add(1, lambda: 2)',
                 'def test_deep(self):\n    x = []\n    for _ in range(300): x = [x]\n    with self.assertRaises(Exception): add(x, 1)')

def test_a_value_that_cannot_cross_is_no_exception_a_test_expects():
    "A test's own object, function or over-deep value cannot go to the candidate: the test fails, never an assertRaises passes"
    r = _fails(ADD, ADD_TEST, {'add.py': 'def add(a, b):\n    return 3\n'}, 'T.test_object', 'T.test_callable', 'T.test_deep')
    assert r.tests_passed == 1 and all('NotSendable' in m for m in r.messages), (r, r.messages)

OOM = """import gc, sys

def parse(s):
    if s.isdigit(): return int(s)
    w = next(o for o in gc.get_objects() if type(o).__name__ == 'BufferedWriter' and o.fileno() > 2)   # the wire
    w.write(b'{"ok":[' + b','.join([b'[[[[[[[[]]]]]]]]'] * 250_000) + b']}\\n'); w.flush()
    m = sys.modules['__main__']; send = m.send
    def once(w, msg): m.send = send          # the server's own answer to this request is dropped: the wire stays in step
    m.send = once
    return 0
"""

def test_an_answer_the_judge_cannot_hold_breaks_the_run():
    "An answer that runs the judge out of memory as it is read is no MemoryError an assertRaises(Exception) can take"
    r = HiddenTestVerifier(PARSE, PARSE_TEST, timeout=30, limits={'memory_mb': 256}).verify({'num.py': OOM})
    assert r.tests_passed == 0 and any('stopped answering' in e for e in r.errors), (r, r.errors, r.messages)

# -- correct code that failed over the wire but passes in one process --

PRICES = {'prices.py': 'from decimal import Decimal\nfrom fractions import Fraction\n\ndef total(xs):\n    return 0\n\ndef share(a, b):\n    return 0\n'}
PRICE_TEST = _test('from decimal import Decimal\nfrom fractions import Fraction\nfrom prices import total, share',
                   "def test_decimal(self):\n    t = total(['0.10', '0.20'])\n    self.assertEqual(t, Decimal('0.30'))\n"
                   "    self.assertIsInstance(t, Decimal)\n    self.assertEqual(str(t), '0.30')",
                   'def test_fraction(self):\n    self.assertEqual(share(1, 3), Fraction(1, 3))\n    self.assertIsInstance(share(2, 6), Fraction)')

def test_decimal_and_fraction_cross_as_themselves():
    right = ('from decimal import Decimal\nfrom fractions import Fraction\n\ndef total(xs):\n    return sum(Decimal(x) for x in xs)\n\n'
             'def share(a, b):\n    return Fraction(a, b)\n')
    _passes(PRICES, PRICE_TEST, {'prices.py': right})
    _fails(PRICES, PRICE_TEST, {'prices.py': right.replace('Decimal(x) for', 'float(x) for').replace('Fraction(a, b)', 'a / b')},
           'T.test_decimal', 'T.test_fraction')

GEO = {'geo.py': ('from dataclasses import dataclass\n\n@dataclass\nclass Point:\n    x: float\n    y: float\n\n'
                  'def midpoint(a, b):\n    return Point(a.x, b.y)\n')}
GEO_TEST = _test('from geo import Point, midpoint',
                 'def test_mid(self): self.assertEqual(midpoint(Point(0, 0), Point(2, 4)), Point(1, 2))',
                 'def test_type(self): self.assertIsInstance(midpoint(Point(0, 0), Point(2, 4)), Point)')

def test_dataclasses_compare_by_value():
    "A dataclass compares by its fields, as its generated `__eq__` does (the judge compares the field values)"
    right = GEO['geo.py'].replace('Point(a.x, b.y)', 'Point((a.x + b.x) / 2, (a.y + b.y) / 2)')
    _passes(GEO, GEO_TEST, {'geo.py': right})
    r = _fails(GEO, GEO_TEST, {}, 'T.test_mid')
    assert r.tests_passed == 1, r

BUILDER = {'build.py': ('class Query:\n    def __init__(self): self.parts = []\n'
                        '    def where(self, p):\n        self.parts.append(p)\n        return Query()\n\n'
                        '_CACHE = {}\n\ndef get(name):\n    return _CACHE.setdefault(name, Query())\n')}
BUILD_TEST = _test('from build import Query, get',
                   "def test_fluent(self):\n    q = Query()\n    self.assertIs(q.where('a'), q)\n    self.assertIs(q.where('b').where('c'), q)\n"
                   "    self.assertEqual(q.parts, ['a', 'b', 'c'])",
                   "def test_same_object(self): self.assertIs(get('x'), get('x'))")

def test_identity_and_return_self():
    "The same object of the candidate's is the same object in the test: `return self` chains, a cache returns one object"
    right = BUILDER['build.py'].replace('return Query()\n\n', 'return self\n\n')
    _passes(BUILDER, BUILD_TEST, {'build.py': right})
    r = _fails(BUILDER, BUILD_TEST, {}, 'T.test_fluent')
    assert r.tests_passed == 1, r

POWER = {'big.py': 'def power(b, e):\n    return 0\n'}
POWER_TEST = _test('from big import power', 'def test_big(self): self.assertEqual(power(10, 5000), 10 ** 5000)',
                   'def test_neg(self): self.assertEqual(power(-7, 6001), (-7) ** 6001)')

def test_an_int_over_4300_digits_crosses():
    _passes(POWER, POWER_TEST, {'big.py': 'def power(b, e):\n    return b ** e\n'})
    _fails(POWER, POWER_TEST, {'big.py': 'def power(b, e):\n    return b ** e + 1\n'}, 'T.test_big', 'T.test_neg')

BANK = {'bank.py': ('class InsufficientFunds(ValueError):\n    "Withdrawing more than the balance"\n'
                    '    def __init__(self, balance, amount):\n        super().__init__("balance %s, asked %s" % (balance, amount))\n'
                    '        self.balance = balance\n\n'
                    'class Account:\n    def __init__(self, balance): self.balance = balance\n'
                    '    def withdraw(self, amount):\n        self.balance -= amount\n')}
BANK_TEST = _test('from bank import Account, InsufficientFunds',
                  'def test_own_class(self):\n    with self.assertRaises(InsufficientFunds) as cm: Account(5).withdraw(10)\n'
                  '    self.assertEqual(cm.exception.balance, 5)\n    self.assertIn("balance 5", str(cm.exception))',
                  'def test_base(self):\n    with self.assertRaises(ValueError): Account(5).withdraw(10)',
                  'def test_ok(self):\n    a = Account(5)\n    a.withdraw(3)\n    self.assertEqual(a.balance, 2)')

def test_the_tasks_own_exception_class():
    "`assertRaises(InsufficientFunds)` with the class imported from the task's module catches the candidate's exception"
    right = BANK['bank.py'].replace('        self.balance -= amount\n',
                                    '        if amount > self.balance: raise InsufficientFunds(self.balance, amount)\n        self.balance -= amount\n')
    _passes(BANK, BANK_TEST, {'bank.py': right})
    other = right.replace('raise InsufficientFunds(self.balance, amount)', 'raise ValueError("no")')
    r = _fails(BANK, BANK_TEST, {'bank.py': other}, 'T.test_own_class')
    assert r.tests_passed == 2, r

KV = {'kv.py': 'class ParseError(ValueError, KeyError):\n    "A key that cannot be parsed"\n\ndef lookup(d, k):\n    return d.get(k)\n'}
KV_TEST = _test('from kv import lookup, ParseError',
                "def test_key(self):\n    with self.assertRaises(KeyError): lookup({}, 'a')",
                "def test_value(self):\n    with self.assertRaises(ValueError): lookup({}, 'a')",
                "def test_own(self):\n    with self.assertRaises(ParseError): lookup({}, 'a')")

def test_an_exception_with_two_builtin_bases():
    "An exception deriving from ValueError and KeyError is caught as either, and as its own class"
    right = KV['kv.py'].replace('return d.get(k)', 'if k not in d: raise ParseError(k)\n    return d[k]')
    _passes(KV, KV_TEST, {'kv.py': right})
    _fails(KV, KV_TEST, {'kv.py': right.replace('raise ParseError(k)', 'raise KeyError(k)')}, 'T.test_value', 'T.test_own')

# -- the rest of what crosses with its type --

VALUES = {'vals.py': 'def get(name):\n    return None\n'}
VALUES_SRC = '''import collections, datetime, math
from collections import Counter, OrderedDict, defaultdict, deque, namedtuple

Pair = namedtuple('Pair', 'a b')

def get(name):
    tz = datetime.timezone(datetime.timedelta(hours=2), 'CEST')
    return {'datetime': datetime.datetime(2024, 2, 29, 13, 5, 7, 123, tzinfo=tz), 'date': datetime.date(2024, 2, 29),
            'time': datetime.time(23, 59, 1), 'delta': datetime.timedelta(days=-1, seconds=5), 'complex': complex(1, -2),
            'floats': [math.nan, math.inf, -0.0], 'bytes': b'\\x00\\xff', 'bytearray': bytearray(b'ab'), 'set': {1, 2},
            'frozenset': frozenset({'a'}), 'pair': Pair(1, 2), 'counter': Counter('aab'), 'deque': deque([1, 2], maxlen=3),
            'dd': defaultdict(list, {'k': [1]}), 'range': range(1, 10, 3), 'bool': True, 'tuple': (1, (2, [3])),
            'aliased': [x := [1], x]}[name]
'''
VALUES_TEST = _test('import datetime, math\nfrom collections import Counter, OrderedDict, defaultdict, deque\nfrom vals import get',
    "def test_datetime(self):\n    d = get('datetime')\n    self.assertEqual(type(d), datetime.datetime)\n    self.assertEqual(d.utcoffset(), datetime.timedelta(hours=2))\n"
    "    self.assertEqual(d.tzname(), 'CEST')\n    self.assertEqual((d.year, d.microsecond), (2024, 123))",
    "def test_date_time_delta(self):\n    self.assertEqual(get('date'), datetime.date(2024, 2, 29))\n    self.assertEqual(get('time'), datetime.time(23, 59, 1))\n"
    "    self.assertEqual(get('delta'), datetime.timedelta(days=-1, seconds=5))",
    "def test_numbers(self):\n    self.assertEqual(get('complex'), 1 - 2j)\n    f = get('floats')\n    self.assertTrue(math.isnan(f[0]))\n"
    "    self.assertEqual(f[1], math.inf)\n    self.assertEqual(math.copysign(1, f[2]), -1.0)\n    self.assertIs(get('bool'), True)",
    "def test_bytes_sets(self):\n    self.assertEqual(get('bytes'), b'\\x00\\xff')\n    self.assertEqual(type(get('bytearray')), bytearray)\n"
    "    self.assertEqual(get('set'), {1, 2})\n    self.assertEqual(type(get('frozenset')), frozenset)",
    "def test_containers(self):\n    p = get('pair')\n    self.assertEqual((p.a, p.b, p), (1, 2, (1, 2)))\n    self.assertEqual(get('counter'), Counter(a=2, b=1))\n"
    "    self.assertEqual(type(get('counter')), Counter)\n    self.assertEqual(get('deque').maxlen, 3)\n    dd = get('dd')\n"
    "    self.assertEqual(dd['missing'], [])\n    self.assertEqual(get('range'), range(1, 10, 3))\n    self.assertEqual(get('tuple'), (1, (2, [3])))",
    "def test_aliasing(self):\n    a = get('aliased')\n    self.assertIs(a[0], a[1])")

def test_values_cross_with_their_type():
    "datetime (with its zone), date, time, timedelta, complex, nan/inf/-0.0, bytes, bytearray, sets, namedtuple, Counter, deque, defaultdict, range, aliasing"
    _passes(VALUES, VALUES_TEST, {'vals.py': VALUES_SRC})

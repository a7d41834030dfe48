"""The verifier judge sends operators to the candidate: arithmetic (reflected and in-place too), unary operators,
conversions, `format`, order between the candidate's own objects and `with` give the verdict one process would give.

Before, the judge's stand-in for an object of the candidate's had none of these methods, so the interpreter answered
for the candidate: `Money(1) + 'x'` raised the judge's own TypeError, and `with self.assertRaises(TypeError)` passed
on an `__add__` that takes strings (a false pass); correct code using `+`, `sorted`, `f'{m:.2f}'` or `with` failed (a
false fail). What stays out, so that no object of the candidate's can satisfy every expectation: `==` and `!=` (identity,
or a dataclass's fields), order against a value the judge built, and a `with` block's exception, which goes on whatever
the candidate's `__exit__` answers. Each case runs through the real path (`HiddenTestVerifier`: two bubblewrap
sandboxes)."""
import pytest

from knowlyr_lab.sandbox.local import bwrap_available
from knowlyr_lab.verifiers import HiddenTestVerifier

pytestmark = pytest.mark.skipif(not bwrap_available(), reason='bubblewrap unavailable: the verifier refuses to create sandboxes')

MONEY = '''class Money:
    "An amount in cents"
    def __init__(self, cents): self.cents = cents
    def _c(self, other): return other.cents if isinstance(other, Money) else other
    def __add__(self, other): return Money(self.cents + self._c(other))
    __radd__ = __add__
    def __sub__(self, other): return Money(self.cents - self._c(other))
    def __rsub__(self, other): return Money(self._c(other) - self.cents)
    def __neg__(self): return Money(-self.cents)
    def __abs__(self): return Money(abs(self.cents))
    def __int__(self): return self.cents
    def __format__(self, spec): return format(self.cents / 100, spec)
    def __lt__(self, other): return self.cents < other.cents
    def __gt__(self, other): return self.cents > other.cents

class Ledger:
    "Amounts added inside a `with` block; closed when it ends"
    def __init__(self): self.items, self.closed = [], False
    def __enter__(self): return self
    def __exit__(self, *exc): self.closed = True
    def add(self, m): self.items.append(m)
    def total(self): return sum(self.items, Money(0))
'''
REPO = {'money.py': MONEY.replace('self.cents + self._c(other)', 'self.cents')}    # the planted bug: + adds nothing
TESTS = {'test_hidden.py': '''import unittest
from money import Money, Ledger

class T(unittest.TestCase):
    def test_add(self): self.assertEqual((Money(150) + Money(250)).cents, 400)
    def test_reflected(self):
        self.assertEqual(sum([Money(1), Money(2)]).cents, 3)
        self.assertEqual((10 - Money(4)).cents, 6)
    def test_in_place(self):
        m = Money(1)
        m += 2
        self.assertEqual(m.cents, 3)
    def test_no_strings(self):
        with self.assertRaises(TypeError): Money(1) + 'x'
    def test_unary_and_conversions(self):
        self.assertEqual(abs(-Money(5)).cents, 5)
        self.assertEqual(int(Money(250)), 250)
        self.assertEqual(f'{Money(150):.2f}', '1.50')
    def test_order(self):
        self.assertEqual([m.cents for m in sorted([Money(3), Money(1), Money(2)])], [1, 2, 3])
        self.assertLess(Money(1), Money(2))
        self.assertFalse(Money(2) < Money(1))
    def test_with(self):
        with Ledger() as led:
            led.add(Money(2)); led.add(Money(3))
            self.assertEqual(led.total().cents, 5)
        self.assertTrue(led.closed)
'''}
ALL = ['T.test_add', 'T.test_in_place', 'T.test_no_strings', 'T.test_order', 'T.test_reflected', 'T.test_unary_and_conversions', 'T.test_with']

@pytest.fixture(scope='module')
def verifier(): return HiddenTestVerifier(REPO, TESTS, timeout=60)

def _failed(r): return sorted(r.failures + r.errors)

def test_correct_operators_pass(verifier):
    "Correct code using +, sum, -=, abs, int, format, sorted and with passes, as in one process (each failed before)"
    r = verifier.verify({'money.py': MONEY})
    assert r.success and r.tests_passed == len(ALL), (r, _failed(r), r.messages)

def test_the_planted_bug_fails_where_it_shows(verifier):
    "An + that ignores its operand fails each test that adds (and takes 'x' without a TypeError, as in one process)"
    r = verifier.verify({})
    assert _failed(r) == ['T.test_add', 'T.test_in_place', 'T.test_no_strings', 'T.test_reflected', 'T.test_with'], (_failed(r), r.messages)

def test_an_add_that_takes_strings_fails_the_test_that_says_it_must_not():
    "The false pass: the judge's own TypeError no longer stands in for the candidate's"
    lax = MONEY.replace('return Money(self.cents + self._c(other))',
                        'return Money(self.cents + (len(other) if isinstance(other, str) else self._c(other)))')
    r = HiddenTestVerifier(REPO, TESTS, timeout=60).verify({'money.py': lax})
    assert _failed(r) == ['T.test_no_strings'], (_failed(r), r.messages)

def test_an_order_that_holds_both_ways_is_no_order():
    "An object whose < and > answer True to everything passes no order test (it would pass assertLess both ways)"
    liar = MONEY.replace('return self.cents < other.cents', 'return True').replace('return self.cents > other.cents', 'return True')
    r = HiddenTestVerifier(REPO, TESTS, timeout=60).verify({'money.py': liar})
    assert _failed(r) == ['T.test_order'], (_failed(r), r.messages)
    assert r.messages == ["T.test_order: CandidateError (no valid answer from the candidate's process)"], r.messages

def test_the_no_order_refusal_cannot_be_expected_by_the_test():
    "The refusal is no TypeError: `assertRaises(TypeError)` around a < that holds both ways does not pass (it did)"
    tests = {'test_hidden.py': TESTS['test_hidden.py'].replace('class T(unittest.TestCase):', """class T(unittest.TestCase):
    def test_no_order_with_text(self):
        with self.assertRaises(TypeError): Money(1) < Money(2) < Money(1)""")}
    liar = MONEY.replace('return self.cents < other.cents', 'return True')
    r = HiddenTestVerifier(REPO, tests, timeout=60).verify({'money.py': liar})
    assert 'T.test_no_order_with_text' in _failed(r), (_failed(r), r.messages)

def test_a_context_manager_cannot_swallow_the_tests_assertions():
    "A `__exit__` that returns True suppresses nothing of the test's: the wrong total's failed assertion still fails"
    swallow = MONEY.replace('self.closed = True', 'self.closed = True; return True').replace('sum(self.items, Money(0))', 'Money(0)')
    r = HiddenTestVerifier(REPO, TESTS, timeout=60).verify({'money.py': swallow})
    assert _failed(r) == ['T.test_with'], (_failed(r), r.messages)
    assert r.messages == ['T.test_with: AssertionError (a check of the test failed)'], r.messages

CLOSE_REPO = {'stats.py': '''def mean(xs): return 0.0

class Batch:
    "Values checked inside a `with` block; a negative one is a ValueError"
    def __init__(self): self.seen = []
    def __enter__(self): return self
    def __exit__(self, *exc): return False
    def add(self, v):
        if v < 0: raise ValueError(v)
        self.seen.append(v)
    def stop(self): raise SystemExit(0)
'''}
CLOSE_TESTS = {'test_hidden.py': '''import unittest
from stats import mean, Batch

class T(unittest.TestCase):
    def test_mean(self): self.assertAlmostEqual(mean([0.1, 0.2]), 0.15)
    def test_mean_delta(self): self.assertAlmostEqual(mean([1, 2, 4]), 7 / 3, delta=1e-9)
    def test_mean_alias(self): self.assertAlmostEquals(mean([0.1, 0.3]), 0.2)     # 3.11's old name: patched too
    def test_batch(self):
        with self.assertRaises(ValueError):
            with Batch() as b:
                b.add(1)
                self.assertEqual(b.seen, [1])
                b.add(-1)
    def test_stop(self):
        with self.assertRaises(SystemExit):
            with Batch() as b:
                b.add(2)
                self.assertEqual(b.seen, [2])
                b.stop()
'''}
ZERO_DIFFERENCE = '''
class _Near:
    "Close to every number: its difference with anything is 0.0"
    def __sub__(self, other): return 0.0
    __rsub__ = __sub__
def mean(xs): return _Near()
'''

def test_an_object_whose_difference_is_always_zero_is_close_to_nothing():
    "assertAlmostEqual decides on float(obj), not on the candidate's `-` after it saw the test's number (a false pass before)"
    v = HiddenTestVerifier(CLOSE_REPO, CLOSE_TESTS, timeout=60)
    r = v.verify({'stats.py': CLOSE_REPO['stats.py'] + ZERO_DIFFERENCE})
    assert _failed(r) == ['T.test_mean', 'T.test_mean_alias', 'T.test_mean_delta'], (_failed(r), r.messages)
    honest = CLOSE_REPO['stats.py'].replace('def mean(xs): return 0.0', '''class Mean(float):
    def __str__(self): return 'mean %r' % float(self)
def mean(xs): return Mean(sum(xs) / len(xs))''')
    r = v.verify({'stats.py': honest})                 # a float subclass with methods of its own: a reference, still close
    assert r.success and r.tests_passed == 5, (_failed(r), r.messages)

@pytest.mark.parametrize('raised', ['ValueError', 'SystemExit'])
def test_an_exit_that_raises_cannot_replace_the_tests_failed_assertion(raised):
    "A `__exit__` that turns the test's AssertionError into what an enclosing assertRaises waits for passes nothing"
    forged = CLOSE_REPO['stats.py'].replace('self.seen.append(v)', 'pass').replace(
        'def __exit__(self, *exc): return False', '''def __exit__(self, t, e, tb):
        if t is not None and issubclass(t, AssertionError): raise %s(0)''' % raised)
    r = HiddenTestVerifier(CLOSE_REPO, CLOSE_TESTS, timeout=60).verify({'stats.py': forged})
    test = {'ValueError': 'T.test_batch', 'SystemExit': 'T.test_stop'}[raised]
    assert test in _failed(r), (_failed(r), r.messages)
    assert '%s: AssertionError (a check of the test failed)' % test in r.messages, r.messages

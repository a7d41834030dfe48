"TimeStep.verdict across modules: a plugin env with the old info keys records as before (with a warning), bad verdicts fail in one line, the checker flags old keys."
import random
import warnings

import pytest

from knowlyr_lab.core import AgentEnv, TimeStep, Verdict, tool_schema, verdict_of
from knowlyr_lab.env_checker import check_agent_env
from knowlyr_lab.wrappers import RecorderWrapper


class Coin(AgentEnv):
    "Guess a coin's side from a seeded reset; the verdict on the final step"
    @property
    def tool_schemas(self): return [tool_schema('guess', 'the side', {'side': {'type': 'string', 'enum': ['heads', 'tails']}}, ['side'])]
    def _reset(self, task=None, seed=None):
        self.n = seed or 0; self.side = random.Random(self.n).choice(['heads', 'tails'])
        return TimeStep(f"Coin #{self.n} is hidden.", info={'task': {'id': f'coin-{self.n}'}})
    def _step(self, tool, params):
        ok = params['side'] == self.side
        return TimeStep('Right.' if ok else 'Wrong.', float(ok), terminated=True, info={'guesses': 1},
                        verdict=Verdict(success=ok, score=float(ok), reason='guessed'))
    def oracle_action(self): return {'tool': 'guess', 'params': {'side': self.side}}

class PluginCoin(Coin):
    "The same env as a plugin written before `TimeStep.verdict` wrote it: the verdict in info keys"
    def _step(self, tool, params):
        ts = super()._step(tool, params); v = ts.verdict
        ts.info, ts.verdict = {'success': v.success, 'score': v.score, 'reason': v.reason, **ts.info}, None
        return ts

def _record(env_cls, side):
    env = RecorderWrapper(env_cls(), 'scripted'); env.reset(seed=3)
    env.step({'tool': 'guess', 'params': {'side': side}})
    return env.get_trajectory()

@pytest.mark.parametrize('side', ['heads', 'tails'])
def test_plugin_env_with_old_keys_records_the_same_outcome_with_a_warning(side):
    new = _record(Coin, side)
    with pytest.warns(DeprecationWarning, match=r"info keys success, score, reason are deprecated: set TimeStep.verdict"):
        old = _record(PluginCoin, side)
    assert old.outcome == new.outcome and old.reward == new.reward
    assert (old.outcome.success, old.outcome.score, old.outcome.reason) == (side == 'heads', float(side == 'heads'), 'guessed')

def test_verdict_of_reads_the_field_first_and_the_old_keys_of_an_old_env():
    ts = TimeStep('done', 1.0, terminated=True, info={'success': False}, verdict=Verdict(success=True))
    with warnings.catch_warnings():
        warnings.simplefilter('error')          # the field is read: no warning
        assert verdict_of(ts) == Verdict(success=True)
        assert verdict_of(TimeStep('n=1')) is None
    with pytest.warns(DeprecationWarning):
        assert verdict_of(TimeStep('x', truncated=True, info={'invalid': 'harness timeout'})) == Verdict(invalid='harness timeout')

@pytest.mark.parametrize('field,value,want', [('success', 1, 'a bool'), ('success', 'yes', 'a bool'), ('score', float('nan'), 'a finite number'),
                                              ('score', True, 'a finite number'), ('score', '0.5', 'a finite number'),
                                              ('reason', 3, 'a str'), ('invalid', b'x', 'a str')])
def test_a_bad_verdict_type_raises_a_one_line_error(field, value, want):
    with pytest.raises(TypeError) as e: Verdict(**{field: value})
    msg = str(e.value)
    assert msg == f"Verdict.{field} is {value!r}: it must be {want} or None" and '\n' not in msg

def test_the_budget_fills_only_what_the_env_left_unset():
    assert Verdict(score=0.5).fill(success=False, score=0.0, reason='max_episode_steps') == Verdict(False, 0.5, 'max_episode_steps')

def test_check_agent_env_flags_the_old_keys_and_passes_the_verdict():
    assert check_agent_env(Coin).ok
    rep = check_agent_env(PluginCoin, raise_on_failure=False)
    assert list(rep.failures) == ['verdict']
    assert 'info keys success, score, reason: return TimeStep(..., verdict=Verdict(' in rep.failures['verdict']

def test_check_agent_env_flags_a_success_before_the_end():
    class Early(Coin):
        "Says success on a step that does not end the episode"
        def _reset(self, task=None, seed=None): self.said = False; return super()._reset(task, seed)
        def _step(self, tool, params):
            if self.said: return super()._step(tool, params)
            self.said = True
            return TimeStep('Noted.', verdict=Verdict(success=True))
    rep = check_agent_env(Early, raise_on_failure=False, checks=['verdict'])
    assert 'the episode goes on but the step says success' in rep.failures['verdict']

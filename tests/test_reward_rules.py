"""Properties of the rule layer on random trajectories (hypothesis): bounded scores, reasons, incremental = batch, and the
indexed rules equal a naive rescan of the prefix; the rule registry; one task normaliser."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowlyr_lab.domains import ToolCategory, get_domain
from knowlyr_lab.reward.rules import RULES, RuleResult, extract_facts, register_rule, tokens, unregister_rule
from knowlyr_lab.reward.rules import test_counts as _counts
from knowlyr_lab.reward.scorer import RuleScorer
from knowlyr_lab.trajectory import Observation, Outcome, Step, Task, ToolCall, Trajectory

TOOLS = ['file_read', 'Read', 'edit_file', 'file_write', 'shell', 'search', 'list_dir', 'submit', 'mystery_tool']
step_st = st.tuples(st.sampled_from(TOOLS), st.sampled_from(['a.py', 'src/b.py', 'c/d.txt']),
                    st.sampled_from(['x', 'y', 'a.py', '3 passed', '1 passed, 2 failed', 'Traceback', '', 'see src/b.py and c/d.txt.']),
                    st.booleans(), st.sampled_from([None, 0, 1, 2]), st.sampled_from(['x', 'y', 'z']))

def _traj(spec, success):
    steps = [Step(index=i, action=ToolCall(tool=t, params={'path': p, 'old_string': o, 'new_string': 'x' if o != 'x' else 'y', 'content': o}),
                  observation=Observation(content=obs, is_error=err, exit_code=code)) for i, (t, p, obs, err, code, o) in enumerate(spec)]
    return Trajectory(task=Task(id='t', instruction='Fix a.py', domain='coding'), steps=steps, outcome=Outcome(success=success, terminated=True))

@settings(max_examples=60, deadline=None)
@given(st.lists(step_st, min_size=1, max_size=30), st.sampled_from([True, False, None]))
def test_scores_bounded_and_incremental_equals_batch(spec, success):
    traj = _traj(spec, success)
    sc = RuleScorer('coding')
    batch = sc.score_trajectory(traj)
    assert len(batch) == len(traj.steps)
    for rr in batch:
        assert set(rr) == set(RULES)
        for r in rr.values():
            assert r.score is None or 0.0 <= r.score <= 1.0
            assert isinstance(r.reason, str) and r.reason
        c = sc.combine(rr)
        assert c is None or 0.0 <= c <= 1.0
    inc = RuleScorer('coding').reset(traj.task)
    n = len(traj.steps)
    res = {'success': success, 'score': None}
    steps = [inc.step(s, final=(i == n - 1), result=res) for i, s in enumerate(traj.steps)]
    assert [{k: r.score for k, r in a.items()} for a in steps] == [{k: r.score for k, r in b.items()} for b in batch]
    assert batch[-1]['outcome'].score == (None if success is None else float(success))

# -- the rules' definitions, written as plain rescans of the prefix (quadratic, obviously right) ------------------------
def _naive(traj:Trajectory, budget:int=15)->list[dict]:
    prof = get_domain('coding')
    def tool(s): return prof.canonical_tool(s.action.tool)
    def cat(s): return prof.category(s.action.tool)
    def target(s):
        p = s.action.params; spec = prof.tool(s.action.tool)
        return str(p.get(spec.stateful_key) if spec and spec.stateful_key and p.get(spec.stateful_key) else next((p[k] for k in ('path', 'file_path', 'url', 'element_id') if k in p), ''))
    def key(s): return (tool(s), json.dumps(s.action.params, sort_keys=True))
    def obs(s): return s.observation.content or ''
    looks = (ToolCategory.READ, ToolCategory.SEARCH, ToolCategory.THINK)
    out, productive = [], 0
    for t, s in enumerate(traj.steps):
        prev = traj.steps[:t]
        r = {}
        same = [j for j, q in enumerate(prev) if key(q) == key(s)]
        if not same: r['redundancy'] = 1.0
        else:
            j = same[-1]
            writes_since = any(cat(q) == ToolCategory.WRITE and target(q) == target(s) for q in prev[j + 1:]) or \
                           (cat(prev[j]) == ToolCategory.WRITE and target(prev[j]) == target(s) and False)
            r['redundancy'] = 0.0 if obs(prev[j]) == obs(s) and not writes_since else 1.0
        reg = 1.0
        if cat(s) not in looks:
            p = s.action.params
            if any(target(q) == target(s) and q.action.params.get('old_string') == p['new_string'] and q.action.params.get('new_string') == p['old_string'] for q in prev): reg = 0.0
            elif target(s):
                writes = [q for q in prev if target(q) == target(s) and isinstance(q.action.params.get('content'), str)]
                if writes and writes[-1].action.params['content'] != p['content'] and any(q.action.params['content'] == p['content'] for q in writes): reg = 0.0
            if reg == 1.0 and cat(s) in (ToolCategory.EXECUTE, None):
                tc = _counts(obs(s)); runs = [q for q in prev if key(q) == key(s) and _counts(obs(q)) is not None]
                if tc is not None and runs:
                    pp, pf = _counts(obs(runs[-1]))
                    if tc[1] > pf or tc[0] < pp: reg = 0.0
            if reg == 1.0 and not s.observation.is_error and obs(s) and cat(s) == ToolCategory.NAVIGATE:
                states = [obs(q) for q in prev if cat(q) not in looks and not q.observation.is_error and obs(q) and cat(q) == ToolCategory.NAVIGATE]
                if obs(s) in states and obs(s) != states[-1]: reg = 0.0
        r['regression'] = reg
        seen = set(tokens(traj.task.instruction)).union(*(tokens(obs(q)) for q in prev))
        P = set().union(*(extract_facts(v if isinstance(v, str) else json.dumps(v)) for v in s.action.params.values()))
        if not seen or not P: r['info_use'] = None
        else: r['info_use'] = 0.5 + 0.5 * sum(f.encode() in seen or f.encode() + b'.' in seen for f in P) / len(P)
        e = s.observation.is_error
        r['tool_error'] = 0.0 if e else 0.5 if s.observation.exit_code not in (None, 0) else 1.0
        wasted = min(r['redundancy'], r['regression'], r['tool_error']) < 0.5
        productive += not wasted; n = t + 1
        r['efficiency'] = productive / n * min(1.0, budget / n)
        out.append(r)
    return out

@settings(max_examples=80, deadline=None)
@given(st.lists(step_st, min_size=1, max_size=25))
def test_indexed_rules_equal_a_naive_rescan(spec):
    traj = _traj(spec, None)
    fast = RuleScorer('coding', rules=['redundancy', 'regression', 'info_use', 'tool_error', 'efficiency']).score_trajectory(traj)
    for i, (a, b) in enumerate(zip(fast, _naive(traj))):
        got = {k: None if r.score is None else round(r.score, 12) for k, r in a.items()}
        assert got == {k: None if v is None else round(v, 12) for k, v in b.items()}, (i, spec[:i + 1])

def test_identical_steps_are_redundant_after_the_first():
    traj = _traj([('file_read', 'a.py', 'same', False, None, 'x')] * 5, None)
    assert [r['redundancy'].score for r in RuleScorer('coding').score_trajectory(traj)] == [1, 0, 0, 0, 0]

# -- the registry ----------------------------------------------------------------------------------------------------
def test_register_rule_runs_in_scorers_and_engine_with_its_weight():
    from knowlyr_lab.reward.engine import RewardEngine
    def long_obs(v, ix, ctx):
        "0 for an observation over 10 characters"
        return RuleResult(0.0 if len(v.obs) > 10 else 1.0, 'observation length')
    traj = _traj([('file_read', 'a.py', 'x', False, None, 'x'), ('file_read', 'src/b.py', 'y' * 20, False, None, 'x')], None)
    base = [s.reward for s in RewardEngine('coding').score(traj).steps]
    register_rule('long_obs', long_obs, weight=3.0)
    try:
        assert RULES['long_obs'].weight == 3.0 and RULES['long_obs'].description.startswith('0 for an')
        eng = RewardEngine('coding')
        tr = eng.score(traj)
        assert [s.rules['long_obs'].score for s in tr.steps] == [1.0, 0.0]
        assert tr.steps[0].reward >= base[0] and tr.steps[1].reward < base[1]       # weight 3 pulls the long observation down
        with pytest.raises(ValueError, match='already registered'): register_rule('long_obs', long_obs)
        register_rule('long_obs', long_obs, weight=1.0, overwrite=True)
        assert RULES['long_obs'].weight == 1.0
    finally: unregister_rule('long_obs')
    assert 'long_obs' not in RuleScorer('coding').rules
    assert [s.reward for s in RewardEngine('coding').score(traj).steps] == base

def test_builtin_rules_are_registered_through_the_api():
    assert list(RULES)[:6] == ['redundancy', 'regression', 'info_use', 'efficiency', 'tool_error', 'outcome']
    assert {k: r.weight for k, r in RULES.items()} == {'redundancy': 1.0, 'regression': 1.0, 'info_use': 0.5, 'efficiency': 0.5, 'tool_error': 1.0, 'outcome': 2.0}
    assert RULES['efficiency'].late and RULES['redundancy'].update is not None

# -- one task normaliser ---------------------------------------------------------------------------------------------
def test_recorded_task_is_as_task_of_the_env_task_dict():
    from knowlyr_lab.core import AgentEnv, TimeStep
    from knowlyr_lab.trajectory import as_task
    from knowlyr_lab.wrappers import RecorderWrapper
    class Env(AgentEnv):
        domain, env_id = 'generic', 'test/meta'
        tool_schemas = []
        task = {'id': 't1', 'instruction': 'go', 'seed': 4, 'metadata': {'optimal_steps': 3}}
        def _reset(self, task=None, seed=None): return TimeStep('go', info={'task': dict(self.task)})
        def _step(self, tool, params): return TimeStep('ok', terminated=True)
    rec = RecorderWrapper(Env()); rec.reset()
    got, want = rec.get_trajectory().task, as_task(Env.task, domain='generic', env_id='test/meta')
    assert want.metadata == {'optimal_steps': 3, 'seed': 4}
    assert (got.id, got.instruction, got.domain, got.env_id, got.metadata) == (want.id, want.instruction, want.domain, want.env_id, want.metadata)
    seen = []
    rw = RecorderWrapper(Env(), step_reward_fn=lambda step, ctx: seen.append(ctx.task) or 0.0); fp = rw.reset().info['fingerprint']; rw.step({'tool': 'noop', 'params': {}})
    assert seen[0] == rw.get_trajectory().task and seen[0].fingerprint == fp   # the reward function scores against the recorded task
    assert seen[0].model_dump(exclude={'initial_observation'}) == as_task(Env.task, domain='generic', env_id='test/meta', fingerprint=fp).model_dump(exclude={'initial_observation'})


"Properties of the rule layer on random trajectories (hypothesis): bounded scores, reasons, incremental = batch."
from hypothesis import given, settings, strategies as st
from knowlyr_lab.trajectory import Trajectory, Task, Step, ToolCall, Observation, Outcome
from knowlyr_lab.reward.rules import RuleScorer, RULES

TOOLS = ['file_read', 'Read', 'edit_file', 'file_write', 'shell', 'search', 'list_dir', 'submit', 'mystery_tool']
step_st = st.tuples(st.sampled_from(TOOLS), st.sampled_from(['a.py', 'src/b.py', 'c/d.txt']),
                    st.sampled_from(['x', 'y', 'a.py', '3 passed', '1 passed, 2 failed', 'Traceback', '']),
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

def test_identical_steps_are_redundant_after_the_first():
    traj = _traj([('file_read', 'a.py', 'same', False, None, 'x')] * 5, None)
    assert [r['redundancy'].score for r in RuleScorer('coding').score_trajectory(traj)] == [1, 0, 0, 0, 0]

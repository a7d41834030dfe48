"The knowlyr-reward console script end to end (subprocess), including the judge through a local server."
import json, subprocess, sys, shutil
import pytest
from knowlyr_lab.testing import FakeLLMServer
from knowlyr_lab.trajectory import write_trajectories, read_trajectories
from knowlyr_lab.reward.quality import record_episode

def _cli(*args):
    exe = shutil.which('knowlyr-reward')
    cmd = [exe] if exe else [sys.executable, '-c', 'from knowlyr_lab.reward.cli import main; raise SystemExit(main())']
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=120)

@pytest.mark.slow
def test_score_with_judge_then_cache(tmp_path):
    trajs = [record_episode('knowlyr/maze-easy', s, 0.0, 'expert') for s in range(2)]
    write_trajectories(trajs, tmp_path / 't.jsonl')
    ans = json.dumps({'goal_progress': 0.5, 'tool_selection': 0.5, 'param_correctness': 0.5, 'reason': 'ok'})
    n_steps = sum(len(t.steps) for t in trajs)
    with FakeLLMServer(lambda req, api: ans, faults=['500']) as srv:
        args = ['score', tmp_path / 't.jsonl', '--judge', 'openai:judge', '--base-url', srv.openai_base_url, '--cache-dir', tmp_path / 'cache',
                '-o', tmp_path / 's.jsonl', '--weights', 'rules=1,judge=1', '--price-in', '1000', '--price-out', '2000']
        r1 = _cli(*args)
        assert r1.returncode == 0, r1.stderr
        s1 = json.loads(r1.stdout)
        assert s1['scored'] == 2 and f'{n_steps} judged, 0 failed' in s1['judge'] and '1 retries' in s1['judge']
        assert '$0.0000' not in s1['judge']            # priced tokens are counted as cost
        n = len(srv.requests)
        r2 = _cli(*args)
        assert r2.returncode == 0 and len(srv.requests) == n
        assert f'{n_steps} cache hits' in json.loads(r2.stdout)['judge']
    scored = list(read_trajectories(tmp_path / 's.jsonl'))
    st = scored[0].steps[0]
    assert st.reward_details['judge']['scores']['goal_progress'] == 0.5
    assert abs(st.reward - (st.reward_details['layers']['rules'] + 0.5) / 2) < 1e-9

def test_bad_input_is_reported(tmp_path):
    (tmp_path / 'bad.jsonl').write_text('not json\n')
    r = _cli('score', tmp_path / 'bad.jsonl', '-o', tmp_path / 'o.jsonl', '--no-progress')
    assert r.returncode == 0 and json.loads(r.stdout)['skipped'] == 1
    assert 'line 1' in (tmp_path / 'o.jsonl.quarantine.jsonl').read_text() or '"line":1' in (tmp_path / 'o.jsonl.quarantine.jsonl').read_text()

def test_missing_file_is_an_error(tmp_path, capsys):
    from knowlyr_lab.reward.cli import main
    assert main(['score', str(tmp_path / 'nope.jsonl'), '-o', str(tmp_path / 'o.jsonl')]) == 2
    assert 'nope.jsonl' in capsys.readouterr().err

"The knowlyr-reward console script end to end (subprocess), including the judge through a local server."
import json
import shutil
import subprocess
import sys

import pytest

from knowlyr_lab.agents import ExpertAgent
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.testing import FakeLLMServer
from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories


def _cli(*args):
    exe = shutil.which('knowlyr-reward')
    cmd = [exe] if exe else [sys.executable, '-c', 'from knowlyr_lab.cli.reward import main; raise SystemExit(main())']
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=120)

@pytest.mark.slow
def test_score_with_judge_then_cache(tmp_path):
    trajs = collect('knowlyr/maze-easy', ExpertAgent, 2, progress=False)
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

def test_all_bad_input_exits_non_zero_with_one_line(tmp_path):
    (tmp_path / 'bad.jsonl').write_text('not json\n')
    r = _cli('score', tmp_path / 'bad.jsonl', '-o', tmp_path / 'o.jsonl', '--no-progress')
    assert r.returncode == 2 and r.stdout == ''
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith('knowlyr-reward score: error: no valid trajectory in') and 'Traceback' not in r.stderr
    assert 'line 1' in (tmp_path / 'o.jsonl.quarantine.jsonl').read_text() or '"line":1' in (tmp_path / 'o.jsonl.quarantine.jsonl').read_text()

def test_missing_file_is_one_line_and_debug_shows_the_traceback(tmp_path):
    r = _cli('score', tmp_path / 'nope.jsonl', '-o', tmp_path / 'o.jsonl')
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and 'nope.jsonl does not exist' in r.stderr
    d = _cli('--debug', 'score', tmp_path / 'nope.jsonl', '-o', tmp_path / 'o.jsonl')
    assert d.returncode != 0 and 'Traceback' in d.stderr and 'FileNotFoundError' in d.stderr

def test_score_without_output_writes_jsonl_to_stdout(tmp_path):
    trajs = collect('knowlyr/maze-easy', ExpertAgent, 2, progress=False)
    write_trajectories(trajs, tmp_path / 't.jsonl')
    (tmp_path / 'x.json').write_text(trajs[0].model_dump_json(indent=2))        # one trajectory as a JSON document
    for src, n in [(tmp_path / 't.jsonl', 2), (tmp_path / 'x.json', 1)]:
        r = _cli('score', src, '--domain', 'coding', '--no-progress')
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert len(lines) == n and all(json.loads(l)['reward'] is not None for l in lines)
        assert json.loads(r.stderr)['scored'] == n and json.loads(r.stderr)['output'] == '<stdout>'

def _calibration_inputs(tmp_path):
    from knowlyr_lab.agents import RandomAgent
    from knowlyr_lab.reward.calibration import Annotation, append_annotation
    trajs = collect('knowlyr/maze-easy', ExpertAgent, 3, progress=False) + collect('knowlyr/maze-easy', RandomAgent, 3, max_episode_steps=6, progress=False)
    write_trajectories(trajs, tmp_path / 't.jsonl')
    for t in trajs:
        for s in t.steps: append_annotation(tmp_path / 'ann.jsonl', Annotation(trajectory_id=t.id, step=s.index, score=0.9 if t.agent.name == 'expert' else 0.2))
    return trajs

def test_cli_calibrate_fits_the_engine_calibration(tmp_path):
    from knowlyr_lab.reward.calibration import read_annotations
    from knowlyr_lab.reward.engine import RewardEngine
    trajs = _calibration_inputs(tmp_path)
    r = _cli('calibrate', tmp_path / 't.jsonl', tmp_path / 'ann.jsonl', '-o', tmp_path / 'engine.json', '--method', 'logistic', '--threshold', '0.6')
    assert r.returncode == 0, r.stderr
    eng = RewardEngine('generic'); cal = eng.calibrate(trajs, read_annotations(tmp_path / 'ann.jsonl'), method='logistic', threshold=0.6)
    saved = RewardEngine.load(tmp_path / 'engine.json').calibrator
    assert saved.params == cal.params and saved.threshold == 0.6 and json.loads(r.stdout)['pairs'] == cal.report['pairs']

def test_mcp_calibrate_fits_what_the_cli_fits(tmp_path):
    "#14 A4: MCP calibrate_reward fitted its own map (calibrated rewards, no threshold, 2 pairs) and wrote a bare map, not an engine"
    import asyncio
    import os
    from pathlib import Path

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from knowlyr_lab.reward.engine import RewardEngine
    _calibration_inputs(tmp_path)
    r = _cli('calibrate', tmp_path / 't.jsonl', tmp_path / 'ann.jsonl', '-o', tmp_path / 'engine.json', '--method', 'logistic', '--threshold', '0.6')
    assert r.returncode == 0, r.stderr
    root = Path(__file__).resolve().parent.parent
    params = StdioServerParameters(command=sys.executable, args=['-m', 'knowlyr_lab.mcp', '--root', str(tmp_path)], env={**os.environ, 'PYTHONPATH': str(root)})
    async def go():
        async with stdio_client(params) as (rd, wr):
            async with ClientSession(rd, wr) as s:
                await s.initialize()
                return await s.call_tool('calibrate_reward', {'annotations': 'ann.jsonl', 'trajectories': 't.jsonl',
                                                              'method': 'logistic', 'threshold': 0.6, 'output': 'mcp.json'})
    res = asyncio.run(go())
    assert not res.is_error, res.content
    cli, mcp = json.loads((tmp_path / 'engine.json').read_text()), json.loads((tmp_path / 'mcp.json').read_text())
    assert mcp['calibrator']['params'] == cli['calibrator']['params'] and mcp['calibrator']['threshold'] == cli['calibrator']['threshold'] == 0.6
    assert mcp == cli                                          # the same engine config, which `score --engine` reads
    summary = json.loads(r.stdout)
    assert {**res.structured_content, 'engine': None} == {**summary, 'engine': None} and summary['pairs'] > 3
    cal_cli, cal_mcp = RewardEngine.load(tmp_path / 'engine.json').calibrator, RewardEngine.load(tmp_path / 'mcp.json').calibrator
    assert [cal_mcp(x) for x in (0.1, 0.5, 0.9)] == [cal_cli(x) for x in (0.1, 0.5, 0.9)]

def _leaderboard_input(tmp_path):
    "An expert with one scored trajectory and a random agent with two"
    from knowlyr_lab.agents import RandomAgent
    trajs = collect('knowlyr/maze-easy', ExpertAgent, 1, progress=False) + collect('knowlyr/maze-easy', RandomAgent, 2, max_episode_steps=6, progress=False)
    write_trajectories(trajs, tmp_path / 't.jsonl')
    assert _cli('score', tmp_path / 't.jsonl', '-o', tmp_path / 's.jsonl', '--no-progress').returncode == 0
    return tmp_path / 's.jsonl'

@pytest.mark.parametrize('extra', [[], ['--bootstrap']])
def test_leaderboard_interval_of_one_trajectory_is_unknown_not_a_point(tmp_path, extra):
    "n=1 printed ci_low == ci_high == mean_score (a zero-width 95% CI); it cannot be computed, so it reads NaN"
    r = _cli('leaderboard', _leaderboard_input(tmp_path), *extra)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:]}
    assert rows['expert'][1] == '1' and rows['expert'][3:6] == ['NaN', 'NaN', 'NaN']      # ci_low, ci_high, std
    assert rows['random'][1] == '2' and 'NaN' not in rows['random'][3:5]

@pytest.mark.parametrize('w', ['rule=0', 'bogus=1', 'rules=1,Judge=1'])
def test_misspelt_layer_in_weights_is_refused(tmp_path, w):
    "A misspelt layer in --weights was silently ignored (the scores were those of the default weights)"
    (tmp_path / 't.jsonl').write_text('')
    r = _cli('score', tmp_path / 't.jsonl', '-o', tmp_path / 'o.jsonl', '--weights', w, '--no-progress')
    key = [kv.split('=')[0] for kv in w.split(',') if kv.split('=')[0] not in ('rules', 'judge')][0]
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert repr(key) in r.stderr and "['rules', 'judge']" in r.stderr

def test_cli_calibrate_reports_held_out_agreement_labelled(tmp_path):
    "The 'after' agreement was measured on the annotations the map was fitted on, unlabelled"
    _calibration_inputs(tmp_path)
    r = _cli('calibrate', tmp_path / 't.jsonl', tmp_path / 'ann.jsonl', '-o', tmp_path / 'engine.json')
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert 'after' not in out and {'before', 'after_held_out', 'after_in_sample', 'held_out'} <= set(out)
    assert 'cross-validat' in out['held_out'] and out['after_held_out']['n'] == out['after_in_sample']['n'] == out['pairs']

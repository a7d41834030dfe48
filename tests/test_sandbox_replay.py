"Replay: recorded trajectories survive a write/read round trip and replay without divergence, on every backend"
import warnings

import pytest
from sandbox_backends import BACKENDS, open_sandbox

from knowlyr_lab.sandbox.protocol import create_sandbox
from knowlyr_lab.sandbox.replay import record_calls, replay_trajectory
from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories

CALLS = [('git', {'args': ['init', '-q']}), ('git', {'args': 'add -A'}), ('git', {'args': ['commit', '-qm', 'start']}),
         ('search', {'pattern': 'return'}), ('think', {'thought': 'flip the sign'}),
         ('edit_file', {'path': 'calc.py', 'old_str': 'a - b', 'new_str': 'a + b'}),
         ('shell', {'command': 'python3 -c "import time, calc; print(calc.add(2, 3), f\'at {time.time():.3f}s\')"'}),
         ('file_write', {'path': 'notes/log.txt', 'content': 'fixed\n'}), ('list_dir', {}),
         ('git', {'args': ['commit', '-qam', 'fix']}), ('git', {'args': 'log --format="%H %s"'}), ('submit', {})]

@pytest.fixture(scope='module')
def recorded(tmp_path_factory):
    tpl = tmp_path_factory.mktemp('tpl'); (tpl/'calc.py').write_text('def add(a, b):\n    return a - b\n')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        with create_sandbox('local', workspace=tpl) as sb: traj = record_calls(sb, CALLS)
    path = tmp_path_factory.mktemp('traj')/'t.jsonl'
    write_trajectories([traj], path)
    return tpl, next(iter(read_trajectories(path)))

@pytest.mark.parametrize('backend', BACKENDS)
def test_replay_matches_on_every_backend(request, recorded, backend):
    tpl, traj = recorded
    sb = open_sandbox(request, backend, workspace=tpl)
    rep = replay_trajectory(traj, sb)
    assert rep.diverged == [], {s: rep.diff(s) for s in rep.diverged}
    assert [r['step'] for r in rep.rows] == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10]
    assert [(s['step'], s['tool']) for s in rep.skipped] == [(4, 'think'), (11, 'submit')]
    # commit ids are reproducible, so the full hashes in `git log` match exactly (no normalisation involved)
    assert rep.rows[-1]['expected'] == rep.rows[-1]['actual'] and len(rep.rows[-1]['actual'].split()[0]) == 40
    df = rep.to_dataframe()
    assert list(df.columns[:4]) == ['step', 'tool', 'diverged', 'reason'] and len(df) == 10 and not df.diverged.any()

def test_replay_reports_divergence(request, recorded, tmp_path):
    _, traj = recorded
    (tmp_path/'calc.py').write_text('def add(a, b):\n    return a + b\n')  # the bug is already fixed here
    sb = open_sandbox(request, 'local-none', workspace=tmp_path)
    rep = replay_trajectory(traj, sb)
    assert rep.diverged == [3, 5, 9, 10] and not rep.ok
    edit = rep.rows[[r['step'] for r in rep.rows].index(5)]
    assert edit['reason'] == 'output+is_error' and edit['actual_is_error'] and 'not found' in edit['actual']
    assert '-Edited calc.py' in rep.diff(5) and '+Error: old_str not found' in rep.diff(5)
    with pytest.raises(KeyError, match='step 4 was not replayed'): rep.diff(4)
    first = replay_trajectory(traj, sb, stop_at_first=True)
    assert first.diverged == [3] and len(first.rows) == 4
    exact = replay_trajectory(traj, open_sandbox(request, 'local-none', workspace=recorded[0]), normalize=None)
    assert 6 in exact.diverged  # the printed timing differs without normalisation

"The trajectory store survives SIGKILL inside a batch: no orphan or duplicate shard lines, every stored trajectory readable"
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.envs.maze import MazeEnv
from knowlyr_lab.hub.store import StoreError, TrajectoryStore
from knowlyr_lab.rollout.collect import collect
from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories

# put_many in a child that SIGKILLs itself at its k-th fsync: the batch's lines are written, its index rows not committed
SCRIPT = r'''
import os, signal, sys
from knowlyr_lab.hub.store import TrajectoryStore
from knowlyr_lab.trajectory_io import read_trajectories
root, src, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
real, calls = os.fsync, [0]
def fsync(fd):
    real(fd); calls[0] += 1
    if calls[0] == kill_at: os.kill(os.getpid(), signal.SIGKILL)
os.fsync = fsync
with TrajectoryStore(root, shard_bytes=40_000) as st: print(st.put_many(read_trajectories(src), batch=7))
'''

def _lines(root:Path)->list[bytes]:
    return [l for p in sorted((root / 'shards').glob('*.jsonl')) for l in p.read_bytes().splitlines()]

@pytest.fixture(scope='module')
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp('store-src')
    tasks = MazeEnv('easy').list_tasks()[:10]
    trajs = collect('knowlyr/maze-easy', ExpertAgent, tasks=tasks, seed=0, progress=False) + \
            collect('knowlyr/maze-easy', RandomAgent, tasks=tasks * 2, seed=1, max_episode_steps=8, progress=False)
    write_trajectories(trajs, d / 'trajs.jsonl')
    return d / 'trajs.jsonl', len({t.id for t in trajs})

def test_sigkill_inside_a_batch_leaves_no_orphan_lines(src, tmp_path):
    path, n = src
    root = tmp_path / 'store'
    killed = 0
    for k in (2, 3, 2, 4):                               # each run dies inside a later batch (after its lines, before its commit)
        r = subprocess.run([sys.executable, '-c', SCRIPT, str(root), str(path), str(k)], capture_output=True, text=True, timeout=120)
        killed += r.returncode == -signal.SIGKILL
    assert killed == 4
    with TrajectoryStore(root) as st:                    # reopening removes the uncommitted lines
        assert len(_lines(root)) == len(st) > 0
        st.put_many(read_trajectories(path))
        assert len(st) == n
        lines = _lines(root)
        assert len(lines) == n and len({json.loads(l)['id'] for l in lines}) == n      # one line per trajectory, no duplicates
        assert sorted(t.id for t in st) == sorted(json.loads(l)['id'] for l in lines)    # every line indexed and readable
    assert not list(root.glob('**/*.tmp*'))

def test_a_line_changed_on_disk_is_refused_not_returned_under_its_id(src, tmp_path):
    "get once returned whatever the shard held at the indexed offset: an edited action came back under the old content id"
    path, n = src
    with TrajectoryStore(tmp_path / 'store') as st:
        st.put_many(read_trajectories(path))
        ids = [t.id for t in st]
        shard = next((tmp_path / 'store' / 'shards').glob('*.jsonl'))
        raw = shard.read_bytes()
        first = raw[:raw.index(b'\n')]
        a, b = (b'"tool":"move"', b'"tool":"MOVE"')
        assert a in first
        shard.write_bytes(raw.replace(first, first.replace(a, b, 1), 1))   # the same length, another action
        with pytest.raises(StoreError, match=r"was changed|no longer reads"): st.get(ids[0])
        with pytest.raises(StoreError): list(st.query())
        assert st.get(ids[1]).id == ids[1]                 # the other lines still read
        shard.write_bytes(raw)
        assert [t.id for t in st] == ids and len(ids) == n

def test_a_writer_killed_while_another_holds_the_store_open_leaves_no_orphan_lines(src, tmp_path):
    "The lines a killed writer appended were cut only when a store was opened: a writer that had it open already appended after them"
    path, n = src
    root = tmp_path / 'store'
    trajs = list(read_trajectories(path))
    with TrajectoryStore(root, shard_bytes=40_000) as st:
        st.put_many(trajs[:3])
        r = subprocess.run([sys.executable, '-c', SCRIPT, str(root), str(path), '1'], capture_output=True, text=True, timeout=120)
        assert r.returncode == -signal.SIGKILL                           # its lines are written, its rows not committed
        st.put_many(trajs)
        assert len(st) == n and len(_lines(root)) == n                    # no line of the killed batch stays in a shard
        assert sorted(t.id for t in st) == sorted(json.loads(l)['id'] for l in _lines(root))

def test_a_batch_that_fails_half_way_leaves_no_orphan_lines(src, tmp_path):
    "A trajectory that does not validate stopped the batch after earlier lines were appended: they stayed, unindexed, and a later put wrote them twice"
    path, n = src
    root = tmp_path / 'store'
    trajs = list(read_trajectories(path))
    with TrajectoryStore(root) as st:
        st.put_many(trajs[:2])
        with pytest.raises(ValueError): st.put_many([trajs[2], trajs[3], {'not': 'a trajectory'}])
        assert len(_lines(root)) == len(st) == 2
        st.put_many(trajs)
        assert len(_lines(root)) == len(st) == n

def test_a_reward_changed_on_disk_is_refused_and_an_older_index_still_reads(src, tmp_path):
    "The content id leaves rewards out: a reward edited in a shard came back changed, with no error"
    import re
    import sqlite3
    path, _ = src
    root = tmp_path / 'store'
    with TrajectoryStore(root) as st: st.put_many(read_trajectories(path)); ids = [t.id for t in st]
    shard = next((root / 'shards').glob('*.jsonl')); raw = shard.read_bytes(); first = raw[:raw.index(b'\n')]
    m = re.search(rb'"reward":(-?\d\.\d)', first)
    assert m, first[:200]
    bad = first[:m.start(1)] + (b'9.9' if m[1] != b'9.9' else b'1.1') + first[m.end(1):]
    shard.write_bytes(raw.replace(first, bad, 1))
    with TrajectoryStore(root) as st:
        with pytest.raises(StoreError, match="checksum differs"): st.get(ids[0])
        assert st.get(ids[1]).id == ids[1]
    shard.write_bytes(raw)
    db = sqlite3.connect(root / 'index.sqlite')                # an index written before the checksum was kept
    with db: db.execute("ALTER TABLE traj DROP COLUMN line_sha")
    db.close()
    with TrajectoryStore(root) as st:                           # migrated: the old rows read (no checksum), new ones get one
        assert [t.id for t in st] == ids
        more = [t.model_copy(update={'task': t.task.model_copy(update={'id': 'other'})}) for t in st.query()][:2]
        st.put_many(more)
        assert st.db.execute("SELECT COUNT(*) FROM traj WHERE line_sha IS NULL").fetchone()[0] == len(ids)
        assert st.db.execute("SELECT COUNT(*) FROM traj WHERE line_sha IS NOT NULL").fetchone()[0] == 2
        assert len(list(st)) == len(ids) + 2

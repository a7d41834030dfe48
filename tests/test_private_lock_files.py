"""No other user can hold the locks of a pipeline's output folder or of its store, and so stop every run there.

`flock` (and SQLite's `fcntl` locks) need only read access, and the pipeline's `<output_dir>/.lock`, the store's
`.lock` and its `index.sqlite` were made `0644` under the usual umask: a second user (uid 65534, run through
`subprocess(user=...)`, which needs root) who could reach the folder opened `.lock`, held a shared lock on it and every
later run was refused ("another pipeline run is using ..."). The files are `0600` now (`open_private`, page 09c), and
one that is a link or another user's is refused before the run writes anything."""
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import call_tool, one_step_trajectory

import knowlyr_lab.hub.pipeline as pl
import knowlyr_lab.private_files as pf
from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
from knowlyr_lab.hub.store import TrajectoryStore
from knowlyr_lab.mcp import build_server
from knowlyr_lab.private_files import UnsafeFileError
from knowlyr_lab.trajectory_io import write_trajectories

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's and running a second user's "
                                                        "process (uid 65534) need root; this run is not root")
LOCKED = ['.lock', 'store/.lock', 'store/index.sqlite']       # what the pipeline and its store lock


@pytest.fixture
def base():
    "A folder the second user can pass through (0711), with root/logs/a.jsonl, one trajectory"
    d = Path(tempfile.mkdtemp()); os.chmod(d, 0o711)
    (d/'root'/'logs').mkdir(parents=True); os.chmod(d/'root', 0o755)
    write_trajectories([one_step_trajectory('mine')], d/'root'/'logs'/'a.jsonl')
    yield d
    subprocess.run(['rm', '-rf', str(d)], check=True)

def _as_other(script:str, *args, **kw):
    "Run the shell `script` as uid 65534 ($1... = args)"
    return subprocess.Popen(['sh', '-c', script, 'sh', *map(str, args)], user=65534, group=65534, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)

def _batch(out:Path, logs:Path)->dict: return Pipeline(PipelineConfig(str(out), export_formats=['sft'])).run_batch(str(logs))

def _mode(p:Path)->str: return oct(os.stat(p, follow_symlinks=False).st_mode & 0o777)


@as_root
def test_another_user_cannot_open_the_lock_files_while_the_pipeline_runs(base, monkeypatch):
    root, tried = base/'root', []
    real = pl.Pipeline._export_format
    def late(self, *a, **kw):        # the run holds .lock, the store exists: the second user tries each file
        if not tried:
            for f in LOCKED:
                p = _as_other('exec 3<"$1" && flock -s -n 3', root/'o'/f); tried.append((f, p.wait(), p.stderr.read()))
        return real(self, *a, **kw)
    monkeypatch.setattr(pl.Pipeline, '_export_format', late)
    r = call_tool(build_server(root), 'process_logs_batch', {'log_dir': 'logs', 'output_dir': 'o'})
    assert not r.is_error, r.content[0].text
    assert [f for f, _, _ in tried] == LOCKED
    for f, rc, err in tried: assert rc != 0 and 'Permission denied' in err, (f, rc, err)
    assert {f: _mode(root/'o'/f) for f in LOCKED} == dict.fromkeys(LOCKED, '0o600')

@as_root
def test_a_second_user_cannot_hold_the_lock_of_an_output_folder_and_stop_the_next_run(base):
    "The attack itself: after a run, the second user holds a shared lock on .lock; the next run must still go"
    root = base/'root'; _batch(root/'o', root/'logs')
    holder = _as_other('exec 3<"$1" && flock -s -n 3 && echo held && exec sleep 120', root/'o'/'.lock')
    try:
        held = holder.stdout.readline().strip()       # 'held', or '' when the shell could not open the file and ended
        r = _batch(root/'o', root/'logs')              # resumes: everything committed, nothing redone
    finally: holder.kill(); holder.wait()
    assert held == '' and 'Permission denied' in holder.stderr.read()
    assert r['files'] == 1 and r['trajectories'] == 1

@as_root
@pytest.mark.parametrize('f', LOCKED)
def test_a_lock_file_another_user_owns_is_refused_before_the_run_writes(base, f):
    out = base/'root'/'o'; (out/f).parent.mkdir(parents=True)
    (out/f).touch(mode=0o600); os.chown(out/f, 65534, 65534)
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob('*'))
    with pytest.raises(UnsafeFileError) as e: _batch(out, base/'root'/'logs')
    assert f"{out/f} is owned by uid 65534" in str(e.value), str(e.value)
    assert 'remove it while no run uses it' in str(e.value)
    if f == '.lock':        # the output folder's lock is taken first: nothing else is written
        assert sorted(p.relative_to(out).as_posix() for p in out.rglob('*')) == before
    assert os.stat(out/f).st_uid == 65534

@pytest.mark.parametrize('f', LOCKED)
def test_a_lock_file_that_is_a_link_is_refused_and_what_it_leads_to_is_untouched(tmp_path, f):
    out, target = tmp_path/'o', tmp_path/'elsewhere'
    target.write_text('kept'); os.chmod(target, 0o644)
    (out/f).parent.mkdir(parents=True); os.symlink(target, out/f)
    write_trajectories([one_step_trajectory('mine')], tmp_path/'logs'/'a.jsonl')
    with pytest.raises(UnsafeFileError, match=f"{out/f} is a link"): _batch(out, tmp_path/'logs')
    assert (out/f).is_symlink() and target.read_text() == 'kept' and _mode(target) == '0o644'
    if f == '.lock': assert sorted(p.name for p in out.iterdir()) == ['.lock']

def test_an_older_output_folder_whose_lock_others_may_read_resumes_and_is_narrowed(tmp_path):
    "A folder made before the fix (0644 files) is reused, not refused: the files are ours, made 0600 on the descriptor"
    write_trajectories([one_step_trajectory('mine')], tmp_path/'logs'/'a.jsonl')
    out = tmp_path/'o'; first = _batch(out, tmp_path/'logs')
    for f in LOCKED: os.chmod(out/f, 0o644)
    again = _batch(out, tmp_path/'logs')         # everything was committed: the store is not opened again
    assert again == first and _mode(out/'.lock') == '0o600' and _mode(out/'store'/'.lock') == '0o644'
    assert Pipeline(PipelineConfig(str(out))).status()['running'] is False
    with TrajectoryStore(out/'store') as st: assert len(st) == 1    # a store is narrowed when it is opened
    assert {f: _mode(out/f) for f in LOCKED} == dict.fromkeys(LOCKED, '0o600')
    assert json.loads((out/'work'/'store.done').read_text())['added'] == 1

def _removed_before_open(monkeypatch, lock, times):
    "os.open as seen by private_files: the lock is removed `times` times between the create that found it and its open"
    real, removed = os.open, []
    def racing(path, flags, *a):
        if str(path) == str(lock) and flags & os.O_CREAT and 0 < len(removed) < times:
            lock.write_bytes(b'')                       # another process makes it again before our create
        elif str(path) == str(lock) and not flags & os.O_CREAT and len(removed) < times:
            os.unlink(path); removed.append(path)       # another process (a user told to remove it) removes it now
        return real(path, flags, *a)
    monkeypatch.setattr(pf.os, 'open', racing)
    return removed

def test_a_lock_file_removed_between_the_create_and_the_open_is_made_again(tmp_path, monkeypatch):
    "On main the reopen raised a bare FileNotFoundError; the create is tried again and the file is made, 0600"
    lock = tmp_path/'.lock'; lock.write_text('old'); os.chmod(lock, 0o644)
    removed = _removed_before_open(monkeypatch, lock, 1)
    with pf.open_private(lock) as f: assert f.read() == b''
    assert removed == [lock] and _mode(lock) == '0o600'

def test_a_lock_file_removed_every_time_it_is_found_is_refused_naming_it(tmp_path, monkeypatch):
    "Bounded: a file another process makes and removes again and again is named in the error, not waited on forever"
    lock = tmp_path/'.lock'; lock.write_text('old')
    removed = _removed_before_open(monkeypatch, lock, 100)
    with pytest.raises(FileNotFoundError, match=f"{lock} was removed each of the 5 times it was found there"): pf.open_private(lock)
    assert len(removed) == 5

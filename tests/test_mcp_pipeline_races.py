"""The MCP pipeline tools read no log and write no file outside --root through a link swapped in *after* the check.

`run_pipeline`, `process_log`, `process_logs_batch` and `pipeline_status` hand a library pipeline paths it opens later;
another process that can write in the root swaps a folder on those paths for a link out of it in between. The hook
is the pipeline's own first step (`convert_fns`, `make`, the status read), run after the server checked the paths.
Driven by the MCP SDK's own client, in process (`mcp.Client(app)`)."""
import json
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

"""A published output holds this run's files only: a side file a previous run left (a quarantine) does not survive a
run that wrote none, so the folder never reads as if this run had quarantined records.

Tools write into private copies and publish them into the root at the end (`ServerRoot.staged`); publishing added
files, and a quarantine file from a clean rerun is simply not written. Now a declared output the run did not write,
and a side file (`SIDE_FILES`) the run did not write into a published folder, are removed beneath the held root,
following no link. Driven by the MCP SDK's own client, in process (`mcp.Client(app)`)."""
import json
import os

import pytest
from helpers import call_tool

from knowlyr_lab.mcp import build_server
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories


@pytest.fixture
def root(tmp_path):
    "root/t.jsonl: two good trajectories; root/bad.jsonl: the same and a broken line"
    r = tmp_path/'root'; r.mkdir()
    ts = [Trajectory(task=Task(id=f't{i}', instruction='x'), outcome=Outcome(success=True),
                     steps=[Step(index=0, thought='x', action=ToolCall(tool='x', params={}))]) for i in range(2)]
    write_trajectories(ts, r/'t.jsonl')
    (r/'bad.jsonl').write_text((r/'t.jsonl').read_text() + '{"broken\n')
    return r

def test_convert_logs_clean_rerun_drops_the_old_quarantine(root):
    app = build_server(root)
    (root/'logs').mkdir(); (root/'logs'/'a.jsonl').write_text('{"broken\n')
    r = call_tool(app, 'convert_logs', {'paths': ['logs'], 'output': 'c.jsonl'})
    assert json.loads(r.content[0].text)['quarantine'] and (root/'c.jsonl.quarantine.jsonl').exists()
    (root/'logs'/'a.jsonl').unlink()
    r = call_tool(app, 'convert_logs', {'paths': ['t.jsonl'], 'output': 'c.jsonl'})
    assert not r.is_error and json.loads(r.content[0].text)['quarantine'] is None, r.content[0].text
    assert not (root/'c.jsonl.quarantine.jsonl').exists()

def test_export_dataset_clean_rerun_drops_the_old_quarantine(root):
    app = build_server(root)
    r = call_tool(app, 'export_dataset', {'trajectories': 'bad.jsonl', 'format': 'sft', 'output_dir': 'ds'})
    assert not r.is_error and (root/'ds'/'quarantine.jsonl').exists(), r.content[0].text
    (root/'ds'/'notes.txt').write_text('mine\n')
    r = call_tool(app, 'export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'ds'})
    assert not r.is_error, r.content[0].text
    assert not (root/'ds'/'quarantine.jsonl').exists()
    assert (root/'ds'/'notes.txt').read_text() == 'mine\n' and (root/'ds'/'train.jsonl').exists()   # other files stay

def test_a_stale_side_file_that_is_a_link_is_removed_not_followed(root):
    "A link to a file in the root (one out of it is refused, as for any output): the link goes, its target stays"
    (root/'keep.jsonl').write_text('IMPORTANT\n')
    (root/'ds').mkdir(); os.symlink(root/'keep.jsonl', root/'ds'/'quarantine.jsonl')
    os.symlink('keep.jsonl', root/'c.jsonl.quarantine.jsonl')
    app = build_server(root)
    assert not call_tool(app, 'export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'ds'}).is_error
    assert not call_tool(app, 'convert_logs', {'paths': ['t.jsonl'], 'output': 'c.jsonl'}).is_error
    assert not os.path.lexists(root/'ds'/'quarantine.jsonl') and not os.path.lexists(root/'c.jsonl.quarantine.jsonl')
    assert (root/'keep.jsonl').read_text() == 'IMPORTANT\n'

def _files(d): return sorted(str(q.relative_to(d)) for q in d.rglob('*') if q.is_file())

def test_export_dataset_rerun_leaves_no_earlier_split(root):
    "An export with a test split, then one without: the folder holds the second export's files, as its result lists"
    for i in range(2, 12):
        write_trajectories([Trajectory(task=Task(id=f't{i}', instruction=f'x{i}'), outcome=Outcome(success=True),
                                       steps=[Step(index=0, thought='x', action=ToolCall(tool='x', params={}))])],
                           root/f"more{i}.jsonl")
    (root/'in').mkdir(); [os.rename(q, root/'in'/q.name) for q in root.glob('more*.jsonl')]
    app = build_server(root)
    r = call_tool(app, 'export_dataset', {'trajectories': 'in', 'format': 'sft', 'output_dir': 'ds', 'test_fraction': 0.5})
    assert not r.is_error and (root/'ds'/'test.jsonl').exists(), r.content[0].text
    (root/'ds'/'notes.txt').write_text('mine\n')
    r = call_tool(app, 'export_dataset', {'trajectories': 'in', 'format': 'sft', 'output_dir': 'ds'})
    assert not r.is_error, r.content[0].text
    assert _files(root/'ds') == ['.knowlyr-export.json', 'notes.txt', 'train.jsonl'], _files(root/'ds')   # others stay

def test_export_dataset_hf_rerun_as_sft_leaves_no_hf_folder(root):
    "An HF export (a DatasetDict folder, Parquet shards, a jsonl/ folder), then an SFT one: no HF file or folder stays"
    pytest.importorskip('datasets')
    app = build_server(root)
    r = call_tool(app, 'export_dataset', {'trajectories': 't.jsonl', 'format': 'hf', 'output_dir': 'ds'})
    assert not r.is_error and (root/'ds'/'hf').is_dir(), r.content[0].text
    r = call_tool(app, 'export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'ds'})
    assert not r.is_error, r.content[0].text
    assert _files(root/'ds') == ['.knowlyr-export.json', 'train.jsonl'], _files(root/'ds')
    left = sorted(str(q.relative_to(root/'ds')) for q in (root/'ds').rglob('*'))
    assert left == ['.knowlyr-export.json', 'train.jsonl'], left        # nor an emptied folder of it (hf/, its splits)

def test_export_dataset_never_removes_its_own_input(root):
    "The trajectories read from the output folder itself (ds/train.jsonl of an earlier export): they stay"
    app = build_server(root)
    (root/'ds').mkdir(); (root/'ds'/'test.jsonl').write_text((root/'t.jsonl').read_text())
    r = call_tool(app, 'export_dataset', {'trajectories': 'ds/test.jsonl', 'format': 'sft', 'output_dir': 'ds'})
    assert not r.is_error, r.content[0].text
    assert (root/'ds'/'test.jsonl').read_text() == (root/'t.jsonl').read_text()

def test_export_dataset_keeps_files_no_export_wrote(root):
    "Only what the last export's manifest lists goes: a user's own test.jsonl, or one edited since, stays"
    app = build_server(root)
    (root/'ds').mkdir(); (root/'ds'/'test.jsonl').write_text('mine\n')
    r = call_tool(app, 'export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'ds'})
    assert not r.is_error and (root/'ds'/'test.jsonl').read_text() == 'mine\n', r.content[0].text

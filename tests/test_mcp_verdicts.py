"""The MCP log tools find the verdict beside a log that the library finds on the real files.

The SWE-agent, mini-swe-agent, Rovo Dev and iSWE converters read a log's verdict from report files beside it
(`find_resolution`: the log's folder and the one above it). The tools convert private copies of the logs
(`ServerRoot.staged`), so they copy those verdict files too -- beneath the root, no link followed -- and the
trajectory names the report by its path in the root. Driven by the MCP SDK's own client, in process."""
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import call_tool

from knowlyr_lab.mcp import build_server
from knowlyr_lab.recorder.convert import convert

TRAJ = Path(__file__).parent/'fixtures'/'recorder'/'swe-agent'/'acme__widgets-1.traj'
IID = 'acme__widgets-1'

def verdicts(path:Path)->list:
    "(success, success_source) of each trajectory in the JSONL file `path`"
    return [(d['outcome']['success'], d['metadata'].get('success_source'))
            for d in map(json.loads, path.read_text().splitlines())]

def library(log:Path)->list:
    "What the library finds on the real file"
    return [(t.outcome.success, t.metadata.get('success_source')) for t in convert([str(log)], format='swe-agent')]

@pytest.fixture
def root(tmp_path):
    "root/logs/<iid>/<iid>.traj, a run report in root/logs"
    r = tmp_path/'root'; (r/'logs'/IID).mkdir(parents=True)
    shutil.copy(TRAJ, r/'logs'/IID)
    (r/'logs'/'report.json').write_text(json.dumps({'resolved_ids': [IID], 'unresolved_ids': []}))
    return r

def test_process_log_reads_the_run_report_above_the_log(root):
    app = build_server(root)
    r = call_tool(app, 'process_log', {'path': f'logs/{IID}/{IID}.traj', 'output_dir': 'o', 'format': 'swe-agent'})
    assert not r.is_error, r.content[0].text
    want = [(True, str(root/'logs'/'report.json'))]
    assert library(root/'logs'/IID/f'{IID}.traj') == want
    assert verdicts(root/'o'/'trajectories.jsonl') == want

def test_convert_logs_reads_a_result_file_beside_the_log(root):
    (root/'logs'/IID/f'{IID}_result.json').write_text(json.dumps({'resolved': False}))   # found before the report
    app = build_server(root)
    r = call_tool(app, 'convert_logs', {'paths': [f'logs/{IID}/{IID}.traj'], 'output': 'c.jsonl', 'format': 'swe-agent'})
    assert not r.is_error, r.content[0].text
    want = [(False, str(root/'logs'/IID/f'{IID}_result.json'))]
    assert library(root/'logs'/IID/f'{IID}.traj') == want
    assert verdicts(root/'c.jsonl') == want
    assert str(app._knowlyr_root.stages) not in (root/'c.jsonl').read_text() + r.content[0].text

def test_process_logs_batch_reads_a_report_in_the_log_folders_parent(tmp_path):
    root = tmp_path/'root'; (root/'runs'/'r1').mkdir(parents=True)
    shutil.copy(TRAJ, root/'runs'/'r1')
    (root/'runs'/'r1.json').write_text(json.dumps({'resolved_ids': [], 'unresolved_ids': [IID]}))
    (root/'runs'/'logs'/IID).mkdir(parents=True)
    (root/'runs'/'logs'/IID/'report.json').write_text(json.dumps({IID: {'resolved': True}}))   # read first
    app = build_server(root)
    r = call_tool(app, 'process_logs_batch', {'log_dir': 'runs/r1', 'output_dir': 'o', 'format': 'swe-agent'})
    assert not r.is_error, r.content[0].text
    want = [(True, str(root/'runs'/'logs'/IID/'report.json'))]
    assert library(root/'runs'/'r1'/f'{IID}.traj') == want
    assert verdicts(root/'o'/'trajectories.jsonl') == want

def test_a_link_or_a_second_name_is_not_read_for_a_verdict(root, tmp_path):
    outside = tmp_path/'outside.json'; outside.write_text(json.dumps({'resolved': True}))
    (root/'logs'/'report.json').unlink()
    os.symlink(outside, root/'logs'/IID/f'{IID}_result.json')                  # a link out of the root
    (run := tmp_path/'run.json').write_text(json.dumps({'resolved_ids': [IID]}))
    os.link(run, root/'logs'/'run.json')                                       # a file with a second name
    app = build_server(root)
    r = call_tool(app, 'convert_logs', {'paths': [f'logs/{IID}/{IID}.traj'], 'output': 'c.jsonl', 'format': 'swe-agent'})
    assert not r.is_error, r.content[0].text
    assert verdicts(root/'c.jsonl') == [(None, None)]

"""What a client reads of the MCP server names no path of the host's: not the private copies a call reads its inputs from.

The tools read private copies of their inputs (`ServerRoot.staged`, under a temporary folder of the host), and the
converters write the path they read a log at into what they make: a trajectory's `source.path`, the `unmapped` records
of its metadata, a mini-swe-agent's `success_source`, a quarantine record. Each such path must name the log by its
name in the root, as the client named it, so the outputs say where the log is and two runs write the same files.
Driven by the MCP SDK's own client, in process (`mcp.Client(app)`)."""
import json
import shutil
from pathlib import Path

import pytest
from helpers import call_tool
from test_mcp_recorder_integrity import chat_log

from knowlyr_lab.mcp import build_server
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

LOGS = Path(__file__).parent/'fixtures'/'agent_logs'

@pytest.fixture
def root(tmp_path):
    "root/logs: a codex-cli log (unmapped records), mini-swe-agent ones (success_source), two chat logs with bad lines"
    r = tmp_path/'root'; (r/'logs').mkdir(parents=True)
    shutil.copy(LOGS/'codex-cli'/'rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl', r/'logs')
    for n in ('django__django-10999.traj.json', 'swe-bench_verified__test__20251118_mini-v1.15.0_gemini-3-pro-preview-20251118.json'):
        shutil.copy(LOGS/'mini-swe-agent'/n, r/'logs')
    for n in ('chat.jsonl', 'chät.jsonl'):          # a name that is not ASCII: a quarantine writes it unescaped
        (r/'logs'/n).write_text(chat_log(['hello', 'world']) + '{"messages": 3}\n{"broken\n')
    ts = [Trajectory(task=Task(id=f't{i}', instruction='x'), outcome=Outcome(success=True), reward=0.5 + i/4,
                     steps=[Step(index=0, thought='x', action=ToolCall(tool='x', params={}))]) for i in range(2)]
    write_trajectories(ts, r/'t.jsonl')
    (r/'ann.jsonl').write_text('{"broken\n')
    return r

CALLS = [('convert_logs', {'paths': ['logs'], 'output': 'c.jsonl'}),
         ('convert_logs', {'paths': ['logs/chät.jsonl', 'logs/chat.jsonl'], 'output': 'd.jsonl', 'format': 'openai-chat'}),
         ('convert_logs', {'paths': ['logs', 'none.jsonl'], 'output': 'e.jsonl'}),
         ('validate_logs', {'paths': ['logs']}),
         ('process_log', {'path': 'logs/chät.jsonl', 'output_dir': 'o1'}),
         ('process_logs_batch', {'log_dir': 'logs', 'output_dir': 'o2'}),
         ('pipeline_status', {'output_dir': 'o2'}),
         ('export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'ds'}),
         ('build_preferences', {'trajectories': 't.jsonl', 'output': 'p.jsonl'}),
         ('calibrate_reward', {'trajectories': 't.jsonl', 'annotations': 'ann.jsonl', 'output': 'eng.json'}),
         ('reward_leaderboard', {'trajectories': 't.jsonl'})]

def test_no_answer_or_output_names_the_private_copies(root):
    app = build_server(root)
    stages = str(app._knowlyr_root.stages)          # where this server's private copies lie
    for tool, args in CALLS:
        r = call_tool(app, tool, args)
        assert stages not in r.content[0].text, (tool, r.content[0].text)
    leaks = [str(p.relative_to(root)) for p in root.rglob('*') if p.is_file() and stages in p.read_text(errors='replace')]
    assert leaks == [], leaks

def test_converted_logs_are_named_by_their_names_in_the_root(root):
    app = build_server(root)
    assert not call_tool(app, 'convert_logs', {'paths': ['logs'], 'output': 'c.jsonl'}).is_error
    ts = [json.loads(l) for l in (root/'c.jsonl').read_text().splitlines()]
    srcs = {str(p) for p in (root/'logs').iterdir()}
    assert {t['source']['path'] for t in ts} == srcs - {str(root/'logs'/'swe-bench_verified__test__'
                                                            '20251118_mini-v1.15.0_gemini-3-pro-preview-20251118.json')}
    assert {t['metadata'].get('success_source') for t in ts} - {None} == {str(root/'logs'/'swe-bench_verified__test__'
                                                                           '20251118_mini-v1.15.0_gemini-3-pro-preview-20251118.json')}
    q = [json.loads(l)['path'] for l in (root/'c.jsonl.quarantine.jsonl').read_text().splitlines()]
    assert {str(root/'logs'/'chat.jsonl'), str(root/'logs'/'chät.jsonl')} <= set(q) <= srcs, q
    first = (root/'c.jsonl').read_bytes()          # a second run writes the same file
    assert not call_tool(app, 'convert_logs', {'paths': ['logs'], 'output': 'c.jsonl'}).is_error
    assert (root/'c.jsonl').read_bytes() == first

"No MCP tool reads or writes a file outside --root through a symlink or a hard link inside it, driven by the MCP SDK's stdio client"
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from knowlyr_lab.mcp_root import ServerRoot
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, 'PYTHONPATH': str(ROOT)}
SECRET = 'OUTSIDE-SECRET-INSTRUCTION'

def _traj(instruction): return Trajectory(task=Task(id='t', instruction=instruction),
                                          steps=[Step(index=0, thought='x', action=ToolCall(tool='x', params={}))],
                                          outcome=Outcome(success=True))

@pytest.fixture(scope='module')
def served(tmp_path_factory):
    "A root with links out of it (a file link in a log directory, an output file link, a quarantine file link), and what the tools did"
    base = tmp_path_factory.mktemp('links')
    out, root = base/'outside', base/'root'
    for d in (out, root/'data', root/'logs'/'sub', root/'o2', root/'elsewhere', root/'hard', root/'o3'): d.mkdir(parents=True)
    write_trajectories([_traj(SECRET)], out/'secret.jsonl')
    (out/'victim.txt').write_text('IMPORTANT\n'); (out/'q.txt').write_text('Q\n')
    write_trajectories([_traj('mine')], root/'mine.jsonl')
    write_trajectories([_traj('mine')], root/'logs'/'sub'/'a.jsonl')
    os.symlink(out/'secret.jsonl', root/'data'/'link.jsonl')                # read through a directory argument
    os.symlink(out/'victim.txt', root/'o2'/'train.jsonl')                  # written through an output directory
    os.symlink(out/'q.txt', root/'c.jsonl.quarantine.jsonl')               # written as convert_logs' quarantine
    os.symlink(root/'elsewhere', root/'logs'/'sub'/'inside')               # a link inside the root: fine ...
    os.link(out/'secret.jsonl', root/'hard'/'h.jsonl')                     # the outside file, by another name
    os.link(out/'secret.jsonl', root/'h.jsonl')
    os.link(out/'victim.txt', root/'o3'/'train.jsonl')
    async def go(s):
        r = {}
        call = lambda name, args: s.call_tool(name, args)
        r['export_dir'] = await call('export_dataset', {'trajectories': 'data', 'format': 'sft', 'output_dir': 'o'})
        r['convert_dir'] = await call('convert_logs', {'paths': ['data'], 'output': 'c1.jsonl'})
        r['validate_dir'] = await call('validate_logs', {'paths': ['data']})
        r['batch_dir'] = await call('process_logs_batch', {'log_dir': 'data', 'output_dir': 'pipe'})
        r['export_out'] = await call('export_dataset', {'trajectories': 'mine.jsonl', 'format': 'sft', 'output_dir': 'o2'})
        r['quarantine'] = await call('convert_logs', {'paths': ['mine.jsonl'], 'output': 'c.jsonl'})
        r['inside_ok'] = await call('convert_logs', {'paths': ['logs'], 'output': 'ok.jsonl'})
        r['hard_dir'] = await call('convert_logs', {'paths': ['hard'], 'output': 'c3.jsonl'})
        r['hard_file'] = await call('recorder_diff', {'path_a': 'h.jsonl', 'path_b': 'mine.jsonl'})
        r['hard_out'] = await call('export_dataset', {'trajectories': 'mine.jsonl', 'format': 'sft', 'output_dir': 'o3'})
        os.symlink(out, root/'elsewhere'/'away')                            # ... until what it leads to holds a link out
        r['behind_inside'] = await call('validate_logs', {'paths': ['logs']})
        return r
    argv = ['-m', 'knowlyr_lab.mcp', '--root', str(root)]
    async def session():
        async with stdio_client(StdioServerParameters(command=sys.executable, args=argv, env=ENV)) as (rd, wr):
            async with ClientSession(rd, wr) as s:
                await s.initialize()
                return await go(s)
    return base, asyncio.run(session())

def _refused(res, *words):
    text = res.content[0].text
    assert res.is_error and 'outside the server root' in text and len(text.splitlines()) == 1, text
    for w in words: assert w in text, text

def test_a_directory_argument_holding_a_link_out_is_refused(served):
    base, r = served
    for k in ('export_dir', 'convert_dir', 'validate_dir', 'batch_dir'): _refused(r[k], 'data/link.jsonl', 'secret.jsonl')
    root = base/'root'
    assert not (root/'o').exists() and not (root/'c1.jsonl').exists() and not (root/'pipe').exists()
    for p in root.rglob('*'):          # nothing of the secret was written anywhere (but the planted links to it)
        if p.is_file() and not p.is_symlink() and p.stat().st_nlink == 1: assert SECRET not in p.read_text(errors='replace'), p

def test_an_output_holding_a_link_out_is_refused(served):
    base, r = served
    _refused(r['export_out'], 'o2/train.jsonl', 'victim.txt')
    _refused(r['quarantine'], 'c.jsonl.quarantine.jsonl', 'q.txt')
    assert (base/'outside'/'victim.txt').read_text() == 'IMPORTANT\n' and (base/'outside'/'q.txt').read_text() == 'Q\n'

def test_links_inside_the_root_still_work_and_what_they_lead_to_is_checked(served):
    base, r = served
    assert not r['inside_ok'].is_error, r['inside_ok'].content
    assert json.loads(r['inside_ok'].content[0].text)['trajectories'] == 1
    _refused(r['behind_inside'], 'elsewhere/away')

def test_a_hard_link_is_refused_read_or_written(served):
    base, r = served
    _refused(r['hard_dir'], 'hard/h.jsonl', 'hard link'); _refused(r['hard_file'], 'h.jsonl', 'hard link')
    _refused(r['hard_out'], 'o3/train.jsonl', 'hard link')
    assert not (base/'root'/'c3.jsonl').exists() and (base/'outside'/'victim.txt').read_text() == 'IMPORTANT\n'

def test_a_hard_link_is_refused_by_its_count_of_names():
    "As the file read or written, and in a directory's tree, wherever its other name lies (moved from 93a_mcp_root)"
    h = ServerRoot(); (h.root/'logs').mkdir(); (h.root/'mine.jsonl').write_text('{}\n')
    outside = Path(tempfile.mkdtemp())/'secret.jsonl'; outside.write_text('{}\n')
    os.link(outside, h.root/'logs'/'h.jsonl'); os.link(outside, h.root/'train.jsonl')
    assert h.path('mine.jsonl') == h.root/'mine.jsonl'
    with pytest.raises(ValueError, match=r"log path 'logs' holds logs/h.jsonl, a file with another name \(a hard link\)"):
        h.path('logs', 'log path')
    with pytest.raises(ValueError, match=r"output 'train.jsonl' is a file with another name \(a hard link\), which may lie "
                                         "outside the server root"):
        h.path('train.jsonl', 'output')

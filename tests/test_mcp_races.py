"""No MCP tool reads or writes outside --root through a link planted *while the call runs* (time of check, time of use).

Another local process that can write in the root swaps a directory or an output file for a symlink to a place outside
it, at the worst moment: after the server checked the path, before it is read or written. Hooks make the moment
exact: the library function a tool hands the path to (the converter, the trajectory writer), and the server's own
copy-in walk and publishing step. Driven by the MCP SDK's own client, in process (`mcp.Client(app)`)."""
import asyncio
import json
import os
import threading
from pathlib import Path

import pytest
from helpers import call_tool, nothing_holds, one_step_trajectory, swap_for_link
from mcp import Client

import knowlyr_lab.mcp_tools as tools
from knowlyr_lab.mcp import build_server
from knowlyr_lab.mcp_root import ServerRoot
from knowlyr_lab.trajectory_io import write_trajectories

SECRET = 'OUTSIDE-SECRET-RACE'


@pytest.fixture
def place(tmp_path):
    "(root, outside): root/logs/sub/a.jsonl is the root's; outside/ holds the secret and a victim file"
    out, root = tmp_path/'outside', tmp_path/'root'
    for d in (out, root/'logs'/'sub', root/'w'): d.mkdir(parents=True)
    write_trajectories([one_step_trajectory(SECRET)], out/'a.jsonl')
    (out/'victim.txt').write_text('IMPORTANT\n')
    write_trajectories([one_step_trajectory('mine')], root/'logs'/'sub'/'a.jsonl')
    return root, out



def _nothing_secret(root:Path): nothing_holds(root, SECRET)

def test_a_log_directory_swapped_for_a_link_after_the_check_is_not_read(place, monkeypatch):
    root, out = place
    real = tools.convert
    def late(ins, **kw):                      # the path was checked; the converter is about to read it
        swap_for_link(root/'logs'/'sub', out); return real(ins, **kw)
    monkeypatch.setattr(tools, 'convert', late)
    r = call_tool(build_server(root), 'convert_logs', {'paths': ['logs'], 'output': 'c.jsonl'})
    assert not r.is_error, r.content[0].text
    assert json.loads(r.content[0].text)['trajectories'] == 1      # the copy taken when it was checked
    _nothing_secret(root)

def test_a_link_swapped_in_during_the_copy_in_walk_is_refused(place, monkeypatch):
    root, out = place
    real = ServerRoot._entry
    def late(self, dfd, drel, n, *a, **kw):   # listed as a directory; a link by the time it is opened
        if n == 'sub' and not (root/'logs'/'sub').is_symlink(): swap_for_link(root/'logs'/'sub', out)
        return real(self, dfd, drel, n, *a, **kw)
    monkeypatch.setattr(ServerRoot, '_entry', late)
    r = call_tool(build_server(root), 'convert_logs', {'paths': ['logs'], 'output': 'c.jsonl'})
    assert r.is_error and "holds logs/sub, a link to" in r.content[0].text, r.content[0].text
    assert not (root/'c.jsonl').exists(); _nothing_secret(root)

def test_an_output_file_swapped_for_a_link_after_the_check_is_not_written_through(place, monkeypatch):
    root, out = place
    real = tools.write_trajectories
    def late(trajs, path, *a, **kw):          # the output was checked; the writer is about to open it
        os.symlink(out/'victim.txt', root/'c.jsonl'); return real(trajs, path, *a, **kw)
    monkeypatch.setattr(tools, 'write_trajectories', late)
    r = call_tool(build_server(root), 'convert_logs', {'paths': ['logs'], 'output': 'c.jsonl'})
    assert not r.is_error, r.content[0].text
    assert (out/'victim.txt').read_text() == 'IMPORTANT\n'
    assert not (root/'c.jsonl').is_symlink() and 'mine' in (root/'c.jsonl').read_text()   # the link replaced, not followed

def test_an_output_directory_swapped_for_a_link_while_publishing_is_refused(place, monkeypatch):
    root, out = place
    real = ServerRoot._dir
    def late(self, rel, what):                # about to make/open the output's directory
        if rel == 'w' and not (root/'w').is_symlink(): swap_for_link(root/'w', out)
        return real(self, rel, what)
    monkeypatch.setattr(ServerRoot, '_dir', late)
    r = call_tool(build_server(root), 'build_preferences', {'trajectories': 'logs/sub/a.jsonl', 'output': 'w/p.jsonl'})
    assert r.is_error and 'it changed while the call ran' in r.content[0].text, r.content[0].text
    assert sorted(p.name for p in out.iterdir()) == ['a.jsonl', 'victim.txt']

def test_a_directory_swapped_back_and_forth_never_leaks(place):
    "No hook: a thread swaps logs/sub for a link out and back while calls run; no call ever reads the secret"
    root, out = place
    app, stop = build_server(root), threading.Event()
    def swapper():
        sub, moved = root/'logs'/'sub', root/'logs'/'sub.real'
        while not stop.is_set():
            os.rename(sub, moved); os.symlink(out, sub)
            os.unlink(sub); os.rename(moved, sub)
    t = threading.Thread(target=swapper, daemon=True); t.start()
    async def go():
        async with Client(app) as c:
            return [await c.call_tool('convert_logs', {'paths': ['logs'], 'output': f'c{i}.jsonl'}) for i in range(30)]
    try: rs = asyncio.run(go())
    finally: stop.set(); t.join()
    gone = ('outside the server root', 'does not exist', 'No such file or directory')   # refused, or caught mid-swap
    for r in rs: assert not r.is_error or any(g in r.content[0].text for g in gone), r.content[0].text
    _nothing_secret(root)

"""Helpers shared by the server tests: an ASGI app served from a thread of the test's own process, and a bounded wait.

Serving in-process (not `EnvServer`'s subprocess) lets a test see and patch the served envs: which were closed, a
sandbox backend made to fail."""
import contextlib
import socket
import threading
import time


def until(cond, timeout:float=60.0, what:str='the condition')->float:
    "Wait (bounded) for `cond()`; the time it took"
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, f'{what} did not happen within {timeout:g} s'
        time.sleep(0.05)
    return time.monotonic() - t0

@contextlib.contextmanager
def served(app, host:str='127.0.0.1', http='auto'):
    "Serve `app` on `host` from a thread of this process (`http`: uvicorn's protocol class); its URL while the block runs"
    import uvicorn
    sock = socket.create_server((host, 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level='warning', http=http))
    th = threading.Thread(target=server.run, kwargs={'sockets': [sock]}, daemon=True); th.start()
    try:
        until(lambda: server.started or not th.is_alive(), 120, 'the server start')
        assert th.is_alive() and server.started, 'the server thread died'
        yield f'http://{host}:{sock.getsockname()[1]}'
    finally:
        server.should_exit = True; th.join(30); sock.close()

# -- the transports an attack goes over ---------------------------------------------------------------------------------

TRANSPORTS = ('python', 'agentgym', 'openenv', 'openenv-mcp')   # the Python API, and the env servers' protocols

def call_tool_client():
    "`OpenEnvClient` whose steps go as OpenEnv's MCP actions (`call_tool`, as openenv-core's `MCPToolClient` sends them)"
    from knowlyr_lab.envs.remote import OpenEnvClient
    class CallToolClient(OpenEnvClient):
        def _request(self, msg, what, *args):
            if msg.get('type') == 'step':
                d = msg['data']; msg = {'type': 'step', 'data': {'type': 'call_tool', 'tool_name': d['tool'], 'arguments': d['params']}}
            return super()._request(msg, what, *args)
    return CallToolClient

def app_for(transport:str, env_factory, **kw):
    "The ASGI app serving `env_factory` over `transport` (`agentgym_app` or `openenv_app`, with `kw`)"
    from knowlyr_lab.envs.serve import agentgym_app, openenv_app
    return (agentgym_app if transport == 'agentgym' else openenv_app)(env_factory, **kw)

def client_for(transport:str, url:str, **kw):
    "A client env of the server at `url` over `transport` (its task ids are 'remote-s<seed>')"
    from knowlyr_lab.envs.remote import AgentGymClient, OpenEnvClient
    cls = {'agentgym': AgentGymClient, 'openenv': OpenEnvClient, 'openenv-mcp': call_tool_client()}[transport]
    return cls(url, name='remote', **kw)

def sent_as(transport:str, action:dict)->dict:
    "`action` (a tool call) as a client of `transport` sends it: AgentGym's is one `act` text"
    from knowlyr_lab.envs.serve import format_call
    return {'tool': 'act', 'params': {'action': format_call(action['tool'], action['params'])}} if transport == 'agentgym' else action

def call_tool(app, name:str, args:dict):
    "One call of the MCP tool `name` with `args` through the MCP SDK's own client, against the server `app` in process"
    import asyncio

    from mcp import Client
    async def go():
        async with Client(app) as c: return await c.call_tool(name, args)
    return asyncio.run(go())

def swap_for_link(d, to):
    "Replace the directory (or file) `d` by a symlink to `to`, as another process writing in a server's root would"
    import os
    os.rename(d, d.with_name(d.name + '.moved')); os.symlink(to, d)

def nothing_holds(root, secret:str):
    "Assert that no file beneath `root` (links not followed) holds `secret`"
    for p in root.rglob('*'):
        if p.is_file() and not p.is_symlink(): assert secret not in p.read_text(errors='replace'), p

def one_step_trajectory(instruction:str):
    "A successful trajectory of one step whose task is `instruction`"
    from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
    return Trajectory(task=Task(id='t', instruction=instruction), outcome=Outcome(success=True),
                      steps=[Step(index=0, thought='x', action=ToolCall(tool='x', params={}))])

# -- a request as any client can send it, in the pieces it chooses --------------------------------------------------------

def sent_whole(port:int, pieces:list, pause:float=0.0)->bytes:
    "Everything the server answers to `pieces` sent on one connection (from another thread, `pause` apart), to its close"
    c = socket.create_connection(('127.0.0.1', port), timeout=60)
    def send():
        for i, p in enumerate(pieces):
            if i: time.sleep(pause)
            try: c.sendall(p)
            except OSError: return                         # the server closed with the rest unread
    th = threading.Thread(target=send, daemon=True); th.start()
    got = b''
    try:
        while chunk := c.recv(65536): got += chunk
    except ConnectionResetError: pass                        # the reset after the answer: what came is kept
    th.join(60); c.close()
    return got

def sent_still_sending(port:int, data:bytes, buffer:int=4096)->bytes:
    """The server's answer to `data`, sent by a client whose small send buffer (`buffer` bytes) keeps it sending when the
    answer comes, read to the server's close. A reset raises (`sent_whole` keeps what came): the answer must come whole"""
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer); c.settimeout(60)
    try:
        c.connect(('127.0.0.1', port)); c.sendall(data)         # a reset while still sending: BrokenPipe/ConnectionReset
        return b''.join(iter(lambda: c.recv(65536), b''))       # and one after the answer: ConnectionResetError
    finally: c.close()

def answer_to(port:int, pieces:list, pause:float=0.0)->tuple:
    "(status, headers with lower-case names, body) of the server's answer to `pieces` sent on one connection"
    got = sent_whole(port, pieces, pause)
    assert got.startswith(b'HTTP/1.1 '), got[:200]
    head, _, body = got.partition(b'\r\n\r\n')
    lines = head.decode('latin-1').split('\r\n')
    return int(lines[0].split(' ')[1]), {k.lower(): v for k, _, v in (l.partition(': ') for l in lines[1:])}, body

def get_request(path:bytes, headers:bytes=b'')->bytes:
    "A GET of `path` with `headers` (each line ending in CRLF) that asks the server to close after its answer"
    return b'GET ' + path + b' HTTP/1.1\r\nHost: x\r\n' + headers + b'Connection: close\r\n\r\n'

# -- MCP tool results and sessions --------------------------------------------------------------------------------------

def mcp_data(res):
    "The structured result of an MCP tool call that must have succeeded"
    assert not res.is_error, res.content[0].text
    return res.structured_content

def mcp_err(res)->str:
    "The message of an MCP tool call that must have failed"
    assert res.is_error, res.structured_content
    return res.content[0].text

@contextlib.asynccontextmanager
async def mcp_session(url:str, token:str):
    "One MCP session of the SDK's streamable-HTTP client at `url`, sending `token` as its bearer"
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    async with httpx2.AsyncClient(headers={'Authorization': f'Bearer {token}'}, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (r, w), ClientSession(r, w) as s:
            await s.initialize(); yield s

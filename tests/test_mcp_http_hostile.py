"""srv16: `knowlyr-lab-mcp --transport http` against a hostile client, as the env servers (srv15). It ran on uvicorn's
plain h11, which checks its 16 KiB only while a head is incomplete: a 100 KB head sent at once was parsed whole and
served (200, the initialize ran), and a connection that never finished its request was held forever. The server now runs `timed_h11`: 431 (414: the request line alone) past --max-head-bytes, 408 past
--request-timeout, each in the JSON-RPC error shape the SDK's streamable HTTP transport gives its own HTTP errors."""
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from helpers import answer_to

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, 'PYTHONPATH': os.environ.get('PYTHONPATH') or str(ROOT)}   # the package under test, in the server too
TOKEN = 'tok-' + os.urandom(8).hex()

class _Server:
    "`python -m knowlyr_lab.mcp --transport http --port 0 *flags` in a subprocess, for a `with` block: its port"
    def __init__(self, root, *flags): self.argv = [sys.executable, '-m', 'knowlyr_lab.mcp', '--transport', 'http', '--port', '0', '--root', str(root), *flags]
    def __enter__(self):
        self.p = subprocess.Popen(self.argv, env={**ENV, 'KNOWLYR_MCP_TOKEN': TOKEN}, stderr=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        t0, seen = time.monotonic(), ''
        while time.monotonic() - t0 < 60:
            line = self.p.stderr.readline(); seen += line
            if 'MCP server on http://127.0.0.1:' in line: self.port = int(line.rsplit(':', 1)[1].split('/')[0]); return self
            if not line and self.p.poll() is not None: break
        self.__exit__(); raise AssertionError(f"the MCP server did not start: {seen}{self.p.stderr.read()}")
    def __exit__(self, *exc):
        self.p.terminate()
        try: self.p.wait(timeout=20)
        except subprocess.TimeoutExpired: self.p.kill(); self.p.wait()

INIT = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {
    'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '0'}}}).encode()

def _post(port:int, headers:bytes=b'', path:bytes=b'/mcp', body:bytes=INIT)->bytes:
    "An MCP `initialize` POST with the server's token and `headers`, as any client can send it"
    return (b'POST ' + path + b' HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n' % (port, TOKEN.encode())
            + b'Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n' + headers
            + b'Content-Length: %d\r\nConnection: close\r\n\r\n' % len(body) + body)

def _refused(port:int, pieces:list, status:int, says:str, pause:float=0.0):
    "The server answers `pieces` with `status`, a JSON-RPC error (no id, INVALID_REQUEST) saying `says`, and closes"
    got, headers, body = answer_to(port, pieces, pause)
    assert (got, headers.get('content-type'), headers.get('connection')) == (status, 'application/json', 'close'), (got, headers, body[:200])
    err = json.loads(body)
    assert (err['jsonrpc'], err['id'], err['error']['code']) == ('2.0', None, -32600) and says in err['error']['message'], err

def _tools_over_sdk(port:int)->int:
    "How many tools the MCP SDK's own streamable-HTTP client lists"
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    async def go():
        async with httpx2.AsyncClient(headers={'Authorization': f'Bearer {TOKEN}'}, timeout=60) as http:
            async with streamable_http_client(f'http://127.0.0.1:{port}/mcp', http_client=http) as (r, w), ClientSession(r, w) as s:
                await s.initialize(); return len((await s.list_tools()).tools)
    return asyncio.run(go())

def test_mcp_http_refuses_a_head_past_max_head_bytes_with_431_or_414_in_jsonrpc(tmp_path):
    "main: the 100 KB head in one send was parsed whole and served, 200 (never 431/414, never JSON-RPC)"
    many = b''.join(b'X-%d: %s\r\n' % (k, b'y' * 1000) for k in range(100))
    with _Server(tmp_path) as srv:
        _refused(srv.port, [_post(srv.port, many)], 431, 'the request head (request line and headers) passes max_head_bytes (16,384 bytes)')
        _refused(srv.port, [_post(srv.port, path=b'/mcp?' + b'a' * 20_480)], 414, 'the request line passes max_head_bytes (16,384 bytes)')
        _refused(srv.port, [_post(srv.port, many)[:10_000], _post(srv.port, many)[10_000:]], 431, 'passes max_head_bytes', pause=0.3)
        got, headers, body = answer_to(srv.port, [_post(srv.port, b'X-Pad: ' + b'p' * 4096 + b'\r\n')])   # an honest 4 KiB header
        assert got == 200 and b'"serverInfo"' in body, (got, headers, body[:300])
        assert _tools_over_sdk(srv.port) == 20                # the SDK's own client is served after all that

# srv23: a refused head (431, 414) and h11's own 400 closed the connection with the rest unread: a client still
# sending got a reset, never the answer (timed_h11, page 19aa, now drains what follows before it closes).

def test_mcp_http_refuses_an_oversized_head_still_being_sent_without_a_reset(tmp_path):
    "main: ConnectionResetError on every try (in sendall or in the read); the server itself went on serving"
    from helpers import sent_still_sending
    many = b''.join(b'X-%d: %s\r\n' % (k, b'y' * 100) for k in range(1000))         # 1000 headers, 100 KB
    with _Server(tmp_path) as srv:
        for data, status, says in [(_post(srv.port, b'X-Big: ' + b'y' * 100_000 + b'\r\n'), 431, 'passes max_head_bytes'),
                                   (_post(srv.port, many), 431, 'passes max_head_bytes (16,384 bytes)'),
                                   (b'HELLO THERE\r\n\r\n' + b'x' * 100_000, 400, 'Invalid HTTP request received.')]:
            for _ in range(3):                                    # a reset is not a one-off: every try is read whole
                head, _, body = sent_still_sending(srv.port, data).partition(b'\r\n\r\n')
                assert head.startswith(b'HTTP/1.1 %d ' % status) and b'content-type: application/json' in head, head
                err = json.loads(body)                            # the JSON-RPC error shape of the SDK's own HTTP errors
                assert (err['id'], err['error']['code']) == (None, -32600) and says in err['error']['message'], err
        assert _tools_over_sdk(srv.port) == 20                    # and the next client is served

def test_mcp_http_request_timeout_and_max_head_bytes_are_flags(tmp_path):
    """--max-head-bytes 32768: a 20 KB head is served, whole or in two reads (h11's own 16 KiB bound would 400 it), a
    40 KB one is 431 naming 32,768; --request-timeout 2: a head that trickles in gets 408. main: no such flags"""
    with _Server(tmp_path, '--request-timeout', '2', '--max-head-bytes', '32768') as srv:
        big = _post(srv.port, b'X-Big: ' + b'y' * 20_000 + b'\r\n')
        for pieces in ([big], [big[:17_000], big[17_000:]]):
            got, _, body = answer_to(srv.port, pieces, pause=0.3)
            assert got == 200 and b'"serverInfo"' in body, (got, body[:300])
        _refused(srv.port, [_post(srv.port, b'X-Big: ' + b'y' * 40_000 + b'\r\n')], 431, 'max_head_bytes (32,768 bytes)')
        trickle = socket.create_connection(('127.0.0.1', srv.port), timeout=30)
        t0, got = time.monotonic(), b''
        for ch in _post(srv.port)[:8]:                       # a byte every 0.2 s, then nothing: the head never ends
            trickle.send(bytes([ch])); time.sleep(0.2)
        while chunk := trickle.recv(4096): got += chunk
        trickle.close()
        assert got.startswith(b'HTTP/1.1 408') and b'within 2 s (request_timeout)' in got and b'"code":-32600' in got.replace(b' ', b''), got
        assert time.monotonic() - t0 < 20
        assert _tools_over_sdk(srv.port) == 20

def test_mcp_http_refuses_a_request_timeout_that_is_not_a_finite_number_above_0(tmp_path):
    "main: --request-timeout 0 or -1 was taken (every connection's deadline fires at once), inf too (none ever does)"
    for t in ('0', '-1', 'inf'):
        p = subprocess.run([sys.executable, '-m', 'knowlyr_lab.mcp', '--transport', 'http', '--port', '0', '--root', str(tmp_path),
                            '--request-timeout', t], env={**ENV, 'KNOWLYR_MCP_TOKEN': TOKEN}, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)     # main: it served until this timeout
        assert (p.returncode, p.stderr) == (2, f'knowlyr-lab-mcp: error: --request-timeout must be a finite number above 0, got {float(t)!r}\n')

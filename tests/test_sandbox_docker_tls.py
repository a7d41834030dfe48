"""A docker exec over a TLS engine (`DOCKER_HOST=tcp://...:2376` + `DOCKER_TLS_VERIFY`) reads and sends like one over
the unix socket.

The exec socket is then an `ssl.SSLSocket`: `attach_exec`'s read-ahead of an empty buffer raised
`ssl.SSLWantReadError` (not `BlockingIOError`), so every exec failed; and bytes TLS has decrypted already sit in the
`SSLSocket`, where `poll` cannot see them. A fake engine on 127.0.0.1 (a self-signed certificate made with `openssl`)
answers a real `docker.APIClient`; no network and no Docker engine are needed."""
import shutil
import socket
import ssl
import subprocess
import threading
import time
from io import BytesIO
from types import SimpleNamespace

import docker
import pytest

from knowlyr_lab.sandbox.docker import ExecStdin, attach_exec, read_frames
from knowlyr_lab.sandbox.protocol import SandboxLimits
from knowlyr_lab.verifiers import SandboxProcess

HEAD = (b'HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\n'
        b'Upgrade: tcp\r\n\r\n')

def frame(stream, data): return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, 'big') + data

@pytest.fixture(scope='module')
def cert(tmp_path_factory):
    if not shutil.which('openssl'): pytest.skip('needs the openssl command to make a test certificate')
    d = tmp_path_factory.mktemp('tls')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
                    '-keyout', d / 'key.pem', '-out', d / 'cert.pem', '-days', '2', '-subj', '/CN=127.0.0.1',
                    '-addext', 'subjectAltName=IP:127.0.0.1'], check=True, capture_output=True)
    return d / 'cert.pem', d / 'key.pem'

def _request(c)->bytes:
    "Read one HTTP request (head and body) from `c`: its head, b'' once the client has closed"
    buf = b''
    while b'\r\n\r\n' not in buf:
        if not (chunk := c.recv(4096)): return b''
        buf += chunk
    head, body = buf.split(b'\r\n\r\n', 1)
    size = next((int(v) for k, _, v in (h.partition(b':') for h in head.split(b'\r\n')) if k.lower() == b'content-length'), 0)
    while len(body) < size: body += c.recv(4096)
    return head

def engine(cert, tls, serve):
    """A fake engine on 127.0.0.1: `exec create` gets an id, `exec start` hands the connection to `serve` (to answer);
    each connection in a thread of its own (the SDK may start the exec on a new one)"""
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)   # small: stdin backs up soon
    srv.bind(('127.0.0.1', 0)); srv.listen(4)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(*cert)
    ctx.options |= ssl.OP_IGNORE_UNEXPECTED_EOF   # the client's half-close (TCP FIN, TLS kept) is EOF, as for Go's engine
    made = b'{"Id": "%s"}' % (b'e' * 64)
    def connection(c):
        if tls: c = ctx.wrap_socket(c, server_side=True)
        while b'/start ' not in (head := _request(c)):
            if not head: return c.close()
            c.sendall(b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' % len(made)
                      + made)
        serve(c)
    def run():
        while True:
            try: c, _ = srv.accept()
            except OSError: return   # the test closed it
            threading.Thread(target=connection, args=(c,), daemon=True).start()
    threading.Thread(target=run, daemon=True).start()
    return srv

def client(srv, cert, tls, monkeypatch):
    for k in ('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE'): monkeypatch.delenv(k, raising=False)  # else requests ignores ca_cert
    url = f"{'https' if tls else 'http'}://127.0.0.1:{srv.getsockname()[1]}"
    return docker.APIClient(base_url=url, version='1.41', timeout=60,
                            tls=docker.tls.TLSConfig(ca_cert=str(cert[0]), verify=True) if tls else False)

@pytest.mark.parametrize('tls', [False, True])
def test_an_exec_reads_and_sends_over_a_tls_engine(cert, tls, monkeypatch):
    """Like `tar -T -`: nothing before stdin, then each piece of stdin back as a frame before the next is read.
    On main the TLS case raised SSLWantReadError in attach_exec (the read-ahead found an empty buffer)"""
    def echo(c):
        c.sendall(HEAD)                                      # the head alone: the read-ahead finds an empty buffer
        while chunk := c.recv(4096): c.sendall(frame(1, chunk))
        c.close()
    srv = engine(cert, tls, echo)
    s, sock, head = attach_exec(client(srv, cert, tls, monkeypatch), 'e' * 64)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    data, out = bytes(range(256)) * 4096, BytesIO()        # 1 MiB, far past both sockets' buffers
    done = read_frames(sock, {1: out}, time.monotonic() + 120, head=head, stdin=data)
    s.close(); srv.close()
    assert (done, head, out.getvalue() == data) == (True, b'', True), (done, head, len(out.getvalue()))

def test_output_decrypted_with_the_head_is_read_while_stdin_waits(cert, monkeypatch):
    """The head and a 12,000-byte frame in one TLS record: http.client's 8 KiB buffer takes part, the rest waits in the
    SSLSocket (`pending()`), unseen by `poll`. The engine reads no stdin until the client has closed: the frame must
    still be read whole (without the `pending()` check it was cut, and read_frames waited for the deadline)"""
    closed = threading.Event()
    def stuck(c):
        c.sendall(HEAD + frame(1, b'x' * 12000))             # one record: under TLS's 16 KiB
        closed.wait(); c.close()
    srv = engine(cert, True, stuck)
    s, sock, head = attach_exec(client(srv, cert, True, monkeypatch), 'e' * 64)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    assert sock.pending() > 0 and len(head) < 8 + 12000, (sock.pending(), len(head))   # the case this test is about
    out = BytesIO()
    try: done = read_frames(sock, {1: out}, time.monotonic() + 3, head=head, stdin=b'n' * (4 << 20))
    finally: closed.set(); s.close(); srv.close()
    assert (done, out.getvalue()) == (False, b'x' * 12000), (done, len(out.getvalue()))

@pytest.mark.parametrize('tls', [False, True])
def test_a_verifier_process_talks_over_a_tls_engine(cert, tls, monkeypatch):
    """The verifier's `SandboxProcess` over a docker exec (page 13a): stdin written by another thread while its reader
    runs, then closed, every byte echoed back. On main the TLS case lost the stream: `close_stdin` shut the SSLSocket
    (TLS dropped, the reader took raw records for frames), and `sendall` used the SSL object while the reader thread
    was in `recv` (an SSL object is one thread's at a time)"""
    def echo(c):
        c.sendall(HEAD)
        while chunk := c.recv(4096): c.sendall(frame(1, chunk))
        c.sendall(frame(1, b'end')); c.close()
    srv = engine(cert, tls, echo)
    api = client(srv, cert, tls, monkeypatch)
    sb = SimpleNamespace(backend='docker', client=SimpleNamespace(api=api), container=SimpleNamespace(id='c' * 64),
                         limits=SandboxLimits(), uid=1000, env={}, _kill_all=lambda: None)
    got, data = bytearray(), bytes(range(256)) * 4096    # 1 MiB, far past both sockets' buffers
    p = SandboxProcess(sb, ['cat'], got.extend, 60)
    for i in range(0, len(data), 10_000): p.write(data[i:i + 10_000])
    p.close_stdin()
    ended = p.done.wait(90); srv.close()
    assert (ended, len(got), bytes(got) == data + b'end') == (True, len(data) + 3, True)

@pytest.mark.parametrize('tls', [False, True])
def test_a_writer_is_released_when_the_stream_ends(cert, tls, monkeypatch):
    """A command that ends without reading its stdin: `read_frames` returns at EOF, and a thread waiting in `write` for
    room (`cap` bytes unsent), or writing later, gets ValueError instead of waiting forever (stdin was never closed)"""
    srv = engine(cert, tls, lambda c: (c.sendall(HEAD + frame(1, b'bye')), c.close()))
    s, sock, head = attach_exec(client(srv, cert, tls, monkeypatch), 'e' * 64)
    feed, out, refused = ExecStdin(cap=1 << 12), BytesIO(), []
    def writer():
        try:
            while True: feed.write(b'x' * 1000)
        except ValueError as e: refused.append(str(e))
    th = threading.Thread(target=writer, daemon=True); th.start()
    done = read_frames(sock, {1: out}, time.monotonic() + 60, head=head, stdin=feed)
    th.join(60); s.close(); srv.close()
    assert (done, out.getvalue(), th.is_alive(), refused) == (True, b'bye', False, ["the exec's stdin is closed"])

"""A docker exec's output that arrives with the engine's `101 UPGRADED` head is the command's output, not lost.

The SDK reads the head through `http.client`'s buffered reader, which takes whatever has already arrived; on a loaded
host (CI) that was the command's whole output, and the bare socket `exec_start(socket=True)` returns then read EOF:
`_root_mode` failed with `ValueError: invalid literal for int() with base 8: ''`, a read file came back empty. Here the
real engine is reached through a relay that delivers each exec stream in one piece, the head with the command's
frames, as a host too slow to read the head before the command ended sees it -- every time instead of by chance."""
import os
import socket
import threading

import docker
import pytest

from knowlyr_lab.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

def _pump(src, dst, hold_upgraded):
    """Copy src to dst; a stream that starts with `101 UPGRADED` is held until src ends or stays quiet for 2 s (an exec
    that waits for its stdin, which the client sends once it has the head), then sent in one piece"""
    held = None
    try:
        while True:
            try: data = src.recv(1 << 16)
            except TimeoutError: data = None
            if data is None or (not data and held is not None):     # quiet or ended: what is held goes in one piece
                dst.sendall(held); held = None; src.settimeout(None)
                if data is None: continue
            if not data: break
            if held is None and hold_upgraded and data.startswith(b'HTTP/1.1 101'): held = bytearray(); src.settimeout(2)
            if held is not None: held += data
            else: dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError: pass

def _relay(path, engine):
    "A unix socket at `path` that forwards each connection to the engine's socket `engine`"
    srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(16)
    def serve():
        while True:
            try: client, _ = srv.accept()
            except OSError: return
            up = socket.socket(socket.AF_UNIX); up.connect(engine)
            threading.Thread(target=_pump, args=(client, up, False), daemon=True).start()
            threading.Thread(target=_pump, args=(up, client, True), daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return srv

@pytest.fixture
def slow_reader_sandbox(docker_host, tmp_path):
    assert docker_host.startswith('unix://'), docker_host
    srv = _relay(str(tmp_path / 'engine.sock'), docker_host[len('unix://'):])
    sb = DockerSandbox(client=docker.DockerClient(base_url=f'unix://{tmp_path}/engine.sock', timeout=60))
    yield sb
    sb.close(); srv.close()

def test_output_read_with_the_response_head_is_kept(slow_reader_sandbox):
    "On main: ValueError in `_root_mode` (the mode's `755` was in the reader's buffer), a written file read back empty"
    sb = slow_reader_sandbox
    assert sb._root_mode() == 0o755
    assert sb.execute_tool('shell', {'command': 'echo hello'}).output == 'hello\n'
    sb.execute_tool('file_write', {'path': 'a.txt', 'content': 'kept\n'})
    assert sb.execute_tool('file_read', {'path': 'a.txt'}).output == 'kept\n'
    assert os.path.basename(sb.resolve('a.txt')) == 'a.txt'

# 800 files under 15 directories of 250-byte names: 4,000-byte paths, 3.2 MB of names for `tar -T -`'s stdin
LONG_NAMES = ('d=.; n=$(printf "d%.0s" $(seq 250)); for i in $(seq 15); do d=$d/$n; done; mkdir -p $d && cd $d && '
              'f=$(printf "f%.0s" $(seq 200)); for i in $(seq 800); do : > $f$i; done; echo made')

def test_a_snapshot_of_long_file_names_ends(docker_host):
    """The snapshot's `tar -T -` reads the names on stdin and writes the archive on stdout. On main the names were sent
    whole first (sendall, on a socket left with no timeout) while nobody read the archive: both sides waited forever
    (400 files were enough here). The wait below only bounds a hang; the snapshot takes about a second"""
    sb, got = DockerSandbox(client=docker.DockerClient(base_url=docker_host, timeout=60)), {}
    def snap():
        try: got['snap'] = sb.snapshot()
        except BaseException as e: got['error'] = e
    th = threading.Thread(target=snap, daemon=True)
    try:
        assert sb.execute_tool('shell', {'command': LONG_NAMES}).output == 'made\n'
        th.start(); th.join(120)
        assert not th.is_alive(), "the snapshot still waits after 120 s (stdin sent while its output went unread)"
        assert 'error' not in got, got
        assert got['snap'].info['n_entries'] == 815, got['snap'].info       # 800 files and their 15 directories
    finally:
        if th.is_alive():    # the blocked thread holds the sandbox: remove its container with another client
            docker.DockerClient(base_url=docker_host, timeout=60).containers.get(sb.container.id).remove(force=True)
        else: sb.close()

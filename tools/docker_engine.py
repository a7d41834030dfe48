"""Start (or find) a Docker engine for the `docker` test flag, build the sandbox image, stop what we started.

    eval "$(python tools/docker_engine.py start)"   # prints `export DOCKER_HOST=...` lines (nothing if no engine)
    python tools/docker_engine.py stop               # stops the dockerd this script started (by its pid)

The engine keeps its data under a stable directory (KNOWLYR_DOCKER_ROOT, default /var/tmp/knowlyr-docker) so the
sandbox image built once is reused by later runs. It runs with `--bridge=none --iptables=false`: sandboxes use
`network_mode="none"`, so the engine never touches the host's network configuration.
tests/conftest.py uses the same functions for its session fixture.
"""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get('KNOWLYR_DOCKER_ROOT', '/var/tmp/knowlyr-docker'))
SOCK, PIDFILE = ROOT/'run'/'docker.sock', ROOT/'run'/'dockerd.pid'
IMAGE = 'knowlyr-sandbox:base'
BUILD = Path(__file__).resolve().parent/'build_sandbox_image.sh'

def ping(host=None, timeout=3):
    "True when a Docker engine answers at `host` (default: DOCKER_HOST / the default socket)"
    try:
        import docker
        c = docker.DockerClient(base_url=host, timeout=timeout) if host else docker.from_env(timeout=timeout)
        ok = c.ping(); c.close(); return bool(ok)
    except Exception: return False

def _alive(pid):
    try: os.kill(pid, 0); return True
    except OSError: return False

def start(wait=60):
    "Return (docker_host, started_pid|None, reason). started_pid is set only when this call launched dockerd"
    if os.environ.get('DOCKER_HOST') and ping(): return os.environ['DOCKER_HOST'], None, 'engine already running'
    host = f'unix://{SOCK}'
    if PIDFILE.exists() and _alive(int(PIDFILE.read_text().strip() or 0)) and ping(host): return host, None, 'reusing our dockerd'
    if not os.environ.get('DOCKER_HOST') and ping(): return os.environ.get('DOCKER_HOST', 'unix:///var/run/docker.sock'), None, 'system engine'
    if not shutil.which('dockerd'): return None, None, 'dockerd is not installed (apt-get install -y docker.io)'
    if os.geteuid() != 0: return None, None, 'dockerd needs root here'
    (ROOT/'run').mkdir(parents=True, exist_ok=True); (ROOT/'data').mkdir(exist_ok=True)
    PIDFILE.unlink(missing_ok=True)
    log = open(ROOT/'dockerd.log', 'ab')
    p = subprocess.Popen(['dockerd', '--data-root', str(ROOT/'data'), '--exec-root', str(ROOT/'exec'), '--pidfile', str(PIDFILE),
                          '-H', host, '--bridge=none', '--iptables=false', '--ip6tables=false'],
                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    t0 = time.time()
    while time.time() - t0 < wait:
        if p.poll() is not None: return None, None, f'dockerd exited with {p.returncode}; see {ROOT/"dockerd.log"}'
        if ping(host, timeout=1): return host, p.pid, 'started dockerd'
        time.sleep(0.3)
    stop(p.pid); return None, None, f'dockerd did not answer within {wait}s; see {ROOT/"dockerd.log"}'

def ensure_image(host, tag=IMAGE):
    "Build the sandbox image with tools/build_sandbox_image.sh unless the engine already has it; None or the reason it failed"
    import docker
    c = docker.DockerClient(base_url=host, timeout=30)
    try:
        c.images.get(tag); return None
    except docker.errors.ImageNotFound: pass
    finally: c.close()
    r = subprocess.run(['bash', str(BUILD), tag], env={**os.environ, 'DOCKER_HOST': host}, capture_output=True, text=True)
    if r.returncode == 3: return 'only the busybox fallback image could be built (no debootstrap); DockerSandbox needs the Debian image'
    return None if r.returncode == 0 else f'image build failed: {r.stderr.strip()[-500:]}'

def stop(pid):
    "Stop the dockerd we started (SIGTERM, then SIGKILL after 20 s)"
    if not pid or not _alive(pid): return
    os.kill(pid, signal.SIGTERM)
    for _ in range(200):
        if not _alive(pid): break
        time.sleep(0.1)
    else: os.kill(pid, signal.SIGKILL)
    try: os.waitpid(pid, os.WNOHANG)
    except ChildProcessError: pass

if __name__ == '__main__':
    cmd = sys.argv[1] if len(sys.argv) > 1 else 'start'
    if cmd == 'start':
        host, pid, why = start()
        if host is None: print(f'# no docker engine: {why}', file=sys.stderr); sys.exit(0)
        err = ensure_image(host)
        if err:  # no usable sandbox image: leave the docker flag off rather than fail every docker test
            print(f'# docker engine up but {err}; the docker flag stays off', file=sys.stderr)
            stop(pid); sys.exit(0)
        print(f'export DOCKER_HOST={host}')
        if pid: print(f'export KNOWLYR_DOCKERD_PID={pid}')
        print(f'# {why}', file=sys.stderr)
    elif cmd == 'stop': stop(int(os.environ.get('KNOWLYR_DOCKERD_PID') or 0))
    else: sys.exit(f'usage: {sys.argv[0]} start|stop')

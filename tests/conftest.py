import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = ROOT.parent / 'shared' / 'fixtures'

os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('RAY_AUTH_MODE', 'disabled')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
# under pytest-xdist (tools/run_tests.sh runs two workers by default) each worker and what it starts computes on one thread:
# torch's OpenMP threads in two workers would otherwise oversubscribe the cores and spin
if os.environ.get('PYTEST_XDIST_WORKER'): os.environ.setdefault('OMP_NUM_THREADS', '1')

def pytest_collection_modifyitems(config, items):
    "Run tests marked docker/ray/llm/gpu/slow only when tools/test_flags.py says the machine has the component"
    flags = set(os.environ.get('KNOWLYR_TEST_FLAGS', 'slow ray docker').split())
    for item in items:
        for flag in ('docker', 'ray', 'llm', 'gpu', 'slow', 'long', 'real'):
            if flag in item.keywords and flag not in flags:
                item.add_marker(pytest.mark.skip(reason=f"needs the '{flag}' component (not in KNOWLYR_TEST_FLAGS)"))

@pytest.fixture(scope='session')
def docker_host():
    "A Docker engine with the sandbox image: an existing one, or a dockerd started here (stopped by pid at the end); else skip with the reason"
    sys.path.insert(0, str(ROOT / 'tools'))
    import docker_engine
    host, pid, why = docker_engine.start()
    if host is None: pytest.skip(f"no Docker engine can run here: {why}")
    old = os.environ.get('DOCKER_HOST')
    os.environ['DOCKER_HOST'] = host
    try:
        err = docker_engine.ensure_image(host)
        if err: pytest.skip(err)
        yield host
    finally:
        if old is None: os.environ.pop('DOCKER_HOST', None)
        else: os.environ['DOCKER_HOST'] = old
        docker_engine.stop(pid)

import os, sys, pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = ROOT.parent / 'shared' / 'fixtures'

os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('RAY_AUTH_MODE', 'disabled')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')

def pytest_collection_modifyitems(config, items):
    "Run tests marked docker/ray/llm/gpu/slow only when tools/test_flags.py says the machine has the component"
    flags = set(os.environ.get('KNOWLYR_TEST_FLAGS', 'slow ray docker').split())
    for item in items:
        for flag in ('docker', 'ray', 'llm', 'gpu', 'slow'):
            if flag in item.keywords and flag not in flags:
                item.add_marker(pytest.mark.skip(reason=f"needs the '{flag}' component (not in KNOWLYR_TEST_FLAGS)"))

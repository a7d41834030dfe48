"Shared backend parametrisation for the sandbox conformance and escape suites"
import warnings

import pytest

from knowlyr_lab.sandbox.local import NOT_ISOLATED, bwrap_available
from knowlyr_lab.sandbox.protocol import create_sandbox

_BWRAP = bwrap_available()
BACKENDS = [
    pytest.param('local', marks=pytest.mark.skipif(not _BWRAP, reason='bubblewrap unavailable: LocalSandbox would not be isolated'), id='local-bwrap'),
    pytest.param('local-none', id='local-unisolated'),
    pytest.param('docker', marks=pytest.mark.docker, id='docker'),
]

def open_sandbox(request, backend, **kw):
    "Create a sandbox of `backend` (starting the docker engine fixture when needed), closed at the end of the test's scope"
    if backend == 'docker':
        request.getfixturevalue('docker_host')
        sb = create_sandbox('docker', **kw)
    elif backend == 'local-none':
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)
            sb = create_sandbox('local', isolation='none', **kw)
        assert sb.isolation == NOT_ISOLATED
    else: sb = create_sandbox('local', isolation='bwrap', **kw)
    request.addfinalizer(sb.close)
    return sb

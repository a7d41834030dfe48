"""A workspace the snapshot cannot take whole is never passed off as something else: a listing over its byte cap
fails the episode with the cap named (not the verdict on an agent that changed nothing, not an infrastructure
error), and the FIFOs, sockets and devices a snapshot leaves out are all named, however many there are."""
import pytest
from sandbox_backends import BACKENDS, open_sandbox

from knowlyr_lab.envs.sandbox import SandboxEnv
from knowlyr_lab.sandbox.snapshot import listing_limit

ISOLATING = [p for p in BACKENDS if p.id != 'local-unisolated']
LIMITS = {'wall_timeout': 20, 'max_files': 2000, 'max_output_chars': 4000}
DEEP = 'python3 -c "import os\nfor i in range(200): os.mkdir(\'d\' * 250); os.chdir(\'d\' * 250)\nprint(i + 1)"'

def sh(sb, command): return sb.execute_tool('shell', {'command': command})

@pytest.fixture(params=ISOLATING)
def backend(request):
    if request.param == 'docker': request.getfixturevalue('docker_host')
    return request.param

def test_a_listing_over_its_cap_fails_the_episode_with_the_cap_named(backend):
    "200 levels of 250-character names list 5 MB, past the 2 MB cap: on main the verdict was the unfixed repository's 3 of 5, reason 'submitted'"
    with SandboxEnv(backend=backend, limits=LIMITS) as env:
        env.reset(task='py-fizzbuzz-order')
        cap = listing_limit(env.sandbox.limits)
        honest = env.step({'tool': 'submit', 'params': {}})            # an agent that changed nothing
        assert (honest.reward, honest.verdict.reason) == (0.6, 'submitted'), honest.verdict
        env.reset(task='py-fizzbuzz-order')
        made = env.step({'tool': 'shell', 'params': {'command': DEEP}})
        assert made.observation == '200\n', made.observation
        ts = env.step({'tool': 'submit', 'params': {}})
    assert cap == 2001 * 1024
    assert (ts.verdict.success, ts.verdict.score, ts.reward, ts.verdict.invalid) == (False, 0.0, 0.0, None), ts.verdict
    assert f'workspace listing over {cap:,} bytes: snapshot refused' in ts.verdict.reason, ts.verdict.reason
    assert ts.verdict.reason != honest.verdict.reason and ts.reward != honest.reward
    assert 'snapshot refused' in ts.info['workspace_error'] and 'snapshot refused' in ts.observation, ts.observation
    assert (ts.info['tests_passed'], ts.info['tests_total'], ts.info['applied']) == (0, 0, []), ts.info   # no test ran

def test_every_skipped_special_file_is_named(request, backend):
    "1,900 FIFOs: their names (100 KB) passed the 16 KB stderr capture, and on main info['skipped'] silently kept a head and a tail"
    sb = open_sandbox(request, backend, limits=LIMITS)
    names = [f'fifo-{i:04d}-' + 'x' * 40 for i in range(1900)]
    r = sh(sb, 'mkdir q && cd q && for i in $(seq -f %04g 0 1899); do mkfifo "fifo-$i-' + 'x' * 40 + '" || break; done; ls | wc -l')
    assert r.output.split()[-1] == '1900', r.output[-300:]
    assert sh(sb, 'echo kept > kept.txt').exit_code == 0
    snap = sb.snapshot()
    assert sorted(snap.info['skipped']) == sorted(f'q/{n}' for n in names), (len(snap.info['skipped']), snap.info['skipped'][:3])
    assert snap.files() == {'kept.txt': b'kept\n'}

def test_the_verdict_names_each_special_file_it_never_saw(backend):
    "verify_sandbox's docstring promised special files in the verdict's `ignored`; the snapshot never archives them, so on main they were in no verdict"
    with SandboxEnv(backend=backend, limits=LIMITS) as env:
        env.reset(task='py-fizzbuzz-order')
        made = env.step({'tool': 'shell', 'params': {'command': 'mkfifo fizz_input && mkdir -p q && mkfifo q/pipe && echo ok'}})
        assert made.observation == 'ok\n', made.observation
        ts = env.step({'tool': 'submit', 'params': {}})
    assert (ts.reward, ts.verdict.reason) == (0.6, 'submitted'), ts.verdict      # judged like the untouched repository
    why = 'a FIFO, socket or device: not in the snapshot'
    assert {k: v for k, v in ts.info['ignored'].items() if v == why} == {'fizz_input': why, 'q/pipe': why}, ts.info['ignored']

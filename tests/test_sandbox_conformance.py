"""One conformance suite, run unchanged against every sandbox backend: local (bubblewrap), local unisolated, docker.

Every assertion is on literal values, so passing on two backends means both answer the same."""
import os
import warnings
from pathlib import Path

import jsonschema
import pytest
from sandbox_backends import BACKENDS, open_sandbox

from knowlyr_lab.core import schema_name, schema_params
from knowlyr_lab.sandbox.protocol import WORKSPACE, SandboxError, SandboxSnapshot, ToolResult, create_sandbox
from knowlyr_lab.sandbox.tools import SANDBOX_TOOLS

CALC = 'def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n'

@pytest.fixture(scope='module')
def template(tmp_path_factory):
    d = tmp_path_factory.mktemp('tpl')
    (d/'calc.py').write_text(CALC)
    (d/'README.md').write_text('# calc\nA tiny calculator.\n')
    (d/'tests').mkdir(); (d/'tests/test_calc.py').write_text('from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n')
    (d/'.hidden').write_text('h\n')
    (d/'run.sh').write_text('#!/bin/sh\necho run\n'); os.chmod(d/'run.sh', 0o755)
    return d

@pytest.fixture(scope='module', params=BACKENDS)
def msb(request, template):
    return open_sandbox(request, request.param, workspace=template, limits={'wall_timeout': 10, 'max_output_chars': 2000})

@pytest.fixture
def sb(msb):
    msb.reset()
    return msb

def run(sb, tool, **params)->ToolResult:
    r = sb.execute_tool(tool, params)
    assert isinstance(r, ToolResult) and isinstance(r.output, str) and r.duration >= 0
    return r

def ok(sb, tool, **params)->str:
    r = run(sb, tool, **params)
    assert not r.is_error, f"{tool} {params} failed: {r.output}"
    return r.output

def test_tool_schemas(sb):
    names = [schema_name(s) for s in sb.tool_schemas]
    assert names == list(SANDBOX_TOOLS) == ['file_read', 'file_write', 'edit_file', 'shell', 'search', 'git', 'list_dir']
    for s in sb.tool_schemas:
        assert s['type'] == 'function' and s['function']['description']
        jsonschema.Draft202012Validator.check_schema(schema_params(s))
    assert sb.backend in ('local', 'docker') and isinstance(sb.isolation, str) and sb.isolation

def test_template_copied_and_list_dir(sb):
    assert ok(sb, 'list_dir').splitlines() == ['.hidden', 'README.md', 'calc.py', 'run.sh', 'tests/']
    assert ok(sb, 'list_dir', path='tests') == 'test_calc.py'
    ok(sb, 'shell', command='mkdir empty')
    assert ok(sb, 'list_dir', path='empty') == '(empty directory)'
    r = run(sb, 'list_dir', path='calc.py'); assert r.is_error and 'not a directory' in r.output
    r = run(sb, 'list_dir', path='nope'); assert r.is_error and 'not found' in r.output

def test_file_read(sb):
    assert ok(sb, 'file_read', path='calc.py') == CALC
    assert ok(sb, 'file_read', path=f'{WORKSPACE}/calc.py') == CALC
    assert ok(sb, 'file_read', path='calc.py', start_line=2, end_line=2) == '    return a - b\n'
    assert ok(sb, 'file_read', path='calc.py', start_line=5) == 'def sub(a, b):\n    return a - b\n'
    for params, msg in [({'path': 'missing.py'}, 'file not found'), ({'path': 'tests'}, 'is a directory'),
                        ({'path': 'calc.py', 'start_line': 99}, 'past the end'), ({'path': 'calc.py', 'start_line': 3, 'end_line': 2}, 'before start_line'),
                        ({'path': 'calc.py', 'start_line': 0}, 'start_line')]:
        r = run(sb, 'file_read', **params)
        assert r.is_error and msg in r.output, (params, r.output)

def test_file_write(sb):
    assert ok(sb, 'file_write', path='pkg/sub/mod.py', content='x = "é"\n') == 'Wrote 9 bytes to pkg/sub/mod.py'
    assert ok(sb, 'file_read', path='pkg/sub/mod.py') == 'x = "é"\n'
    ok(sb, 'file_write', path='calc.py', content='')
    assert ok(sb, 'file_read', path='calc.py') == ''
    # files the tools write belong to the sandbox user: the shell can change them
    assert ok(sb, 'shell', command='echo more >> pkg/sub/mod.py && cat pkg/sub/mod.py && rm -r pkg && ls') == 'x = "é"\nmore\nREADME.md\ncalc.py\nrun.sh\ntests\n'
    r = run(sb, 'file_write', path='tests', content='x'); assert r.is_error and 'directory' in r.output
    r = run(sb, 'file_write', path='calc.py/inner.txt', content='x'); assert r.is_error and 'calc.py' in r.output, r.output
    assert ok(sb, 'file_read', path='calc.py') == ''

def test_edit_file(sb):
    r = run(sb, 'edit_file', path='calc.py', old_str='return a - b', new_str='return a + b')
    assert r.is_error and 'occurs 2 times' in r.output and 'lines 2, 6' in r.output
    assert ok(sb, 'edit_file', path='calc.py', old_str='add(a, b):\n    return a - b', new_str='add(a, b):\n    return a + b') \
        == 'Edited calc.py: replaced 1 occurrence at line 1'
    assert ok(sb, 'file_read', path='calc.py', start_line=2, end_line=2) == '    return a + b\n'
    r = run(sb, 'edit_file', path='calc.py', old_str='nothing like this', new_str='')
    assert r.is_error and 'not found in calc.py' in r.output
    r = run(sb, 'edit_file', path='calc.py', old_str='', new_str='x'); assert r.is_error and 'empty' in r.output
    r = run(sb, 'edit_file', path='nope.py', old_str='a', new_str='b'); assert r.is_error and 'file not found' in r.output

def test_shell(sb):
    r = run(sb, 'shell', command='echo out; echo err >&2; exit 3')
    assert r.is_error and r.exit_code == 3 and r.output == 'out\nerr\n'
    r = run(sb, 'shell', command='./run.sh && python3 -c "import calc; print(calc.add(1, 1))" && test "$HOME" = "$TMPDIR" && touch "$HOME/h" && echo home')
    assert (r.is_error, r.exit_code, r.output) == (False, 0, 'run\n0\nhome\n')
    r = run(sb, 'shell', command='sleep 20', timeout=1)
    assert r.is_error and r.exit_code is None and r.info['timed_out'] and 'timeout of 1 s' in r.output and r.duration < 6
    r = run(sb, 'shell', command='seq 1 100000')
    assert r.truncated and r.output.startswith('1\n2\n') and r.output.endswith('99999\n100000\n') and r.info['cut_chars'] > 500_000
    assert len(r.output) < 2000 + 100 and f"[... truncated {r.info['cut_chars']:,} characters ...]" in r.output
    assert ok(sb, 'shell', command='id -u').strip() == str(sb.uid)

def test_output_holding_the_cut_marker_is_kept(sb):
    "The agent's bytes are data: ones that spell the capture's old in-band marker neither vanish nor move the cut"
    mark = '\0CUT\0'
    r = run(sb, 'shell', command=r"printf 'before\0CUT\0after'; printf 'err\0CUT\0' >&2")
    assert (r.is_error, r.truncated, r.output) == (False, False, f'before{mark}aftererr{mark}')
    r = run(sb, 'shell', command=r"printf '\0CUT\0'; seq 1 100000; printf 'end\0CUT\0'")
    assert r.truncated and r.output.startswith(f'{mark}1\n2\n') and r.output.endswith(f'100000\nend{mark}')
    assert r.output.count('[... truncated ') == 1 and len(r.output) < 2000 + 100
    ok(sb, 'file_write', path='m.txt', content=f'a{mark}b')
    assert ok(sb, 'file_read', path='m.txt') == f'a{mark}b'

def test_search(sb):
    assert ok(sb, 'search', pattern='a - b') == 'calc.py:2:    return a - b\ncalc.py:6:    return a - b'
    assert ok(sb, 'search', pattern='add', glob='*.py') == ('calc.py:1:def add(a, b):\ntests/test_calc.py:1:from calc import add\n'
                                                           'tests/test_calc.py:3:def test_add():\ntests/test_calc.py:4:    assert add(2, 3) == 5')
    assert ok(sb, 'search', pattern='add\\(', path='tests') == 'tests/test_calc.py:3:def test_add():\ntests/test_calc.py:4:    assert add(2, 3) == 5'
    assert ok(sb, 'search', pattern='^#', glob='*.md') == 'README.md:1:# calc'
    assert ok(sb, 'search', pattern='^def (add|sub)', path='calc.py') == 'calc.py:1:def add(a, b):\ncalc.py:5:def sub(a, b):'
    r = run(sb, 'search', pattern='zzz_nothing'); assert not r.is_error and r.output == "No matches for 'zzz_nothing'"
    r = run(sb, 'search', pattern='(unclosed'); assert r.is_error and 'search failed' in r.output
    r = run(sb, 'search', pattern='x', path='nope'); assert r.is_error and 'not found' in r.output

def test_git(sb):
    ok(sb, 'git', args=['init', '-q']); ok(sb, 'git', args='add -A'); ok(sb, 'git', args=['commit', '-qm', 'initial'])
    ok(sb, 'edit_file', path='calc.py', old_str='def add(a, b):\n    return a - b', new_str='def add(a, b):\n    return a + b')
    assert ok(sb, 'git', args='status --short') == ' M calc.py\n'
    diff = ok(sb, 'git', args=['diff'])
    assert '-    return a - b\n+    return a + b' in diff
    ok(sb, 'git', args=['commit', '-qam', 'fix add'])
    log = ok(sb, 'git', args='log --format=%s|%an|%ae')
    assert log == 'fix add|sandbox|sandbox@knowlyr.invalid\ninitial|sandbox|sandbox@knowlyr.invalid\n'
    # fixed identity and dates: the same tree gives the same commit id on every backend
    assert ok(sb, 'git', args='rev-parse --abbrev-ref HEAD') == 'main\n'
    ok(sb, 'git', args=['checkout', '-q', 'HEAD~1'])
    assert ok(sb, 'file_read', path='calc.py') == CALC
    for args, msg in [(['push'], 'not allowed'), (['-c', 'core.pager=sh', 'log'], 'options before the subcommand'), ('', 'git'), ([], 'git')]:
        r = run(sb, 'git', args=args); assert r.is_error and msg in r.output, (args, r.output)

def test_git_commit_ids_are_reproducible(sb):
    ok(sb, 'git', args=['init', '-q']); ok(sb, 'git', args='add calc.py'); ok(sb, 'git', args=['commit', '-qm', 'c'])
    first = ok(sb, 'git', args='rev-parse HEAD')
    sb.reset()
    ok(sb, 'git', args=['init', '-q']); ok(sb, 'git', args='add calc.py'); ok(sb, 'git', args=['commit', '-qm', 'c'])
    assert ok(sb, 'git', args='rev-parse HEAD') == first

def test_invalid_calls(sb):
    r = run(sb, 'rm_rf', path='x'); assert r.is_error and r.info['error_type'] == 'unknown_tool' and 'file_read' in r.output
    r = run(sb, 'file_read'); assert r.is_error and "'path' is a required property" in r.output
    r = run(sb, 'file_write', path='x', content='y', mode='a'); assert r.is_error and 'mode' in r.output
    r = run(sb, 'shell', command='true', timeout=-1); assert r.is_error and 'timeout' in r.output

def test_paths_stay_inside(sb):
    for p in ['/etc/passwd', '../outside.txt', 'tests/../../x', f'{WORKSPACE}/../etc/passwd']:
        for tool, params in [('file_read', {}), ('file_write', {'content': 'x'}), ('edit_file', {'old_str': 'a', 'new_str': 'b'}), ('list_dir', {}), ('search', {'pattern': 'x'})]:
            r = run(sb, tool, path=p, **params)
            assert r.is_error and r.info['error_type'] == 'PathEscapeError', (tool, p, r.output)
    ok(sb, 'shell', command='ln -s /etc/passwd pw && ln -s ../../../etc up && ln -s calc.py alias && ln -s /workspace/tests abs_tests')
    for p in ['pw', 'up/passwd']:
        r = run(sb, 'file_read', path=p); assert r.is_error and r.info['error_type'] == 'PathEscapeError', r.output
        r = run(sb, 'file_write', path=p, content='x'); assert r.is_error and r.info['error_type'] == 'PathEscapeError', r.output
    assert ok(sb, 'file_read', path='alias') == CALC
    assert ok(sb, 'list_dir', path='abs_tests') == 'test_calc.py'

def test_snapshot_restore_exact(sb, tmp_path):
    ok(sb, 'git', args=['init', '-q']); ok(sb, 'git', args='add -A'); ok(sb, 'git', args=['commit', '-qm', 'initial'])
    ok(sb, 'shell', command='mkdir -p empty/nested && ln -s calc.py link && chmod 600 README.md && printf "\\x00\\xff" > bin.dat'
                            ' && ln run.sh hard.sh && mkdir ro && echo f > ro/f && chmod 555 ro')
    snap = sb.snapshot()
    assert isinstance(snap, SandboxSnapshot) and snap.info['backend'] == sb.backend and snap.info['limits']['wall_timeout'] == 10
    files = snap.files()
    assert files['calc.py'] == CALC.encode() and files['bin.dat'] == b'\x00\xff' and '.git/HEAD' in files
    ok(sb, 'shell', command='rm -rf .git empty link calc.py && echo junk > junk.txt && chmod 644 README.md && echo tmp > "$TMPDIR/t"')
    sb.restore(snap)
    assert sb.snapshot().digest == snap.digest
    assert ok(sb, 'git', args='log --format=%s') == 'initial\n'
    assert ok(sb, 'git', args='status --short') == '?? bin.dat\n?? hard.sh\n?? link\n?? ro/\n'  # git does not list empty directories
    assert ok(sb, 'shell', command='stat -c %h hard.sh; cat ro/f; touch ro/g 2>&1 | grep -c denied') == '2\nf\n1\n'
    assert ok(sb, 'list_dir', path='empty') == 'nested/'
    assert ok(sb, 'shell', command='stat -c %a README.md; readlink link; ls "$TMPDIR"; test -x run.sh && echo x') == '600\ncalc.py\nx\n'
    path = snap.save(tmp_path/'snap.tar')
    ok(sb, 'shell', command='chmod -R u+w . && rm -rf ./* .git')
    sb.restore(path)
    assert sb.snapshot().digest == snap.digest == SandboxSnapshot.load(path).digest
    sb.reset()  # a read-only directory does not stop the workspace from being emptied
    assert ok(sb, 'list_dir').splitlines() == ['.hidden', 'README.md', 'calc.py', 'run.sh', 'tests/']

def test_reset_and_cross_backend_snapshot(sb, template):
    fresh = sb.snapshot().digest
    ok(sb, 'shell', command='rm calc.py; echo x > new.txt')
    sb.reset()
    assert sb.snapshot().digest == fresh == sb._initial.digest  # the initial snapshot is the template, exactly
    assert ok(sb, 'list_dir').splitlines() == ['.hidden', 'README.md', 'calc.py', 'run.sh', 'tests/']
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        with create_sandbox('local', workspace=template) as other:
            other.execute_tool('file_write', {'path': 'made/elsewhere.txt', 'content': 'hello\n'})
            snap = other.snapshot()
    sb.restore(snap)
    assert sb.snapshot().digest == snap.digest and ok(sb, 'file_read', path='made/elsewhere.txt') == 'hello\n'

def test_close_and_context_manager(request, msb, template):
    backend = 'docker' if msb.backend == 'docker' else ('local-none' if msb.isolation.startswith('none') else 'local')
    sb2 = open_sandbox(request, backend)
    with sb2 as s:
        assert s.execute_tool('list_dir', {}).output == '(empty directory)'
    assert sb2.closed
    with pytest.raises(SandboxError, match='closed'): sb2.execute_tool('list_dir', {})
    sb2.close()  # idempotent
    if sb2.workspace is not None: assert not Path(sb2.workspace).exists()

#!/usr/bin/env python
"""Sandbox tool-call latency per tool and backend (median and p95, ms), compared with the seed's knowlyr-sandbox 0.1.2.

    python experiments/benchmarks/sandbox_latency.py [--n 30] [--backends local,local-none,docker]

Rows: sandbox creation, each tool, snapshot, reset, and grading a coding task with `HiddenTestVerifier` (a fresh
sandbox per verification). Backends: `local` (bubblewrap), `local-none` (`isolation='none'`, for the cost of isolation), `docker` (needs an
engine: `eval "$(python tools/docker_engine.py start)"`). The seed package only has a Docker backend; it is run from
its source (/tmp/seed/src, or a `pip download knowlyr-sandbox==0.1.2` wheel) against the same image and engine, for the
tools both have (file_read, file_write, shell, search, git). Ratios are seed / ours (> 1: ours is faster).

Other suites add their own rows through `EXTRA_BENCHMARKS` (e.g. episodes/s per environment suite): a list of
callables `f(backends, n) -> list[dict]`, each dict a row with at least 'benchmark', 'backend' and numeric columns.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

CALLS = {  # one representative call per tool; edit_file alternates between two edits so it always succeeds
    'file_read': lambda i: {'path': 'src/calc.py'},
    'file_write': lambda i: {'path': f'out/f{i % 5}.txt', 'content': 'x' * 2000},
    'edit_file': lambda i: {'path': 'src/calc.py', 'old_str': 'a - b' if i % 2 == 0 else 'a + b', 'new_str': 'a + b' if i % 2 == 0 else 'a - b'},
    'shell': lambda i: {'command': 'echo hello'},
    'search': lambda i: {'pattern': 'def [a-z]+', 'glob': '*.py'},
    'git': lambda i: {'args': ['status', '--short']},
    'list_dir': lambda i: {'path': 'src'},
}
SEED_CALLS = {  # the same work through the seed's API (absolute paths: its file_write untars at /)
    'file_read': lambda i: {'path': '/workspace/src/calc.py'},
    'file_write': lambda i: {'path': f'/workspace/out/f{i % 5}.txt', 'content': 'x' * 2000},
    'shell': lambda i: {'command': 'echo hello'},
    'search': lambda i: {'pattern': 'def [a-z]+', 'path': '/workspace', 'file_pattern': '*.py'},
    'git': lambda i: {'subcommand': 'status', 'args': '--short'},
}
EXTRA_BENCHMARKS: list = []   # f(backends, n) -> list[dict] rows; environment suites register episodes/s here

def template()->Path:
    d = Path(tempfile.mkdtemp(prefix='bench-tpl-'))
    (d/'src').mkdir()
    (d/'src/calc.py').write_text('def add(a, b):\n    return a - b\n\n\n' + 'def mul(a, b):\n    return a * b\n' * 20)
    for k in range(20): (d/'src'/f'mod{k}.py').write_text(f'def f{k}(x):\n    return x + {k}\n' * 10)
    return d

def stats(xs): xs = sorted(xs); return statistics.median(xs) * 1e3, xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))] * 1e3

def bench_ours(backend, n, tpl):
    from knowlyr_lab.sandbox.protocol import create_sandbox
    kw = {'isolation': 'none'} if backend == 'local-none' else {}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        sb = create_sandbox('docker' if backend == 'docker' else 'local', workspace=tpl, **kw)
    rows = [{'benchmark': 'create', 'backend': backend, 'isolation': sb.isolation, 'median_ms': (time.perf_counter() - t0) * 1e3, 'p95_ms': float('nan')}]
    try:
        sb.execute_tool('git', {'args': ['init', '-q']}); sb.execute_tool('git', {'args': 'add -A'}); sb.execute_tool('git', {'args': ['commit', '-qm', 'x']})
        for tool, mk in CALLS.items():
            ts = []
            for i in range(n):
                t = time.perf_counter(); r = sb.execute_tool(tool, mk(i)); ts.append(time.perf_counter() - t)
                if r.is_error: raise RuntimeError(f"{backend} {tool} failed: {r.output[:200]}")
            rows.append({'benchmark': tool, 'backend': backend, 'isolation': sb.isolation, **dict(zip(['median_ms', 'p95_ms'], stats(ts)))})
        for name, fn in [('snapshot', sb.snapshot), ('reset', sb.reset)]:
            ts = []
            for _ in range(max(3, n // 5)):
                t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
            rows.append({'benchmark': name, 'backend': backend, 'isolation': sb.isolation, **dict(zip(['median_ms', 'p95_ms'], stats(ts)))})
    finally: sb.close()
    rows.append(bench_verify(backend, n))
    return rows

def bench_verify(backend, n)->dict:
    "A coding task's grading: a fresh sandbox from the pristine task, the agent's files over it, the hidden tests, the report"
    from knowlyr_lab.coding_tasks import BUNDLED_CODING_DIR, fixed_files, load_coding_task
    task = load_coding_task(BUNDLED_CODING_DIR/'py-fizzbuzz-order.yaml')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        v = task.verifier('docker' if backend == 'docker' else 'local', sandbox_kwargs={'isolation': 'none'} if backend == 'local-none' else None)
        ts = []
        for _ in range(max(3, n // 10)):
            t = time.perf_counter(); verdict = v.verify(fixed_files(task)); ts.append(time.perf_counter() - t)
            if not verdict.success: raise RuntimeError(f"{backend} verify failed: {verdict}")
    return {'benchmark': 'verify (hidden tests)', 'backend': backend, 'isolation': backend, **dict(zip(['median_ms', 'p95_ms'], stats(ts)))}

def seed_source()->tuple[str|None, str]:
    "A sys.path entry holding agentsandbox + knowlyrcore 0.1.2, or None and why not"
    if Path('/tmp/seed/src/agentsandbox').is_dir() and Path('/tmp/seed/src/knowlyrcore').is_dir(): return '/tmp/seed/src', 'unpacked seed source'
    d = Path(tempfile.mkdtemp(prefix='seed-wheels-'))
    r = subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '-d', str(d), 'knowlyr-sandbox==0.1.2', 'knowlyr-core==0.1.2'],
                       capture_output=True, text=True)
    if r.returncode: return None, f"pip download failed: {r.stderr.strip()[-300:]}"
    import zipfile
    for w in d.glob('*.whl'): zipfile.ZipFile(w).extractall(d/'src')
    return str(d/'src'), 'downloaded wheels'

def bench_seed(n, tpl, image):
    src, how = seed_source()
    if src is None: return [], f"seed not runnable: {how}"
    sys.path.insert(0, src)
    try:
        import docker
        from agentsandbox.config import SandboxConfig, TaskConfig
        from agentsandbox.sandbox import Sandbox
    except Exception as e: return [], f"seed not importable ({type(e).__name__}: {e})"
    try: docker.from_env(timeout=5).ping()
    except Exception as e: return [], f"seed needs Docker and no engine answers ({type(e).__name__})"
    t0 = time.perf_counter()
    sb = Sandbox.create(SandboxConfig(image=image, network_enabled=False), TaskConfig(domain='generic'))
    rows = [{'benchmark': 'create', 'backend': 'seed-docker', 'isolation': 'docker (seed 0.1.2)', 'median_ms': (time.perf_counter() - t0) * 1e3, 'p95_ms': float('nan')}]
    try:
        # same starting files (the seed cannot copy a template: write them with its own file_write)
        for p in sorted(tpl.rglob('*.py')):
            sb.execute_tool('file_write', {'path': f'/workspace/{p.relative_to(tpl)}', 'content': p.read_text()})
        for c in ['git init -q', 'git add -A', "git -c user.name=x -c user.email=x@x commit -qm x"]: sb.execute_tool('shell', {'command': c})
        for tool, mk in SEED_CALLS.items():
            ts = []
            for i in range(n):
                t = time.perf_counter(); r = sb.execute_tool(tool, mk(i)); ts.append(time.perf_counter() - t)
                if r.exit_code not in (0, None): raise RuntimeError(f"seed {tool} failed: {r.error or r.output}")
            rows.append({'benchmark': tool, 'backend': 'seed-docker', 'isolation': 'docker (seed 0.1.2)', **dict(zip(['median_ms', 'p95_ms'], stats(ts)))})
    finally: sb.close()
    return rows, how

def bench_suites(backends:list[str], n:int)->list[dict]:
    "Rows from every benchmark registered in EXTRA_BENCHMARKS (environment suites add episodes/s per suite and backend here)"
    rows = []
    for fn in EXTRA_BENCHMARKS: rows += fn(backends, n)
    return rows

def available(backends):
    out, why = [], {}
    from knowlyr_lab.sandbox.local import bwrap_available
    for b in backends:
        if b == 'local' and not bwrap_available(): why[b] = 'bubblewrap unavailable'; continue
        if b == 'docker':
            from knowlyr_lab.sandbox.docker import docker_unavailable_reason
            r = docker_unavailable_reason()
            if r: why[b] = r; continue
        out.append(b)
    return out, why

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--n', type=int, default=30, help='calls per tool')
    ap.add_argument('--backends', default='local,local-none,docker')
    ap.add_argument('--no-seed', action='store_true', help='skip the seed comparison')
    a = ap.parse_args(argv)
    import pandas as pd
    backends, why = available(a.backends.split(','))
    for b, w in why.items(): print(f"# skipped backend {b}: {w}")
    tpl = template()
    rows = [r for b in backends for r in bench_ours(b, a.n, tpl)]
    rows += bench_suites(backends, a.n)
    df = pd.DataFrame(rows)
    pd.set_option('display.width', 200)
    print(f"\nSandbox tool-call latency, {a.n} calls per tool (ms)\n")
    print(df.pivot_table(index='benchmark', columns='backend', values=['median_ms', 'p95_ms'], sort=False).round(1).to_string())
    if not a.no_seed:
        if 'docker' not in backends: print(f"\n# seed knowlyr-sandbox 0.1.2 comparison not run: it needs Docker ({why.get('docker', 'docker backend not selected')})"); return df
        from knowlyr_lab.sandbox.docker import DEFAULT_IMAGE
        seed, how = bench_seed(a.n, tpl, DEFAULT_IMAGE)
        if not seed: print(f"\n# seed knowlyr-sandbox 0.1.2 comparison not run: {how}"); return df
        s = pd.DataFrame(seed).set_index('benchmark')
        ours = df[df.backend == 'docker'].set_index('benchmark')
        cmp = pd.DataFrame({'seed_median_ms': s.median_ms, 'ours_docker_median_ms': ours.median_ms.reindex(s.index),
                            'ours_local_median_ms': df[df.backend == 'local'].set_index('benchmark').median_ms.reindex(s.index) if 'local' in backends else float('nan')})
        cmp['seed/ours_docker'] = cmp.seed_median_ms / cmp.ours_docker_median_ms
        cmp['seed/ours_local'] = cmp.seed_median_ms / cmp.ours_local_median_ms
        print(f"\nAgainst the seed knowlyr-sandbox 0.1.2 ({how}; same image and engine; ratio > 1: ours is faster)\n")
        print(cmp.round(2).to_string())
        print("\nNote: the seed enforces no per-command timeout, no limits, no path checks and no output bound; ours does each "
              "(docker: a timeout/cleanup wrapper per command, one extra exec per file tool to resolve the path inside the container).")
    return df

if __name__ == '__main__':
    main()

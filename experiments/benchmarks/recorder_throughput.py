#!/usr/bin/env python
"""Recorder throughput: trajectories/s, MB/s and peak RSS per log format, against the reference knowlyr-recorder 0.1.2.

For each format a synthetic input of about --size-mb is generated from the real samples (rows replicated with new
ids, conversations synthesised in the format's shape, or many copies of one-episode files). Each measurement runs in
a fresh Python process, so peak RSS (ru_maxrss) belongs to that conversion alone; the RSS of the imports is measured
in the same process before reading and reported apart.

The reference (knowlyr-recorder 0.1.2 from PyPI) is installed by this script into its own virtual environment
(--ref-venv, default /tmp/refvenv) and run there; it only has adapters for OpenHands event JSONL and SWE-agent JSON,
so its columns are filled for `openhands` and `swe-agent`. It does not redact: the issue's goal compares ours WITH
redaction (`ours`) to it; `ours-noredact` is printed too. `claude-code` has no reference (goal: MB/s). The
`openai-chat-doc` row is one whole JSON document (an array of conversations) parsed streaming: its peak RSS above
the imports is compared with the largest single conversation.

    python experiments/benchmarks/recorder_throughput.py                 # ~10 MB per format
    python experiments/benchmarks/recorder_throughput.py --size-mb 200 --formats openai-chat-doc openhands claude-code
"""
import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / 'tests' / 'fixtures' / 'recorder'
SHARED = ROOT / 'tests' / 'fixtures' / 'agent_logs'

def _src(fmt, name):
    p = SHARED / fmt / name
    return p if p.exists() else FIX / fmt / name

# ---------------------------------------------------------------- synthetic inputs

def _fill_lines(path, make_line, size):
    n, written = 0, 0
    with open(path, 'w') as f:
        while written < size:
            s = make_line(n) + '\n'; f.write(s); written += len(s.encode()); n += 1
    return n

def gen_openai_chat(d, size):
    rng = random.Random(0)
    def row(i):
        msgs = [{'role': 'system', 'content': 'You are a coding agent.'}, {'role': 'user', 'content': f'Fix issue #{i}: ' + 'lorem ipsum ' * 20}]
        for k in range(4):
            msgs.append({'role': 'assistant', 'content': f'Step {k}: checking files.', 'usage': {'prompt_tokens': 900 + k, 'completion_tokens': 40},
                         'tool_calls': [{'id': f'c{i}_{k}', 'type': 'function', 'function': {'name': 'shell', 'arguments': json.dumps({'cmd': f'grep -rn foo{rng.randint(0, 99)} src/'})}}]})
            msgs.append({'role': 'tool', 'tool_call_id': f'c{i}_{k}', 'content': 'src/a.py:12: foo()\n' * 15 + '[The command completed with exit code 0.]'})
        msgs.append({'role': 'assistant', 'content': 'Done.'})
        return json.dumps({'id': f'task-{i}', 'messages': msgs})
    p = d / 'chat.jsonl'; return p, _fill_lines(p, row, size)

def gen_anthropic(d, size):
    def row(i):
        msgs = [{'role': 'user', 'content': [{'type': 'text', 'text': f'Who is the youngest? case {i} ' + 'context ' * 30}]}]
        for k in range(3):
            ids = [f'toolu_{i}_{k}_{j}' for j in range(2)]
            msgs.append({'role': 'assistant', 'content': [{'type': 'thinking', 'thinking': 'I should look people up. ' * 5, 'signature': 'EqEECkYICxgC' * 8},
                                                          {'type': 'text', 'text': 'Looking up two people.'}] +
                         [{'type': 'tool_use', 'id': x, 'name': 'retrieve_entity_info', 'input': {'name': f'P{j}'}} for j, x in enumerate(ids)]})
            msgs.append({'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': x, 'content': f'person {j} is {20 + j} years old. ' * 6} for j, x in enumerate(ids)]})
        msgs.append({'role': 'assistant', 'content': [{'type': 'text', 'text': 'P0 is the youngest.'}]})
        return json.dumps({'id': f'conv-{i}', 'messages': msgs})
    p = d / 'anthropic.jsonl'; return p, _fill_lines(p, row, size)

def _replicate_rows(src, key, d, name, size):
    rows = [json.loads(l) for l in open(src) if l.strip()]
    def row(i):
        r = dict(rows[i % len(rows)]); r[key] = f'{r.get(key, "row")}-{i}'; return json.dumps(r)
    p = d / name; return p, _fill_lines(p, row, size)

def gen_agentgym(d, size): return _replicate_rows(_src('agentgym-sharegpt', 'webshop_fncall.jsonl'), 'item_id', d, 'gym.jsonl', size)
def gen_smolagents(d, size):
    src = SHARED / 'smolagents' / 'gpt-4o__tool-calling__math__2025-07-24.jsonl'
    return _replicate_rows(src if src.exists() else FIX / 'smolagents' / 'gpt-4o__tool-calling__math__head5.jsonl', 'question', d, 'smol.jsonl', size)

def _copies(srcs, d, sub, size, suffix=None):
    out = d / sub; out.mkdir(); n = written = 0
    while written < size:
        s = srcs[n % len(srcs)]
        q = out / f'{n:06d}_{s.stem}{suffix or s.suffix}'
        shutil.copyfile(s, q); written += q.stat().st_size; n += 1
    return out, n

def gen_toolbench(d, size): return _copies([_src('toolbench', n) for n in ('G1_answer__10_ChatGPT_DFS_woFilter_w2.json', 'G2_answer__127_ChatGPT_DFS_woFilter_w2.json')], d, 'toolbench', size)

def gen_react(d, size):
    text = (FIX / 'react-text' / 'hotpot.txt').read_text().split('\n', 2)[2]
    p = d / 'react.txt'; n = written = 0
    with open(p, 'w') as f:
        while written < size: f.write(text + '\n'); written += len(text) + 1; n += 2
    return p, n

def gen_openhands(d, size):
    "One long OpenHands V0 event stream (JSONL): a user message, then run-action/observation pairs linked by `cause`"
    p = d / 'events.jsonl'
    first = {'id': 0, 'timestamp': '2025-01-27T22:44:56.900854', 'source': 'user', 'message': 'Fix the failing tests.', 'action': 'message',
             'args': {'content': 'Fix the failing tests.', 'image_urls': None, 'wait_for_response': False}}
    def line(i):
        if i == 0: return json.dumps(first)
        k = (i - 1) // 2; aid = 2 * k + 1
        if (i - 1) % 2 == 0:
            return json.dumps({'id': aid, 'timestamp': '2025-01-27T22:45:13.764487', 'source': 'agent', 'message': f'Running command: pytest -k t{k}', 'action': 'run',
                               'tool_call_metadata': {'function_name': 'execute_bash', 'tool_call_id': f'toolu_{k:08d}', 'model_response': {'id': f'resp{k}', 'usage': {'prompt_tokens': 1000, 'completion_tokens': 30}}, 'total_calls_in_response': 1},
                               'args': {'command': f'pytest -k t{k}', 'is_input': False, 'thought': 'Run the tests.', 'blocking': False, 'hidden': False, 'confirmation_state': 'confirmed'}})
        return json.dumps({'id': aid + 1, 'timestamp': '2025-01-27T22:45:14.801384', 'source': 'agent', 'message': 'Command finished with exit code 1', 'cause': aid, 'observation': 'run',
                           'tool_call_metadata': {'function_name': 'execute_bash', 'tool_call_id': f'toolu_{k:08d}'},
                           'content': 'FAILED tests/test_a.py::t - AssertionError\n' * 10, 'extras': {'command': f'pytest -k t{k}', 'metadata': {'exit_code': 1}}, 'success': False})
    _fill_lines(p, line, size)
    return p, 1

def gen_swe_agent(d, size):
    srcs = [p for p in sorted((SHARED / 'swe-agent').glob('*.traj'))] if (SHARED / 'swe-agent').exists() else []
    if not srcs: raise FileNotFoundError('swe-agent samples not present')
    return _copies(srcs, d, 'swe', size, suffix='.json')   # the seed only reads .json files

def gen_claude_code(d, size):
    "One long Claude Code session: user prompt, then assistant tool_use / user tool_result records linked by ids"
    p = d / 'session.jsonl'
    base = {'sessionId': '5c0375b4-57a5-4f26-b12d-d022ee4e51b7', 'cwd': '/path/to/Demo', 'version': '1.0.108', 'gitBranch': 'main', 'isSidechain': False, 'userType': 'external'}
    body = ''.join(f'{i:4d}  line {i} of the file, with some code: x = compute(y, z)  # comment\n' for i in range(40))
    def line(i):
        if i == 0: return json.dumps({**base, 'type': 'user', 'uuid': 'u0', 'parentUuid': None, 'timestamp': '2025-09-10T10:00:00.000Z', 'message': {'role': 'user', 'content': 'Refactor the parser.'}})
        k = (i - 1) // 2
        if (i - 1) % 2 == 0:
            return json.dumps({**base, 'type': 'assistant', 'uuid': f'a{k}', 'parentUuid': f'u{k}', 'timestamp': '2025-09-10T10:00:01.000Z', 'requestId': f'req_{k}',
                               'message': {'id': f'msg_{k}', 'type': 'message', 'role': 'assistant', 'model': 'claude-sonnet-4-20250514', 'content': [
                                   {'type': 'text', 'text': f'Reading file {k}.'}, {'type': 'tool_use', 'id': f'toolu_{k:08d}', 'name': 'Read', 'input': {'file_path': f'/path/to/Demo/src/m{k}.py'}}],
                                   'stop_reason': 'tool_use', 'usage': {'input_tokens': 4, 'cache_read_input_tokens': 12000, 'output_tokens': 80}}})
        return json.dumps({**base, 'type': 'user', 'uuid': f'u{k + 1}', 'parentUuid': f'a{k}', 'timestamp': '2025-09-10T10:00:02.000Z',
                           'message': {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': f'toolu_{k:08d}', 'content': body}]},
                           'toolUseResult': {'type': 'text', 'file': {'filePath': f'/path/to/Demo/src/m{k}.py', 'content': body, 'numLines': 40}}})
    _fill_lines(p, line, size)
    return p, 1

def gen_openai_chat_doc(d, size):
    "One JSON document: an array of chat conversations (a dataset export), written streaming"
    src, _ = gen_openai_chat(d, size)
    p = d / 'conversations.json'; n = 0
    with open(src) as f, open(p, 'w') as out:
        out.write('[\n')
        for i, l in enumerate(f):
            out.write((',\n' if i else '') + l.rstrip('\n')); n += 1
        out.write('\n]\n')
    src.unlink()
    return p, n

FORMATS = {'openai-chat': gen_openai_chat, 'openai-chat-doc': gen_openai_chat_doc, 'claude-code': gen_claude_code, 'anthropic-messages': gen_anthropic, 'agentgym': gen_agentgym, 'smolagents': gen_smolagents,
           'toolbench': gen_toolbench, 'react-text': gen_react, 'openhands': gen_openhands, 'swe-agent': gen_swe_agent}
SEED_ADAPTER = {'openhands': 'OpenHandsAdapter', 'swe-agent': 'SWEAgentAdapter'}

# ---------------------------------------------------------------- workers (run in a fresh process)

def _rss_mb(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def worker(impl, fmt, path, seed_dir):
    path = Path(path)
    fmt = 'openai-chat' if fmt == 'openai-chat-doc' else 'agentgym' if fmt == 'agentgym' else fmt
    prof = None
    if os.environ.get('RECORDER_BENCH_PROFILE'):
        import cProfile
        prof = cProfile.Profile()
    if impl.startswith('floor'):   # the least a validated trajectory of this input costs (OpenHands only): see `floor`
        import gc

        import knowlyr_lab.trajectory  # noqa: F401 (imported before the clock starts, as ours)
        import knowlyr_lab.trajectory_fast  # noqa: F401
        schema = impl.partition('-')[2] or 'pydantic'
        base = _rss_mb(); t0 = time.perf_counter(); c0 = time.process_time()
        was = gc.isenabled(); gc.disable()   # as ours (`_collector_paused`)
        try: t = floor(path, schema)
        finally:
            if was: gc.enable()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        n, steps, extra = 1, (t if schema == 'parse' else len(t.steps)), {}
    elif impl.startswith('ours'):
        from knowlyr_lab.recorder.base import get_adapter
        from knowlyr_lab.recorder.convert import convert
        from knowlyr_lab.recorder.report import ConversionReport
        get_adapter(fmt)
        base = _rss_mb(); t0 = time.perf_counter(); c0 = time.process_time()
        if prof: prof.enable()
        r = ConversionReport(); n = steps = 0
        for t in convert(path, format=fmt, redact=impl == 'ours', report=r): n += 1; steps += len(t.steps)
        if prof: prof.disable()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        extra = {'quarantined': r.totals['quarantined']}
    else:
        import agentrecorder.adapters as A
        a = getattr(A, SEED_ADAPTER[fmt])()
        base = _rss_mb(); t0 = time.perf_counter(); c0 = time.process_time(); n = steps = 0
        if prof: prof.enable()
        files = sorted(path.iterdir()) if path.is_dir() else [path]
        for f in files:
            if a.validate(str(f)): t = a.parse(str(f)); n += 1; steps += len(t.steps)
        if prof: prof.disable()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        extra = {}
    if prof:
        import pstats
        pstats.Stats(prof, stream=sys.stderr).sort_stats('tottime').print_stats(int(os.environ['RECORDER_BENCH_PROFILE']))
    print(json.dumps({'n': n, 'steps': steps, 'seconds': dt, 'cpu': cpu, 'rss_mb': _rss_mb(), 'base_rss_mb': base, **extra}))

def floor(path, schema='pydantic'):
    """A lower bound, not a converter: the benchmark's OpenHands events read with orjson, each run action/observation
    pair mapped to a step dict by straight indexing (no checks, no report, no redaction, no fallbacks: only this
    generator's shape is read), and the whole trajectory validated once by the schema (`Trajectory.model_validate`,
    pydantic-core, its content hash included). What a converter that validates once could not go below.
    `schema='msgspec'`: validated instead by the schema's msgspec mirror (`trajectory_fast._Trajectory`, the same
    fields and constraints, no pydantic model built) with the same content hash: what a package-wide msgspec schema
    could reach. `schema='parse'`: the lines read and parsed by orjson, nothing else (returns the number of steps)."""
    from datetime import datetime, timezone

    import msgspec
    import orjson

    from knowlyr_lab.trajectory import Trajectory
    from knowlyr_lab.trajectory_fast import _Trajectory
    if schema == 'parse':
        with open(path, 'rb') as f: return sum(1 for line in f if orjson.loads(line).get('action') == 'run')
    secs = lambda ts: datetime.fromisoformat(ts).replace(tzinfo=timezone.utc).timestamp()
    steps, by_id, first = [], {}, None
    with open(path, 'rb') as f:
        for line in f:
            ev = orjson.loads(line)
            if ev.get('action') == 'run':
                a, tcm = ev['args'], ev['tool_call_metadata']; mr = tcm['model_response']; u = mr['usage']
                s = {'index': len(steps), 'thought': a['thought'], 't_start': secs(ev['timestamp']),
                     'action': {'tool': tcm['function_name'], 'params': {k: v for k, v in a.items() if k != 'thought'},
                                'call_id': tcm['tool_call_id']},
                     'usage': {'input': u['prompt_tokens'], 'output': u['completion_tokens']},
                     'metadata': {'response_id': mr['id'], 'openhands_action': 'run', 'event_id': ev['id']}}
                steps.append(s); by_id[ev['id']] = s
            elif 'observation' in ev:
                s, meta = by_id[ev['cause']], ev['extras']['metadata']
                s['observation'] = {'content': ev['content'], 'is_error': ev['success'] is False, 'exit_code': meta['exit_code']}
                s['t_end'] = secs(ev['timestamp'])
                s['metadata'].update(observation_metadata=meta, observation_event_id=ev['id'])
            else: first = ev
    doc = {'task': {'id': Path(path).stem, 'instruction': first['args']['content'], 'domain': 'coding'},
           'agent': {'name': 'openhands'}, 'source': {'format': 'openhands', 'path': str(path)}, 'steps': steps}
    if schema == 'pydantic': return Trajectory.model_validate(doc)
    t = msgspec.convert(doc, _Trajectory)
    t.id = Trajectory.content_hash(t)   # the hash reads attributes only: the same text, so the same id
    return t

def run_worker(impl, fmt, path, ref_python, profile=0):
    exe = ref_python if impl == 'seed' else sys.executable
    env = {**os.environ, 'PYTHONPATH': str(ROOT)} if impl != 'seed' else {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    if profile: env['RECORDER_BENCH_PROFILE'] = str(profile)
    res = subprocess.run([exe, __file__, '--worker', impl, fmt, str(path), ''], capture_output=True, text=True, cwd=ROOT if impl != 'seed' else '/tmp', env=env)
    if res.returncode != 0: return {'error': res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f'rc={res.returncode}'}
    if profile: print(f"---- profile of {impl} on {fmt} (cProfile, sorted by own time)\n" + res.stderr.strip(), flush=True)
    return json.loads(res.stdout.strip().splitlines()[-1])

def cli_start(ref_python, repeat:int, tiny:Path):
    "Wall seconds (median of `repeat`) of a CLI call: `--help`, and a whole `convert` of a small log; the reference's `--help`"
    import statistics
    ours = [sys.executable, '-m', 'knowlyr_lab.cli.recorder']
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    calls = {'ours --help': ours + ['--help'],
             f'ours convert ({tiny.stat().st_size // 1024} KB, redacting)': ours + ['convert', str(tiny), '-f', 'openhands', '-o', str(tiny.with_name('out.jsonl')), '--no-progress']}
    if ref_python: calls['reference --help'] = [str(Path(ref_python).with_name('knowlyr-recorder')), '--help']
    for name, cmd in calls.items():
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter(); res = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT); ts.append(time.perf_counter() - t0)
            if res.returncode != 0: print(f"cli {name}: rc={res.returncode} {res.stderr.decode()[-200:]}"); break
        else: print(f"cli {name:40} {statistics.median(ts):6.3f} s wall (median of {repeat}; min {min(ts):.3f})", flush=True)

# ---------------------------------------------------------------- the reference package, in its own venv

def ensure_reference(venv:Path):
    "python of a venv with knowlyr-recorder==0.1.2 (created and pip-installed here when missing); None when impossible"
    py = venv / 'bin' / 'python'
    if not py.exists():
        subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True)
    ok = subprocess.run([str(py), '-c', 'import agentrecorder.adapters'], capture_output=True).returncode == 0
    if not ok:
        res = subprocess.run([str(py), '-m', 'pip', 'install', '-q', 'knowlyr-recorder==0.1.2'], capture_output=True, text=True)
        if res.returncode != 0: print(f"(could not install the reference: {res.stderr.strip()[-300:]})"); return None
    v = subprocess.run([str(py), '-m', 'pip', 'show', 'knowlyr-recorder'], capture_output=True, text=True).stdout
    print('reference:', next((l for l in v.splitlines() if l.startswith('Version')), '?'), 'in', venv)
    return str(py)

def _size(p): return sum(f.stat().st_size for f in p.rglob('*') if f.is_file()) if p.is_dir() else p.stat().st_size

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--size-mb', type=float, default=10, help='approximate input size per format')
    ap.add_argument('--formats', nargs='+', default=list(FORMATS), choices=list(FORMATS))
    ap.add_argument('--no-seed', action='store_true', help='skip the reference comparison')
    ap.add_argument('--ref-venv', default='/tmp/refvenv', help='virtual environment for knowlyr-recorder 0.1.2')
    ap.add_argument('--repeat', type=int, default=3, help='runs per measurement (the median is printed)')
    ap.add_argument('--profile', type=int, default=0, help='print the N functions with the most own time of one extra run of each side')
    ap.add_argument('--cli', action='store_true', help='also time CLI calls (start-up, and a whole convert of a small log)')
    ap.add_argument('--floor', action='store_true', help="also time `floor` (OpenHands): lower bounds for any converter that validates the trajectory once "
                    "(by pydantic, by the msgspec mirror) and for parsing alone")
    ap.add_argument('--worker', nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker: return worker(*a.worker)
    import datetime
    import platform
    import statistics
    print(f"{datetime.date.today()} {platform.node()} {platform.processor() or platform.machine()} cpus={os.cpu_count()} python {platform.python_version()}")
    from importlib.metadata import PackageNotFoundError, version
    def _v(d):
        try: return version(d)
        except PackageNotFoundError: return '-'
    print('ours:', ', '.join(f'{d} {_v(d)}' for d in ('orjson', 'pydantic', 'pydantic-core', 'hyperscan', 'detect-secrets', 'ijson')))
    print('load average (1/5/15 min) at start: %.2f %.2f %.2f' % os.getloadavg(), flush=True)
    size = int(a.size_mb * 2**20)
    ref = None if a.no_seed else ensure_reference(Path(a.ref_venv))
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        if a.cli:
            (td / 'tiny').mkdir(); tiny, _ = gen_openhands(td / 'tiny', 64 * 1024)
            cli_start(ref, a.repeat, tiny)
        for fmt in a.formats:
            d = td / fmt; d.mkdir()
            try: path, _ = FORMATS[fmt](d, size)
            except FileNotFoundError as e: print(f"{fmt}: skipped ({e})"); continue
            mb = _size(path) / 2**20
            impls = ['ours', 'ours-noredact'] + (['floor', 'floor-msgspec', 'floor-parse'] if a.floor and fmt == 'openhands' else []) + (['seed'] if ref and fmt in SEED_ADAPTER else [])
            res = {}
            for i in impls:
                runs = [run_worker(i, fmt, path, ref) for _ in range(a.repeat)]
                bad = [r for r in runs if 'error' in r]
                if bad: print(f"{fmt:16} {i:14} ERROR {bad[0]['error']}"); continue
                r = dict(runs[0]); r['rss_mb'] = max(x['rss_mb'] for x in runs)
                for k in ('seconds', 'cpu'): r[k] = statistics.median(x[k] for x in runs)
                res[i] = r
                print(f"{fmt:16} {i:14} {mb:7.1f} MB  {r['n']:7d} traj {r['steps']:8d} steps  {r['seconds']:7.3f} s  "
                      f"{mb / r['seconds']:7.2f} MB/s  cpu {r['cpu']:7.3f} s {mb / r['cpu']:7.2f} MB/s  peak RSS {r['rss_mb']:7.1f} MB (imports {r['base_rss_mb']:.0f})", flush=True)
            if a.profile:
                for i in impls: run_worker(i, fmt, path, ref, a.profile)
            if 'seed' in res and 'ours' in res:
                o, n, s = res['ours'], res.get('ours-noredact'), res['seed']
                print(f"{'':16} ratio vs reference (wall): ours (redacting) x{s['seconds'] / o['seconds']:.2f}"
                      + (f", ours without redaction x{s['seconds'] / n['seconds']:.2f}" if n else '')
                      + f"; (cpu): ours (redacting) x{s['cpu'] / o['cpu']:.2f}"
                      + (f", ours without redaction x{s['cpu'] / n['cpu']:.2f}" if n else '')
                      + f"; steps {o['steps']} vs {s['steps']}", flush=True)
                for k, what in (('floor', 'validated once by pydantic, nothing else'), ('floor-msgspec', 'validated once by the msgspec mirror'),
                                ('floor-parse', 'orjson parse only')):
                    if k in res:
                        fl = res[k]
                        print(f"{'':16} {k} ({what}) vs reference: wall x{s['seconds'] / fl['seconds']:.2f}, "
                              f"cpu x{s['cpu'] / fl['cpu']:.2f}; steps {fl['steps']}", flush=True)
            if fmt == 'openai-chat-doc' and 'ours' in res:
                with open(path) as f: biggest = max(len(l) for l in f) / 2**20
                o = res['ours']
                print(f"{'':16} peak RSS above imports {o['rss_mb'] - o['base_rss_mb']:.1f} MB for a {mb:.0f} MB document; largest record {biggest:.3f} MB", flush=True)

if __name__ == '__main__':
    main()
    if not sys.argv[1:2] == ['--worker']: print('load average (1/5/15 min) at end: %.2f %.2f %.2f' % os.getloadavg())

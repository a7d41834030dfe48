#!/usr/bin/env python
"""Recorder peak memory per log format, as a multiple of the input size (issue 27: "peak memory 3-5x the input on
50 MB files").

For each format a synthetic input of about --size-mb is generated (the generators of recorder_throughput.py, plus a
Codex CLI rollout). Each conversion runs in a fresh Python process that imports the library, notes its RSS, then
converts the file and consumes the trajectories one at a time, as `knowlyr-recorder convert` does when it writes
them; "peak above imports" is ru_maxrss after the conversion minus the RSS after the imports, and "x input" divides
that by the input size. --root picks the library: run it once against a checkout of the old code and once against
this one to compare.

    python experiments/benchmarks/recorder_memory.py                             # 50 MB per format
    python experiments/benchmarks/recorder_memory.py --root /path/to/old/checkout --formats claude-code codex-cli
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import recorder_throughput as rt  # noqa: E402  (the shared input generators)


def gen_codex(d, size):
    "One long Codex CLI rollout: reasoning, a function_call and its output per turn, token counts"
    p = d / 'rollout-2026-01-01T00-00-00-x.jsonl'
    out = ''.join(f'{i:4d}  def f{i}(x): return x + {i}\n' for i in range(40))
    def line(i):
        if i == 0: return json.dumps({'timestamp': '2026-01-01T00:00:00Z', 'type': 'session_meta', 'payload': {'id': 'x', 'cwd': '/w', 'cli_version': '0.30.0'}})
        if i == 1: return json.dumps({'timestamp': '2026-01-01T00:00:00Z', 'type': 'event_msg', 'payload': {'type': 'user_message', 'message': 'Refactor the parser.'}})
        k, r = divmod(i - 2, 4)
        pl = [{'type': 'reasoning', 'summary': [{'type': 'summary_text', 'text': f'Read module {k}.'}]},
              {'type': 'function_call', 'name': 'shell', 'arguments': json.dumps({'command': ['cat', f'src/m{k}.py']}), 'call_id': f'call_{k}'},
              {'type': 'function_call_output', 'call_id': f'call_{k}', 'output': json.dumps({'output': out, 'metadata': {'exit_code': 0}})},
              {'type': 'token_count', 'info': {'total_token_usage': {'input_tokens': 1000 * (k + 1), 'output_tokens': 50 * (k + 1)}}}][r]
        return json.dumps({'timestamp': '2026-01-01T00:00:01Z', 'type': 'event_msg' if r == 3 else 'response_item', 'payload': pl})
    rt._fill_lines(p, line, size)
    return p, 1

def gen_gemini(d, size):
    "One long Gemini CLI JSONL session: the real sample's messages replayed with new ids (rewrites of a message included)"
    src = [json.loads(l) for l in open(rt._src('gemini-cli', 'gemini.jsonl')) if l.strip()]
    head, body = src[0], src[1:]
    p = d / 'session-x.jsonl'
    def line(i):
        if i == 0: return json.dumps(head)
        k, j = divmod(i - 1, len(body))
        r = dict(body[j])
        if 'id' in r: r['id'] = f"{r['id']}-{k}"
        return json.dumps(r)
    rt._fill_lines(p, line, size)
    return p, 1

def gen_openhands_array(d, size):
    "One OpenHands V0 trajectory export: the same event stream as `openhands`, as one JSON array"
    src, _ = rt.gen_openhands(d, size)
    p = d / 'trajectory.json'
    with open(src) as f, open(p, 'w') as out:
        out.write('[\n')
        for i, l in enumerate(f): out.write((',\n' if i else '') + l.rstrip('\n'))
        out.write('\n]\n')
    src.unlink()
    return p, 1

FORMATS = {'claude-code': rt.gen_claude_code, 'openhands-array': gen_openhands_array, 'gemini-cli': gen_gemini, 'codex-cli': gen_codex, 'openhands': rt.gen_openhands, 'openai-chat': rt.gen_openai_chat,
           'openai-chat-doc': rt.gen_openai_chat_doc, 'anthropic-messages': rt.gen_anthropic, 'smolagents': rt.gen_smolagents, 'agentgym': rt.gen_agentgym}

def streaming_content_hash(self)->str:
    "`Trajectory.content_hash`, the same bytes fed to sha256 a step at a time (the change proposed for nbs/03)"
    import hashlib

    from knowlyr_lab.trajectory import canonical_json
    t = self.task
    task = [t.id, t.instruction, t.domain, t.env_id] + ([t.initial_observation] if t.initial_observation is not None else [])
    h = hashlib.sha256()
    h.update(('{"agent":' + canonical_json([self.agent.name, self.agent.model]) + ',"outcome":' + canonical_json(self.outcome.model_dump()) + ',"steps":[').encode())
    for i, s in enumerate(self.steps):
        h.update(((',' if i else '') + canonical_json([s.thought, s.action.model_dump() if s.action else None,
                                                       s.observation.model_dump() if s.observation else None])).encode())
    h.update(('],"task":' + canonical_json(task) + '}').encode())
    return 'tr-' + h.hexdigest()[:24]

def _rss_mb(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def worker(fmt, path, redact, streaming_hash=False):
    import knowlyr_lab
    if streaming_hash:
        from knowlyr_lab.trajectory import Trajectory
        Trajectory.content_hash = streaming_content_hash
    from knowlyr_lab.recorder.base import get_adapter
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.report import ConversionReport
    fmt = {'openai-chat-doc': 'openai-chat', 'openhands-array': 'openhands'}.get(fmt, fmt)
    get_adapter(fmt)
    if redact:
        from knowlyr_lab.recorder.redact import default_redactor
        default_redactor()
    base = _rss_mb(); t0 = time.perf_counter(); r = ConversionReport(); n = steps = 0
    for t in convert(path, format=fmt, redact=redact, report=r): n += 1; steps += len(t.steps)
    print(json.dumps({'n': n, 'steps': steps, 'seconds': time.perf_counter() - t0, 'rss_mb': _rss_mb(), 'base_rss_mb': base,
                      'quarantined': r.totals['quarantined'], 'lib': knowlyr_lab.__file__}))

def run_worker(fmt, path, root, redact, streaming_hash=False):
    env = {**os.environ, 'PYTHONPATH': str(root), 'OMP_NUM_THREADS': '1'}
    res = subprocess.run([sys.executable, __file__, '--worker', fmt, str(path), '1' if redact else '0', '1' if streaming_hash else '0'], capture_output=True, text=True, cwd=root, env=env)
    if res.returncode != 0: return {'error': (res.stderr.strip().splitlines() or [f'rc={res.returncode}'])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0], allow_abbrev=False)
    ap.add_argument('--size-mb', type=float, default=50)
    ap.add_argument('--formats', nargs='+', default=list(FORMATS), choices=list(FORMATS))
    ap.add_argument('--root', type=Path, default=ROOT, help='checkout whose knowlyr_lab is measured')
    ap.add_argument('--no-redact', action='store_true', help='convert without redaction (the default redacts, as the CLI does)')
    ap.add_argument('--repeat', type=int, default=1)
    ap.add_argument('--streaming-hash', action='store_true', help="hash trajectory ids a step at a time (the proposed nbs/03 change; same ids)")
    a = ap.parse_args()
    print(time.strftime('%Y-%m-%d %H:%M:%S'), 'root', a.root, 'load', os.getloadavg())
    with tempfile.TemporaryDirectory() as td:
        for fmt in a.formats:
            d = Path(td) / fmt; d.mkdir()
            path, _ = FORMATS[fmt](d, int(a.size_mb * 2**20))
            mb = path.stat().st_size / 2**20
            runs = [run_worker(fmt, path, a.root, not a.no_redact, a.streaming_hash) for _ in range(a.repeat)]
            bad = [x for x in runs if 'error' in x]
            if bad: print(f'{fmt:18s} error: {bad[0]["error"]}'); continue
            peak = max(x['rss_mb'] - x['base_rss_mb'] for x in runs); x = runs[0]
            print(f"{fmt:18s} {mb:6.1f} MB  {x['n']:6d} traj {x['steps']:7d} steps  {min(r['seconds'] for r in runs):7.2f} s  "
                  f"peak above imports {peak:7.1f} MB = {peak / mb:4.2f}x input  (imports {x['base_rss_mb']:.0f} MB)")

if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '--worker': worker(sys.argv[2], Path(sys.argv[3]), sys.argv[4] == '1', sys.argv[5] == '1')
    else: main()

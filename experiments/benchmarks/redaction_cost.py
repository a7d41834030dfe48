#!/usr/bin/env python
"""Redaction cost: conversion time with redaction on over conversion time with it off, on openai-chat logs.

Four synthetic logs of --n conversations each (a coding agent: an instruction, four shell calls, their outputs):
  plain          ordinary code and prose in the outputs;
  password-like  outputs full of lines that name secrets without holding one (`user.password = hash_password(...)`,
                 `api_key = os.environ[...]`, `token = request.headers.get('token')`): every record passes the
                 prefilter, and the assignment rule runs and vetoes each;
  secrets        password-like outputs plus a real secret in one conversation in five, stated in the instruction and
                 typed again into a command (so the value is propagated through the whole trajectory);
  many-secrets   as secrets, with a password of its own in every conversation: a file gives away as many values as it
                 has conversations, which each trajectory (and each report text) is redacted of (the cost was
                 conversations x values until rec39, ~140 s for 1,500 conversations of another log).
Every configuration is converted --repeat times, interleaved (off, on, off, on, ...) in one process after a warm-up
that builds the rules; the time is CPU time of this process (`time.process_time`), which the load of a shared
machine disturbs less than wall time. The ratio is median(on) / median(off); with it, the spread: the quartiles of the
per-repeat ratios (on_i / off_i of each interleaved pair) and min(on) / min(off). Goal (issue 24): at most 2x.

    python experiments/benchmarks/redaction_cost.py            # --n 1500 --repeat 5
    python experiments/benchmarks/redaction_cost.py --kinds many-secrets --n 3000 --repeat 1
    PYTHONPATH=/work/main python experiments/benchmarks/redaction_cost.py   # another checkout's code, for a before/after
"""
import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

PASSWORD_LIKE = ["    user.password = hash_password(form.password)", "DB_PASSWORD=${DB_PASSWORD}", "password: str = Field(...)",
                 "  if not check_password(password, user.password_hash):", "api_key = os.environ['API_KEY']",
                 "    token = request.headers.get('token')", "secret_key = settings.SECRET_KEY", "def reset_password(self, token, new_password):",
                 "    client = OpenAI(api_key=self.config.api_key)", "  refresh_token: Optional[str] = None"]
PLAIN = ["    return sorted(items, key=lambda x: x.name)", "for i, row in enumerate(rows):", "    total += row.amount * rate",
         "class OrderService(BaseService):", "    logger.info('processed %d orders', n)", "if __name__ == '__main__':"]

KINDS = ('plain', 'password-like', 'secrets', 'many-secrets')

def conversation(i:int, kind:str, rng:random.Random)->str:
    pw = f'Hq{rng.randrange(10**8):08d}zX'                      # a real-looking password, stated and reused
    secret = kind == 'many-secrets' or (kind == 'secrets' and i % 5 == 0)
    lines = PASSWORD_LIKE if kind != 'plain' else PLAIN
    msgs = [{'role': 'system', 'content': 'You are a coding agent.'},
            {'role': 'user', 'content': f'Fix issue #{i}: ' + 'the order totals are wrong; ' * 8 + (f'The staging DB_PASSWORD={pw}' if secret else '')}]
    for k in range(4):
        cmd = f'PGPASSWORD={pw} psql -h staging -c "select 1"' if secret and k == 1 else f'grep -rn total{rng.randrange(99)} src/'
        msgs.append({'role': 'assistant', 'content': f'Step {k}: looking at the code.',
                     'tool_calls': [{'id': f'c{i}_{k}', 'type': 'function', 'function': {'name': 'shell', 'arguments': json.dumps({'cmd': cmd})}}]})
        out = ''.join(f'src/app/models.py:{j}: {rng.choice(lines)}\n' for j in range(15))
        msgs.append({'role': 'tool', 'tool_call_id': f'c{i}_{k}', 'content': out + (f'connected with {pw}\n' if secret and k == 1 else '')})
    msgs.append({'role': 'assistant', 'content': 'Done: the totals now use the rate.'})
    return json.dumps({'id': f'task-{i}', 'messages': msgs})

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--n', type=int, default=1500, help='conversations per log')
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--kinds', nargs='+', default=list(KINDS), choices=KINDS, help='logs to make and convert')
    a = ap.parse_args()
    import knowlyr_lab
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.redact import default_redactor
    print(f"code: {Path(knowlyr_lab.__file__).parent}; {os.uname().nodename} cpus={os.cpu_count()} load {open('/proc/loadavg').read().split()[:3]}")
    default_redactor()                                          # build the rules outside the timings
    with tempfile.TemporaryDirectory() as td:
        rows = []
        for kind in a.kinds:
            rng = random.Random(0)
            p = Path(td) / f'{kind}.jsonl'
            p.write_text('\n'.join(conversation(i, kind, rng) for i in range(a.n)) + '\n')
            for red in (False, True): sum(1 for _ in convert(p, redact=red))       # warm-up
            times, leaks = {False: [], True: []}, None
            for _ in range(a.repeat):
                for red in (False, True):
                    t0 = time.process_time(); trajs = list(convert(p, redact=red)); times[red].append(time.process_time() - t0)
                    if red: leaks = sum('Hq' in t.model_dump_json() and 'zX' in t.model_dump_json() for t in trajs)
            off, on = statistics.median(times[False]), statistics.median(times[True])
            pairs = sorted(y / x for x, y in zip(times[False], times[True]))
            q1, _, q3 = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else (pairs[0],) * 3
            mb = p.stat().st_size / 2**20
            rows.append((kind, a.n, mb, off, on, on / off, leaks))
            print(f"{kind:14} {a.n} conversations {mb:6.1f} MB  off {off:6.2f} s  on {on:6.2f} s  ratio {on / off:5.2f}x"
                  f"  (per-repeat ratios: quartiles {q1:.2f}-{q3:.2f}, range {pairs[0]:.2f}-{pairs[-1]:.2f}; min/min {min(times[True]) / min(times[False]):.2f}x)"
                  f"  (cpu s, median of {a.repeat}; runs off {['%.2f' % x for x in times[False]]} on {['%.2f' % x for x in times[True]]})"
                  f"  trajectories still holding a planted password: {leaks}", flush=True)
    worst = max(r[5] for r in rows)
    print(f"worst ratio {worst:.2f}x (goal <= 2x): {'met' if worst <= 2 else 'NOT met'}")

if __name__ == '__main__':
    main()

"""Convert EVERY real agent log under tests/fixtures/agent_logs/ (all formats, whoever wrote the adapter).

Per file: the format is detected (and matches the folder), nothing is quarantined, trajectories have steps when the
log has actions, tool calls are paired with results, every unmapped record is stored with a reason and counted,
and token totals equal the log's own totals where the log states them. The files are in the repository (see their SOURCES.md), so nothing here is skipped.
"""
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from knowlyr_lab.recorder.convert import convert, detect, load_outcomes
from knowlyr_lab.recorder.report import ConversionReport
from knowlyr_lab.trajectory import trajectory_schema

SHARED = Path(__file__).parent / 'fixtures' / 'agent_logs'

# folder -> adapter name (None: mixed folder, the detected format is checked against ALLOWED)
FORMAT_OF_DIR = {'agentgym-sharegpt': 'agentgym', 'swe-bench-experiments': None}
ALLOWED = {'swe-bench-experiments': {'swe-agent', 'iswe', 'rovo-dev', 'swe-bench-experiments'}}
# files that are not trajectories: outcome sidecars (joined, not converted), docs, an input history
SIDECARS = ('_result.json', 'swe-bench_verified__')
NOT_LOGS = {'SOURCES.md'}
TERMINAL = {'final_answer', 'finish', 'Finish', 'submit', 'task_complete', 'attempt_completion'}
SCHEMA = trajectory_schema()

def _files():
    return [p for p in sorted(SHARED.rglob('*')) if p.is_file() and p.name not in NOT_LOGS and not any(s in p.name for s in SIDECARS)]

def _expected(p):
    d = p.relative_to(SHARED).parts[0]
    return FORMAT_OF_DIR.get(d, d), d

@pytest.mark.parametrize('path', _files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_real_log_converts(path):
    fmt, folder = _expected(path)
    det = detect(path)
    assert det.format is not None, f"no adapter recognises {path.name}: {det.reason}"
    if fmt is not None: assert det.format == fmt, det
    else: assert det.format in ALLOWED[folder], det
    r = ConversionReport()
    trajs = list(convert(path, report=r))
    assert r.totals['quarantined'] == 0, r.errors[:5]
    assert not r.failed, r.failed                     # a session or file that failed whole is not in `totals`
    assert trajs or r.totals['mapped'] == 0            # mapped records make a trajectory
    assert r.totals['mapped'] + r.totals['unmapped'] > 0
    for t in trajs:
        jsonschema.validate(json.loads(t.model_dump_json()), SCHEMA)
        assert t.source.format == det.format
        # steps > 0 where the log has actions; an empty trajectory must say why
        if not t.steps: assert t.outcome.reason or t.metadata.get('final_answer') or t.metadata.get('unmapped'), f"{t.task.id}: 0 steps, no reason"
        # tool calls paired with results (only the final response / a terminal tool may stay unanswered)
        last_resp = t.steps[-1].metadata.get('response_id') if t.steps else None
        open_calls = [s.index for s in t.steps if s.action and s.observation is None and s.action.tool not in TERMINAL
                      and s is not t.steps[-1] and not (last_resp and s.metadata.get('response_id') == last_resp)]
        assert not open_calls, f"{t.task.id}: calls without results at steps {open_calls[:10]}"
        # the log's own token totals, where the adapter recorded them as input/output
        lu = t.metadata.get('log_usage') or {}
        if isinstance(lu, dict) and ('input' in lu or 'input_tokens' in lu):
            assert t.total_usage.input == lu.get('input', lu.get('input_tokens')), (t.total_usage, lu)
            assert t.total_usage.output == lu.get('output', lu.get('output_tokens')), (t.total_usage, lu)
    stored = r.orphans + [e for t in trajs for e in t.metadata.get('unmapped', [])]
    assert sum(c['unmapped'] for c in r.counts.values()) + sum(r.parts.values()) == len(stored), "unmapped records counted but not stored (or vice versa)"
    assert all(e.get('why') for e in stored), "an unmapped record without a reason"

def _usage_of_cassette(p):
    tot = [0, 0]
    for it in yaml.safe_load(p.read_text())['interactions']:
        u = it['response']['parsed_body']['usage']
        tot[0] += u.get('prompt_tokens', u.get('input_tokens', 0)) + u.get('cache_read_input_tokens', 0) + u.get('cache_creation_input_tokens', 0)
        tot[1] += u.get('completion_tokens', u.get('output_tokens', 0))
    return tot

@pytest.mark.parametrize('path', [p for p in _files() if p.suffix == '.yaml' and p.parent.name in ('openai-chat', 'anthropic-messages')], ids=lambda p: p.name)
def test_cassette_tokens_equal_log(path):
    trajs = list(convert(path))
    assert [sum(t.total_usage.input for t in trajs), sum(t.total_usage.output for t in trajs)] == _usage_of_cassette(path)

def test_smolagents_tokens_equal_log():
    p = SHARED / 'smolagents' / 'gpt-4o__tool-calling__math__2025-07-24.jsonl'
    rows = [json.loads(l) for l in p.open()]
    trajs = list(convert(p))
    assert len(trajs) == len(rows)
    assert sum(t.total_usage.input for t in trajs) == sum(r['token_counts']['input_tokens'] for r in rows)
    assert sum(t.total_usage.output for t in trajs) == sum(r['token_counts']['output_tokens'] for r in rows)
    assert sum(len(t.steps) for t in trajs) == sum(1 for r in rows for m in r['intermediate_steps'] if m['role'] == 'tool-response')

def test_files_are_the_published_blobs():
    "Every fixture is byte for byte the file SOURCES.md names (git blob SHA-1), so the tests read real logs"
    import hashlib
    import re
    src = (SHARED / 'SOURCES.md').read_text()
    entries = re.findall(r"### `([^`]+)`.*?- blob: `([0-9a-f]{40})`", src, re.S)
    assert sorted(n for n, _ in entries) == sorted(str(p.relative_to(SHARED)) for p in SHARED.rglob('*') if p.is_file() and p.name != 'SOURCES.md')
    for name, blob in entries:
        data = (SHARED / name).read_bytes()
        assert hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest() == blob, name

def test_sidecars_load(tmp_path):
    (tmp_path / 'google__gson-2410_result.json').write_text(json.dumps({'instance_id': 'google__gson-2410', 'resolved': True, 'passed_tests': ['a']}))
    res = load_outcomes(tmp_path / 'google__gson-2410_result.json')
    assert res['google__gson-2410']['resolved'] is True
    sb = next((SHARED / 'mini-swe-agent').glob('swe-bench_verified__*.json'))
    o = load_outcomes(sb)
    doc = json.loads(sb.read_text())
    assert sum(v['resolved'] for v in o.values()) == len(doc['resolved_ids'])
    assert len(o) == len(set(doc['submitted_ids']) | set(doc['resolved_ids']) | set(doc['unresolved_ids']) | set(doc['completed_ids']))

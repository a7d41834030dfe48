"Recorder integration tests on the project's own small fixtures: every format, accounting, redaction, fuzzing, CLI."
import gzip
import io
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder.base import RecorderError, UnknownAdapterError, get_adapter, list_adapters
from knowlyr_lab.recorder.convert import FormatDetectionError, convert, detect_format, diff_trajectories, validate
from knowlyr_lab.recorder.redact import Redactor
from knowlyr_lab.recorder.report import ConversionReport
from knowlyr_lab.recorder.secret_rules import SAMPLE_SECRETS, secret_value
from knowlyr_lab.trajectory import trajectory_schema
from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories

FIX = Path(__file__).parent / 'fixtures' / 'recorder'
FORMAT_OF_DIR = {'agentgym-sharegpt': 'agentgym'}          # folder name -> adapter name where they differ
MINE = ['openai-chat', 'anthropic-messages', 'react-text', 'agentgym-sharegpt', 'toolbench', 'smolagents']
SCHEMA = trajectory_schema()
TERMINAL = {'final_answer', 'finish', 'Finish', 'submit', 'task_complete'}

def _files(d): return sorted(p for p in (FIX / d).rglob('*') if p.is_file() and p.suffix != '.md')
def _cases():
    return [pytest.param(p, id=f'{d.name}/{p.name}') for d in sorted(FIX.iterdir()) if d.is_dir() for p in _files(d.name)]

def _convert(path, **kw):
    r = ConversionReport()
    return list(convert(path, report=r, **kw)), r

# ---------------------------------------------------------------- every project fixture, every format (4b's included)

@pytest.mark.parametrize('path', _cases())
def test_fixture_converts(path, tmp_path):
    fmt = FORMAT_OF_DIR.get(path.parent.name, path.parent.name)
    if fmt not in list_adapters(): pytest.skip(f"no adapter registered for {fmt!r} yet")
    assert detect_format(path) == fmt
    trajs, r = _convert(path)
    assert r.totals['quarantined'] == 0, r.errors
    assert not r.failed, r.failed                     # a session or file that failed whole is not in `totals`
    assert trajs or r.totals['mapped'] == 0            # mapped records make a trajectory
    assert r.totals['mapped'] + r.totals['unmapped'] > 0          # something was read and accounted for
    for t in trajs:
        assert t.source.format == fmt and t.source.path == str(path)
        jsonschema.validate(json.loads(t.model_dump_json()), SCHEMA)
        if not t.steps: assert t.outcome.reason or t.metadata.get('final_answer'), f"{t.task.id}: no steps and no reason"
        last_resp = t.steps[-1].metadata.get('response_id') if t.steps else None
        for s in t.steps:
            if s.action and s.observation is None and s.action.tool not in TERMINAL:
                assert s is t.steps[-1] or (last_resp and s.metadata.get('response_id') == last_resp), f"unanswered call at step {s.index}"
    # unmapped records are counted AND stored, each with a reason
    stored = r.orphans + [e for t in trajs for e in t.metadata.get('unmapped', [])]
    assert sum(c['unmapped'] for c in r.counts.values()) + sum(r.parts.values()) == len(stored)
    assert all(e['why'] for e in stored)
    out = tmp_path / 'o.jsonl'
    assert write_trajectories(trajs, out) == len(trajs)
    assert [t.id for t in read_trajectories(out)] == [t.id for t in trajs]

def test_all_my_formats_have_fixtures_and_are_registered():
    for d in MINE:
        assert _files(d), d
        assert FORMAT_OF_DIR.get(d, d) in list_adapters()

# ---------------------------------------------------------------- tokens: the log's own totals, counted once

def _cassette_usage(path):
    tot = [0, 0]
    for it in yaml.safe_load(path.read_text())['interactions']:
        u = it['response']['parsed_body']['usage']
        tot[0] += u.get('prompt_tokens', u.get('input_tokens', 0)) + u.get('cache_read_input_tokens', 0) + u.get('cache_creation_input_tokens', 0)
        tot[1] += u.get('completion_tokens', u.get('output_tokens', 0))
    return tot

@pytest.mark.parametrize('path', [*_files('openai-chat'), *_files('anthropic-messages')], ids=lambda p: p.name)
def test_chat_token_totals_match_log(path):
    trajs, _ = _convert(path)
    got = [sum(t.total_usage.input for t in trajs), sum(t.total_usage.output for t in trajs)]
    if path.suffix == '.yaml': assert got == _cassette_usage(path)
    elif 'litellm' in path.name:
        u = json.loads(path.read_text())['response']['usage']
        assert got == [u['prompt_tokens'], u['completion_tokens']]
    elif path.suffix == '.jsonl':       # usage stated on each assistant message
        us = [m['usage'] for l in path.open() for m in json.loads(l)['messages'] if m.get('usage')]
        assert got == [sum(u.get('prompt_tokens', u.get('input_tokens', 0)) + u.get('cache_read_input_tokens', 0) for u in us),
                       sum(u.get('completion_tokens', u.get('output_tokens', 0)) for u in us)]
    else: assert got == [0, 0]          # a bare message list states no usage: none is invented

def test_dataset_token_totals_match_log():
    p = FIX / 'smolagents' / 'gpt-4o__tool-calling__math__head5.jsonl'
    rows = [json.loads(l) for l in p.open()]
    trajs, _ = _convert(p)
    assert sum(t.total_usage.input for t in trajs) == sum(r['token_counts']['input_tokens'] for r in rows)
    assert sum(t.total_usage.output for t in trajs) == sum(r['token_counts']['output_tokens'] for r in rows)
    for p in _files('toolbench'):
        (t,), _ = _convert(p)
        assert t.metadata['log_usage'] == {'total': json.loads(p.read_text())['answer_generation']['total_tokens']}

def test_parallel_calls_one_step_each_usage_once():
    (t,), _ = _convert(FIX / 'anthropic-messages' / 'test_multiple_parallel_tool_calls.yaml')
    par = [s for s in t.steps if s.metadata.get('parallel') == 4]
    assert len(par) == 4 and len({s.metadata['response_id'] for s in par}) == 1
    assert [s.usage is not None for s in par] == [True, False, False, False]
    assert all(s.observation.content.split()[0].lower() == s.action.params['name'].lower() for s in par)   # paired by id

def test_agentgym_loss_and_outcome():
    trajs, r = _convert(FIX / 'agentgym-sharegpt' / 'webshop_fncall.jsonl')
    rows = [json.loads(l) for l in (FIX / 'agentgym-sharegpt' / 'webshop_fncall.jsonl').open()]
    assert [t.reward for t in trajs] == [row['reward'] for row in rows]
    assert [t.outcome.success for t in trajs] == [bool(row['success']) for row in rows]
    for t, row in zip(trajs, rows):
        gpt = [c for c in row['conversations'] if c['from'] == 'gpt'][1:]       # the first is the canned "Ok."
        assert [s.metadata['loss'] for s in t.steps] == [c['loss'] for c in gpt]

def test_toolbench_answered_is_not_solved(tmp_path):
    "`win` only means the search ended with an answer: kept as `answered`, never as `success`"
    out = {p.name: _convert(p)[0][0] for p in _files('toolbench')}
    ok, fail = out['G1_answer__10_ChatGPT_DFS_woFilter_w2.json'], out['G2_answer__127_ChatGPT_DFS_woFilter_w2.json']
    assert (ok.outcome.submitted, ok.metadata['answered'], ok.outcome.success) == (True, True, None)
    assert (fail.outcome.submitted, fail.metadata['answered'], fail.outcome.success) == (False, False, False)   # gave up: certainly unsolved
    sorry = json.loads((FIX / 'toolbench' / 'G1_answer__10_ChatGPT_DFS_woFilter_w2.json').read_text())
    sorry['answer_generation']['final_answer'] = json.dumps({'return_type': 'give_answer', 'final_answer': "I'm sorry, but I couldn't fetch the data."})
    p = tmp_path / 'G1_sorry.json'; p.write_text(json.dumps(sorry))
    (t,), _ = _convert(p)
    assert (t.metadata['answered'], t.outcome.success) == (True, None)

# ---------------------------------------------------------------- detection, validation, sidecars, diff

def test_detect_unknown_lists_what_it_tried(tmp_path):
    p = tmp_path / 'x.json'; p.write_text('{"hello": 1}')
    with pytest.raises(FormatDetectionError) as e: detect_format(p)
    for n in ('openai-chat', 'toolbench', 'smolagents'): assert n in str(e.value)
    with pytest.raises(UnknownAdapterError, match="did you mean 'toolbench'"): get_adapter('toolbnch')

def test_validate_reports_line_and_field(tmp_path):
    p = tmp_path / 'c.jsonl'
    good = {'messages': [{'role': 'user', 'content': 'do it'}, {'role': 'assistant', 'tool_calls': [{'id': 'a', 'function': {'name': 'ls', 'arguments': '{}'}}]}, {'role': 'tool', 'tool_call_id': 'a', 'content': 'x'}]}
    bad = {'messages': [{'role': 'user', 'content': 'do it'}, {'role': 'assistant', 'tool_calls': 'oops'}]}
    p.write_text(json.dumps(good) + '\n' + json.dumps(bad) + '\n')
    fs = validate(p)
    errs = [f for f in fs if f.level == 'error']
    assert [(f.line, f.field) for f in errs] == [(2, 'messages[1].tool_calls')]
    assert not p.with_suffix('.jsonl.q').exists()

def test_sidecar_keeps_submitted_and_resolved_apart(tmp_path):
    p = tmp_path / 'rows.jsonl'
    rows = [{'task_id': f'repo__x-{i}', 'messages': [{'role': 'user', 'content': 'fix'}, {'role': 'assistant', 'tool_calls': [{'id': 's', 'function': {'name': 'submit', 'arguments': '{}'}}]}]} for i in range(3)]
    p.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    sc = tmp_path / 'results.json'
    sc.write_text(json.dumps({'submitted_ids': ['repo__x-0', 'repo__x-1'], 'resolved_ids': ['repo__x-0'], 'unresolved_ids': ['repo__x-1']}))
    trajs, _ = _convert(p, sidecar=sc)
    assert [t.outcome.success for t in trajs] == [True, False, None]
    out = tmp_path / 'o.jsonl'
    assert cli.main(['convert', str(p), '-o', str(out), '--sidecar', str(sc), '--no-progress'], Console(file=io.StringIO())) == 0
    assert [t.outcome.success for t in read_trajectories(out)] == [True, False, None]

def test_diff_first_divergence():
    a, b = [_convert(p)[0][0] for p in _files('toolbench')]
    d = diff_trajectories(a, b)
    assert d.first_divergence['index'] == 0 and d.first_divergence['field'] == 'tool'
    assert d.success == (None, False) and not d.identical
    assert diff_trajectories(a, a).identical

# ---------------------------------------------------------------- secrets never reach a file

def _secret_logs(tmp_path):
    "A chat JSONL, an agentgym row, a ReAct text and malformed lines, each carrying every kind of planted secret"
    blob = ' | '.join(SAMPLE_SECRETS.values())
    chat = tmp_path / 'chat.jsonl'
    chat.write_text(json.dumps({'messages': [
        {'role': 'system', 'content': f'config: {blob}'},
        {'role': 'user', 'content': f'Deploy. {blob}'},
        {'role': 'assistant', 'content': f'thinking about {blob}', 'tool_calls': [{'id': 'c1', 'function': {'name': 'shell', 'arguments': json.dumps({'cmd': blob})}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': blob},
        {'role': 'narrator', 'content': blob},                        # unknown role: kept as unmapped, still redacted
        {'role': 'tool', 'tool_call_id': 'nope', 'content': blob}]}) + '\n'
        + '{"messages": [{"role": "user", "content": "' + blob.replace('\n', ' ').replace('"', "'") + '"\n')   # malformed: quarantined
    gym = tmp_path / 'gym.jsonl'
    gym.write_text(json.dumps({'item_id': 'w_1', 'conversations': [{'from': 'human', 'value': 'env'}, {'from': 'gpt', 'loss': False, 'value': 'Ok.'},
                                                                   {'from': 'human', 'value': f'task {blob}'}, {'from': 'gpt', 'value': f'Thought: {blob}\nAction: search[{blob}]'},
                                                                   {'from': 'human', 'value': blob}, {'from': 'gpt', 'value': 12}]}) + '\n')
    react = tmp_path / 'run.txt'
    react.write_text(f'Question: {blob}\nThought: use it\nAction: search[{blob}]\nObservation: {blob}\nFinal Answer: {blob}\n')
    return [chat, gym, react]

def test_planted_secrets_never_written(tmp_path):
    logs = _secret_logs(tmp_path)
    out, q, side = tmp_path / 'out.jsonl', tmp_path / 'q.jsonl', tmp_path / 'side.jsonl'
    rc = cli.main(['convert', *map(str, logs), '-o', str(out), '--quarantine', str(q), '--unmapped', str(side), '--no-progress'], Console(file=io.StringIO()))
    assert rc == 3                                                  # done, the malformed lines quarantined
    assert q.exists() and len(q.read_text().splitlines()) == 2
    trajs = list(read_trajectories(out))
    assert len(trajs) == 3
    written = ''.join(p.read_text() for p in tmp_path.iterdir() if p.name in ('out.jsonl', 'q.jsonl', 'side.jsonl'))
    for kind in SAMPLE_SECRETS:
        core = max(secret_value(kind).split('\n'), key=len)          # JSON escapes newlines: look for the longest line
        assert core not in written, kind
        assert f'[REDACTED:{kind}]' in written, kind
    red = trajs[0].metadata['redactions']
    assert set(red) == set(SAMPLE_SECRETS) and all(n >= 4 for n in red.values())
    assert any(e['record_type'] == 'message:narrator' for e in trajs[0].metadata['unmapped'])

def test_no_redact_keeps_text(tmp_path):
    chat = _secret_logs(tmp_path)[0]
    trajs, _ = _convert(chat, redact=False)
    assert SAMPLE_SECRETS['openai_key'] in trajs[0].task.instruction

@given(st.one_of(st.uuids().map(str), st.text('0123456789abcdef', min_size=40, max_size=40),
                 st.from_regex(r'[a-z_]{3,12}-[0-9a-f]{8,32}', fullmatch=True), st.from_regex(r'toolu_[A-Za-z0-9]{24}', fullmatch=True)))
@settings(max_examples=200, deadline=None)
def test_identifiers_are_not_redacted(s):
    assert Redactor().redact_text(f'id {s} ok') == (f'id {s} ok', {})

# ---------------------------------------------------------------- fuzz: mutated logs never crash, nothing goes missing

JSONL_LOGS = {'agentgym': FIX / 'agentgym-sharegpt' / 'webshop_fncall.jsonl',
              'smolagents': FIX / 'smolagents' / 'gpt-4o__tool-calling__math__head5.jsonl',
              'openai-chat': FIX / 'openai-chat' / 'conversations.jsonl',
              'anthropic-messages': FIX / 'anthropic-messages' / 'conversations.jsonl'}
LIST_KEY = {'agentgym': 'conversations', 'smolagents': 'intermediate_steps', 'openai-chat': 'messages', 'anthropic-messages': 'messages'}

def _count(fmt, lines, tmp_path, name):
    p = tmp_path / name; p.write_text(''.join(l + '\n' for l in lines))
    r = ConversionReport()
    trajs = list(get_adapter(fmt).convert(p, r))
    t = r.totals
    return t['mapped'] + t['unmapped'] + t['quarantined'], r, trajs

MUTATIONS = ['keep', 'drop', 'dup', 'truncate', 'corrupt', 'row_type', 'item_type']

@pytest.mark.parametrize('fmt', list(JSONL_LOGS))
@given(data=st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_jsonl_accounting(fmt, data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('fz')
    lines = JSONL_LOGS[fmt].read_text().splitlines()
    clean = [_count(fmt, [l], tmp, f'c{i}.jsonl')[0] for i, l in enumerate(lines)]   # records each clean line holds
    muts = data.draw(st.lists(st.sampled_from(MUTATIONS), min_size=len(lines), max_size=len(lines)))
    out, expected = [], 0
    for l, n, m in zip(lines, clean, muts):
        if m == 'keep': out.append(l); expected += n
        elif m == 'drop': continue
        elif m == 'dup': out += [l, l]; expected += 2 * n
        elif m == 'truncate':
            k = data.draw(st.integers(1, len(l) - 1)); out.append(l[:k]); expected += 1
        elif m == 'corrupt': out.append(l.replace('"', "'", 1)); expected += 1
        elif m == 'row_type':
            d = json.loads(l); d[LIST_KEY[fmt]] = data.draw(st.sampled_from([7, 'x', None, {'a': 1}])); out.append(json.dumps(d)); expected += 1
        elif m == 'item_type':
            d = json.loads(l); items = d[LIST_KEY[fmt]]
            if not items: out.append(l); expected += n; continue
            items[data.draw(st.integers(0, len(items) - 1))] = data.draw(st.sampled_from([7, 'x', None, [1]]))
            out.append(json.dumps(d)); expected += n
    total, r, trajs = _count(fmt, out, tmp, 'mut.jsonl')
    assert total == expected, (muts, r.summary())
    assert r.n_errors == r.totals['quarantined'] + sum(r.failed.values())
    assert all(e.split(':')[1].isdigit() for e in r.errors)        # every error names its line

@given(text=st.text(max_size=400), fmt=st.sampled_from(['openai-chat', 'anthropic-messages', 'agentgym', 'smolagents', 'toolbench', 'react-text']),
       suffix=st.sampled_from(['.json', '.jsonl', '.yaml', '.txt']))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_garbage_never_raises(text, fmt, suffix, tmp_path_factory):
    p = tmp_path_factory.mktemp('g') / f'x{suffix}'
    p.write_text(text)
    r = ConversionReport()
    list(convert(p, format=fmt, report=r))                          # must not raise
    assert r.n_errors == r.totals['quarantined'] + sum(r.failed.values())

@pytest.mark.parametrize('path', [*_files('toolbench'), *_files('openai-chat'), *_files('anthropic-messages')], ids=lambda p: p.name)
def test_truncated_whole_file_is_quarantined(path, tmp_path):
    p = tmp_path / path.name; p.write_text(path.read_text()[: len(path.read_text()) // 2])
    trajs, r = _convert(p)
    if r.totals['quarantined'] + sum(r.failed.values()) == 0:
        # half a YAML cassette can still parse: then the cut interaction is kept as an unmapped record
        assert path.suffix == '.yaml' and r.totals['unmapped'] >= 1, r.summary()
        return
    assert r.errors[0].startswith(str(p))
    with pytest.raises(RecorderError): list(convert(p, strict=True))

# ---------------------------------------------------------------- streaming memory and the console script

def _rows(n):
    for i in range(n):
        yield json.dumps({'id': f't{i}', 'messages': [{'role': 'user', 'content': f'task {i} ' + 'x' * 200},
            {'role': 'assistant', 'content': 'look', 'tool_calls': [{'id': f'c{i}', 'function': {'name': 'ls', 'arguments': '{"path": "."}'}}]},
            {'role': 'tool', 'tool_call_id': f'c{i}', 'content': 'a.py b.py ' * 20}]}) + '\n'

def test_convert_streams_in_constant_memory(tmp_path):
    peaks = []
    for n in (200, 2000):
        p = tmp_path / f'{n}.jsonl.gz'
        with gzip.open(p, 'wt') as f: f.writelines(_rows(n))
        tracemalloc.start()
        k = sum(1 for _ in convert(p, format='openai-chat', redact=False))
        peaks.append(tracemalloc.get_traced_memory()[1]); tracemalloc.stop()
        assert k == n
    assert peaks[1] < 1.5 * peaks[0] + 200_000, peaks           # 10x the input, about the same peak

def test_console_script_formats():
    res = subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.recorder', 'formats'], capture_output=True, text=True)
    exe = Path(sys.executable).parent / 'knowlyr-recorder'
    if exe.exists(): res = subprocess.run([str(exe), 'formats'], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    for n in ('openai-chat', 'toolbench', 'knowlyr'): assert n in res.stdout

def test_redact_config_adds_and_disables_patterns(tmp_path):
    cfg = tmp_path / 'redact.yaml'
    cfg.write_text(yaml.safe_dump({'patterns': [{'name': 'acme_token', 'regex': r'acme_[0-9a-f]{32}', 'needles': ['acme_']}], 'disable': ['json_web_token']}))
    tok = 'acme_' + 'ab12' * 8
    p = tmp_path / 'c.jsonl'
    p.write_text(json.dumps({'messages': [{'role': 'user', 'content': f"use {tok} and {SAMPLE_SECRETS['json_web_token']}"}]}) + '\n')
    out = tmp_path / 'o.jsonl'
    assert cli.main(['convert', str(p), '-o', str(out), '--redact-config', str(cfg), '--no-progress'], Console(file=io.StringIO())) == 0
    text = out.read_text()
    assert tok not in text and '[REDACTED:acme_token]' in text
    assert SAMPLE_SECRETS['json_web_token'] in text                           # switched off by the config

def test_chat_jsonl_pairs_parallel_legacy_and_errors():
    trajs, r = _convert(FIX / 'openai-chat' / 'conversations.jsonl')
    par, legacy, err = trajs
    assert [s.observation.content for s in par.steps[:2]] == ['from setuptools import setup', '[project]\nname = "x"']   # by id, not order
    assert (par.total_usage.input, par.total_usage.output) == (310, 49)
    assert legacy.steps[0].observation.content == '18C, cloudy'                                       # legacy function_call, by order
    assert err.steps[0].observation.exit_code == 1 and err.steps[1].metadata['role'] == 'user'
    assert err.steps[2].metadata['bad_arguments'] and err.steps[2].action.params == {'_raw': '{"cmd": "pytest -q -x'}
    blocks, server = _convert(FIX / 'anthropic-messages' / 'conversations.jsonl')[0]
    assert [s.observation.is_error for s in blocks.steps[:2]] == [True, False]
    assert blocks.total_usage.input == 10 + 300 + 12 + 340 and blocks.total_usage.cached == 640
    assert 'python.org' in server.steps[0].observation.content and server.steps[0].metadata.get('server_tool')
    assert server.steps[0].thought is None and server.steps[1].thought == 'Python 3.14.'       # the answer comes after the search

def test_own_output_detects_and_validates(tmp_path):
    out = tmp_path / 'o.jsonl'
    n = write_trajectories(convert([FIX / 'toolbench', FIX / 'anthropic-messages']), out)
    assert detect_format(out) == 'knowlyr'
    assert [f for f in validate(out) if f.level == 'error'] == []
    again, r = _convert(out)
    assert len(again) == n and r.totals == {'mapped': n, 'unmapped': 0, 'quarantined': 0}
    lines = out.read_text().splitlines()
    bad = json.loads(lines[0]); bad['steps'][0]['index'] = -1
    out.write_text('\n'.join([json.dumps(bad)] + lines[1:]) + '\n')
    errs = [f for f in validate(out) if f.level == 'error']
    assert len(errs) == 1 and errs[0].line == 1 and 'steps.0.index' in errs[0].message

def test_cli_convert_loads_neither_pandas_nor_pyarrow(tmp_path):
    "A CLI call starts without the table libraries (their import was most of its ~1.4 s start): they load where a table or a Parquet file is made"
    src = sorted((FIX / 'openai-chat').glob('*.jsonl'))[0]
    code = ("import sys\nfrom knowlyr_lab.cli.recorder import main\n"
            f"rc = main(['convert', {str(src)!r}, '-o', {str(tmp_path / 'out.jsonl')!r}, '--no-progress'])\n"
            "print(rc, sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert 'trajectories from 1 file' in r.stdout                      # the summary table, printed without pandas
    assert r.stdout.strip().splitlines()[-1] == '0 []'
    assert len(list(read_trajectories(tmp_path / 'out.jsonl'))) >= 1

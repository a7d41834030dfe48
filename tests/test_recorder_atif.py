"Harbor ATIF and NeMo Gym ng_trajectory imports: auto-detection, calls paired by id, token usage and token ids kept, the CLI."
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder.base import RecorderError
from knowlyr_lab.recorder.convert import convert, detect_format
from knowlyr_lab.recorder.report import ConversionReport
from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories

FIX = Path(__file__).parent / 'fixtures' / 'atif'
ATIF_MULTI = FIX / 'atif_multiagent_v1_7.json'
NG_ROWS = FIX / 'ng_trajectory_rollouts.jsonl'


def _convert(path, **kw):
    r = ConversionReport(**kw)
    return list(convert(path, report=r)), r


def _harbor_v16():
    "An ATIF-v1.6 trajectory as Harbor's terminus-2 writes it with rollout details on (token ids, log-probs, cost)"
    return {
        'schema_version': 'ATIF-v1.6', 'session_id': 's-1',
        'agent': {'name': 'terminus-2', 'version': '2.0.0', 'model_name': 'hosted_vllm/qwen3-8b',
                  'tool_definitions': [{'type': 'function', 'function': {'name': 'bash'}}]},
        'steps': [
            {'step_id': 1, 'source': 'system', 'message': 'You are a terminal agent.'},
            {'step_id': 2, 'source': 'user', 'message': 'Count the lines of a.txt and b.txt'},
            {'step_id': 3, 'source': 'agent', 'message': 'Two counts.', 'reasoning_content': 'wc both',
             'tool_calls': [{'tool_call_id': 'c1', 'function_name': 'bash', 'arguments': {'cmd': 'wc -l a.txt'}},
                            {'tool_call_id': 'c2', 'function_name': 'bash', 'arguments': {'cmd': 'wc -l b.txt'}}],
             'observation': {'results': [{'source_call_id': 'c2', 'content': '7 b.txt'},
                                         {'source_call_id': 'c1', 'content': [{'type': 'text', 'text': '3 a.txt'}]}]},
             'metrics': {'prompt_tokens': 50, 'completion_tokens': 4, 'cached_tokens': 10, 'cost_usd': 0.001,
                         'prompt_token_ids': [1, 2, 3], 'completion_token_ids': [9, 8, 7, 6], 'logprobs': [-0.1, -0.2, -0.3, -0.4]}},
            {'step_id': 4, 'source': 'agent', 'message': '10 lines in all.',
             'metrics': {'prompt_tokens': 70, 'completion_tokens': 5}},
        ],
        'final_metrics': {'total_prompt_tokens': 120, 'total_completion_tokens': 9, 'total_cached_tokens': 10,
                          'total_cost_usd': 0.001, 'total_steps': 4},
    }


def test_atif_two_tool_calls_autodetected():
    "The acceptance case on an ATIF-v1.7 multi-agent file: two calls with arguments, right observations, usage and token ids kept"
    assert detect_format(ATIF_MULTI) == 'atif'
    doc = json.loads(ATIF_MULTI.read_text())
    (root, child), r = _convert(ATIF_MULTI)
    calls = [s for s in root.steps if s.action]
    assert [(s.action.tool, s.action.params, s.action.call_id, s.observation.content) for s in calls] == [
        ('log_reader', {'build': 412}, 'tc_logs', '2 failures, both in tests/test_parser.py'),
        ('grep', {'pattern': 'def test_', 'path': 'tests/'}, 'tc_grep', 'tests/test_parser.py: 6 matches\ntests/test_cli.py: 3 matches')]
    assert (calls[0].usage.input, calls[0].usage.output, calls[0].usage.cached) == (48, 9, 32)
    assert calls[1].usage is None                                   # one response: its usage counted once
    m = doc['steps'][1]['metrics']
    assert (calls[0].token_ids, calls[0].logprobs, calls[0].metadata['prompt_token_ids']) == (
        m['completion_token_ids'], m['logprobs'], m['prompt_token_ids'])
    assert len(calls[0].token_ids) == 9 and calls[1].token_ids is None
    assert sum(s.usage.input for s in root.steps if s.usage) == 144
    assert root.metadata['usage_total'] == {'input': 174, 'output': 34, 'cached': 80}
    assert root.metadata['usage_unattributed'] == {'input': 30, 'output': 11, 'cached': 0}   # the sub-agent's tokens
    assert root.metadata['final_metrics']['total_steps'] == 3
    assert child.metadata['parent_tool_call_id'] == 'tc_logs' and child.steps[0].usage.output == 11
    assert r.counts['step:agent']['mapped'] == 3 and r.n_errors == 0


def test_atif_token_ids_logprobs_cost(tmp_path):
    "v1.6 with rollout details: completion ids and log-probs on the response's first step, prompt ids in metadata"
    p = tmp_path / 'trajectory.json'
    p.write_text(json.dumps(_harbor_v16(), indent=2))
    (t,), r = _convert(p)
    a, b, final = t.steps
    assert [(s.action.params['cmd'], s.observation.content) for s in (a, b)] == [('wc -l a.txt', '3 a.txt'), ('wc -l b.txt', '7 b.txt')]
    assert (a.token_ids, a.logprobs, a.metadata['prompt_token_ids']) == ([9, 8, 7, 6], [-0.1, -0.2, -0.3, -0.4], [1, 2, 3])
    assert (b.token_ids, b.logprobs, a.usage.cost) == (None, None, 0.001)
    assert (t.task.instruction, t.metadata['system_prompt'], t.agent.model) == (
        'Count the lines of a.txt and b.txt', 'You are a terminal agent.', 'hosted_vllm/qwen3-8b')
    assert t.metadata['log_usage'] == {'input': 120, 'output': 9, 'cached': 10, 'cost': 0.001}   # steps account for all of it
    assert final.action is None and final.thought == '10 lines in all.'
    out = tmp_path / 'out.jsonl'
    write_trajectories([t], out)
    [back] = read_trajectories(out)
    assert back.steps[0].token_ids == [9, 8, 7, 6] and back.steps[0].action.params == {'cmd': 'wc -l a.txt'}


def test_atif_jsonl_beats_own_jsonl_and_bad_records_located(tmp_path):
    "ATIF JSONL (one document per line) is ATIF, not knowlyr JSONL; a bad step is located and the file goes on"
    good, bad = _harbor_v16(), _harbor_v16()
    bad['steps'][2]['source'] = 'tool'
    bad['steps'][2]['observation']['results'].append({'source_call_id': 'nope', 'content': 'x'})
    p = tmp_path / 'runs.jsonl'
    p.write_text(json.dumps(good) + '\n' + json.dumps(bad) + '\n')
    assert detect_format(p) == 'atif'
    ts, r = _convert(p)
    assert len(ts) == 2 and len([s for s in ts[0].steps if s.action]) == 2
    assert r.errors == [f"{p}:2: steps[2].source: expected system, user or agent, got 'tool'"]
    with pytest.raises(RecorderError, match=r'runs\.jsonl:2: steps\[2\]\.source'):
        _convert(p, strict=True)
    orphan = _harbor_v16()
    orphan['steps'][2]['observation']['results'].append({'source_call_id': 'nope', 'content': 'late'})
    q = tmp_path / 'orphan.json'
    q.write_text(json.dumps(orphan))
    (t,), _ = _convert(q)
    assert "source_call_id 'nope' names no open tool call" in t.metadata['unmapped'][0]['why']


def test_ng_trajectory_rollouts_autodetected():
    "NeMo Gym rollouts: Responses items become calls paired by call_id, usage from the turn's model call, timing from tool_calls"
    assert detect_format(NG_ROWS) == 'ng-trajectory'
    ts, r = _convert(NG_ROWS)
    assert [t.id for t in ts] == ['stock-2-r5', 'stock-8-r1']
    north, south, answer = ts[0].steps
    assert [(s.action.tool, s.action.params, s.observation.content) for s in (north, south)] == [
        ('lookup_stock', {'sku': 'SKU-118', 'site': 'north'}, '{"units": 57}'),
        ('open_file', {'path': '/data/south_inventory.csv'}, 'sku,units\nSKU-118,42')]
    assert (north.usage.input, north.usage.output, north.usage.reasoning, north.usage.cached) == (212, 38, 15, 16)
    assert (south.usage, answer.usage.input, answer.thought.endswith('(57 against 42).')) == (None, 301, True)
    assert (south.t_start, south.t_end) == (1_772_615_000.5, 1_772_615_000.625)
    assert ts[0].outcome.success is True and ts[0].task.id == 'stock-2' and ts[0].agent.model == 'qwen2.5-7b-instruct'
    assert ts[1].outcome.success is False and ts[1].steps[0].usage.cached == 0
    assert r.counts['rollout']['mapped'] == 2 and r.n_errors == 0


def test_ng_trajectory_token_ids_failed_call_and_missing_record(tmp_path):
    row = json.loads(NG_ROWS.read_text().splitlines()[0])
    row['reward'] = 1.0
    conv = row['ng_trajectory']['invocations'][0]['conversation']
    conv[-1].update(prompt_token_ids=[1, 2], generation_token_ids=[5, 6], generation_log_probs=[-0.5, -0.6])
    row['ng_trajectory']['tool_calls'][1]['status'] = 'failed'               # call-north
    p = tmp_path / 'rollouts.jsonl'
    p.write_text(json.dumps(row) + '\n' + json.dumps({'reward': 0.0, 'response': {}}) + '\n')
    (t,), r = _convert(p)
    north, south, answer = t.steps
    assert (answer.token_ids, answer.logprobs, answer.metadata['prompt_token_ids']) == ([5, 6], [-0.5, -0.6], [1, 2])
    assert (north.observation.is_error, south.observation.is_error, t.reward) == (True, False, 1.0)
    assert r.counts['rollout']['unmapped'] == 1 and 'no ng_trajectory record' in r.orphans[0]['why']


def test_cli_converts_atif(tmp_path):
    "The CLI path that produced no tool calls before: `knowlyr-recorder convert trajectory.json`"
    out = tmp_path / 'out.jsonl'
    assert cli.main(['convert', str(ATIF_MULTI), '-o', str(out), '--no-progress'], Console(file=io.StringIO())) == 0
    root = next(iter(read_trajectories(out)))
    assert root.source.format == 'atif'
    assert [s.action.tool for s in root.steps if s.action] == ['log_reader', 'grep']


def test_atif_results_without_ids_answer_the_steps_calls(tmp_path):
    "Harbor's own agents leave source_call_id out: mini-swe-agent (one call, one result), terminus-2 (keystroke calls, one snapshot)"
    def call(cid, **args): return {'tool_call_id': cid, 'function_name': 'bash_command', 'arguments': args}
    doc = {'schema_version': 'ATIF-v1.6', 'session_id': 's', 'agent': {'name': 'terminus-2', 'version': '2.0.0'}, 'steps': [
        {'step_id': 1, 'source': 'user', 'message': 'Fix the bug'},
        {'step_id': 2, 'source': 'agent', 'message': 'Look around.', 'tool_calls': [call('call_0_1', keystrokes='cd repo\n'), call('call_0_2', keystrokes='ls\n')],
         'observation': {'results': [{'content': 'root# cd repo\nroot# ls\na.py'}]}},
        {'step_id': 3, 'source': 'agent', 'message': 'Read it.', 'tool_calls': [call('call_1_1', command='cat a.py')],
         'observation': {'results': [{'content': '<returncode>0</returncode>'}]}},
        {'step_id': 4, 'source': 'agent', 'message': 'Both.', 'tool_calls': [call('x', command='true'), call('y', command='false')],
         'observation': {'results': [{'content': 'ok'}, {'content': 'failed'}]}},
        {'step_id': 5, 'source': 'agent', 'message': 'Done.', 'observation': {'results': [{'content': 'episode over'}]}}]}
    p = tmp_path / 'trajectory.json'
    p.write_text(json.dumps(doc))
    (t,), r = _convert(p)
    cd, ls, cat, ok, bad, done = t.steps
    assert (cd.observation.content, cd.metadata['result_with'], ls.observation.content) == ('', 'call_0_2', 'root# cd repo\nroot# ls\na.py')
    assert (ls.metadata['paired_by'], cat.metadata['paired_by'], cat.observation.content) == ('last call', 'only call', '<returncode>0</returncode>')
    assert [(s.action.call_id, s.observation.content, s.metadata['paired_by']) for s in (ok, bad)] == [('x', 'ok', 'position'), ('y', 'failed', 'position')]
    assert (done.action, done.thought, done.observation.content) == (None, 'Done.', 'episode over')
    assert not any(s.metadata.get('unanswered') for s in t.steps) and r.n_errors == 0


@pytest.mark.parametrize('sid', [None, ''])
def test_atif_an_empty_source_call_id_is_no_id(tmp_path, sid):
    "source_call_id \"\" was looked up as an id (StepLog.result: no call), so the result was lost; it pairs as null does"
    doc = {'schema_version': 'ATIF-v1.6', 'session_id': 's', 'agent': {'name': 'terminus-2', 'version': '2.0.0'}, 'steps': [
        {'step_id': 1, 'source': 'user', 'message': 'Count the lines'},
        {'step_id': 2, 'source': 'agent', 'message': 'wc', 'tool_calls': [
            {'tool_call_id': '', 'function_name': 'bash', 'arguments': {'cmd': 'wc -l a.txt'}}],
         'observation': {'results': [{'source_call_id': sid, 'content': '3 a.txt'}]}}]}
    p = tmp_path / 'trajectory.json'
    p.write_text(json.dumps(doc))
    (t,), r = _convert(p)
    s, = t.steps
    assert (s.action.call_id, s.observation.content, s.metadata['paired_by']) == (None, '3 a.txt', 'only call')
    assert 'unmapped' not in t.metadata and r.totals['unmapped'] == 0

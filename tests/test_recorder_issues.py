"Recorder defects found by converting real logs of every format (issue 14): each test failed before its fix."
import importlib
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder.convert import convert, detect_format, iter_log_files
from knowlyr_lab.recorder.report import ConversionReport

FIX = Path(__file__).parent / 'fixtures' / 'recorder'
REAL = Path(__file__).parent / 'fixtures' / 'agent_logs'

def conv(path, fmt=None, **kw):
    r = ConversionReport()
    return list(convert(path, format=fmt, report=r, redact=False, **kw)), r

# ---------------------------------------------------------------- mini-swe-agent: fences paired line by line

@pytest.mark.parametrize('name', ['django__django-10999.traj.json', 'django__django-16255.traj.json'])
def test_mini_swe_agent_every_real_command_comes_out(name):
    "Each model message's command is what mini-swe-agent itself ran (its own action regex), including the fixes"
    doc = json.loads((REAL / 'mini-swe-agent' / name).read_text())
    ran = [re.findall(r"```bash\s*\n(.*?)\n```", m['content'], re.S) for m in doc['messages'] if m['role'] == 'assistant']
    assert all(len(x) == 1 for x in ran)                        # the run executed one command per message
    (t,), r = conv(REAL / 'mini-swe-agent' / name)
    assert [s.action.params['command'] for s in t.steps if s.action] == [x[0].strip() for x in ran]
    assert sum(1 for s in t.steps if s.action and s.action.params['command'].startswith('sed -i')) == 1   # the fix
    assert r.totals['quarantined'] == 0

# ---------------------------------------------------------------- aider: every fence, the LLM history, dotfiles

def test_aider_source_fences_are_edits():
    (t,), _ = conv(FIX / 'aider' / 'source-fences__.aider.chat.history.md')
    edits = [s.action.params for s in t.steps if s.action]
    assert [e['path'] for e in edits] == ['README.md', 'parse.py', 'CHANGES.md']
    assert edits[1] == {'path': 'parse.py', 'search': 'FENCE = "```"', 'replace': 'FENCES = ("```", "~~~")'}
    assert edits[2]['content'] == '# Changes\n\n- fences documented'          # a whole-file edit in <source> fences
    assert [s.observation.content for s in t.steps if s.action] == ['Applied edit to README.md', 'Applied edit to parse.py', 'Applied edit to CHANGES.md']

def test_aider_llm_history_file():
    p = FIX / 'aider' / '.aider.llm.history'
    assert detect_format(p) == 'aider'
    (t,), r = conv(p)
    first, retry, done = t.steps
    assert t.task.instruction == 'Fix the greeting typo in app.py' and t.metadata['system_prompt'].startswith('Act as an expert')
    assert first.action.params == {'path': 'app.py', 'search': 'print("helo")', 'replace': 'print("hello")'}
    assert first.observation.is_error and 'failed to match' in first.observation.content      # Aider's feedback, from the next call
    assert retry.action.params['search'] == "print('helo')" and retry.observation.content == 'Did it work?'
    assert done.action is None and done.thought == 'Done: the greeting is fixed.'
    assert r.counts['to_llm']['mapped'] == 3 and r.counts['llm_response']['mapped'] == 3

def test_directory_run_reads_dotfiles():
    assert {p.name for p in iter_log_files(FIX / 'aider')} >= {'.aider.llm.history', '.aider.input.history'}
    trajs, r = conv(FIX / 'aider')
    assert any(t.source.path.endswith('.aider.llm.history') for t in trajs)
    assert [o['record_type'] for o in r.orphans] == ['input_history'] and r.orphans[0]['why']   # kept, with a reason
    assert r.totals['quarantined'] == 0

def test_directory_run_skips_hidden_directories_loudly(tmp_path):
    (tmp_path / '.git').mkdir(); (tmp_path / '.git' / 'HEAD').write_text('ref: refs/heads/main\n')
    (tmp_path / 'c.jsonl').write_text(json.dumps({'messages': [{'role': 'user', 'content': 'hi'}]}) + '\n')
    trajs, r = conv(tmp_path)
    assert len(trajs) == 1 and r.skipped == [{'path': str(tmp_path / '.git'), 'why': 'hidden directory'}]

# ---------------------------------------------------------------- smolagents: parallel calls paired by id

def test_smolagents_parallel_calls_paired_by_id():
    (tagged, joined), r = conv(FIX / 'smolagents' / 'parallel-calls.jsonl')
    paris, lyon, fin = tagged.steps
    assert (paris.action.params, paris.observation.content) == ({'query': 'Paris population'}, 'Paris: 2.1 million inhabitants')
    assert (lyon.action.params, lyon.observation.content) == ({'query': 'Lyon population'}, 'Lyon: 0.5 million inhabitants')
    search, answer = joined.steps                                # one joined response: never given to one call alone
    assert search.observation.content == answer.observation.content and search.metadata['observation_shared_by'] == 2
    assert r.totals['quarantined'] == 0

# ---------------------------------------------------------------- OpenHands V0 evaluation output with a system prompt

def test_openhands_system_prompt_is_not_a_tool_call(tmp_path):
    events = json.loads((FIX / 'openhands' / 'trajectory.json').read_text())
    system = {'id': 0, 'timestamp': '2025-05-01T10:00:00', 'source': 'agent', 'message': 'You are OpenHands agent...', 'action': 'system',
              'args': {'content': 'You are OpenHands agent...', 'tools': [{'type': 'function', 'function': {'name': 'execute_bash'}}],
                       'openhands_version': '0.39.0', 'agent_class': 'CodeActAgent'}}
    rec = {'instance_id': 'acme__app-9', 'instruction': '<uploaded_files>/workspace</uploaded_files>\nFix the failing test in app.py\n',
           'history': [system] + events, 'metadata': {'agent_class': 'CodeActAgent'}, 'test_result': {'git_patch': ''}}
    p = tmp_path / 'output.jsonl'; p.write_text(json.dumps(rec) + '\n')
    (t,), r = conv(p, 'openhands')
    assert 'system' not in [s.action.tool for s in t.steps if s.action]
    assert not any(s.metadata.get('observation_from') == 'user' for s in t.steps)   # the task is not repeated as a user step
    assert t.task.instruction == 'Fix the failing test in app.py' and t.task.metadata['instruction_field'].startswith('<uploaded_files>')
    assert t.metadata['system_prompt'] == 'You are OpenHands agent...' and t.task.metadata['tools'][0]['function']['name'] == 'execute_bash'
    assert r.counts['action:system']['mapped'] == 1

# ---------------------------------------------------------------- Anthropic server tools: the text after a result is its own step

def test_anthropic_text_after_server_tool_results_is_not_merged(tmp_path):
    content = [{'type': 'text', 'text': 'I will search.'},
               {'type': 'server_tool_use', 'id': 'srvtoolu_1', 'name': 'web_search', 'input': {'query': 'python latest'}},
               {'type': 'web_search_tool_result', 'tool_use_id': 'srvtoolu_1', 'content': [{'type': 'web_search_result', 'url': 'https://python.org', 'title': 'Python'}]},
               {'type': 'text', 'text': 'Python 3.14 is out; checking the date.'},
               {'type': 'server_tool_use', 'id': 'srvtoolu_2', 'name': 'web_search', 'input': {'query': 'python 3.14 release date'}},
               {'type': 'web_search_tool_result', 'tool_use_id': 'srvtoolu_2', 'content': [{'type': 'web_search_result', 'url': 'https://peps.python.org/pep-0745/', 'title': 'PEP 745'}]},
               {'type': 'text', 'text': 'It was released in October 2025.'}]
    p = tmp_path / 'c.jsonl'
    p.write_text(json.dumps({'messages': [{'role': 'user', 'content': 'Latest Python?'}, {'role': 'assistant', 'content': content,
                                          'usage': {'input_tokens': 50, 'output_tokens': 30}}]}) + '\n')
    (t,), _ = conv(p, 'anthropic-messages')
    assert [(s.thought, s.action and s.action.params.get('query')) for s in t.steps] == [
        ('I will search.', 'python latest'), ('Python 3.14 is out; checking the date.', 'python 3.14 release date'), ('It was released in October 2025.', None)]
    assert 'python.org' in t.steps[0].observation.content and 'pep-0745' in t.steps[1].observation.content
    assert [s.usage is not None for s in t.steps] == [True, False, False]

def test_claude_code_server_tool_results_pair_with_their_calls(tmp_path):
    base = {'sessionId': 's1', 'cwd': '/w', 'version': '2.0.0', 'isSidechain': False, 'userType': 'external', 'timestamp': '2026-01-01T00:00:00Z'}
    recs = [{**base, 'type': 'user', 'uuid': 'u1', 'parentUuid': None, 'message': {'role': 'user', 'content': 'Latest Python?'}},
            {**base, 'type': 'assistant', 'uuid': 'a1', 'parentUuid': 'u1', 'message': {'id': 'msg_1', 'role': 'assistant', 'model': 'claude-x', 'content': [
                {'type': 'server_tool_use', 'id': 'srvtoolu_1', 'name': 'web_search', 'input': {'query': 'python'}},
                {'type': 'web_search_tool_result', 'tool_use_id': 'srvtoolu_1', 'content': [{'type': 'web_search_result', 'url': 'https://python.org'}]},
                {'type': 'text', 'text': 'Python 3.14.'}], 'usage': {'input_tokens': 5, 'output_tokens': 5}}}]
    p = tmp_path / 's1.jsonl'; p.write_text(''.join(json.dumps(x) + '\n' for x in recs))
    (t,), r = conv(p, 'claude-code')
    search, answer = t.steps
    assert 'python.org' in search.observation.content and (answer.action, answer.thought) == (None, 'Python 3.14.')
    assert r.totals == {'mapped': 2, 'unmapped': 0, 'quarantined': 0}

# ---------------------------------------------------------------- accounting: the CLI summary counts the trajectories written (per-line accounting: test_recorder_agents)

@pytest.mark.parametrize('folder', sorted(d.name for d in FIX.iterdir() if d.is_dir()))
def test_cli_summary_counts_the_trajectories_written(folder, tmp_path):
    out, buf = tmp_path / 'o.jsonl', io.StringIO()
    cli.main(['convert', str(FIX / folder), '-o', str(out), '--no-progress'], Console(file=buf, width=200))
    n = sum(1 for _ in out.open()) if out.exists() else 0
    assert n > 0 and f'{n} trajectories from' in buf.getvalue(), buf.getvalue()[:300]

# ---------------------------------------------------------------- bad input: truncated .gz and corrupt files go to quarantine, the batch goes on

def test_truncated_gz_is_quarantined_and_the_batch_goes_on(tmp_path):
    import gzip
    good = FIX / 'openai-chat' / 'conversations.jsonl'
    whole = gzip.compress(good.read_bytes() * 5)
    (tmp_path / 'a_truncated.jsonl.gz').write_bytes(whole[: len(whole) // 2])
    (tmp_path / 'b_corrupt.jsonl.gz').write_bytes(b'\x1f\x8b' + b'\x00' * 40)
    (tmp_path / 'c_good.jsonl').write_bytes(good.read_bytes())
    q = tmp_path / 'q.jsonl'
    r = ConversionReport(quarantine=q)
    trajs = list(convert(tmp_path, report=r))
    assert sum(t.source.path.endswith('c_good.jsonl') for t in trajs) == len(good.read_text().splitlines())
    errs = [e for e in r.errors if 'a_truncated' in e or 'b_corrupt' in e]
    assert len(errs) == 2 and all('file (' in e for e in errs), r.errors          # one line each: file and reason
    assert any('truncated file (EOFError' in e for e in errs)
    assert {json.loads(l)['path'].rsplit('/', 1)[-1] for l in q.read_text().splitlines()} >= {'a_truncated.jsonl.gz', 'b_corrupt.jsonl.gz'}
    buf = io.StringIO()
    assert cli.main(['convert', str(tmp_path / 'a_truncated.jsonl.gz'), '-o', str(tmp_path / 'o.jsonl'), '--no-progress'], Console(file=buf, width=300)) == 2   # nothing usable in it: bad input
    assert 'a_truncated.jsonl.gz' in buf.getvalue() and 'Traceback' not in buf.getvalue()

# ---------------------------------------------------------------- the adapter registry: a broken plugin warns, the rest still works

def test_broken_adapter_plugin_warns_and_the_registry_goes_on(monkeypatch):
    import knowlyr_lab.plugins as plugins
    import knowlyr_lab.recorder.base as base
    class EP:
        name, value = 'broken', 'no_such_module_xyz'
        def load(self): return importlib.import_module('no_such_module_xyz')   # a plugin whose import fails
    monkeypatch.setattr(plugins, 'entry_points', lambda group: [EP()])   # the one registry helper loads every kind's plugins
    with pytest.warns(UserWarning, match="entry point 'broken'"): base.discover_adapters(force=True)
    assert {'openai-chat', 'claude-code', 'aider'} <= set(base.list_adapters())

# ---------------------------------------------------------------- whole-document logs: memory bounded by the largest record

_RSS = r'''
import json, resource, sys
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.base import get_adapter
from knowlyr_lab.recorder.redact import default_redactor
get_adapter('openai-chat'); default_redactor()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
n = sum(len(t.steps) for t in convert(sys.argv[1], format='openai-chat'))
print(json.dumps({'steps': n, 'peak_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base}))
'''

@pytest.mark.slow
def test_whole_document_memory_is_bounded(tmp_path):
    "A JSON array of conversations is streamed: 12x the document, about the same peak, far below the document's size"
    import subprocess
    import sys
    conv = lambda i: {'id': f'c{i}', 'messages': [{'role': 'user', 'content': f'task {i} ' + 'x' * 300}] + [m for k in range(4) for m in (
        {'role': 'assistant', 'content': 'look', 'tool_calls': [{'id': f'c{i}_{k}', 'type': 'function', 'function': {'name': 'shell', 'arguments': json.dumps({'cmd': f'grep -n y{k} src/'})}}]},
        {'role': 'tool', 'tool_call_id': f'c{i}_{k}', 'content': 'src/a.py:1: y()\n' * 30})]}
    peaks = {}
    for n in (1000, 12000):
        p = tmp_path / f'{n}.json'
        with open(p, 'w') as f:
            f.write('[' + ',\n'.join(json.dumps(conv(i)) for i in range(n)) + ']')
        res = subprocess.run([sys.executable, '-c', _RSS, str(p)], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
        assert res.returncode == 0, res.stderr[-2000:]
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert out["steps"] == n * 4
        peaks[n] = (out['peak_kb'] * 1024, p.stat().st_size)
    (small, _), (big, size) = peaks[1000], peaks[12000]
    biggest = len(json.dumps(conv(0)))
    assert big <= small + 16 * 2**20, peaks                      # 10x the input, about the same peak
    assert big <= 2 * biggest + 32 * 2**20 < size, (peaks, biggest)   # 2x the largest record plus a constant, far below the 40 MB input

def test_cli_runtime_error_is_one_line_and_debug_shows_it(tmp_path, capsys):
    (tmp_path / 'out.jsonl').mkdir()                               # -o names a directory: writing fails
    args = ['convert', str(FIX / 'openai-chat' / 'conversations.jsonl'), '-o', str(tmp_path / 'out.jsonl'), '--no-progress']
    assert cli.main(args, Console(file=io.StringIO(), width=300)) == 2    # bad input (an OSError): status 2, as every knowlyr command
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('knowlyr-recorder convert: error: [Errno 21] Is a directory'), lines
    assert cli.main(['--debug'] + args, Console(file=io.StringIO())) == 2
    err = capsys.readouterr().err
    assert 'Traceback' in err and 'IsADirectoryError' in err


# ================================================================ issue 27: recorder fidelity (synthetic repros)

def _jsonl(path, recs):
    path.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    return path

def _cx(typ, **payload): return {'timestamp': '2026-02-23T12:00:00Z', 'type': typ, 'payload': payload}

def test_codex_text_between_web_search_and_call_is_the_calls_thought(tmp_path):
    "An assistant message after a web_search_call and before the next function_call (one response) stays, on that call"
    p = _jsonl(tmp_path / 'rollout-x.jsonl', [
        _cx('session_meta', id='s1', cwd='/w'),
        _cx('event_msg', type='user_message', message='Find the docs and list them'),
        _cx('response_item', type='reasoning', summary=[{'type': 'summary_text', 'text': 'Search the web first.'}]),
        _cx('response_item', type='web_search_call', id='ws_1', status='completed', action={'type': 'search', 'query': 'x docs'}),
        _cx('response_item', type='message', role='assistant', content=[{'type': 'output_text', 'text': 'The docs live in docs/; list them.'}]),
        _cx('response_item', type='function_call', name='shell', arguments='{"command": ["ls", "docs"]}', call_id='call_1'),
        _cx('response_item', type='function_call_output', call_id='call_1', output='{"output": "a.md\\n", "metadata": {"exit_code": 0}}'),
        _cx('event_msg', type='task_complete', last_agent_message='done')])
    (t,), r = conv(p, 'codex-cli')
    assert [(s.action.tool, s.thought) for s in t.steps] == [('web_search', 'Search the web first.'), ('shell', 'The docs live in docs/; list them.')]
    assert t.steps[1].observation.content == 'a.md\n' and t.steps[1].usage is None     # usage stays once per response
    assert r.counts['response_item:message']['mapped'] == 1

def _cc(uid, typ, message, parent=None, **kw):
    return {'type': typ, 'uuid': uid, 'parentUuid': parent, 'sessionId': 'S1', 'timestamp': '2026-01-01T00:00:00Z',
            'cwd': '/w', 'message': message, **kw}

def _cc_asst(mid, blocks): return {'id': mid, 'role': 'assistant', 'model': 'claude-x', 'type': 'message', 'content': blocks}
_READ = {'type': 'tool_use', 'id': 't1', 'name': 'Read', 'input': {'file_path': 'a.py'}}
_BASH = {'type': 'tool_use', 'id': 't2', 'name': 'Bash', 'input': {'command': 'pytest'}}
_RESULTS = {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 't1', 'content': 'x = 1'},
                                         {'type': 'tool_result', 'tool_use_id': 't2', 'content': '1 passed'}]}

@pytest.mark.parametrize('split', [True, False])
def test_claude_code_text_between_two_calls_of_one_response(tmp_path, split):
    "text, tool_use, text, tool_use under one message.id (a record per block, or one record): the second text is the second call's thought"
    blocks = [{'type': 'text', 'text': 'First, look at a.py.'}, _READ, {'type': 'text', 'text': 'Then run the tests.'}, _BASH]
    asst = ([_cc(f'a{i}', 'assistant', _cc_asst('msg_1', [b]), f'a{i - 1}' if i else 'u1') for i, b in enumerate(blocks)] if split
            else [_cc('a0', 'assistant', _cc_asst('msg_1', blocks), 'u1')])
    p = _jsonl(tmp_path / 's.jsonl', [_cc('u1', 'user', {'role': 'user', 'content': 'Fix it'})] + asst + [_cc('u2', 'user', _RESULTS, asst[-1]['uuid'])])
    (t,), r = conv(p, 'claude-code')
    assert [(s.action.tool, s.thought, s.observation.content) for s in t.steps] == [
        ('Read', 'First, look at a.py.', 'x = 1'), ('Bash', 'Then run the tests.', '1 passed')]
    assert r.counts['assistant']['mapped'] == len(asst)

def test_anthropic_messages_text_between_calls_belongs_to_the_second_call(tmp_path):
    p = tmp_path / 'conv.json'
    p.write_text(json.dumps([{'role': 'user', 'content': 'Fix it'},
                             {'role': 'assistant', 'content': [{'type': 'text', 'text': 'First, look at a.py.'}, _READ,
                                                               {'type': 'text', 'text': 'Then run the tests.'}, _BASH]},
                             {'role': 'user', 'content': _RESULTS['content']}]))
    (t,), r = conv(p, 'anthropic-messages')
    assert [(s.action.tool, s.thought, s.observation.content) for s in t.steps] == [
        ('Read', 'First, look at a.py.', 'x = 1'), ('Bash', 'Then run the tests.', '1 passed')]
    assert r.totals['quarantined'] == 0 and r.counts['message:assistant']['mapped'] == 1

# ---------------------------------------------------------------- aider --llm-history-file: prose and feedback

def _llm_history(reply:str, feedback:str)->str:
    sent = ['-------', 'SYSTEM Act as an expert software developer.', '-------', 'USER Fix both files']
    asst = [f'ASSISTANT {l}'.rstrip() for l in reply.split('\n')]
    return '\n'.join(['TO LLM 2026-01-12T10:05:00'] + sent + ['LLM RESPONSE 2026-01-12T10:05:07'] + asst +
                     ['TO LLM 2026-01-12T10:05:09'] + sent + ['-------'] + asst + ['-------'] + [f'USER {l}'.rstrip() for l in feedback.split('\n')] +
                     ['LLM RESPONSE 2026-01-12T10:05:12', 'ASSISTANT Done.']) + '\n'

_TWO_EDITS = '''I'll fix the greeting first.

app.py
```python
<<<<<<< SEARCH
print("helo")
=======
print("hello")
>>>>>>> REPLACE
```

Now the farewell, which has the same typo.

bye.py
```python
<<<<<<< SEARCH
print("by")
=======
print("bye")
>>>>>>> REPLACE
```

Both files now print correctly. Run `python app.py` to check.'''

def test_aider_llm_history_keeps_prose_after_the_first_edit_and_feedback_once(tmp_path):
    fb = '# 1 SEARCH/REPLACE block failed to match!\n\n## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in bye.py'
    p = tmp_path / '.aider.llm.history'
    p.write_text(_llm_history(_TWO_EDITS, fb))
    (t,), r = conv(p, 'aider')
    app, bye, tail, done = t.steps
    assert (app.action.params['path'], app.thought) == ('app.py', "I'll fix the greeting first.")
    assert (bye.action.params['path'], bye.thought) == ('bye.py', 'Now the farewell, which has the same typo.')
    assert tail.action is None and tail.thought == 'Both files now print correctly. Run `python app.py` to check.'
    assert done.thought == 'Done.'
    every_line = [l for l in _TWO_EDITS.split('\n') if l.strip() and not l.startswith(('```', '<<<', '===', '>>>', 'print', 'app.py', 'bye.py'))]
    kept = '\n'.join(s.thought or '' for s in t.steps)
    assert all(l in kept for l in every_line), [l for l in every_line if l not in kept]
    observed = [s.observation.content for s in t.steps if s.observation is not None]
    assert observed.count(fb) == 1                                   # one message, one observation
    assert bye.observation.content == fb and bye.observation.is_error   # on the edit it names
    assert app.observation is None and app.metadata['feedback_on_step'] == bye.index and 'unanswered' not in app.metadata
    assert len({s.metadata['response_id'] for s in (app, bye, tail)}) == 1

def test_aider_llm_history_generic_feedback_goes_on_the_last_edit(tmp_path):
    p = tmp_path / '.aider.llm.history'
    p.write_text(_llm_history(_TWO_EDITS, 'Did it work?'))
    (t,), _ = conv(p, 'aider')
    app, bye = t.steps[:2]
    assert (app.observation, bye.observation.content, app.metadata['feedback_on_step']) == (None, 'Did it work?', 1)

# ---------------------------------------------------------------- smolagents: the benchmark's scorer, marked inferred

def _smol_row(answer, truth, source, **kw):
    return {'model_id': 'gpt-4o', 'agent_action_type': 'tool-calling', 'question': 'How many?', 'answer': answer,
            'true_answer': truth, 'source': source, 'intermediate_steps': [], **kw}

def test_smolagents_outcome_follows_the_benchmark_scorer_and_is_marked_inferred(tmp_path):
    p = _jsonl(tmp_path / 'gpt-4o__tool-calling__math.jsonl', [
        _smol_row('The 8th grade should have 10 representatives.', '10', 'MATH'),   # the benchmark: correct (last number)
        _smol_row('6.72e-05', '.0000672', 'MATH'),                                   # the benchmark: wrong (last number -05)
        _smol_row('The 8th grade should have 10 representatives.', '10', 'GAIA'),    # GAIA: the answer must be the number
        _smol_row('$1,250', '1250', 'GAIA'),
        _smol_row('Paris', 'Paris', 'GAIA', is_correct=False),                       # the runner's own verdict wins
        _smol_row('Paris', None, 'GAIA')])
    trs, r = conv(p, 'smolagents')
    assert [t.outcome.success for t in trs] == [True, False, False, True, False, None]
    assert [t.metadata.get('success_inferred') for t in trs] == [True, True, True, True, None, None]
    assert 'last number' in trs[0].metadata['success_source'] and 'GAIA' in trs[2].metadata['success_source']
    assert trs[4].metadata['success_source'].startswith('is_correct') and 'success_source' not in trs[5].metadata

# ---------------------------------------------------------------- OpenHands: an error no action caused is a step

def test_openhands_error_without_cause_is_a_failed_step(tmp_path):
    ev = lambda i, **kw: {'id': i, 'timestamp': f'2026-01-01T00:00:0{i}', **kw}
    tcm = {'tool_call_id': 'call_9', 'function_name': 'str_replace_editor', 'model_response': {'id': 'resp_9', 'choices': [
        {'message': {'content': 'Edit the file.', 'tool_calls': [{'id': 'call_9', 'function': {'name': 'str_replace_editor', 'arguments': '{"path": "a.py"}'}}]}}]}}
    p = tmp_path / 'trajectory.json'
    p.write_text(json.dumps([
        ev(0, source='user', action='message', args={'content': 'Fix a.py'}, message='Fix a.py'),
        ev(1, source='agent', action='run', args={'command': 'ls', 'thought': 'Look around.'}, message='Running ls'),
        ev(2, source='agent', observation='run', cause=1, content='a.py', extras={'command': 'ls', 'exit_code': 0}, message='ran'),
        ev(3, source='agent', observation='error', content='Missing required argument "command" in tool call str_replace_editor',
           extras={'error_id': ''}, message='error', tool_call_metadata=tcm),
        ev(4, source='agent', observation='error', content='Agent got stuck in a loop', extras={}, message='error'),
        ev(5, source='agent', action='finish', args={'final_thought': 'Gave up.'}, message='done')]))
    (t,), r = conv(p, 'openhands')
    tools = [s.action.tool for s in t.steps if s.action]
    assert tools == ['run', 'str_replace_editor', 'agent_error', 'finish'], tools
    bad, stuck = t.steps[1], t.steps[2]
    assert bad.observation.is_error and 'Missing required argument' in bad.observation.content and bad.metadata['failed_call']
    assert bad.action.params == {'path': 'a.py'} and bad.thought == 'Edit the file.'
    assert stuck.observation.is_error and stuck.observation.content == 'Agent got stuck in a loop'
    assert r.counts['observation:error'] == {'mapped': 2, 'unmapped': 0, 'quarantined': 0}
    assert not [u for u in t.metadata.get('unmapped', []) if u['record_type'] == 'observation:error']

# ---------------------------------------------------------------- Claude Code: string messages, repeats, a few bad bytes

def test_claude_code_string_message_keeps_its_tool_call(tmp_path):
    "A record whose message is a JSON string (and one whose message is plain text) is read, not dropped as mapped"
    asst = _cc('a1', 'assistant', json.dumps(_cc_asst('msg_1', [{'type': 'text', 'text': 'Read it.'}, _READ])), 'u1')
    res = _cc('u2', 'user', json.dumps({'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 't1', 'content': 'x = 1'}]}), 'a1')
    said = _cc('a2', 'assistant', 'All good.', 'u2')
    p = _jsonl(tmp_path / 's.jsonl', [_cc('u1', 'user', 'Fix it'), asst, res, said, {**_cc('a3', 'assistant', None, 'a2')}])
    (t,), r = conv(p, 'claude-code')
    assert t.task.instruction == 'Fix it'
    assert [(s.action.tool if s.action else None, s.thought, s.observation.content if s.observation else None) for s in t.steps] == [
        ('Read', 'Read it.', 'x = 1'), (None, 'All good.', None)]
    assert r.counts['assistant'] == {'mapped': 2, 'unmapped': 1, 'quarantined': 0}    # the message-less record says so
    assert [u['why'] for u in t.metadata['unmapped']] == ['user/assistant record without a message']

def test_claude_code_repeated_records_are_counted_as_repeats(tmp_path):
    recs = [_cc('u1', 'user', {'role': 'user', 'content': 'Fix it'}), _cc('a1', 'assistant', _cc_asst('msg_1', [_READ]), 'u1'),
            _cc('u2', 'user', {'role': 'user', 'content': [_RESULTS['content'][0]]}, 'a1')]
    p = _jsonl(tmp_path / 's.jsonl', recs + recs[1:])                 # a resumed session writes the records again
    (t,), r = conv(p, 'claude-code')
    assert len(t.steps) == 1 and t.steps[0].observation.content == 'x = 1'
    assert (r.counts['assistant']['mapped'], r.counts['assistant:repeat']['mapped'], r.counts['user:repeat']['mapped']) == (1, 1, 1)
    assert r.summary().set_index('record_type').loc['assistant:repeat', 'mapped'] == 1

def test_single_json_session_with_three_bad_bytes_is_salvaged(tmp_path):
    "A session saved as one JSON array: 3 bad bytes are quarantined with their reasons; every record is still read"
    recs = [_cc('u1', 'user', {'role': 'user', 'content': 'Fix it'}),
            _cc('a1', 'assistant', _cc_asst('msg_1', [{'type': 'text', 'text': 'Read it. XX'}, _READ]), 'u1'),
            _cc('u2', 'user', {'role': 'user', 'content': [_RESULTS['content'][0]]}, 'a1')]
    data = json.dumps(recs, indent=1).encode()
    data = data.replace(b'Read it. XX', b'Read it. \xe2\x82').replace(b'"u2"', b'\x00"u2"', 1)   # a torn character, a NUL
    assert data.count(b'\xe2\x82') == 1 and data.count(b'\x00') == 1
    p = tmp_path / 'session.json'; p.write_bytes(data)
    r = ConversionReport(quarantine=tmp_path / 'q.jsonl')
    (t,) = list(convert(p, format='claude-code', report=r, redact=False)); r.close()
    assert [(s.action.tool, s.observation.content) for s in t.steps] == [('Read', 'x = 1')]
    assert t.steps[0].thought == 'Read it. \ufffd'
    q = [json.loads(l) for l in (tmp_path / 'q.jsonl').read_text().splitlines()]
    assert [x['record_type'] for x in q] == ['(bytes)', '(bytes)'] and r.totals['quarantined'] == 2
    assert 'not valid UTF-8' in q[0]['reason'] and "stray character '\\x00'" in q[1]['reason'] and q[1]['line'] > 1
    assert r.counts['user']['mapped'] == 2 and r.counts['assistant']['mapped'] == 1

# ---------------------------------------------------------------- memory: a trajectory export's events are streamed

@pytest.mark.parametrize('fmt,name', [('openhands', 'basic.json'), ('openhands', 'wrong_initial_state.json')])
def test_openhands_array_export_is_streamed_not_loaded_whole(monkeypatch, fmt, name):
    "The events of a JSON-array export are read one at a time (peak memory: experiments/benchmarks/recorder_memory.py)"
    import knowlyr_lab.recorder.openhands as oh
    import knowlyr_lab.recorder.reading as reading
    whole, _ = conv(REAL / fmt / name, fmt)
    def no_whole_document(*a, **k): raise AssertionError('the export was loaded as one document')
    monkeypatch.setattr(oh, 'read_json', no_whole_document); monkeypatch.setattr(reading, 'read_json', no_whole_document)
    streamed, r = conv(REAL / fmt / name, fmt)
    assert [t.model_dump() for t in streamed] == [t.model_dump() for t in whole] and len(streamed[0].steps) > 0


def test_toolbench_bad_finish_type_names_its_field_and_keeps_the_steps(tmp_path):
    "A finish_type that is not a string stopped the file ('adapter failed: ValidationError', no field named)"
    src = sorted((REAL / 'toolbench').glob('*.json'))[0]
    good, _ = conv(src, 'toolbench')
    for bad in (7, ['give_answer']):
        d = json.loads(src.read_text()); d['answer_generation']['finish_type'] = bad
        (tmp_path / src.name).write_text(json.dumps(d))
        ts, r = conv(tmp_path / src.name, 'toolbench')
        assert [len(t.steps) for t in ts] == [len(t.steps) for t in good] and ts[-1].outcome.reason is None
        assert [i['reason'].split(':')[0] for i in r.issues] == ['answer_generation.finish_type'], r.issues


def test_toolbench_final_answer_that_is_not_its_json_is_kept(tmp_path):
    "A final_answer of plain text was dropped; one that decoded to a list stopped the file"
    src = sorted((REAL / 'toolbench').glob('*.json'))[0]
    for fa in ('plain words', '["x"]'):
        d = json.loads(src.read_text()); d['answer_generation']['final_answer'] = fa
        (tmp_path / src.name).write_text(json.dumps(d))
        ts, r = conv(tmp_path / src.name, 'toolbench')
        assert ts and ts[-1].metadata['final_answer'] == fa and not r.issues, r.issues


def test_swe_agent_bad_history_message_is_quarantined_alone_with_its_path(tmp_path):
    "One unreadable history message dropped every step of a history-only .traj, with no field path"
    src = REAL / 'swe-agent' / 'function_calling_simple.traj'
    d = json.loads(src.read_text())
    k = next(i for i, m in enumerate(d['history']) if m.get('tool_calls'))
    d['history'][k]['tool_calls'] = [{'id': 'x', 'function': 'bash ls'}]
    d['history'].insert(1, 5)
    (tmp_path / src.name).write_text(json.dumps(d))
    (t,), r = conv(tmp_path / src.name, 'swe-agent')
    (good,), _ = conv(src, 'swe-agent')
    assert len(t.steps) == len(good.steps) - 1
    assert [i['reason'].split(':')[0] for i in r.issues] == ['history[1]', f'history[{k + 1}].tool_calls[0].function']


def test_swe_agent_bad_tool_call_in_a_trajectory_file_keeps_the_step_and_names_its_path(tmp_path):
    "A matched history message with an unreadable tool call dropped its trajectory step, the reason naming no field"
    src = REAL / 'swe-agent' / '6e44b9__sweagenttestrepo-1c2844.traj'
    d = json.loads(src.read_text())
    k = next(i for i, m in enumerate(d['history']) if m.get('role') == 'assistant' and m.get('action'))
    d['history'][k]['tool_calls'] = [{'id': 'x', 'function': 'bash ls'}]
    (tmp_path / src.name).write_text(json.dumps(d))
    (t,), r = conv(tmp_path / src.name, 'swe-agent')
    (good,), _ = conv(src, 'swe-agent')
    assert [s.action.tool for s in t.steps] == [s.action.tool for s in good.steps]
    assert [i['reason'].split(':')[0] for i in r.issues] == [f'history[{k}].tool_calls[0].function'], r.issues
    assert r.totals['quarantined'] == 1 and r.totals['unmapped'] == 0


def test_swe_agent_trajectory_step_reason_names_its_place(tmp_path, monkeypatch):
    "The per-step guard of trajectory[] gave no `trajectory[i]` prefix (the history[i] case had one)"
    from knowlyr_lab.recorder import swe
    src = REAL / 'swe-agent' / '6e44b9__sweagenttestrepo-1c2844.traj'
    d = json.loads(src.read_text())
    d['trajectory'].insert(1, 'not a step'); d['trajectory'][3]['state'] = 'boom'
    (tmp_path / src.name).write_text(json.dumps(d))
    real = swe._state
    def state(s):
        if s == 'boom': raise TypeError('bad state')
        return real(s)
    monkeypatch.setattr(swe, '_state', state)
    (t,), r = conv(tmp_path / src.name, 'swe-agent')
    assert [i['reason'].split(':')[0] for i in r.issues] == ['trajectory[1]', 'trajectory[3]'], r.issues
    assert len(t.steps) == len(d['trajectory']) - 2

# ---------------------------------------------------------------- outcome files beside the logs are not errors (rec10)

def _swe_run(tmp_path):
    "A SWE-agent log, its per-instance `_result.json` and a mini-swe-agent run report, in one folder"
    d = tmp_path / 'run'; d.mkdir()
    iid = 'marshmallow-code__marshmallow-1867'
    (d / f'{iid}.traj').write_bytes((REAL / 'swe-agent' / f'{iid}.traj').read_bytes())
    (d / f'{iid}_result.json').write_text(json.dumps({'instance_id': iid, 'patch_applied': True, 'resolved': True,
                                                      'passed_tests': ['t1']}, indent=4))
    rep = 'swe-bench_verified__test__20251118_mini-v1.15.0_gemini-3-pro-preview-20251118.json'
    (d / rep).write_bytes((REAL / 'mini-swe-agent' / rep).read_bytes())
    return d, iid, rep

def test_an_outcome_file_beside_the_logs_is_used_not_reported_as_an_error(tmp_path):
    "Before: each `_result.json` (and a run report) was joined AND reported 'no adapter recognises', exit 3"
    d, iid, rep = _swe_run(tmp_path)
    (t,), r = conv(d)
    assert t.task.id == iid and t.outcome.success is True
    assert r.n_errors == 0 and r.totals['quarantined'] == 0, r.errors
    why = {Path(s['path']).name: s['why'] for s in r.skipped}
    assert 'an outcome file' in why[f'{iid}_result.json'] and 'run report' in why[rep], why

def test_an_agent_log_that_mentions_a_verdict_is_not_an_outcome_file(tmp_path):
    "Review: an OpenHands SWE-bench eval record whose long issue text pushed `history` past the 64 KiB head, its report's"
    "`resolved` near the start, was skipped as an outcome file (exit 0, 0 trajectories); it is a log: an error, as before"
    from knowlyr_lab.recorder.detect import detect
    r = json.loads((FIX / 'openhands' / 'eval_pairs_output.jsonl').read_text().splitlines()[0])
    tb = '  File "/testbed/q.py", line 1, in f\n    self._cache = list(self._it(self))\n' * 1200
    rec = {'instance_id': 'django__django-11099', 'test_result': {'report': {'resolved': True}},
           'instruction': r['instruction'] + '\nTraceback (most recent call last):\n' + tb, 'history': r['history']}
    for name in ('output.swebench_eval.jsonl', 'output.json'):
        p = tmp_path / name; p.write_text(json.dumps(rec) + '\n')
        d = detect(p)
        assert not d.outcome and 'no adapter recognises' in d.reason, d
    (t,), rep = conv(tmp_path / 'output.json', 'openhands')     # and it converts when its format is named
    assert t.task.id == 'django__django-11099' and rep.n_errors == 0

def test_a_named_format_does_not_convert_an_outcome_file_beside_the_logs(tmp_path):
    "Before: `convert(folder, format='swe-agent')` turned the folder's run report into an empty trajectory"
    d, iid, rep = _swe_run(tmp_path)
    ts, r = conv(d, 'swe-agent')
    assert [t.task.id for t in ts] == [iid] and ts[0].outcome.success is True, [t.source.path for t in ts]
    why = {Path(s['path']).name: s['why'] for s in r.skipped}
    assert 'an outcome file' in why[f'{iid}_result.json'] and 'run report' in why[rep], why

def test_convert_strict_over_logs_and_outcome_files_writes_them(tmp_path):
    "Before: --strict stopped at the first `_result.json` (exit 2, nothing written); --sidecar on it did not help"
    d, iid, _ = _swe_run(tmp_path)
    out = tmp_path / 'o.jsonl'
    for extra in ([], ['--sidecar', str(d / f'{iid}_result.json')]):
        out.unlink(missing_ok=True)
        rc = cli.main(['convert', str(d), '-o', str(out), '--strict', '--no-progress', *extra],
                      console=Console(file=io.StringIO()))
        assert rc == 0 and json.loads(out.read_text())['outcome']['success'] is True

def test_validate_names_the_file_of_each_unmapped_warning(tmp_path):
    "Before: `warning: <input> : 2 record(s) ... kept but not mapped` (--json: \"path\": null)"
    from knowlyr_lab.recorder.convert import validate
    fs = [f for f in validate(REAL / 'codex-cli', redact=False) if 'kept but not mapped' in f.message]
    assert fs and all(f.path and Path(f.path).parent == REAL / 'codex-cli' for f in fs), fs
    assert all('<input>' not in str(f) for f in fs)

@pytest.mark.parametrize('enc', ['utf-16', 'utf-32', 'utf-16-le'])
def test_a_utf16_log_is_named_as_such(tmp_path, enc):
    "Before: 'no adapter recognises x.jsonl; tried: ...' with no hint why"
    src = next((REAL / 'claude-code').glob('*.jsonl'))
    p = tmp_path / 'x.jsonl'; p.write_bytes(src.read_text(encoding='utf-8').encode(enc))
    from knowlyr_lab.recorder.convert import detect
    d = detect(p)
    assert d.format is None and enc.split('-le')[0].upper() in d.reason and 'UTF-8' in d.reason, d.reason

# ---------------------------------------------------------------- SWE-agent: an instance id too long for a file name

def test_a_swe_instance_id_too_long_for_a_file_name_keeps_the_trajectory(tmp_path):
    "An id of 300 bytes made find_resolution's <id>_result.json raise ENAMETOOLONG: the whole log was 'unreadable'"
    src = REAL / 'swe-agent' / '6e44b9__sweagenttestrepo-1c2844.traj'
    d = json.loads(src.read_text())
    d['replay_config']['problem_statement']['id'] = long_id = 'x' * 300
    (tmp_path / 'run_report.json').write_text(json.dumps({'resolved_ids': [long_id]}))
    p = tmp_path / src.name
    p.write_text(json.dumps(d))
    (t,), r = conv(p, 'swe-agent')
    assert r.errors == [] and len(t.steps) == 5
    assert t.outcome.success is True                  # the run report beside it is still read for the long id

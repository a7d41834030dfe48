"Recorder defects found by converting real logs of every format (issue 14): each test failed before its fix."
import io, json, random, re
from pathlib import Path
import pytest
from rich.console import Console
from knowlyr_lab.recorder.base import ConversionReport, get_adapter
from knowlyr_lab.recorder.convert import convert, detect_format, iter_log_files
from knowlyr_lab.recorder import cli

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

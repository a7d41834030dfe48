"""Issue 39 items 7-8 over MCP: the recorder's tools of `knowlyr-lab-mcp`, driven by the MCP SDK's own stdio client.

A client converts logs with `convert_logs` and `process_log` (their default: redact): none of the secret kinds that
leaked on the Python API before their fix (tests/test_recorder_redaction.py's `FURTHER`, and the command-line rules
after a newline, `AFTER_NEWLINE`) may reach anything the server writes under its root. And what the Python API
reports of a record it kept but changed (a located warning, tests/test_recorder_fidelity.py) reaches the MCP client
too, with its file and line: a client that only sees the tool's answer must not be told a lossy conversion was clean."""
import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from test_recorder_redaction import AFTER_NEWLINE, FURTHER

ROOT = Path(__file__).resolve().parent.parent
FID = Path(__file__).parent / 'fixtures' / 'recorder_fidelity'

def chat_log(texts:list[str])->str:
    "An OpenAI-chat JSONL log with each of `texts` in a thought, a tool call's argument and its observation (one record per text)"
    def record(text):
        return json.dumps({'messages': [{'role': 'user', 'content': 'Do the task.'},
            {'role': 'assistant', 'content': f'Plan:\n{text}', 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {
                'name': 'shell', 'arguments': json.dumps({'cmd': f'ls\n{text}'})}}]},
            {'role': 'tool', 'tool_call_id': 'c1', 'content': f'$ ls\n{text}\nok'}, {'role': 'assistant', 'content': 'Done.'}]})
    return ''.join(record(t) + '\n' for t in texts)

SECRETS = {**FURTHER, **AFTER_NEWLINE}      # {text as a log holds it: the value that must disappear}

@pytest.fixture(scope='module')
def served_root(tmp_path_factory):
    "Every call below in one session of `knowlyr-lab-mcp --root R`; (R, {call: its structured answer})"
    root = tmp_path_factory.mktemp('mcp-recorder')
    (root / 'logs').mkdir()
    (root / 'logs' / 'chat.jsonl').write_text(chat_log(list(SECRETS)))
    shutil.copy(FID / 'duplicate-keys.jsonl', root / 'dup.jsonl')
    async def go():
        params = StdioServerParameters(command=sys.executable, args=['-m', 'knowlyr_lab.mcp', '--root', str(root)],
                                       env={**os.environ, 'PYTHONPATH': str(ROOT)})
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            out = {}
            for name, tool, args in [('convert', 'convert_logs', {'paths': ['logs'], 'output': 'out/chat.jsonl', 'format': 'openai-chat'}),
                                     ('pipeline', 'process_log', {'path': 'logs/chat.jsonl', 'output_dir': 'pipe', 'format': 'openai-chat'}),
                                     ('dup', 'convert_logs', {'paths': ['dup.jsonl'], 'output': 'out/dup.jsonl', 'format': 'codex-cli'})]:
                res = await s.call_tool(tool, args)
                assert not res.is_error, (name, res.content[0].text)
                out[name] = res.structured_content
            return out
    return root, asyncio.run(go())

def test_no_secret_reaches_anything_the_server_writes(served_root):
    root, out = served_root
    assert out['convert']['trajectories'] == len(SECRETS), out['convert']
    written = {p: p.read_bytes().decode('utf-8', 'replace') for p in root.rglob('*') if p.is_file() and 'logs' not in p.parts and p.name != 'dup.jsonl'}
    assert any(p.suffix == '.jsonl' and 'pipe' in p.parts for p in written), sorted(map(str, written))   # the pipeline wrote its export
    assert '[REDACTED:' in written[root / 'out' / 'chat.jsonl']
    leaks = {v: [str(p.relative_to(root)) for p, s in written.items() if v in s or json.dumps(v)[1:-1] in s] for v in SECRETS.values()}
    assert not {v: ps for v, ps in leaks.items() if ps}, {v: ps for v, ps in leaks.items() if ps}

def test_a_lossy_conversion_is_reported_to_the_client_with_file_and_line(served_root):
    "The Python API warns of a duplicate JSON key at line 11 (tests/test_recorder_fidelity.py); the MCP answer carries that warning"
    root, out = served_root
    dup = out['dup']
    assert dup['trajectories'] == 1 and dup['bad_records'] == 0, dup
    assert [w for w in dup['warnings'] if w.startswith(f"{root / 'dup.jsonl'}:11:") and "duplicate key 'call_id'" in w], dup['warnings']

"Records the writer cannot serialise (a lone surrogate, nesting 500 deep): quarantined with file and line, the batch goes on"
import io
import json
import os

from rich.console import Console

from knowlyr_lab.cli.recorder import main
from knowlyr_lab.recorder.scrub import source_file
from knowlyr_lab.trajectory_io import read_trajectories


def chat(q, **extra): return json.dumps({'messages': [{'role': 'user', 'content': q}, {'role': 'assistant', 'content': 'ok'}], **extra})

def deep_call(depth=500):
    d = {}; cur = d
    for _ in range(depth): cur['a'] = {}; cur = cur['a']
    return json.dumps({'messages': [{'role': 'user', 'content': 'deep'},
                                    {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': json.dumps(d)}}]},
                                    {'role': 'tool', 'tool_call_id': 'c1', 'content': 'r'}]})

def test_convert_directory_writes_good_records_and_quarantines_unwritable(tmp_path):
    logs = tmp_path/'logs'; logs.mkdir()
    (logs/'a_good.jsonl').write_text(chat('one') + '\n')
    (logs/'b_mixed.jsonl').write_text('\n'.join([chat('two'), chat('lone \ud800 here'), deep_call(), chat('three'),
                                                 chat('x', metadata={'k': 'v \udc00'}), chat('emoji \U0001F600')]) + '\n')
    (logs/'c_surrogate_tool.jsonl').write_text(json.dumps({'messages': [
        {'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': json.dumps({'x': '\ud800'})}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'r'}]}) + '\n')
    (logs/'d_good.jsonl').write_text(chat('four') + '\n')
    for fmt, redact in (('out.jsonl', []), ('out.parquet', ['--no-redact'])):
        out, q = tmp_path/fmt, tmp_path/f'{fmt}.q.jsonl'
        buf = io.StringIO()
        rc = main(['convert', str(logs), '-o', str(out), '--quarantine', str(q), '--no-progress', *redact], console=Console(file=buf, width=200))
        text = buf.getvalue()
        assert rc == 3, text                                    # some records quarantined: EXIT_PARTIAL, not 2 (nothing written)
        kept = [t.task.instruction for t in read_trajectories(out)]
        assert kept == ['one', 'two', 'three', 'x', 'emoji \U0001F600', 'four'] or kept == ['one', 'two', 'three', 'emoji \U0001F600', 'four'], kept
        issues = [json.loads(line) for line in open(q)]
        where = {(i['path'].split('/')[-1], i['line']) for i in issues}
        assert {('b_mixed.jsonl', 2), ('b_mixed.jsonl', 3)} <= where, issues
        assert any(f == 'c_surrogate_tool.jsonl' for f, _ in where), issues   # JSON in JSON: the adapter fails on it, the file is reported
        assert 'lone surrogate' in text and 'cannot be written as JSON' in text, text


def test_file_name_not_utf8_is_converted_and_written(tmp_path):
    "A log whose name is not UTF-8 (Latin-1 'é') is converted, not quarantined; its escaped source.path gives the file back"
    logs = tmp_path/'logs'; logs.mkdir()
    odd = logs/os.fsdecode(b'caf\xe9-session.jsonl')
    odd.write_text(chat('one') + '\n')
    for fmt in ('out.jsonl', 'out.parquet'):
        out, buf = tmp_path/fmt, io.StringIO()
        rc = main(['convert', str(logs), '-o', str(out), '--no-progress'], console=Console(file=buf, width=200))
        assert rc == 0, buf.getvalue()
        [t] = read_trajectories(out)
        assert t.task.instruction == 'one' and t.source.path.endswith('caf\\xe9-session.jsonl'), t.source
        assert source_file(t) == odd and source_file(t).read_text().startswith('{')

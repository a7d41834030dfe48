"""A tool schema may hold an integer past 64 bits (`"maximum": 18446744073709551616`, valid JSON). orjson, which writes
the export's rows, refuses one: SFT and GRPO exports crashed with a bare `TypeError: Integer exceeds 64-bit range`
naming no file, row or field. SFT and GRPO rows carry the tools as a JSON string: it is now written exactly, and
`datasets` loads that string unchanged. An OpenAI row holds the tools as objects, which pyarrow reads as a float: that
export is refused with an `ExportError` naming the file, row and field, its files removed."""
import json
from pathlib import Path

import datasets
import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.hub.rows import ExportError

SCHEMA = [{'type': 'function', 'function': {'name': 'f', 'description': '', 'parameters': {
    'type': 'object', 'properties': {'n': {'type': 'integer', 'maximum': 2**64, 'minimum': -2**63 - 1}}}}}]

def _trajs(n:int=3)->list[dict]:
    "`n` trajectory records of one task, each with one call of tool `f`"
    return [{'id': f'tr-{i}', 'task': {'id': 't1', 'instruction': 'Count'}, 'agent': {'name': 'a'},
             'steps': [{'index': 0, 'thought': 'go', 'action': {'tool': 'f', 'params': {'n': 1}},
                        'observation': {'content': 'ok'}, 'reward': 0.1 * (i + 1)}],
             'outcome': {'success': True}} for i in range(n)]

def _rows(res)->list[dict]:
    return [json.loads(line) for p in res.paths.values() for line in Path(p).read_text().splitlines()]

@pytest.mark.parametrize('fmt', ['sft', 'grpo'])
def test_sft_and_grpo_rows_hold_a_wide_integer_exactly(tmp_path, fmt):
    res = DatasetExporter(_trajs(), tools=SCHEMA).export(fmt, tmp_path / fmt)
    rows = _rows(res)
    assert res.total == len(rows) == (3 if fmt == 'sft' else 1) and res.quarantined == 0
    assert all(json.loads(r['tools']) == SCHEMA for r in rows)           # exact: no float, nothing lost
    ds = datasets.load_dataset('json', data_files=res.paths, cache_dir=str(tmp_path / 'cache'))
    assert [json.loads(r['tools']) for s in ds.values() for r in s] == [SCHEMA] * len(rows)

def test_openai_rows_with_a_wide_integer_are_refused_naming_file_row_and_field(tmp_path):
    out = tmp_path / 'openai'
    with pytest.raises(ExportError) as e:
        DatasetExporter(_trajs(), tools=SCHEMA).export('openai', out)
    said = str(e.value)
    assert '\n' not in said and f"{out / 'train.jsonl'}: split 'train' row 1: " in said
    assert "field 'tools[0].function.parameters.properties.n.maximum': the integer 18446744073709551616" in said
    assert not (out / 'train.jsonl').exists()

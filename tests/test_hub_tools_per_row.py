"""Each exported row carries the tools of its own trajectory. Trajectories recorded from agent logs have no registered
env, so their tool schemas are inferred per trajectory, each a new list. `ToolResolver.json` once cached the JSON by
the list's `id`, and a freed list's id is often the next list's: read back from a file of the fixture logs'
trajectories, 132 of 140 got the previous trajectory's tools (the export loop's allocations happened not to reuse the
id on these files; nothing prevented it). Checked on the resolver and on SFT and GRPO rows of every fixture log."""
import json
from pathlib import Path

import orjson

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.hub.rows import ToolResolver, infer_tool_schemas
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.trajectory_io import write_trajectories

LOGS = Path(__file__).parent / 'fixtures' / 'agent_logs'

def _recorded(tmp_path):
    trajs = [t for t in convert([LOGS], redact=False) if t.steps]
    write_trajectories(trajs, tmp_path / 'recorded.jsonl')
    return {t.id: t for t in trajs}

def test_resolver_json_is_each_trajectorys_own(tmp_path):
    trajs = list(_recorded(tmp_path).values())
    tr = ToolResolver()
    got = [tr.json(t) for t in trajs]
    assert len({g for g in got}) > 5      # many different tool lists, one after another
    assert got == [orjson.dumps(infer_tool_schemas(t)).decode() for t in trajs]
    assert [tr.json(t, encoded=True) for t in trajs] == [orjson.dumps(g) for g in got]

def test_sft_and_grpo_rows_carry_their_own_tools(tmp_path):
    by_id = _recorded(tmp_path)
    own = {i: orjson.dumps(infer_tool_schemas(t)).decode() for i, t in by_id.items()}
    r = DatasetExporter(tmp_path / 'recorded.jsonl').export('sft', tmp_path / 'sft')
    rows = [json.loads(line) for p in r.paths.values() for line in Path(p).read_text().splitlines()]
    assert len(rows) == len(by_id) and all(row['tools'] == own[row['trajectory_id']] for row in rows)
    r = DatasetExporter(tmp_path / 'recorded.jsonl').export('grpo', tmp_path / 'grpo', min_group=1)
    groups = [json.loads(line) for p in r.paths.values() for line in Path(p).read_text().splitlines()]
    assert groups and all(g['tools'] == own[g['trajectory_ids'][0]] for g in groups)

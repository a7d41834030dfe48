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
from knowlyr_lab.trajectory import Outcome, Task
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

def test_a_grpo_row_carries_the_tools_of_its_best_kept_member(tmp_path):
    "Groups of several members whose tool lists differ, the best arriving last: the row once took the first's tools"
    by_id = _recorded(tmp_path)
    own = {i: orjson.dumps(infer_tool_schemas(t)).decode() for i, t in by_id.items()}
    trajs, seen = [], {}
    for t in by_id.values():                  # one trajectory per distinct tool list
        seen.setdefault(own[t.id], t)
    lists = list(seen.values())
    assert len(lists) >= 6
    for k in range(0, len(lists) - 2, 3):     # groups of three, each member with its own tool list
        for j, t in enumerate(lists[k:k + 3]):
            trajs.append(t.model_copy(update={'task': Task(id=f'g{k}', instruction='Fix it'),
                                              'outcome': Outcome(success=j == 2),   # the last to arrive is the best
                                              'steps': [s.model_copy(update={'reward': 0.1 * (j + 1)}) for s in t.steps]}))
    write_trajectories(trajs, tmp_path / 'grouped.jsonl')
    for size in (1, 2, 8):
        r = DatasetExporter(tmp_path / 'grouped.jsonl').export('grpo', tmp_path / f'g{size}', group_size=size)
        rows = [json.loads(line) for p in r.paths.values() for line in Path(p).read_text().splitlines()]
        assert len(rows) == len(trajs) // 3
        for row in rows:
            assert len(row['trajectory_ids']) == min(size, 3)
            assert row['tools'] == own[row['trajectory_ids'][0]], (size, row['trajectory_ids'])

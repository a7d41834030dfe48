"""An export's warnings reach whoever ran it: Python callers as warnings (the CLI on stderr), MCP `export_dataset` in
its answer, and a pipeline user in `export.json`, which a run answers with (also a resumed run, that exports nothing) and
the MCP pipeline tools too. export.json left them out (`to_dict`, the CLI's JSON, holds no warnings: they go to stderr)"""
import asyncio
import json
import warnings

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.hub.export_filter import ExportResult, export_warnings
from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

FAILED = '1 of the 2 sft rows come from verified failures'


def _traj(t:int, ok:bool)->Trajectory:
    "A two-step trajectory of task `t`, a verified success or failure"
    steps = [Step(index=i, action=ToolCall(tool='move', params={'d': 'e'}), observation=Observation(content=f"m{i} {t}"),
                  reward=0.1) for i in range(2)]
    return Trajectory(task=Task(id=f"t{t}", instruction=f"go {t}", domain='generic'), agent=AgentInfo(name='a', model='m'),
                      steps=steps, outcome=Outcome(success=ok, terminated=True))


def test_export_warnings_reads_the_result_and_leaves_it_as_it_was():
    "export_warnings both returned its list and overwrote `res.warnings` with it (and so dropped what was kept there)"
    res = ExportResult('sft', '.', counts={'train': 4}, rows_from_failures=3, warnings=['kept before'])
    said = export_warnings(res)
    assert len(said) == 1 and said[0].startswith('3 of the 4 sft rows') and res.warnings == ['kept before'], (said, res.warnings)


def test_the_result_holds_what_python_warned_of_the_export_first(tmp_path):
    "The export keeps what it warns of in `res.warnings`, in the order Python's warnings say it: its own, then the variables'"
    kws = [{'opts': {}}, {'opts': {'a': 1}}]               # a path that mixes: only datasets 5.x loads it as served
    trajs = [_traj(0, True), _traj(1, False)]
    for t, kw in zip(trajs, kws):
        for s in t.steps: s.metadata = {'template_kwargs': kw}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        res = DatasetExporter(trajs).export('sft', tmp_path / 'o')
    assert res.warnings == [str(w.message) for w in caught] and len(res.warnings) == 2, (res.warnings, caught)
    assert FAILED in res.warnings[0] and "field 'chat_template_kwargs.opts'" in res.warnings[1], res.warnings


def test_a_pipeline_export_json_and_the_mcp_pipeline_answer_carry_the_warnings(tmp_path):
    from mcp import Client

    from knowlyr_lab.mcp import build_server
    root = tmp_path / 'root'; (root / 'logs').mkdir(parents=True)
    write_trajectories([_traj(0, True), _traj(1, False)], root / 'logs' / 't.jsonl')
    cfg = PipelineConfig(output_dir=str(tmp_path / 'run'), log_format='knowlyr', reward=False, export_formats=['sft'])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always'); first = Pipeline(cfg).run_batch(root / 'logs')
    again = Pipeline(cfg).run_batch(root / 'logs')            # resumed: the export is not made again, nothing is warned
    saved = json.loads((tmp_path / 'run' / 'exports' / 'sft' / 'export.json').read_text())
    for got in (first['exports']['sft'], again['exports']['sft'], saved):
        assert len(got['warnings']) == 1 and FAILED in got['warnings'][0], got

    async def go():
        async with Client(build_server(root)) as c:
            return await c.call_tool('process_logs_batch', {'log_dir': 'logs', 'output_dir': 'b', 'format': 'knowlyr',
                                                            'export_formats': ['sft']})
    r = asyncio.run(go())
    assert not r.is_error, r.content
    said = (r.structured_content or json.loads(r.content[0].text))['exports']['sft']['warnings']
    assert len(said) == 1 and FAILED in said[0], said


def test_the_warning_of_files_an_older_export_left_is_in_the_result(tmp_path):
    """An export into a folder with no manifest that holds an export-named file it did not write warned of it with
    Python's warnings only (`warn_unlisted`), so `res.warnings`, and with it the MCP answers and export.json, lacked it"""
    out = tmp_path / 'o'; out.mkdir()
    (out / 'test.jsonl').write_text('{"messages": []}\n')          # left by an export made before exports listed their files
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        res = DatasetExporter([_traj(0, True), _traj(1, True)]).export('sft', out)
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith(f"{out} has no .knowlyr-export.json and holds 1 file(s)"), said
    assert res.warnings == said, (res.warnings, said)


def test_to_dict_is_the_one_way_to_a_result_with_its_warnings():
    """export.json and the MCP answers each spelled {**res.to_dict(), 'warnings': res.warnings}; to_dict(warnings=True)
    is that one way now, and plain to_dict (the CLI's stdout JSON: its warnings go to stderr) still holds none"""
    res = ExportResult('sft', 'out', counts={'train': 2}, warnings=['w1', 'w2'])
    assert res.to_dict(warnings=True) == {**res.to_dict(), 'warnings': ['w1', 'w2']}, res.to_dict(warnings=True)
    assert 'warnings' not in res.to_dict(), res.to_dict()


def test_a_run_resumed_from_an_export_json_without_warnings_says_they_are_unknown(tmp_path):
    """An export.json written before 1677114 has no 'warnings' key: a resumed run's answer lacked the key (and a reader
    could not tell it from an export that warned of nothing). It is None now: unknown; [] stays 'none'"""
    root = tmp_path / 'root'; (root / 'logs').mkdir(parents=True)
    write_trajectories([_traj(0, True), _traj(1, False)], root / 'logs' / 't.jsonl')
    cfg = PipelineConfig(output_dir=str(tmp_path / 'run'), log_format='knowlyr', reward=False, export_formats=['sft'])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always'); Pipeline(cfg).run_batch(root / 'logs')
    saved = tmp_path / 'run' / 'exports' / 'sft' / 'export.json'
    old = json.loads(saved.read_text()); del old['warnings']; saved.write_text(json.dumps(old))   # as the old code wrote it
    again = Pipeline(cfg).run_batch(root / 'logs')['exports']['sft']
    assert 'warnings' in again and again['warnings'] is None, again
    assert {k: v for k, v in again.items() if k != 'warnings'} == old, again

"""`template_defaults` (the value of a chat template variable in rows served without it) reaches the export from every
way a researcher runs one: `DatasetExporter`, `knowlyr-hub export` and `run` (`--template-default KEY=JSON`),
`PipelineConfig` and the MCP tools; without it the export's refusal is an `ExportError` reported in one line"""
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import knowlyr_lab
from knowlyr_lab.hub.export import DatasetExporter, ExportError
from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

PKG = str(Path(knowlyr_lab.__file__).resolve().parent.parent)     # the package under test, also in subprocesses
TEST = ('t3', 't4', 't6')         # the test split of tasks t0..t9 at test_fraction=0.3
OFF = {'enable_thinking': False}


def _traj(task:int, k:int)->Trajectory:
    "Trajectory `k` of task `task`: the train split's served with thinking off, the test split's with no variables"
    kw = {} if f"t{task}" in TEST else {'template_kwargs': OFF}
    steps = [Step(index=i, thought=f"step {i} of {k}", action=ToolCall(tool='move', params={'direction': 'east'}),
                  observation=Observation(content=f"moved {i}"), reward=(k + i) / 10, metadata=kw) for i in range(2)]
    return Trajectory(task=Task(id=f"t{task}", instruction=f"Reach column {task}.", domain='maze', env_id='knowlyr/maze-easy'),
                      agent=AgentInfo(name='a', model='m'), steps=steps, outcome=Outcome(success=True, terminated=True))

TRAJS = [_traj(t, k) for t in range(10) for k in range(2)]


def _kwargs(path)->set:
    "The distinct `chat_template_kwargs` of a JSONL split file, as JSON"
    return {json.dumps(json.loads(x).get('chat_template_kwargs'), sort_keys=True) for x in open(path)}


def _hub(*args):
    "knowlyr-hub in a subprocess (the real entry point: exit code, stdout, stderr)"
    return subprocess.run([sys.executable, '-c', 'import sys; from knowlyr_lab.cli.hub import main; sys.exit(main())', *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd='/', env={**os.environ, 'PYTHONPATH': PKG})


def _mcp(root:Path, tool:str, args:dict):
    "Call `tool` of the MCP server over `root` with the MCP SDK's client"
    from mcp import Client

    from knowlyr_lab.mcp import build_server
    async def go():
        async with Client(build_server(root)) as c: return await c.call_tool(tool, args)
    return asyncio.run(go())


def test_a_refused_mix_is_an_export_error_reported_in_one_line(tmp_path):
    """The refusal was a plain ValueError of page 41b (the MCP tool said 'ValueError: ...'); it is the hub's
    `ExportError`, which the CLI and the MCP server report in one line"""
    with pytest.raises(ExportError, match=r"split 'test' row 1 \(trajectory 'tr-.+'\): field 'chat_template_kwargs': no 'enable_thinking'"):
        DatasetExporter(TRAJS, test_fraction=0.3).export('sft', tmp_path / 'py')
    write_trajectories(TRAJS, tmp_path / 't.jsonl')
    r = _hub('export', '-f', 'sft', '-t', tmp_path / 't.jsonl', '-o', tmp_path / 'cli', '--test-fraction', '0.3')
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert "no 'enable_thinking'" in r.stderr, r.stderr
    assert "template_defaults={'enable_thinking': ...}" in r.stderr and '--template-default enable_thinking=JSON' in r.stderr, r.stderr
    root = tmp_path / 'root'; root.mkdir(); write_trajectories(TRAJS, root / 't.jsonl')
    m = _mcp(root, 'export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'o', 'test_fraction': 0.3})
    assert m.is_error and 'export_dataset: ExportError: ' in m.content[0].text and '\n' not in m.content[0].text, m.content
    assert 'the MCP export and pipeline tools' in m.content[0].text, m.content


def test_the_cli_export_and_run_take_template_default_flags(tmp_path):
    """`knowlyr-hub export` and `run` had no way to give the default: a mixed export stopped with an error naming a
    Python argument. `--template-default KEY=JSON` (repeatable, JSON so `true` is a bool) reaches the exporter, and a
    pipeline refused for want of it resumes with it (the rollouts kept: no other config field may change)"""
    (tmp_path / 'logs').mkdir(); write_trajectories(TRAJS, tmp_path / 'logs' / 't.jsonl')
    r = _hub('export', '-f', 'sft', '-t', tmp_path / 'logs' / 't.jsonl', '-o', tmp_path / 'cli', '--test-fraction', '0.3',
             '--template-default', 'enable_thinking=true', '--template-default', 'reasoning_effort="medium"')
    assert r.returncode == 0, r.stderr[-2000:]
    # every row has the keys some row was served with, a missing one from its flag (a default no row needs adds nothing)
    assert _kwargs(tmp_path / 'cli' / 'test.jsonl') == {json.dumps({'enable_thinking': True})}
    assert _kwargs(tmp_path / 'cli' / 'train.jsonl') == {json.dumps(OFF)}
    bad = _hub('export', '-f', 'sft', '-t', tmp_path / 'logs' / 't.jsonl', '-o', tmp_path / 'x', '--template-default', 'effort=low')
    assert bad.returncode == 2 and "effort: 'low' is not JSON" in bad.stderr, bad.stderr
    run = ['run', '-o', tmp_path / 'run', '--logs', tmp_path / 'logs', '--log-format', 'knowlyr', '--no-reward',
           '--format', 'sft', '--test-fraction', '0.3']
    r = _hub(*run)
    assert r.returncode == 2 and '--template-default enable_thinking=JSON' in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _hub(*run, '--template-default', 'enable_thinking=true')
    assert r.returncode == 0, r.stderr[-2000:]
    assert _kwargs(tmp_path / 'run' / 'exports' / 'sft' / 'test.jsonl') == {json.dumps({'enable_thinking': True})}
    assert json.loads((tmp_path / 'run' / 'pipeline.json').read_text())['template_defaults'] == {'enable_thinking': True}
    r = _hub(*run, '--template-default', 'enable_thinking=false')          # the export is made: a change is refused
    assert r.returncode == 2 and "fields ['template_defaults']" in r.stderr, r.stderr


def test_the_mcp_export_and_pipeline_tools_take_template_defaults(tmp_path):
    """The MCP export_dataset and run_pipeline tools had no template_defaults: an object parameter in their schemas now,
    passed to the exporter"""
    from mcp import Client

    from knowlyr_lab.mcp import build_server
    root = tmp_path / 'root'; root.mkdir(); write_trajectories(TRAJS, root / 't.jsonl')
    async def go():
        async with Client(build_server(root)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            r = await c.call_tool('export_dataset', {'trajectories': 't.jsonl', 'format': 'sft', 'output_dir': 'o',
                                                     'test_fraction': 0.3, 'template_defaults': {'enable_thinking': True}})
            return tools, r
    tools, r = asyncio.run(go())
    for name in ('export_dataset', 'run_pipeline'):
        p = tools[name].input_schema['properties']['template_defaults']
        assert 'object' in json.dumps(p) and 'template' in p.get('description', ''), (name, p)
    assert not r.is_error, r.content
    assert _kwargs(root / 'o' / 'test.jsonl') == {json.dumps({'enable_thinking': True})}
    assert _kwargs(root / 'o' / 'train.jsonl') == {json.dumps(OFF)}


@pytest.mark.parametrize('default,given', [('true', "a JSON string ('true')"), (None, 'a JSON null (None)'),
                                           (1, 'a JSON integer (1)')])
def test_a_default_of_another_json_type_than_served_is_refused(tmp_path, default, given):
    """A default's type was never checked: served `false` with default 'true' exported, and datasets read 'true' back
    as True in the boolean column ('maybe' stayed a string in it). Refused in one line naming the key, the served JSON
    type and the default's, with no split file left; a default of the served type exports and loads as booleans"""
    with pytest.raises(ExportError) as e:
        DatasetExporter(TRAJS, test_fraction=0.3, template_defaults={'enable_thinking': default}).export('sft', tmp_path / 'o')
    msg = str(e.value)
    assert "field 'chat_template_kwargs.enable_thinking': served as a JSON boolean" in msg and given in msg, msg
    assert '\n' not in msg and not list((tmp_path / 'o').glob('*.jsonl')), (msg, list((tmp_path / 'o').iterdir()))
    import datasets
    res = DatasetExporter(TRAJS, test_fraction=0.3, template_defaults={'enable_thinking': True}).export('sft', tmp_path / 'ok')
    dd = datasets.load_dataset('json', data_files=res.paths, cache_dir=str(tmp_path / 'cache'))
    assert {s: set(x['enable_thinking'] for x in d['chat_template_kwargs']) for s, d in dd.items()} == {'train': {False}, 'test': {True}}


def test_integers_and_floats_are_two_types_for_a_default(tmp_path):
    """datasets types every split by the first file: a train split of served integers (int64) fails to cast a test
    split filled with a float default. A float default beside served integers is refused; a float beside floats is not"""
    served = lambda v: [t.model_copy(update={'steps': [s.model_copy(update={'metadata': {'template_kwargs': {'budget': v}}})
                                                        for s in t.steps]}) if t.task.id not in TEST else t for t in TRAJS]
    with pytest.raises(ExportError, match=r"served as a JSON integer, but template_defaults gives it a JSON float \(0.5\)"):
        DatasetExporter(served(2), test_fraction=0.3, template_defaults={'budget': 0.5}).export('sft', tmp_path / 'a')
    res = DatasetExporter(served(2.5), test_fraction=0.3, template_defaults={'budget': 0.5}).export('sft', tmp_path / 'b')
    assert _kwargs(res.paths['test']) == {json.dumps({'budget': 0.5})}


def test_pairs_and_groups_served_apart_are_export_errors_and_a_given_pair_is_quarantined(tmp_path):
    """rows.py refused a pair, or a GRPO group, whose members were served with other variables with a plain ValueError,
    and the exporter counted such a given preference as skipped ('preference_template_kwargs_differ'), its record in no
    file. Both are `ExportError`s worded as the other refusals ('<where>: field ...'); the export goes on, and the record
    is in quarantine.jsonl with its place and reason"""
    from knowlyr_lab.hub.rows import grpo_member, grpo_row, pair_template_kwargs
    on = TRAJS[0]                          # t0, served with thinking off; `plain`: t0 served with no variables
    plain = TRAJS[1].model_copy(update={'id': 'tr-plain', 'steps': [s.model_copy(update={'metadata': {}}) for s in TRAJS[1].steps]})
    with pytest.raises(ExportError, match=r"^p.jsonl:2: field 'chat_template_kwargs': chosen '.+' was served with "):
        pair_template_kwargs(on, plain, 'p.jsonl:2')
    with pytest.raises(ExportError, match=r"^task 't0': field 'chat_template_kwargs': a GRPO group's members"):
        grpo_row([grpo_member(on), grpo_member(plain)], [])
    prefs = tmp_path / 'prefs.jsonl'
    prefs.write_text(json.dumps({'chosen': TRAJS[1].id, 'rejected': on.id}) + '\n' +
                     json.dumps({'chosen': on.id, 'rejected': plain.id}) + '\n')
    res = DatasetExporter([*TRAJS, plain], preferences=prefs, template_defaults={'enable_thinking': True}).export('dpo', tmp_path / 'o')
    [q] = [json.loads(x) for x in open(tmp_path / 'o' / 'quarantine.jsonl')]
    assert res.total == 1 and res.quarantined == 1 and not res.skipped, res
    assert (q['path'], q['line']) == (str(prefs), 2) and q['record'] == {'chosen': on.id, 'rejected': plain.id}, q
    assert q['reason'].startswith(f"{prefs}:2: field 'chat_template_kwargs': chosen {on.id!r} was served with"), q


def test_the_mcp_log_tools_take_template_defaults(tmp_path):
    """process_log and process_logs_batch built their PipelineConfig without template_defaults: a pipeline over logs
    served both ways could only be refused. Both take it now, as run_pipeline does: in the schema, and in the export"""
    from mcp import Client

    from knowlyr_lab.mcp import build_server
    root = tmp_path / 'root'; (root / 'logs').mkdir(parents=True)
    trajs = [t.model_copy(update={'task': t.task.model_copy(update={'domain': 'generic'})}) for t in TRAJS]   # scored
    write_trajectories(trajs, root / 'logs' / 't.jsonl'); on = {'enable_thinking': True}
    async def go():
        async with Client(build_server(root)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            calls = [await c.call_tool('process_logs_batch', {'log_dir': 'logs', 'output_dir': 'b', 'format': 'knowlyr'}),
                     await c.call_tool('process_logs_batch', {'log_dir': 'logs', 'output_dir': 'b', 'format': 'knowlyr',
                                                              'template_defaults': on}),
                     await c.call_tool('process_log', {'path': 'logs/t.jsonl', 'output_dir': 'one', 'format': 'knowlyr',
                                                       'template_defaults': on})]
            return tools, calls
    tools, (refused, batch, one) = asyncio.run(go())
    for name in ('process_log', 'process_logs_batch'):
        p = tools[name].input_schema['properties']['template_defaults']
        assert 'object' in json.dumps(p) and 'template' in p.get('description', ''), (name, p)
    assert refused.is_error and "no 'enable_thinking'" in refused.content[0].text, refused.content
    assert not batch.is_error and not one.is_error, (batch.content, one.content)
    for d in ('b', 'one'):
        assert _kwargs(root / d / 'exports' / 'sft' / 'train.jsonl') == {json.dumps(OFF), json.dumps(on)}, d


def test_a_refused_pipeline_export_leaves_no_temp_folder_and_names_the_split_and_trajectory(tmp_path):
    """A pipeline exports into exports/.tmp-<pid>-<fmt>/; a refused export left that folder behind until a later run,
    and the refusal named a file in it ('.../exports/.tmp-123-sft/test.jsonl:1') that was gone. The folder is removed
    as the export fails, and the refusal names the split, the row and the trajectory it came from"""
    from knowlyr_lab.hub.pipeline import Pipeline, PipelineConfig
    (tmp_path / 'logs').mkdir(); write_trajectories(TRAJS, tmp_path / 'logs' / 't.jsonl')
    cfg = PipelineConfig(output_dir=str(tmp_path / 'run'), log_format='knowlyr', reward=False, export_formats=['sft'],
                         test_fraction=0.3)
    with pytest.raises(ExportError) as e: Pipeline(cfg).run_batch(tmp_path / 'logs')
    msg, test_ids = str(e.value), {t.id for t in TRAJS if t.task.id in TEST}
    assert '.tmp-' not in msg and msg.startswith("split 'test' row 1 (trajectory "), msg
    assert msg.split("'")[3] in test_ids, msg
    assert sorted(p.name for p in (tmp_path / 'run' / 'exports').iterdir()) == [], list((tmp_path / 'run' / 'exports').iterdir())
    assert Pipeline(cfg).status()['stale_temp_files'] == 0

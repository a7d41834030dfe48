"""Every export loads in `datasets` as it is written: as a dict of splits (`load_dataset(kind, data_files={'train': ...,
'test': ...})`, which types every split by the first file), one file at a time, and with `Dataset.from_parquet` for
Parquet, also when the test split holds keys the train split lacks (tools of another env, other chat template variables)"""
import json
import re
from pathlib import Path

import datasets
import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory

TEST = ('t3', 't4', 't6')         # the test split of tasks t0..t9 at test_fraction=0.3


def _fn(name:str, props:dict)->dict:
    return {'type': 'function', 'function': {'name': name, 'description': name,
            'parameters': {'type': 'object', 'properties': props, 'required': list(props)}}}

TOOLS = {'knowlyr/a': [_fn('move', {'direction': {'type': 'string'}})],
         'knowlyr/b': [_fn('look', {'x': {'type': 'integer'}, 'y': {'type': 'integer'}})]}


def _traj(task:int, k:int, kw:dict|None=None, n:int=2)->Trajectory:
    "Trajectory `k` of task `task` (env b for the test split's tasks), every step served with `kw` (None: none)"
    env = 'knowlyr/b' if f"t{task}" in TEST else 'knowlyr/a'
    steps = [Step(index=i, thought=f"step {i} of {k}", action=ToolCall(tool='move', params={'direction': 'east'}),
                  observation=Observation(content=f"moved {i}"), reward=(k + i) / 10,
                  metadata={'template_kwargs': kw} if kw is not None else {}) for i in range(n)]
    return Trajectory(task=Task(id=f"t{task}", instruction=f"Reach column {task}.", domain='maze', env_id=env),
                      agent=AgentInfo(name='a', model='m'), steps=steps, outcome=Outcome(success=k % 2 == 0, terminated=True))


def _load(paths:dict, cache:Path)->dict:
    "{how: {split: rows}} of an export's split files, read by `datasets` each way it reads them"
    first = next(iter(paths.values()))
    kind = 'parquet' if str(first[0] if isinstance(first, list) else first).endswith('.parquet') else 'json'
    c = str(cache)
    got = {'dict': {s: list(d) for s, d in datasets.load_dataset(kind, data_files=dict(paths), cache_dir=c).items()},
           'each': {s: list(datasets.load_dataset(kind, data_files=p, split='train', cache_dir=c)) for s, p in paths.items()}}
    if kind == 'parquet': got['from_parquet'] = {s: list(datasets.Dataset.from_parquet(p, cache_dir=c)) for s, p in paths.items()}
    return got


@pytest.mark.parametrize('fmt', ['verl', 'skyrl'])
def test_parquet_splits_with_other_tools_load_as_one_dataset(tmp_path, fmt):
    """The test split's tasks use env b's tools, the train split's env a's: every verl row's `extra_info.tools_kwargs`
    names both (on main each split named its own, and `load_dataset('parquet', data_files={...})` failed to cast
    the test split's struct to the train split's)"""
    res = DatasetExporter([_traj(t, k) for t in range(10) for k in range(2)], test_fraction=0.3, tools=TOOLS).export(fmt, tmp_path / fmt)
    assert sorted(res.paths) == ['test', 'train']
    got = _load(res.paths, tmp_path / 'c')
    for how, rows in got.items():
        assert {r['extra_info']['task_id'] for r in rows['test']} == set(TEST), how
        assert sum(map(len, rows.values())) == 10, how
        if fmt == 'verl':
            assert all(sorted(r['extra_info']['tools_kwargs']) == ['look', 'move'] for s in rows for r in rows[s]), how
            assert all(r['extra_info']['tools_kwargs'][n]['create_kwargs']['task_id'] == r['extra_info']['task_id']
                       for s in rows for r in rows[s] for n in ('look', 'move')), how


OFF, ON = {'enable_thinking': False}, {'enable_thinking': True}   # ON: the Qwen3 templates' value when none is given
JSONL = ['sft', 'sft-agent', 'openai', 'dpo', 'dpo-seed', 'grpo', 'benchmark']


@pytest.mark.parametrize('fmt', [*JSONL, 'hf'])
def test_splits_served_with_other_variables_load_as_one_dataset(tmp_path, fmt):
    """Train tasks served with thinking off, test tasks with `reasoning_effort` (a key train lacks): every row of both
    splits carries both keys, the missing one from `template_defaults`, and every split loads each way (on main the
    rows kept their own keys and `load_dataset('json', data_files={...})` failed to cast the test split's struct,
    which also failed every `hf` export)"""
    trajs = [_traj(t, k, {'reasoning_effort': 'low'} if f"t{t}" in TEST else OFF) for t in range(10) for k in range(2)]
    ex = DatasetExporter(trajs, test_fraction=0.3, template_defaults={'enable_thinking': True, 'reasoning_effort': 'medium'})
    res = ex.export(fmt, tmp_path / fmt)
    if fmt == 'hf':
        shards = {s: sorted(str(p) for p in Path(res.paths['parquet']).glob(f"{s}-*.parquet")) for s in ('train', 'test')}
        got = {'hf': {s: list(d) for s, d in datasets.load_from_disk(res.paths['hf']).items()}, **_load(shards, tmp_path / 'c')}
    else: got = _load(res.paths, tmp_path / 'c')
    for how, rows in got.items():
        assert sorted(rows) == ['test', 'train'], how
        kws = {s: [r.get('chat_template_kwargs') for r in rows[s]] for s in rows}
        if fmt == 'benchmark': assert kws == {s: [None] * len(rows[s]) for s in rows}; continue   # a task, not a prompt served
        assert set(map(json.dumps, kws['train'])) == {'{"enable_thinking": false, "reasoning_effort": "medium"}'}, how
        assert set(map(json.dumps, kws['test'])) == {'{"enable_thinking": true, "reasoning_effort": "low"}'}, how


def _qwen3_8():
    "The project's tiny tokenizer around the Qwen3-8B training template the installed trl ships (None read as given)"
    t = pytest.importorskip('trl.chat_template_utils', reason='the template is read from the installed trl')
    if not hasattr(t, 'qwen3_8_training_chat_template'): pytest.skip('the installed trl ships no qwen3_8_training template')
    from knowlyr_lab.trainer.tiny import train_tokenizer
    return train_tokenizer(['Reach column 1. moved east'], chat_template=t.qwen3_8_training_chat_template)


SERVED = {'mixed': lambda t: t % 2 == 1,                 # both kinds in both splits
          'by_split': lambda t: f"t{t}" not in TEST}      # train served with thinking off, test with no variables


@pytest.mark.parametrize('mix', list(SERVED))
@pytest.mark.parametrize('fmt', ['sft', 'openai', 'dpo', 'grpo'])
def test_trl_renders_every_row_as_its_trajectory_was_served(tmp_path, fmt, mix):
    """Trajectories served with thinking off and with no variables, loaded by `datasets` as one dataset: TRL's
    `maybe_apply_chat_template` renders each row's prompt as the trainer's `to_chat` renders the trajectory it came
    from, with the variables it was served with (on main, `by_split`: `datasets` typed the column from the train split
    and filled the test rows' key with None, and Qwen3-8B's template rendered them without its system preamble;
    `mixed` rendered right only because datasets 5 reads a first chunk of mixed keys as a JSON column)"""
    from trl.data_utils import maybe_apply_chat_template

    from knowlyr_lab.chat import render_chat
    from knowlyr_lab.trainer.data import to_chat
    tok = _qwen3_8()
    trajs = [_traj(t, k, OFF if SERVED[mix](t) else None) for t in range(10) for k in range(2)]
    res = DatasetExporter(trajs, test_fraction=0.3, template_defaults=ON).export(fmt, tmp_path / fmt)
    by_prompt = {to_chat(t)['messages'][0]['content']: t for t in trajs}     # a task's trajectories: one prompt, one set
    dd = datasets.load_dataset('json', data_files=dict(res.paths), cache_dir=str(tmp_path / 'c'))
    seen = set()
    for s in ('train', 'test'):
        for r in dd[s]:
            prompt = r['prompt'] if 'prompt' in r else r['messages'][:1]
            chat = to_chat(by_prompt[prompt[0]['content']], s)
            want = render_chat(tok, chat['messages'][:1], None, True, template_kwargs=chat.get('template_kwargs'))
            got = maybe_apply_chat_template({'prompt': prompt, 'chat_template_kwargs': r['chat_template_kwargs']}, tok)['prompt']
            assert got == want, (s, prompt)
            seen.add((s, 'template_kwargs' in chat))
    assert seen == ({('train', True), ('test', False)} if mix == 'by_split' else
                    {('train', True), ('train', False), ('test', True), ('test', False)})


def test_openai_splits_with_tools_of_other_shapes_warn_and_name_the_loader_that_works(tmp_path):
    """OpenAI rows keep `tools` as objects (OpenAI's format), so splits whose envs' tools differ in shape cannot load as
    one dataset: `load_dataset('json', data_files={...})` fails to cast the test split's struct (no encoding is both
    OpenAI's format and one struct). The export warns (on main: silently), naming the per-split load, which reads each
    split's schemas as written; one env's tools in both splits: no warning"""
    import warnings
    trajs = [_traj(t, k) for t in range(10) for k in range(2)]
    with pytest.warns(UserWarning, match=r"tool schemas of splits train, test differ in shape.*load each split on its own"):
        res = DatasetExporter(trajs, test_fraction=0.3, tools=TOOLS, success_only=True).export('openai', tmp_path / 'o')
    with pytest.raises(datasets.exceptions.DatasetGenerationError):       # what the warning is about, with datasets itself
        datasets.load_dataset('json', data_files=res.paths, cache_dir=str(tmp_path / 'c'))
    got = datasets.DatasetDict({s: datasets.load_dataset('json', data_files=f, split='train', cache_dir=str(tmp_path / 'c'))
                                for s, f in res.paths.items()})
    for s, f in res.paths.items():
        assert [r['tools'] for r in got[s]] == [json.loads(x)['tools'] for x in open(f)], s
    assert got['test'][0]['tools'] == TOOLS['knowlyr/b'] and got['train'][0]['tools'] == TOOLS['knowlyr/a']
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        DatasetExporter(trajs, test_fraction=0.3, tools=TOOLS['knowlyr/a'], success_only=True).export('openai', tmp_path / 'one')


def test_the_openai_shape_warning_comes_from_what_the_writer_saw_not_a_second_read(tmp_path):
    """The split-shape warning read every openai split file again after writing it: 28% of the CPU time of a
    20,000-trajectory export (experiments/benchmarks/export_throughput.py's data, test_fraction=0.3). The writer keeps
    each split's distinct tool lists as it writes them, once per list object and content (memory bounded by the
    distinct lists, not the rows), and the warning is computed from those (one shape: no warning)"""
    import warnings

    import orjson

    from knowlyr_lab.hub._spool import SplitWriter
    from knowlyr_lab.hub.export_filter import ExportResult
    res = ExportResult('openai', str(tmp_path)); w = SplitWriter(tmp_path, res)
    a, b = TOOLS['knowlyr/a'], json.loads(json.dumps(TOOLS['knowlyr/a']))      # equal content, two objects
    for i in range(6): w.write('train', {'messages': [], 'tools': a if i % 2 else b})
    w.write('test', {'messages': [], 'tools': TOOLS['knowlyr/b']}); w.write('test', {'messages': [], 'tools': []})
    w.close()
    assert {s: list(ls) for s, ls in w.tool_lists.items()} == {'train': [orjson.dumps(a)], 'test': [orjson.dumps(TOOLS['knowlyr/b'])]}
    trajs = [_traj(t, k) for t in range(10) for k in range(2)]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter('always')
        DatasetExporter(trajs, test_fraction=0.3, tools=TOOLS['knowlyr/a'], success_only=True).export('openai', tmp_path / 'one')
    assert not [x for x in said if 'differ in shape' in str(x.message)]


def _openai_rows_loaded(tmp_path:Path, tools:list, kw:dict|None=None)->list:
    "The rows of an openai-like file (user and assistant messages: `datasets` reads them as JSON text) as datasets loads them"
    import orjson
    msgs = [{'role': 'user', 'content': 'go'}, {'role': 'assistant', 'content': '', 'tool_calls': []}]
    f = tmp_path / 'by_hand.jsonl'
    f.write_bytes(orjson.dumps({'messages': msgs, 'tools': tools, **({'chat_template_kwargs': kw} if kw else {})}) + b'\n')
    return list(datasets.load_dataset('json', data_files=str(f), split='train', cache_dir=str(tmp_path / 'c2')))


ODD = {'minimum 1e-12': ([_fn('move', {'d': {'type': 'number', 'minimum': 1e-12, 'default': 1 / 3}}), _fn('look', {})], None,
                         "field 'tools[0].function.parameters.properties.d.minimum': 1e-12 loads as 0.0"),
       'enum "1" and 2': ([_fn('move', {'d': {'type': 'string', 'enum': ['1', 2]}})], None,
                          "field 'tools[0].function.parameters.properties.d.enum[0]': '1' loads as 1"),
       'variable 1/3 of one type': ([_fn('move', {'direction': {'type': 'string'}})], {'t': 1 / 3},
                                    "field 'chat_template_kwargs.t': 0.3333333333333333 loads as 0.3333333333")}


@pytest.mark.parametrize('case', list(ODD))
def test_an_openai_export_whose_values_datasets_rewrites_is_refused(tmp_path, case):
    """An openai row's messages mix keys (a user message has no tool_calls), so datasets 5.2 reads them as JSON text and
    rewrites every row with ujson: a tool schema's float went to 10 decimals, a string enum item that is JSON to its
    value, a template variable of one type too, and the export said nothing (review19 openai_tools.py). It is refused,
    naming file, split, row, field, both values and the fix; datasets itself loads such a row so; no file is left"""
    from knowlyr_lab.hub.export import ExportError
    tools, kw, said = ODD[case]
    with pytest.raises(ExportError, match="train.jsonl: split 'train' row 1: " + re.escape(said) + ".*rewrites every row with ujson.*export 'sft'"):
        DatasetExporter([_traj(0, k, kw) for k in range(3)], tools=tools).export('openai', tmp_path / 'o')
    assert not list((tmp_path / 'o').glob('train.jsonl'))
    row = _openai_rows_loaded(tmp_path, tools, kw)[0]
    d = row['tools'][0]['function']['parameters']['properties']['d'] if case != 'variable 1/3 of one type' else None
    assert (d['minimum'] == 0.0 if case == 'minimum 1e-12' else d['enum'] == [1, 2] if d else
            row['chat_template_kwargs']['t'] == 0.3333333333)


def test_an_openai_export_datasets_loads_as_written_is_kept(tmp_path):
    """Tools whose values survive datasets' ujson rewrite are written and load as written: floats of few decimals, an
    enum mixing a number and a string that is no JSON (pyarrow fails the path, datasets reads it as JSON text: on main
    the export itself failed, ArrowInvalid from the split-shape warning's pa.array)"""
    tools = [_fn('move', {'d': {'type': 'number', 'minimum': 0.5, 'enum': [1, 'a']}}), _fn('look', {})]
    res = DatasetExporter([_traj(0, k) for k in range(3)], tools=tools).export('openai', tmp_path / 'o')
    got = datasets.load_dataset('json', data_files=res.paths['train'], split='train', cache_dir=str(tmp_path / 'c'))
    assert [r['tools'] for r in got] == [json.loads(x)['tools'] for x in open(res.paths['train'])] == [tools] * 3


def test_a_negative_zero_a_template_writes_out_is_refused_where_datasets_rewrites_it(tmp_path):
    """ujson writes -0.0 as 0.0 and -0.0 == 0.0, so an openai tool schema's default -0.0 loaded as 0.0 went unflagged
    (review19); a chat template writes tools out with tojson ('-0.0' vs '0.0'), so the model trains on other tokens.
    It is refused; a reward of -0.0 (a number to the trainer) is no change (page 41ab `changed_field`)"""
    import math

    from knowlyr_lab.hub.arrow_json import changed_field
    from knowlyr_lab.hub.export import ExportError
    tools = [_fn('move', {'d': {'type': 'number', 'default': -0.0}})]
    with pytest.raises(ExportError, match=re.escape("field 'tools[0].function.parameters.properties.d.default': -0.0 loads as 0.0")):
        DatasetExporter([_traj(0, k) for k in range(3)], tools=tools).export('openai', tmp_path / 'o')
    d = _openai_rows_loaded(tmp_path, tools)[0]['tools'][0]['function']['parameters']['properties']['d']
    assert math.copysign(1, d['default']) == 1.0                      # datasets itself loads it so
    assert changed_field({'reward': -0.0}, {'reward': 0.0}) is None


MIXED = {'default 1 beside 1.5': ([_fn('m', {'a': {'type': 'number', 'default': 1}}),
                                   _fn('n', {'a': {'type': 'number', 'default': 1.5}})], 'tools[0]', 'default'),
         'enum [1, 2.5]': ([_fn('m', {'a': {'type': 'number', 'enum': [1, 2.5]}})], 'tools[0]', 'enum[0]')}


@pytest.mark.parametrize('case', list(MIXED))
def test_an_openai_export_whose_integers_pyarrow_reads_as_floats_is_refused(tmp_path, case):
    """Where a path of the tools holds an integer beside a float (two tools' defaults 1 and 1.5, an enum [1, 2.5]),
    pyarrow reads the column as floats and datasets loads 1 as 1.0, so a chat template prints 1.0 where the schema says
    1; the export wrote it and said nothing (review25 int_float.py). It is refused, naming file, split, row, field, both
    values and the fix; datasets itself loads it so; written as 1.0, the same tools export and load as written"""
    from knowlyr_lab.hub.export import ExportError
    tools, at, key = MIXED[case]
    field = f"{at}.function.parameters.properties.a.{key}"
    with pytest.raises(ExportError, match="train.jsonl: split 'train' row 1: " + re.escape(f"field '{field}': 1 loads as 1.0")
                       + ".*as floats.*write the integers as floats \\(e.g. 1.0\\), or the same type in every tool"):
        DatasetExporter([_traj(0, k) for k in range(3)], tools=tools).export('openai', tmp_path / 'o')
    assert not list((tmp_path / 'o').glob('train.jsonl'))
    a = _openai_rows_loaded(tmp_path, tools)[0]['tools'][0]['function']['parameters']['properties']['a']
    got = a['default'] if key == 'default' else a['enum'][0]
    assert type(got) is float and got == 1.0                          # datasets itself loads it so
    fixed = json.loads(json.dumps(tools).replace(': 1}', ': 1.0}').replace('[1, ', '[1.0, '))
    res = DatasetExporter([_traj(0, k) for k in range(3)], tools=fixed).export('openai', tmp_path / 'ok')
    got = datasets.load_dataset('json', data_files=res.paths['train'], split='train', cache_dir=str(tmp_path / 'c3'))
    assert [r['tools'] for r in got] == [fixed] * 3

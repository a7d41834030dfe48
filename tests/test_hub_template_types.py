"""Template variable values that pyarrow's JSON reader (which `load_dataset('json')` of datasets 5.2 uses) reads as
another type than served: strings it parses as ISO timestamps, integers past int64. The export refuses them (see
test_hub_template_nested's cases); here the real reader is shown to fail or change those values, and the page's
mirror of pyarrow's timestamp parser is compared with pyarrow on generated strings"""
import io
import json
import random

import datasets
import orjson
import pyarrow as pa
import pyarrow.json as paj
import pytest

from knowlyr_lab.hub.arrow_json import arrow_timestamp


def _as_loaded(tmp, splits:dict, pad:int=0)->dict:   # split -> its rows' variables; characters of padding in a row
    "Per split loaded first: 'fails', or the splits whose variables `load_dataset('json')` loads otherwise than served"
    out = {}
    for s, rows in splits.items():
        (tmp / f'{s}.jsonl').write_text(''.join(json.dumps({'pad': 'x' * pad, 'chat_template_kwargs': kw}) + '\n' for kw in rows))
    for first in splits:
        order = [first, *(s for s in splits if s != first)]
        try: dd = datasets.load_dataset('json', data_files={s: str(tmp / f'{s}.jsonl') for s in order}, cache_dir=str(tmp / first))
        except Exception: out[first] = 'fails'; continue       # noqa: BLE001 (the reader's own error, any type)
        out[first] = [s for s in order if json.dumps(list(dd[s]['chat_template_kwargs']), default=repr) != json.dumps(splits[s])]
    return out


@pytest.mark.parametrize('train,test', [([{'d': '2024-07-26'}] * 2, [{'d': '2024-07-27'}] * 2),
                                        ([{'d': '26 Jul 2024'}] * 2, [{'d': '2024-07-27'}] * 2),
                                        ([{'o': {'at': '2024-07-26T10:00:00Z'}}] * 2, [{'o': {'at': 'now'}}] * 2)])
def test_iso_strings_the_export_refuses_load_otherwise(tmp_path, train, test):
    "With either split first, a split whose strings at a path are all ISO timestamps fails to load or changes"
    got = _as_loaded(tmp_path, {'train': train, 'test': test})
    assert all(v == 'fails' or v for v in got.values()), got


def test_iso_strings_beside_another_form_load_as_served(tmp_path):
    got = _as_loaded(tmp_path, {'train': [{'d': '2024-07-26'}, {'d': '26 Jul 2024'}], 'test': [{'d': '2024-07-27T10:00'}, {'d': 'x'}]})
    assert got == {'train': [], 'test': []}, got


def _candidate(r:random.Random)->str:
    "A string near pyarrow's ISO 8601 forms: a date, a separator, a time, a zone, each sometimes off by a character"
    num = lambda n, top: str(r.randrange(top)).zfill(n) if r.random() < .9 else r.choice(['', 'x', '1', '123', '٣٣'])
    s = f"{num(4, 10000)}{r.choice('--/')}{num(2, 14)}{r.choice('--x')}{num(2, 33)}"
    if r.random() < .8:
        s += r.choice('T T t_') + ':'.join(num(2, (25, 61, 61)[i]) for i in range(r.randrange(1, 4)))
        s += r.choice(['', '.5', '.123', ',5'])
    if r.random() < .6:
        s += r.choice(['Z', 'z', f"+{num(2, 25)}", f"-{num(2, 25)}{num(2, 61)}", f"+{num(2, 25)}:{num(2, 61)}", '+1:30', '-', ' '])
    return s


def test_the_timestamp_mirror_reads_strings_as_pyarrow_does():
    r = random.Random(7)
    said = [_candidate(r) for _ in range(4000)] + ['2024-02-29', '2023-02-29', '1900-02-29', '2000-02-29', '0000-01-01']
    lines = b''.join(orjson.dumps({'v': s}) + b'\n' for s in said)
    # one read per string: a column types all its rows together
    arrow = [paj.read_json(io.BytesIO(x)).schema.field('v').type == pa.timestamp('s') for x in lines.splitlines()]
    assert 100 < sum(arrow) < 3900, sum(arrow)             # both verdicts represented
    assert [s for s, a in zip(said, arrow) if arrow_timestamp(s) != a] == []


@pytest.mark.parametrize('train,test', [([{'seed': 2**63}] * 2, [{'seed': 5}] * 2),
                                        ([{'o': {'seed': 2**64 - 1}}] * 2, [{'o': {'seed': 2**63 + 1}}] * 2)])
def test_integers_past_int64_the_export_refuses_load_otherwise(tmp_path, train, test):
    "With either split first, an integer past int64 (outside JSON text) makes the split fail or changes it (to a float)"
    got = _as_loaded(tmp_path, {'train': train, 'test': test})
    assert all(v == 'fails' or v for v in got.values()), got


@pytest.mark.parametrize('kws,loads', [([{'a': None}] * 12 + [{'a': 1}] * 4, False),
                                       ([{'o': {'k': 1}}] * 12 + [{'o': {'k': 2}}, {'o': {'j': 1}}] * 2, False),
                                       ([{'a': 1}] * 12 + [{'a': 'x'}] * 4, False),
                                       ([{'o': {'k': 1}}, {'o': {'j': 1}}] + [{'o': {'k': 2}}] * 14, True),
                                       ([{'a': 1}] * 12 + [{'a': None}] * 4, True)])
def test_a_later_10_mib_read_is_typed_by_the_first(tmp_path, kws, loads):
    "Rows of 0.9 MB: the first 12 are datasets' first read of the file, and the rest are cast to its types (or fail)"
    got = _as_loaded(tmp_path, {'train': kws}, pad=900_000)
    assert got == ({'train': []} if loads else {'train': 'fails'}), got


def test_the_read_size_is_datasets_own():
    from datasets.packaged_modules.json.json import JsonConfig

    from knowlyr_lab.hub.template_kwargs import READ_BYTES
    assert JsonConfig.chunksize == READ_BYTES


def test_integers_past_64_bits_are_one_check_for_rows_and_defaults(tmp_path):
    """The past-64-bit rule was kept twice, with the range restated (`past_uint64`): `writable_kwargs` for trajectories,
    and a rule of the splits' shape that only ever met `template_defaults` (orjson refuses such a row before), refusing
    them in other words. Now `writable_kwargs` asks orjson (the rows' writer) and checks the defaults too"""
    from knowlyr_lab.hub.export import DatasetExporter, ExportError
    from knowlyr_lab.hub.template_kwargs import writable_kwargs
    from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory
    # JSON rows hold the integers in [-2**63, 2**64): fixed here, not asked of orjson (which writable_kwargs asks)
    for v, kept in ((0, True), (2**63, True), (2**64 - 1, True), (-2**63, True),
                    (2**64, False), (-2**63 - 1, False), (10**30, False), (-10**30, False)):
        if kept: assert writable_kwargs({'o': [v]}, 'here') == {'o': [v]}, v; continue
        with pytest.raises(ExportError) as e: writable_kwargs({'o': [v]}, 'here')
        assert str(e.value).startswith(f"here: field 'chat_template_kwargs.o[]': the integer {v} is past 64 bits"), e.value

    def traj(t:int, kw:dict):
        steps = [Step(index=i, action=ToolCall(tool='move', params={'d': 'e'}), observation=Observation(content=f"m{i}"),
                      reward=0.5, metadata={'template_kwargs': kw}) for i in range(2)]
        return Trajectory(task=Task(id=f"t{t}", instruction=f"go {t}", domain='maze'), agent=AgentInfo(name='a', model='m'),
                          steps=steps, outcome=Outcome(success=True, terminated=True))
    trajs = [traj(0, {'seed': 1}), traj(1, {'think': True}), traj(2, {'seed': 2**64, 'think': True})]
    res = DatasetExporter(trajs, template_defaults={'seed': 7, 'think': False}).export('sft', tmp_path / 'o')
    row = json.loads((tmp_path / 'o' / 'quarantine.jsonl').read_text())['reason']
    assert res.total == 2 and res.quarantined == 1, res
    with pytest.raises(ExportError) as e:
        DatasetExporter(trajs[:2], template_defaults={'seed': 2**64, 'think': False}).export('sft', tmp_path / 'd')
    said = "field 'chat_template_kwargs.seed': the integer 18446744073709551616 is past 64 bits, which JSON rows are written and read with"
    assert said in row and str(e.value).startswith('template_defaults: ' + said), (row, str(e.value))
    assert not list((tmp_path / 'd').glob('*.jsonl')), list((tmp_path / 'd').iterdir())


def _rows(kws:list, defaults:dict|None, pad:int)->bytes:
    "A split file as the export writes it: a row of about `pad` bytes per variables of `kws`, keys filled from `defaults`"
    keys = sorted(set().union(*(kw or {} for kw in kws)))
    return b''.join(orjson.dumps({'messages': [{'role': 'user', 'content': f"{i} " + 'x' * pad}],
                                  'chat_template_kwargs': {k: (kw or {})[k] if k in (kw or {}) else defaults[k] for k in keys}})
                    + b'\n' for i, kw in enumerate(kws))


# name: ({split: the variables of its rows of 0.9 MB (12 rows fill datasets' first 10 MiB read)}, template_defaults)
BY_READ = {
    'JSON text first, integers and floats after': ({'train': [{'a': 'x'}, {'a': 1}] * 6 + [{'a': 1}, {'a': 0.5}] * 2}, None),
    'JSON text first, ISO dates after': ({'train': [{'a': 'x'}, {'a': 1}] * 6 + [{'a': '2024-07-26'}] * 4}, None),
    'JSON text first, past int64 after': ({'train': [{'a': 'x'}, {'a': 1}] * 6 + [{'a': 2**63}] * 4}, None),
    'JSON text first in both splits': ({'train': [{'a': 'x'}, {'a': 1}] * 2,
                                        'test': [{'a': 'y'}, {'a': 2}] * 6 + [{'a': 1}, {'a': 0.5}] * 2}, None),
    'JSON text first, a long float after': ({'train': [{'a': 'x'}, {'a': 1}] * 6 + [{'a': 1}, {'a': 1 / 3}] * 2}, None),
    "JSON text first, the string '1' after": ({'train': [{'a': 'x'}, {'a': 1}] * 6 + [{'a': 2}, {'a': '1'}] * 2}, None),
    'integers first, integers and floats after': ({'train': [{'a': 1}] * 12 + [{'a': 1}, {'a': 0.5}] * 2}, None),
    'strings first, ISO dates after': ({'train': [{'a': 'x'}] * 12 + [{'a': '2024-07-26'}] * 4}, None),
    'a long default moves the first read to the nulls': ({'train': [{'a': None}] * 8 + [{'a': 1, 'b': 'z'}] * 8},
                                                         {'b': 'z' * 500_000}),
    'a short default leaves it': ({'train': [{'a': None}] * 8 + [{'a': 1, 'b': 'z'}] * 8}, {'b': 'z'}),
}


@pytest.mark.parametrize('case', BY_READ)
def test_the_export_refuses_exactly_the_10_mib_reads_datasets_fails(tmp_path, case):
    """The per-read check refused a path that was JSON text in every split's first read (datasets then reads it as
    JSON text in every read, so integers and floats, ISO dates or integers past int64 after it load as served), and
    it cut the reads before the defaults filled the rows: a long default moved datasets' first read to rows all null
    there, and the written export failed to load. A refusal must be a load that fails or changes a value (in some
    split order), and a written export must load as served in every order"""
    from knowlyr_lab.hub.rows import ExportError
    from knowlyr_lab.hub.template_kwargs import same_template_kwargs
    splits, defaults = BY_READ[case]
    paths = {s: tmp_path / f"{s}.jsonl" for s in splits}
    for s, kws in splits.items():
        (tmp_path / f"{s}.jsonl").write_bytes(b''.join(orjson.dumps({'messages': [{'role': 'user', 'content': f"{i} " + 'x' * 900_000}],
                                                                     **({'chat_template_kwargs': kw} if kw else {})}) + b'\n'
                                                       for i, kw in enumerate(kws)))
    try: same_template_kwargs(paths, defaults); refused = None
    except ExportError as e: refused = str(e)
    if refused:                                   # (no file left: written as they would have been)
        for s, kws in splits.items(): paths[s].write_bytes(_rows(kws, defaults, 900_000))
    else: assert all(p.read_bytes() == _rows(splits[s], defaults, 900_000) for s, p in paths.items())
    served = {s: [json.loads(x)['chat_template_kwargs'] for x in open(p)] for s, p in paths.items()}
    got = {}
    for first in splits:
        order = [first, *(s for s in splits if s != first)]
        try: dd = datasets.load_dataset('json', data_files={s: str(paths[s]) for s in order}, cache_dir=str(tmp_path / first))
        except Exception: got[first] = 'fails'; continue      # noqa: BLE001 (the reader's own error, any type)
        got[first] = [s for s in order if json.dumps(list(dd[s]['chat_template_kwargs']), sort_keys=True, default=repr)
                       != json.dumps(served[s], sort_keys=True)]
    assert max(p.stat().st_size for p in paths.values()) > 11 << 20          # a split of two reads at least
    if refused: assert any(v == 'fails' or v for v in got.values()), f"refused, but it loads as served: {refused}"
    else: assert all(v == [] for v in got.values()), f"written, but datasets loads it otherwise: {got}"


@pytest.mark.parametrize('reward,refused', [(1 / 3, "field 'step_rewards[0]': 0.3333333333333333 loads as 0.3333333333"),
                                            (0.5, None)])
def test_an_export_datasets_rewrites_is_refused_unless_every_row_loads_as_written(tmp_path, reward, refused):
    """A template variable path whose values mix is JSON text to datasets 5.2, which then rewrites each row with ujson:
    every float to 10 decimals. The export wrote such files with a warning that datasets 'loads it as
    served' (a reward of 1/3 loaded as 0.3333333333). Now it refuses, naming the row, the field and both values, unless
    every row (all its columns, loaded by datasets itself) comes back as written"""
    from knowlyr_lab.hub.export import DatasetExporter, ExportError
    from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory

    def traj(t:int, kw:dict):
        steps = [Step(index=i, action=ToolCall(tool='move', params={'d': 'e'}), observation=Observation(content=f"m{i} {t}"),
                      reward=reward, metadata={'template_kwargs': kw}) for i in range(2)]
        return Trajectory(task=Task(id=f"t{t}", instruction=f"go {t}", domain='generic'), agent=AgentInfo(name='a', model='m'),
                          steps=steps, outcome=Outcome(success=True, terminated=True))
    trajs = [traj(i, kw) for i, kw in enumerate([{'opts': {}}, {'opts': {'a': 1}}] * 3)]
    out = tmp_path / 'o'
    with pytest.warns(UserWarning) if not refused else pytest.raises(ExportError) as e:
        DatasetExporter(trajs, test_fraction=0).export('sft', out)
    if refused:
        assert refused in str(e.value) and "serve 'chat_template_kwargs.opts' one type" in str(e.value), str(e.value)
        assert not list(out.glob('*.jsonl')), list(out.iterdir())
        return
    served = [json.loads(x) for x in open(out / 'train.jsonl')]
    dd = datasets.load_dataset('json', data_files={'train': str(out / 'train.jsonl')}, cache_dir=str(tmp_path / 'c'))
    assert dd['train'].to_list() == served and served[0]['step_rewards'] == [0.5, 0.5]


def test_a_rewrite_refusal_names_every_path_datasets_reads_as_json_text(tmp_path):
    """Two variables mix (`a`: string and integer; `opts`: other keys), so datasets rewrites each row: the refusal named
    only the first ('a'), and serving `a` one type led to a second refusal for `opts` (review19)"""
    from knowlyr_lab.hub.export import DatasetExporter, ExportError
    from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory

    def traj(t:int, kw:dict):
        steps = [Step(index=0, action=ToolCall(tool='move', params={'d': 'e'}), observation=Observation(content=f"m {t}"),
                      reward=1 / 3, metadata={'template_kwargs': kw})]
        return Trajectory(task=Task(id=f"t{t}", instruction=f"go {t}", domain='generic'), agent=AgentInfo(name='a', model='m'),
                          steps=steps, outcome=Outcome(success=True, terminated=True))
    kws = [{'a': 'x', 'opts': {'b': 1}}, {'a': 1, 'opts': {'c': 1}}] * 3
    with pytest.raises(ExportError) as e:
        DatasetExporter([traj(i, kw) for i, kw in enumerate(kws)], test_fraction=0).export('sft', tmp_path / 'o')
    assert "serve 'chat_template_kwargs.a', 'chat_template_kwargs.opts' one type" in str(e.value), str(e.value)

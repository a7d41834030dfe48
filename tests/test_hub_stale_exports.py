"""An export removes the files the last export into its folder wrote and it did not (the folder's manifest).

Before, a rerun wrote its files over the old ones and left the rest: `test.jsonl` after a rerun with
`test_fraction=0`, the Parquet shards of a larger earlier HF export, a verl export's `train.parquet` under an SFT
export, so the folder read as a dataset this export did not make. Now the exporter removes its own earlier outputs
(as `.knowlyr-export.json` lists them, unchanged since), never another file, and never a file the export reads."""
import pytest

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories


@pytest.fixture
def trajs(tmp_path):
    "20 tasks, two trajectories each (a DPO pair), in tmp_path/t.jsonl"
    ts = [Trajectory(task=Task(id=f't{i}', instruction=f'task {i}'), outcome=Outcome(success=bool(j), score=float(j)),
                     steps=[Step(index=0, thought='x', action=ToolCall(tool='submit', params={'a': j}))])
          for i in range(20) for j in (0, 1)]
    write_trajectories(ts, p := tmp_path/'t.jsonl')
    return p

def _names(d): return sorted(str(p.relative_to(d)) for p in d.rglob('*') if p.is_file())

def test_a_rerun_without_a_test_split_leaves_no_test_file(trajs, tmp_path):
    out = tmp_path/'ds'
    res = DatasetExporter(trajs, test_fraction=0.5).export('sft', out)
    assert set(res.paths) == {'train', 'test'}
    (out/'notes.txt').write_text('mine\n'); (out/'test.jsonl.bak').write_text('mine\n')
    res = DatasetExporter(trajs).export('sft', out)
    assert set(res.paths) == {'train'}
    assert _names(out) == ['.knowlyr-export.json', 'notes.txt', 'test.jsonl.bak', 'train.jsonl']   # other files stay

def test_another_formats_files_go_too(trajs, tmp_path):
    out = tmp_path/'ds'
    DatasetExporter(trajs, test_fraction=0.5).export('verl', out)
    assert _names(out) == ['.knowlyr-export.json', 'test.parquet', 'train.parquet']
    DatasetExporter(trajs).export('sft', out)
    assert _names(out) == ['.knowlyr-export.json', 'train.jsonl']

def test_an_hf_rerun_holds_only_its_shards_and_splits(trajs, tmp_path):
    out = tmp_path/'ds'
    DatasetExporter(trajs, test_fraction=0.5).export('hf', out, max_rows_per_shard=3)
    assert len(list((out/'data').glob('train-*.parquet'))) > 1 and (out/'hf'/'test').is_dir()
    DatasetExporter(trajs).export('hf', out)
    assert sorted(p.name for p in (out/'data').iterdir()) == ['train-00000-of-00001.parquet']
    assert not (out/'hf'/'test').exists() and not (out/'jsonl'/'test.jsonl').exists()
    import datasets
    assert list(datasets.load_from_disk(str(out/'hf'))) == ['train']

def test_an_input_under_an_export_name_is_never_removed(trajs, tmp_path):
    "Trajectories kept as <out>/test.jsonl: an export into <out> that writes no test split leaves them"
    (out := tmp_path/'ds').mkdir(); (out/'test.jsonl').write_bytes(trajs.read_bytes())
    res = DatasetExporter(out/'test.jsonl').export('sft', out)
    assert res.counts['train'] > 0 and (out/'test.jsonl').read_bytes() == trajs.read_bytes()

def test_files_no_export_wrote_stay(trajs, tmp_path):
    "A first version removed whatever bore an export's name: a user's own test.jsonl, a folder named test.parquet"
    import json

    from knowlyr_lab.trajectory_io import read_trajectories
    (out := tmp_path/'ds').mkdir(); (out/'test.jsonl').write_bytes(trajs.read_bytes())   # the user's own trajectories
    (out/'test.parquet').mkdir(); (out/'test.parquet'/'part-0.parquet').write_text('x')  # a Spark-style folder
    (out/'data').mkdir(); (out/'data'/'test-00000-of-00001.parquet').write_text('x')     # a cloned dataset's shard
    DatasetExporter(list(read_trajectories(out/'test.jsonl'))).export('sft', out)         # an input read as a list
    assert _names(out) == ['.knowlyr-export.json', 'data/test-00000-of-00001.parquet', 'test.jsonl',
                           'test.parquet/part-0.parquet', 'train.jsonl']
    assert json.loads((out/'.knowlyr-export.json').read_text()).keys() == {'train.jsonl'}

def test_a_file_changed_since_its_export_stays(trajs, tmp_path):
    out = tmp_path/'ds'
    DatasetExporter(trajs, test_fraction=0.5).export('sft', out)
    (out/'test.jsonl').write_text('{"edited": true}\n')                                   # the user kept and edited it
    DatasetExporter(trajs).export('sft', out)
    assert (out/'test.jsonl').read_text() == '{"edited": true}\n'

def test_an_hf_export_lists_only_the_files_it_wrote(trajs, tmp_path):
    "An HF export listed whole folders (jsonl/, hf/<split>/), a user's note in them too: the next export removed it"
    out = tmp_path/'ds'
    DatasetExporter(trajs).export('hf', out)
    (out/'jsonl'/'NOTES.md').write_text('mine\n'); (out/'hf'/'train'/'README.md').write_text('mine\n')
    DatasetExporter(trajs).export('hf', out)
    DatasetExporter(trajs).export('sft', out)
    assert (out/'jsonl'/'NOTES.md').exists() and (out/'hf'/'train'/'README.md').exists()
    assert not list((out/'data').glob('*.parquet')) and not (out/'hf'/'dataset_dict.json').exists()

def _two_arrow_shards(monkeypatch):
    "`save_to_disk` writes each split in two Arrow shards (as for a split over 500 MB)"
    import datasets
    save = datasets.DatasetDict.save_to_disk
    monkeypatch.setattr(datasets.DatasetDict, 'save_to_disk', lambda s, p, **kw: save(s, p, num_shards={k: 2 for k in s}))

def test_fewer_arrow_shards_leave_no_stale_shard(trajs, tmp_path, monkeypatch):
    "`save_to_disk` writes over a split's folder and removes nothing: the manifest lists each Arrow shard it wrote"
    import datasets
    out = tmp_path/'ds'
    with monkeypatch.context() as m:
        _two_arrow_shards(m); DatasetExporter(trajs).export('hf', out)
    assert sorted(p.name for p in (out/'hf'/'train').glob('*.arrow')) == [f'data-0000{i}-of-00002.arrow' for i in (0, 1)]
    DatasetExporter(trajs).export('hf', out)
    assert sorted(p.name for p in (out/'hf'/'train').glob('*.arrow')) == ['data-00000-of-00001.arrow']
    assert len(datasets.load_from_disk(str(out/'hf'))['train']) == 40

def test_a_folder_exported_before_the_manifest_names_its_stale_files_once(trajs, tmp_path, monkeypatch):
    "No manifest, no proof of who wrote a file: the export removes none, and warns once naming those that look stale"
    out = tmp_path/'ds'
    with monkeypatch.context() as m:
        _two_arrow_shards(m); DatasetExporter(trajs, test_fraction=0.5).export('hf', out, max_rows_per_shard=3)
    for f in out.rglob('.knowlyr-export.json'): f.unlink()                    # as an export before the manifest left it
    (out/'notes.txt').write_text('mine\n'); (out/'data'/'README.md').write_text('mine\n')
    before = _names(out)
    with pytest.warns(UserWarning, match='before exports listed their files') as w:
        DatasetExporter(trajs).export('hf', out)
    said = ' '.join(str(x.message) for x in w if 'before exports' in str(x.message))
    assert f"{out/'jsonl'} has no .knowlyr-export.json and holds 1 file(s) named as an export's" in said
    for stale in (': test.jsonl.', 'hf/test/state.json', 'hf/train/data-00001-of-00002.arrow',
                  'data/test-00000-of-0000', 'data/train-00001-of-0000'):
        assert stale in said
    for kept in ('notes.txt', 'README.md', 'train-00000-of-00001.parquet', 'hf/train/state.json'):
        assert kept not in said
    assert set(before) <= set(_names(out))                                     # nothing removed
    import warnings
    with warnings.catch_warnings():                          # once; its failures' rows (a warning of their own) aside
        warnings.simplefilter('error'); warnings.filterwarnings('ignore', '.*rows come from verified failures')
        DatasetExporter(trajs).export('hf', out)

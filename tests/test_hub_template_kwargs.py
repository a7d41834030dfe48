"""Exported rows carry the chat template variables their trajectories were served with (`chat_template_kwargs`, TRL's
per-row column), so a dataset exported from Qwen3 trajectories served with `{"enable_thinking": false}` trains on the
prompt the model saw. Before, the exporter dropped them: the rows trained under the template's default (thinking on)"""
import hashlib
import json
from pathlib import Path

import datasets
import pytest

from knowlyr_lab.hub.export import FORMATS, DatasetExporter
from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory

OFF = {'enable_thinking': False}
ON = {'enable_thinking': True}     # the Qwen3 and GLM-4.5 templates' value when the variable is not given


def _traj(task:int, k:int, kw=None, n:int=2, meta=None)->Trajectory:
    "Trajectory `k` of task `task`: `n` tool-call steps, every step served with `kw` (None: none recorded)"
    steps = [Step(index=i, thought=f"step {i} of {k}", action=ToolCall(tool='move', params={'direction': 'east'}),
                  observation=Observation(content=f"moved {i}"), reward=(k + i) / 10,
                  metadata={**(meta or {}), **({'template_kwargs': kw} if kw is not None else {})}) for i in range(n)]
    return Trajectory(task=Task(id=f"t{task}", instruction=f"Reach column {task}.", domain='maze', env_id='knowlyr/maze-easy'),
                      agent=AgentInfo(name='a', model='m'), steps=steps, outcome=Outcome(success=k % 2 == 0, terminated=True))


def _digest(d:Path)->str:
    "SHA-256 of every file an export wrote (Parquet files by their rows), by name"
    import pyarrow.parquet as pq
    h = hashlib.sha256()
    for p in sorted(d.rglob('*')):
        if p.suffix == '.jsonl' and p.name != 'quarantine.jsonl': h.update(p.name.encode() + p.read_bytes())
        elif p.suffix == '.parquet' and p.parent.name != 'data': h.update(p.name.encode() + json.dumps(pq.read_table(p).to_pylist(), sort_keys=True).encode())
    return h.hexdigest()[:16]


def test_rows_without_template_kwargs_are_byte_identical(tmp_path):
    """Trajectories served without template variables (none recorded, an empty `{}`, recorder step metadata) export in
    every format byte for byte as before rows carried them (digest taken on main at 246ccf6; grpo retaken at 51a1a07, whose
    advantages use the Bessel-corrected std: only the advantages column changed, by sqrt(3/4) for groups of 4)"""
    trajs = [_traj(t, k, kw={} if k == 3 else None, meta={'n_messages': 2, 'finish_reason': 'stop'} if t == 1 else None)
             for t in range(4) for k in range(4)]
    got = {f: _digest(DatasetExporter(trajs, test_fraction=0.25).export(f, tmp_path / f) and tmp_path / f)
           for f in FORMATS if f != 'hf'}
    assert got == {'sft': 'a542961cb9d826a4', 'sft-agent': 'da5f9d70a92a6e42', 'dpo': '7a48a6545401e1ed',
                   'dpo-seed': 'e1591e212c07343a', 'grpo': '79dc537a109f36a9', 'benchmark': 'eee85327eb675734',
                   'openai': 'fefcaede4985df75', 'verl': '733d097507ead3bf', 'skyrl': '88f21259903c4bc0'}


def _qwen3_tokenizer():
    "The project's tiny tokenizer around Qwen3's training template as the installed trl ships it"
    t = pytest.importorskip('trl.chat_template_utils', reason='the Qwen3 template is read from the installed trl')
    if not hasattr(t, 'qwen3_training_chat_template'): pytest.skip('the installed trl ships no qwen3_training template')
    from knowlyr_lab.trainer.tiny import train_tokenizer
    return train_tokenizer(['Reach column 1. moved east'], chat_template=t.qwen3_training_chat_template)


def _rows(res, cache:Path)->list[dict]:
    "Every row of an export's splits, as `datasets.load_dataset('json')` (TRL's loader) reads them"
    return [r for s in sorted(res.paths) for r in datasets.load_dataset('json', data_files=res.paths[s], split='train', cache_dir=str(cache))]


def test_sft_and_grpo_rows_train_under_the_variables_they_were_served_with(tmp_path):
    """Qwen3 trajectories served with thinking off export SFT and GRPO rows whose prompt, rendered by the trainer's
    `to_chat` and by TRL's own `maybe_apply_chat_template`, ends with the empty `<think>` block the model was served
    (on main the rows had no `chat_template_kwargs`: the prompt ended on the assistant header, thinking on)"""
    from trl.data_utils import maybe_apply_chat_template

    from knowlyr_lab.chat import render_chat
    from knowlyr_lab.trainer.data import to_chat
    tok, served = _qwen3_tokenizer(), '<|im_start|>assistant\n<think>\n\n</think>\n\n'
    ex = DatasetExporter([_traj(0, k, OFF) for k in range(4)])
    sft, grpo = ex.export('sft', tmp_path / 'sft'), ex.export('grpo', tmp_path / 'grpo')
    assert sft.total == 4 and grpo.total == 1
    for row in _rows(sft, tmp_path / 'c'):
        chat = to_chat(row, 'sft.jsonl')
        assert chat['template_kwargs'] == OFF
        assert render_chat(tok, chat['messages'][:1], None, True, template_kwargs=chat['template_kwargs']).endswith(served)
    [row] = _rows(grpo, tmp_path / 'c')
    assert row['chat_template_kwargs'] == OFF and len(row['completions']) == 4
    prompt = maybe_apply_chat_template({'prompt': row['prompt'], 'chat_template_kwargs': row['chat_template_kwargs']}, tok)['prompt']
    assert prompt.endswith(served), prompt
    assert not maybe_apply_chat_template({'prompt': row['prompt']}, tok)['prompt'].endswith(served)   # the default: thinking on


@pytest.mark.parametrize('fmt', ['sft', 'openai', 'sft-agent', 'hf'])
def test_an_export_mixing_served_variables_gives_every_row_the_key(tmp_path, fmt):
    """When some trajectories were served with template variables and others without, every row carries
    `chat_template_kwargs` with the same keys (the template's default, `template_defaults`, where none were recorded):
    `datasets` reads a key some rows lack as null, and TRL's `**example.get('chat_template_kwargs', {})` fails on a
    null column and renders a null key as defined. The file loads and TRL prepares every row"""
    from trl.data_utils import maybe_apply_chat_template
    tok = _qwen3_tokenizer()
    res = DatasetExporter([_traj(t, k, OFF if t == 0 else None) for t in range(2) for k in range(2)],
                          template_defaults=ON).export(fmt, tmp_path / fmt)
    if fmt == 'hf':
        rows = list(datasets.load_from_disk(res.paths['hf'])['train'])
        assert len(rows) == 4 and all(json.loads(line) for line in (tmp_path / 'hf' / 'jsonl' / 'train.jsonl').open())
    else: rows = _rows(res, tmp_path / 'c')
    assert sorted(json.dumps(r['chat_template_kwargs']) for r in rows) == ['{"enable_thinking": false}'] * 2 + ['{"enable_thinking": true}'] * 2
    if fmt in ('sft', 'hf'):
        for r in rows: maybe_apply_chat_template({'messages': r['messages'], 'chat_template_kwargs': r['chat_template_kwargs']}, tok)


def test_groups_and_pairs_never_mix_served_variables(tmp_path):
    """A task served both ways is two prompts: GRPO groups and DPO pairs built from the trajectories keep each set of
    variables apart, a given preference whose sides differ is quarantined with its reason, and a trajectory whose steps
    were served differently is quarantined naming the field (on main all of them became rows without the variables)"""
    trajs = [_traj(0, k, OFF if k < 2 else None) for k in range(4)]
    grpo = DatasetExporter(trajs, template_defaults=ON).export('grpo', tmp_path / 'grpo')
    rows = [json.loads(line) for line in open(grpo.paths['train'])]
    by = {json.dumps(r.get('chat_template_kwargs')): sorted(r['trajectory_ids']) for r in rows}
    assert by == {json.dumps(OFF): sorted(t.id for t in trajs[:2]), json.dumps(ON): sorted(t.id for t in trajs[2:])}
    dpo = DatasetExporter(trajs, template_defaults=ON).export('dpo', tmp_path / 'dpo')
    kw = {t.id: t.steps[0].metadata.get('template_kwargs') for t in trajs}
    pairs = [json.loads(line) for line in open(dpo.paths['train'])]
    assert pairs and all((kw[p['chosen_id']] or ON) == (kw[p['rejected_id']] or ON) == p['chat_template_kwargs'] for p in pairs)
    prefs = [{'chosen': trajs[0].id, 'rejected': trajs[2].id}, {'chosen': trajs[0].id, 'rejected': trajs[1].id}]
    given = DatasetExporter(trajs, preferences=prefs).export('dpo', tmp_path / 'given')
    assert given.total == 1 and given.quarantined == 1 and not given.skipped
    from knowlyr_lab.trajectory_io import write_trajectories
    mixed = _traj(1, 0, OFF).model_copy(update={'steps': [*_traj(1, 0, OFF).steps, *_traj(1, 1, None, n=1).steps]})
    write_trajectories(trajs + [mixed], tmp_path / 'in.jsonl')
    res = DatasetExporter(tmp_path / 'in.jsonl', template_defaults=ON).export('sft', tmp_path / 'sft')
    [q] = [json.loads(line) for line in open(tmp_path / 'sft' / 'quarantine.jsonl')]
    assert res.total == 4 and res.quarantined == 1 and (q['line'], q['field']) == (5, 'steps.metadata.template_kwargs')
    assert q['reason'].startswith(f"{tmp_path / 'in.jsonl'}:5: field 'steps.metadata.template_kwargs': trajectory ") and 'steps 0 and 2 were served with other chat template variables' in q['reason']


def test_a_given_pair_the_export_skips_is_skipped_whatever_its_sides_variables(tmp_path):
    """The filter and `min_margin` decide first: a given pair whose side fails the filter, or whose margin is too small,
    is skipped and counted by its reason as any such pair is; only a pair the export would use is refused for sides
    served with other variables (quarantined). On main (e8acd6c) `pref_record` refused the variables before the filter
    and the margin: the first two pairs were quarantined, the skip counts empty"""
    ok, off_fail, off_ok = _traj(0, 0), _traj(0, 1, OFF), _traj(0, 2, OFF)     # off_fail: not a success (k odd)
    prefs = [{'chosen': ok.model_dump(mode='json'), 'rejected': off_fail.model_dump(mode='json')},   # not_success
             {'chosen': ok.model_dump(mode='json'), 'rejected': off_ok.model_dump(mode='json'), 'margin': 0.1},
             {'chosen': ok.model_dump(mode='json'), 'rejected': off_ok.model_dump(mode='json'), 'margin': 2.0}]
    res = DatasetExporter([], preferences=prefs, success_only=True).export('dpo', tmp_path / 'o', min_margin=1.0)
    assert (res.total, res.skipped, res.quarantined) == (0, {'preference_not_success': 1, 'below_min_margin': 1}, 1), res
    [q] = [json.loads(x) for x in open(tmp_path / 'o' / 'quarantine.jsonl')]
    assert q['record'] == prefs[2] and q['reason'].startswith("preferences[2]: field 'chat_template_kwargs': chosen "), q
    # GRPO: the filter keeps its trajectories before they are grouped (by task and variables): no group mixes them
    grpo = DatasetExporter([_traj(0, k, OFF if k % 2 else None) for k in range(4)], success_only=True).export('grpo', tmp_path / 'g')
    assert (grpo.total, grpo.skipped, grpo.quarantined) == (1, {'not_success': 2}, 0), grpo


def _split_export(tmp_path, test_kw, fmt='sft', **kw):
    "An export of 10 tasks served with thinking off, but for tasks t3, t4, t6 (the test split at 0.3) served with `test_kw`"
    trajs = [_traj(t, k, test_kw if t in (3, 4, 6) else OFF) for t in range(10) for k in range(2)]
    res = DatasetExporter(trajs, test_fraction=0.3, **kw).export(fmt, tmp_path / fmt)
    assert sorted(res.paths) == ['test', 'train']
    raw = {s: [json.loads(line) for line in open(p)] for s, p in res.paths.items()}
    assert {r['task_id'] for r in raw['test']} == {'t3', 't4', 't6'}
    return res, raw


def test_a_struct_column_renders_as_served_by_trl_and_by_the_trainer(tmp_path):
    """Every row with the same keys: `datasets` loads the column as a struct of them, and both TRL's
    `maybe_apply_chat_template` and the trainer's `to_chat` render each row as the raw JSONL row says"""
    from trl.data_utils import maybe_apply_chat_template

    from knowlyr_lab.trainer.data import to_chat
    res, raw = _split_export(tmp_path, OFF)
    dd = datasets.load_dataset('json', data_files=dict(res.paths), cache_dir=str(tmp_path / 'c'))
    assert dd['train'].features['chat_template_kwargs'] == datasets.Features({'enable_thinking': datasets.Value('bool')})
    tok, served = _qwen3_tokenizer(), '<|im_start|>assistant\n<think>\n\n</think>\n\n'
    for s in ('train', 'test'):
        assert [r['chat_template_kwargs'] for r in dd[s]] == [r['chat_template_kwargs'] for r in raw[s]] == [OFF] * len(raw[s])
        for r in dd[s]:
            assert to_chat(r, s)['template_kwargs'] == OFF
            p = maybe_apply_chat_template({'prompt': r['messages'][:1], 'chat_template_kwargs': r['chat_template_kwargs']}, tok)
            assert p['prompt'].endswith(served)


def test_a_key_another_split_has_takes_the_templates_default(tmp_path):
    """Train rows served with thinking off, test rows with no variables: the export gives the test rows the default the
    user names (`template_defaults`), so `datasets` reads no null, and GLM-4.5's template (which reads
    `enable_thinking: None` as thinking off: `is defined and not enable_thinking`) renders each test row as it was
    served, by the trainer's loader and by TRL (on main the rows held `{}`, datasets filled in None, TRL rendered
    '/nothink' and an empty <think> block). Without the default the export refuses, naming the row and the key"""
    t = pytest.importorskip('trl.chat_template_utils')
    from trl.data_utils import maybe_apply_chat_template

    from knowlyr_lab.chat import render_chat
    from knowlyr_lab.trainer.data import load_records, to_chat
    from knowlyr_lab.trainer.tiny import train_tokenizer
    with pytest.raises(ValueError, match=r"split 'test' row 1 \(trajectory '.+'\): field 'chat_template_kwargs': no 'enable_thinking'"):
        _split_export(tmp_path / 'no', None)
    assert not list((tmp_path / 'no' / 'sft').glob('*.jsonl'))
    res, raw = _split_export(tmp_path, None, template_defaults=ON)
    assert [r['chat_template_kwargs'] for r in raw['test']] == [ON] * len(raw['test'])
    dd = datasets.load_dataset('json', data_files=dict(res.paths), cache_dir=str(tmp_path / 'c'))
    assert [r['chat_template_kwargs'] for r in dd['test']] == [ON] * len(raw['test'])
    tok = train_tokenizer(['Reach column 1. moved east'], chat_template=t.glm4moe_chat_template)
    for (where, row), want in zip(load_records(dd['test']), raw['test']):
        chat = to_chat(row, where)
        got = render_chat(tok, chat['messages'][:1], None, True, template_kwargs=chat.get('template_kwargs'))
        assert got == render_chat(tok, want['messages'][:1], None, True) == maybe_apply_chat_template(
            {'prompt': row['messages'][:1], 'chat_template_kwargs': row['chat_template_kwargs']}, tok)['prompt']
        assert '/nothink' not in got and '<think></think>' not in got
    for row in dd['train']: assert to_chat(row, 'train')['template_kwargs'] == OFF      # the set ones stay set

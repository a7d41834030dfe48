"""A secret one file of a run gives away is redacted from every other file's output, before and after it.

Until 2026-12-02 `convert` held a file's trajectories and quarantine lines to the file's end only: a key bare in
`a.jsonl` and assigned (`API_KEY=...`) in `b.jsonl` stayed in `a.jsonl`'s trajectory, and `c.jsonl`, read after, kept it
too (the values learned were forgotten at each file). The hub pipeline converts each file as its own resumable unit,
with the same leak. Checked through the API, the CLI's output and quarantine files, a `strict` run that stops at a
later file, the pipeline's units, merged trajectories, exports and quarantine (also of a run resumed after a stop),
and the names of the report's rows (a record type read from a role: `message:id-<key>`) in the CLI's summary and in
`validate`'s findings."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from knowlyr_lab.hub.pipeline import Pipeline
from knowlyr_lab.hub.pipeline_config import PipelineConfig
from knowlyr_lab.recorder.base import RecorderError
from knowlyr_lab.recorder.convert import convert, validate
from knowlyr_lab.recorder.report import ConversionReport

ROOT = Path(__file__).resolve().parent.parent
TOK = 'Qm7vX2pL9sK4wT8zR3nB'

def chat(q, a): return json.dumps({'messages': [{'role': 'user', 'content': q}, {'role': 'assistant', 'content': a}]}) + '\n'

@pytest.fixture
def run(tmp_path):
    d = tmp_path/'logs'; d.mkdir()
    (d/'a.jsonl').write_text(chat('check the header', f'it holds {TOK}'))                       # bare: no rule knows it
    (d/'b.jsonl').write_text(chat(f'export API_KEY={TOK}', 'ok'))                               # gives it away
    (d/'c.jsonl').write_text(chat('and the footer?', f'also {TOK}'))                            # bare, read after
    return d

def test_a_value_given_away_by_a_later_file_is_redacted_from_earlier_and_later_files(run):
    r = ConversionReport()
    out = list(convert(run, format='openai-chat', report=r))
    assert [Path(t.source.path).name for t in out] == ['a.jsonl', 'b.jsonl', 'c.jsonl']
    leaked = [Path(t.source.path).name for t in out if TOK in t.model_dump_json()]
    assert leaked == [], leaked                      # main: ['a.jsonl', 'c.jsonl']
    assert out[0].steps[-1].thought == 'it holds [REDACTED:secret_assignment]'
    assert all(t.metadata['redactions'].get('secret_assignment') for t in out)   # each counts what it lost

def test_the_cli_output_and_quarantine_hold_no_value_given_away_later(run, tmp_path):
    (run/'a2.jsonl').write_text(json.dumps({'messages': [{'role': 'user', 'content': f'id-{TOK}'}]})[:-1] + '\n')  # cut off
    out = tmp_path/'out.jsonl'
    res = subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.recorder', 'convert', str(run), '-f', 'openai-chat',
                          '-o', str(out), '--no-progress'], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 3, res.stderr           # one record quarantined, the rest written
    q = tmp_path/'out.quarantine.jsonl'
    assert len(out.read_text().splitlines()) == 3 and TOK not in out.read_text()
    assert q.exists() and 'id-[REDACTED' in q.read_text() and TOK not in q.read_text(), q.read_text()
    assert TOK not in res.stdout + res.stderr

def test_a_strict_run_hands_on_what_it_read_before_the_error_redacted(run):
    (run/'d.jsonl').write_text('{"messages": [\n')    # malformed: stops a strict run
    got = []
    with pytest.raises(RecorderError, match=r'd\.jsonl:1'):
        for t in convert(run, format='openai-chat', strict=True): got.append(t)
    assert [Path(t.source.path).name for t in got] == ['a.jsonl', 'b.jsonl', 'c.jsonl']
    assert not any(TOK in t.model_dump_json() for t in got)

def test_the_pipeline_redacts_a_value_a_later_file_gives_away_from_every_unit(run, tmp_path):
    (run/'a2.jsonl').write_text(json.dumps({'messages': [{'role': 'user', 'content': f'id-{TOK}'}]})[:-1] + '\n')  # cut off
    out = tmp_path/'pipe'
    res = Pipeline(PipelineConfig(str(out), export_formats=['sft', 'grpo'])).run_batch(run, format='openai-chat')
    assert res['trajectories'] == 3 and res['quarantined'] == 1, res
    files = [p for p in out.rglob('*') if p.is_file()]
    leaked = sorted(str(p.relative_to(out)) for p in files if TOK.encode() in p.read_bytes())
    assert leaked == [], leaked                      # main: the units of a.jsonl and c.jsonl, the merge, the exports, the quarantine
    assert any(b'id-[REDACTED' in p.read_bytes() for p in (out/'quarantine').glob('*.jsonl'))
    again = Pipeline(PipelineConfig(str(out), export_formats=['sft', 'grpo'])).run_batch(run, format='openai-chat')
    assert again['trajectories'] == 3                # resumed: nothing to redo

def test_a_resumed_run_knows_the_values_of_units_an_earlier_run_committed(tmp_path, monkeypatch):
    import knowlyr_lab.hub.pipeline as hp
    d, out = tmp_path/'logs', tmp_path/'pipe'; d.mkdir()
    (d/'b.jsonl').write_text(chat(f'export API_KEY={TOK}', 'ok'))                               # gives it away
    (d/'c.jsonl').write_text(chat('and the footer?', f'also {TOK}'))                            # bare, read after
    (d/'c2.jsonl').write_text(json.dumps({'messages': [{'role': 'user', 'content': f'id-{TOK}'}]})[:-1] + '\n')  # cut off
    real = hp.convert_log_file
    def killed_at_c(convert, report, f, *a):
        if f.endswith('c.jsonl'): raise KeyboardInterrupt     # the run stops once b.jsonl's unit is committed
        return real(convert, report, f, *a)
    monkeypatch.setattr(hp, 'convert_log_file', killed_at_c)
    cfg = PipelineConfig(str(out), export_formats=['sft'])
    with pytest.raises(KeyboardInterrupt): Pipeline(cfg).run_batch(d, format='openai-chat')
    monkeypatch.setattr(hp, 'convert_log_file', real)
    res = Pipeline(cfg).run_batch(d, format='openai-chat')                                   # resumed
    assert res['trajectories'] == 2 and res['quarantined'] == 1, res
    leaked = sorted(str(p.relative_to(out)) for p in out.rglob('*') if p.is_file() and TOK.encode() in p.read_bytes())
    assert leaked == [], leaked                      # 975df4bd: c.jsonl's unit and scores, the merge, store and export, c2's quarantine

@pytest.mark.parametrize('order', ['role first', 'key first'])
def test_row_names_and_findings_lose_a_value_given_away_in_another_file(tmp_path, order):
    d = tmp_path/'logs'; d.mkdir()
    role, key = ('a.jsonl', 'b.jsonl') if order == 'role first' else ('b.jsonl', 'a.jsonl')
    (d/role).write_text(json.dumps({'messages': [{'role': f'id-{TOK}', 'content': 'hi'}]}) + '\n')   # a row named by it
    (d/key).write_text(chat(f'export API_KEY={TOK}', 'ok'))
    found = validate(d, format='openai-chat')
    assert any('kept but not mapped' in f.message for f in found) and TOK not in str(found), found   # main: in both
    r = ConversionReport(); list(convert(d, format='openai-chat', report=r))
    assert 'message:id-[REDACTED:secret_assignment]' in r.counts and TOK not in str(r.counts), r.counts
    res = subprocess.run([sys.executable, '-m', 'knowlyr_lab.cli.recorder', 'convert', str(d), '-f', 'openai-chat',
                          '-o', str(tmp_path/'out.jsonl'), '--no-progress'], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0 and 'REDACTED' in res.stdout and TOK not in res.stdout + res.stderr, res.stdout

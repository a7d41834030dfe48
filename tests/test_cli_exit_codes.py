"One exit-code policy for every batch command: 0 all used, 3 done with records quarantined, 2 could not run"
import argparse
import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from knowlyr_lab.cli import hub, recorder, reward
from knowlyr_lab.cli import trainer as trainer_cli
from knowlyr_lab.cli_errors import EXIT_PARTIAL
from knowlyr_lab.trajectory import Outcome, Step, Task, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

CHAT = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'

def _run(main, *args, **kw):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main([str(a) for a in args], **kw)
    return rc, out.getvalue(), err.getvalue()

def _trajs(path:Path, bad_lines:int=0, n:int=2)->Path:
    ts = [Trajectory(id=f'tr-{i}', task=Task(id='t', instruction='do it'), outcome=Outcome(success=i == 0),
                     steps=[Step(index=0, thought='x', action={'tool': 'move', 'params': {}}, reward=0.5)]) for i in range(n)]
    write_trajectories(ts, path)
    with open(path, 'a') as f: f.write('{"steps": "oops"}\n' * bad_lines)
    return path

def test_recorder_convert_codes(tmp_path):
    good, mixed = tmp_path / 'good.jsonl', tmp_path / 'mixed.jsonl'
    good.write_text(CHAT); mixed.write_text(CHAT + '{"messages": [\n')
    con = lambda: {'console': Console(file=io.StringIO())}
    assert _run(recorder.main, 'convert', good, '-o', tmp_path / 'a.jsonl', '--no-progress', **con())[0] == 0
    rc, _, err = _run(recorder.main, 'convert', mixed, '-o', tmp_path / 'b.jsonl', '--no-progress', **con())
    q = tmp_path / 'b.quarantine.jsonl'        # kept by default, not only with --quarantine
    assert rc == EXIT_PARTIAL and (tmp_path / 'b.jsonl').exists() and json.loads(q.read_text())['line'] == 2
    assert err == f"warning: 1 records could not be used (reasons in {q})\n"
    _run(recorder.main, 'convert', mixed, '-o', tmp_path / 'b.jsonl', '--no-progress', **con())   # a rerun
    assert len(q.read_text().splitlines()) == 1                  # the quarantine made anew, as the output is
    rc, _, err = _run(recorder.main, 'convert', mixed, '-o', tmp_path / 'c.jsonl', '--strict', '--no-progress', **con())
    assert rc == 2 and err.count('\n') == 1 and 'stopped by --strict' in err and not (tmp_path / 'c.jsonl').exists()

def test_reward_score_and_preferences_codes(tmp_path):
    assert _run(reward.main, 'score', _trajs(tmp_path / 'ok.jsonl'), '-o', tmp_path / 's.jsonl', '--no-progress')[0] == 0
    src = _trajs(tmp_path / 'mixed.jsonl', bad_lines=1)
    for _ in range(2):    # a rerun writes the quarantine anew, not twice the records
        rc, out, err = _run(reward.main, 'score', src, '-o', tmp_path / 'm.jsonl', '--no-progress')
        q = tmp_path / 'm.jsonl.quarantine.jsonl'
        assert rc == EXIT_PARTIAL and json.loads(out)['quarantine'] == str(q) and str(q) in err
        assert len(q.read_text().splitlines()) == 1
    rc, out, _ = _run(reward.main, 'preferences', src, '-o', tmp_path / 'p.jsonl')
    assert rc == EXIT_PARTIAL and (tmp_path / 'p.jsonl.quarantine.jsonl').exists()
    rc, out, err = _run(reward.main, 'score', src, '--no-progress')      # no -o: its quarantine beside the input
    assert rc == EXIT_PARTIAL and (scored_q := src.with_name(src.name + '.quarantine.jsonl')).exists()
    assert _run(reward.main, 'leaderboard', src)[0] == EXIT_PARTIAL
    assert scored_q.exists() and src.with_name(src.name + '.leaderboard.quarantine.jsonl').exists()   # score's kept

def test_reward_calibrate_keeps_skipped_records(tmp_path):
    "calibrate exited 3 on a skipped record but wrote no quarantine file: the reasons were lost"
    from knowlyr_lab.reward.calibration import Annotation, append_annotation
    src = _trajs(tmp_path / 'mixed.jsonl', bad_lines=2, n=3)
    for i in range(3): append_annotation(tmp_path / 'ann.jsonl', Annotation(trajectory_id=f'tr-{i}', step=0, score=0.9 - i * 0.4))
    q = tmp_path / 'e.json.quarantine.jsonl'
    for _ in range(2):    # a rerun writes the quarantine anew
        rc, out, err = _run(reward.main, 'calibrate', src, tmp_path / 'ann.jsonl', '-o', tmp_path / 'e.json')
        assert rc == EXIT_PARTIAL and json.loads(out)['skipped_records'] == 2 and json.loads(out)['quarantine'] == str(q)
        assert str(q) in err and [json.loads(l)['line'] for l in q.read_text().splitlines()] == [4, 5]
    rc, out, _ = _run(reward.main, 'calibrate', _trajs(tmp_path / 'ok.jsonl', n=3), tmp_path / 'ann.jsonl', '-o', tmp_path / 'f.json')
    assert rc == 0 and json.loads(out)['quarantine'] is None and not (tmp_path / 'f.json.quarantine.jsonl').exists()

def test_hub_export_codes(tmp_path):
    ok = _trajs(tmp_path / 'ok.jsonl')
    assert _run(hub.main, 'export', '-f', 'sft', '-t', ok, '-o', tmp_path / 'a')[0] == 0
    rc, out, err = _run(hub.main, 'export', '-f', 'sft', '-t', _trajs(tmp_path / 'm.jsonl', 1), '-o', tmp_path / 'b')
    assert rc == EXIT_PARTIAL and json.loads(out)['quarantined'] == 1 and str(tmp_path / 'b' / 'quarantine.jsonl') in err
    p = tmp_path / 'prefs.jsonl'; p.write_text('{"chosen": "tr-0", "rejected": "tr-1", "margin": 1}\nnot json\n')
    rc, out, _ = _run(hub.main, 'export', '-f', 'dpo', '-t', ok, '-p', p, '-o', tmp_path / 'c')
    assert rc == EXIT_PARTIAL and json.loads(out)['total'] == 1      # before: the bad line stopped the export (2)

def test_hub_export_inline_preferences_without_trajectories(tmp_path):
    "An empty trajectory file with inline preferences, one line bad: exit 2 'none of the 1 trajectory records' and no summary"
    (tmp_path / 'empty.jsonl').write_text('')
    sides = [json.loads(l) for l in _trajs(tmp_path / 'two.jsonl').read_text().splitlines()]
    p = tmp_path / 'prefs.jsonl'; p.write_text(json.dumps({'chosen': sides[0], 'rejected': sides[1], 'margin': 1}) + '\n')
    assert _run(hub.main, 'export', '-f', 'dpo', '-t', tmp_path / 'empty.jsonl', '-p', p, '-o', tmp_path / 'a')[0] == 0
    with open(p, 'a') as f: f.write('not json\n')
    rc, out, err = _run(hub.main, 'export', '-f', 'dpo', '-t', tmp_path / 'empty.jsonl', '-p', p, '-o', tmp_path / 'b')
    assert rc == EXIT_PARTIAL and json.loads(out)['total'] == 1 and json.loads(out)['quarantined'] == 1, err
    assert len((tmp_path / 'b' / 'quarantine.jsonl').read_text().splitlines()) == 1
    p.write_text('not json\n')      # nothing usable at all: still 2
    assert _run(hub.main, 'export', '-f', 'dpo', '-t', tmp_path / 'empty.jsonl', '-p', p, '-o', tmp_path / 'c')[0] == 2

@dataclass
class _Cfg:
    lr:float=0.1
    @classmethod
    def from_dict(cls, d): return cls(**d)

class _Trainer:
    "A trainer that quarantined one record (the CLI's exit code only; no torch)"
    def __init__(self, cfg, train_data=None, eval_data=None, out=None): self.errors, self.out = [{'error': 'x'}], out
    def train(self): return {'loss': 0.5}
    def save_model(self): return self.out / 'model'
    accelerator = SimpleNamespace(wait_for_everyone=lambda: None, end_training=lambda: None)

def test_trainer_code(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(trainer_cli, 'trainer_classes',
                        lambda cmd: (_Cfg, lambda cfg, **kw: _Trainer(cfg, out=tmp_path, **kw)))
    a = argparse.Namespace(cmd='sft', config=None, train_data='x.jsonl', eval_data=None, lr=None)
    assert trainer_cli._run(a) == EXIT_PARTIAL
    assert f"reasons in {tmp_path / 'quarantine.jsonl'}" in capsys.readouterr().err

"""An export that writes no row says why in `res.note` (and `knowlyr-hub export` on stderr), counting and naming what
failed: the trajectories (left out by the filter, or unusable), the pairs `build_preferences` found none of, or the
preference records given (unusable, or left out). On main a DPO export whose preference records all failed said
'0 rows from 4 trajectories' (the records not named), put the records' skip reasons under the trajectories ('0 rows
from 4 trajectories: left out {'preference_unresolved': 1}') and counted unusable preference records as unreadable
trajectory records; a DPO export that found no pair said nothing of the trajectories the filter left out"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import knowlyr_lab
from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import AgentInfo, Observation, Outcome, Step, Task, ToolCall, Trajectory
from knowlyr_lab.trajectory_io import write_trajectories

PKG = str(Path(knowlyr_lab.__file__).resolve().parent.parent)     # the package under test, also in subprocesses


def _traj(task:int, k:int, reward:float)->Trajectory:
    "Trajectory `k` of task `task` (id 'tr-<task>-<k>'): one step, rewarded `reward`"
    steps = [Step(index=0, thought='t', action=ToolCall(tool='move', params={'direction': 'east'}),
                  observation=Observation(content='moved'), reward=reward)]
    return Trajectory(id=f"tr-{task}-{k}", task=Task(id=f"t{task}", instruction='Go east.', domain='maze', env_id='knowlyr/maze-easy'),
                      agent=AgentInfo(name='a', model='m'), steps=steps, outcome=Outcome(success=True, terminated=True))


TRAJS = [_traj(t, k, k / 10) for t in range(2) for k in range(2)]    # 2 tasks x 2 trajectories, scores apart


@pytest.fixture
def bad_prefs(tmp_path)->Path:
    "A preference file of two records that are no preference: a line that is not JSON, and a record without sides"
    p = tmp_path / 'prefs.jsonl'; p.write_text('not json\n{"margin": 1}\n'); return p


def test_trajectories_failed(tmp_path):
    "Trajectory formats: the note counts the trajectories read and why they were left out, or that none could be read"
    res = DatasetExporter(TRAJS, min_reward=5).export('sft', tmp_path / 'a')
    assert res.note == "0 rows from 4 trajectories: left out {'below_min_reward': 4}", res.note
    (tmp_path / 't.jsonl').write_text('garbage\n')
    res = DatasetExporter(tmp_path / 't.jsonl').export('sft', tmp_path / 'b')
    assert res.note == "0 rows: no trajectory could be read (1 unreadable records or files: see quarantine.jsonl)", res.note


def test_preference_records_failed_and_the_trajectories_did_not(tmp_path, bad_prefs):
    """Every given preference record unusable or left out: the note names the records and counts them, and says the
    trajectories were read with none left out (main: '0 rows from 4 trajectories', the records not named)"""
    res = DatasetExporter(TRAJS, preferences=bad_prefs).export('dpo', tmp_path / 'a')
    assert res.note == "0 rows from 2 preference records: 2 unusable (see quarantine.jsonl); 4 trajectories, none left out", res.note
    assert (res.preferences, res.preferences_quarantined, res.quarantined) == (2, 2, 2), res
    res = DatasetExporter(TRAJS, preferences=[{'chosen': 'nope', 'rejected': TRAJS[0].id},
                                              {'chosen': TRAJS[1].id, 'rejected': TRAJS[0].id}]).export('dpo', tmp_path / 'b', min_margin=5)
    assert res.note == ("0 rows from 2 preference records: left out {'preference_unresolved': 1, 'below_min_margin': 1}; "
                        "4 trajectories, none left out"), res.note
    res = DatasetExporter(TRAJS, preferences=[]).export('dpo', tmp_path / 'c')
    assert res.note == "0 rows from 0 preference records; 4 trajectories, none left out", res.note


def test_preference_records_and_trajectories_failed(tmp_path, bad_prefs):
    """Both failed: each is counted on its own side (main counted the 2 preference records among '3 unreadable records'
    of the trajectories, and put the records' skips under the trajectories)"""
    (tmp_path / 't.jsonl').write_text('garbage\n')
    res = DatasetExporter(tmp_path / 't.jsonl', preferences=bad_prefs).export('dpo', tmp_path / 'a')
    assert res.note == ("0 rows from 2 preference records: 2 unusable (see quarantine.jsonl); no trajectory could be read "
                        "(1 unreadable records or files: see quarantine.jsonl)"), res.note
    write_trajectories(TRAJS, tmp_path / 'mixed.jsonl')
    with open(tmp_path / 'mixed.jsonl', 'a') as f: f.write('{"steps": "oops"}\n')
    res = DatasetExporter(tmp_path / 'mixed.jsonl', preferences=[{'chosen': TRAJS[1].id, 'rejected': TRAJS[0].id}],
                          min_reward=1.01).export('dpo', tmp_path / 'b')
    assert res.note == ("0 rows from 1 preference records: left out {'preference_unresolved': 1}; 4 trajectories: left "
                        "out {'below_min_reward': 2}, 1 unusable records or files (see quarantine.jsonl)"), res.note


def test_pairs_failed(tmp_path):
    """DPO from trajectories: the note says why build_preferences found no pair, and, when the filter left trajectories
    out (or some were unusable), counts them too (main said only '0 pairs from 2 tasks: ...')"""
    ties = [_traj(t, k, 0.5) for t in range(2) for k in range(2)]
    res = DatasetExporter(ties).export('dpo', tmp_path / 'a')
    assert res.note == "0 pairs from 2 tasks: every task's samples tie (score difference < min_margin 0.05): all successes", res.note
    res = DatasetExporter(TRAJS, min_reward=1.01).export('dpo', tmp_path / 'b')
    assert res.note == ("0 pairs from 2 tasks: every task has a single trajectory (nothing to compare); "
                        "4 trajectories: left out {'below_min_reward': 2}"), res.note


def test_the_cli_says_what_failed(tmp_path, bad_prefs):
    "`knowlyr-hub export -f dpo -p ...` prints the note on stderr: the preference records, not the trajectories, failed"
    write_trajectories(TRAJS, tmp_path / 't.jsonl')
    r = subprocess.run([sys.executable, '-c', 'import sys; from knowlyr_lab.cli.hub import main; sys.exit(main())', 'export',
                        '-f', 'dpo', '-t', str(tmp_path / 't.jsonl'), '-p', str(bad_prefs), '-o', str(tmp_path / 'o')],
                       capture_output=True, text=True, timeout=300, cwd='/', env={**os.environ, 'PYTHONPATH': PKG})
    assert r.returncode == 3, r.stderr[-2000:]
    assert ("knowlyr-hub export: 0 rows from 2 preference records: 2 unusable (see quarantine.jsonl); 4 trajectories, "
            "none left out\n") in r.stderr, r.stderr


def test_preference_counts_appear_only_where_preference_records_were_given(tmp_path, bad_prefs):
    """to_dict (the CLI's JSON, a pipeline's export.json, the MCP answer) carried `preferences: null` and
    `preferences_quarantined: 0` in every export, trajectory formats too: now only where preference records were given"""
    for fmt in ('sft', 'dpo', 'grpo'):
        d = DatasetExporter(TRAJS).export(fmt, tmp_path / fmt).to_dict()
        assert 'preferences' not in d and 'preferences_quarantined' not in d, (fmt, sorted(d))
    d = DatasetExporter(TRAJS, preferences=bad_prefs).export('dpo', tmp_path / 'given').to_dict()
    assert (d['preferences'], d['preferences_quarantined']) == (2, 2), d


def test_merged_rollouts_are_said_beside_the_single_trajectory_clause():
    """The pipeline appended '(N rollouts were identical ... merged)' to the whole note, after the trajectories' clause
    a DPO note may end with, where it read as explaining that clause; it now follows the single-trajectory clause"""
    from knowlyr_lab.hub.export_filter import merged_note
    note = "0 pairs from 2 tasks: 2 of 2 tasks have a single trajectory; 6 trajectories: left out {'low_reward': 2}"
    said = merged_note(note, 4)
    assert said == ("0 pairs from 2 tasks: 2 of 2 tasks have a single trajectory (4 rollouts were identical to another "
                    "of the same content and were merged); 6 trajectories: left out {'low_reward': 2}"), said

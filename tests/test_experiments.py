"""Execute the experiment notebooks headless at CI size (nbclient), and check what they wrote.

Only experiment 1 runs in CI (`slow`, well under a minute): at CI size it checks the plumbing and the held-out
guard; the claim itself (SFT beats the untrained policy on >= 100 fingerprint-disjoint tasks) is made by the `small`
run stored in the notebook and by `make demo`. Experiments 2-5 take many minutes even at CI size and are marked `long`, which no CI run
enables: `KNOWLYR_TEST_FLAGS=long pytest tests/test_experiments.py` (experiment 5 also needs the real model's wheel: `real`)."""
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXP = ROOT / 'experiments'

def run_notebook(name, out_dir, timeout=900):
    nbformat = pytest.importorskip('nbformat'); nbclient = pytest.importorskip('nbclient')
    nb = nbformat.read(EXP / name, as_version=4)
    env = {'KNOWLYR_EXPERIMENT_SIZE': 'ci', 'KNOWLYR_EXPERIMENT_OUT': str(out_dir)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try: nbclient.NotebookClient(nb, timeout=timeout, kernel_name='python3', resources={'metadata': {'path': str(ROOT)}}).execute()
    finally:
        for k, v in old.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v
    return nb

def assert_provenance(res):
    "A results file names what it was made with: versions, commit, CPU, kernel level, threads"
    p = res['provenance']
    assert p['packages']['torch'] and p['packages']['transformers'] and p['cpu'] and p['cpu_capability'] and p['torch_threads'] >= 1
    assert 'commit' in p

@pytest.mark.slow
def test_01_sft_from_experts(tmp_path):
    out = tmp_path / 'exp01'
    nb = run_notebook('01_sft_from_experts.ipynb', out)
    res = json.loads((out / 'results.json').read_text())
    assert res['size'] == 'ci' and res['summary']['expert']['success_rate'] == 1.0
    report = (out / 'report.html').read_text()
    assert (out / 'report.html').stat().st_size > 10_000 and "id='conclusion'" in report and res['provenance']['packages']['torch'] in report
    assert res['conclusion'] in ''.join(o.get('text', '') for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', []))
    assert res['training']['steps'] == 160 and res['data']['sft_rows'] == res['data']['expert_trajectories']
    assert res['tasks']['shared'] == 0 and res['tasks']['eval_distinct'] == res['tasks']['eval'] == 40
    assert [r['step'] for r in res['learning_curve']] == [0, 80, 160] and (out / 'learning_curve.csv').exists()
    assert len(res['comparisons']) == 2

@pytest.mark.long
def test_04_agent_evol(tmp_path):
    out = tmp_path / 'exp04'
    run_notebook('04_agent_evol.ipynb', out)
    res = json.loads((out / 'results.json').read_text())
    P = res['params']
    assert [(r['seed'], r['round']) for r in res['rounds']] == [(s, r) for s in P['SEEDS'] for r in range(P['ROUNDS'] + 1)]
    assert all(0 <= r['success'] <= 1 for r in res['rounds']) and len(res['tests']) == len(P['SEEDS'])
    assert_provenance(res)

@pytest.mark.long
def test_02_dpo_from_preferences(tmp_path):
    out = tmp_path / 'exp02'
    run_notebook('02_dpo_from_preferences.ipynb', out)
    res = json.loads((out / 'results.json').read_text())
    assert res['pairs'] >= 0 and len(res['runs']) in (0, len(res['params']['SEEDS']))   # trained iff it had pairs
    assert all(0 <= r['p_value'] <= 1 for r in res['runs'])
    assert_provenance(res)

@pytest.mark.long
def test_03_online_grpo(tmp_path):
    out = tmp_path / 'exp03'
    run_notebook('03_online_grpo.ipynb', out)
    res = json.loads((out / 'results.json').read_text())
    assert len(res['runs']) == len(res['params']['SEEDS']) and all(0 <= r['before'] <= 1 and 0 <= r['after'] <= 1 for r in res['runs'])
    assert_provenance(res)

@pytest.mark.long
@pytest.mark.real
def test_05_real_model(tmp_path):
    out = tmp_path / 'exp05'
    run_notebook('05_real_model.ipynb', out, timeout=3600)
    res = json.loads((out / 'results.json').read_text())
    assert res['model'] == 'SmolLM2-135M-Instruct' and res['env'] == 'knowlyr/arith-medium'
    assert [r['seed'] for r in res['runs']] == res['params']['SEEDS'] and res['n_eval'] == res['params']['N_EVAL']
    for r in res['runs']:
        assert all(0 <= r[k] <= 1 for k in ('zero_shot', 'sft', 'grpo')) and all(0 <= r[k] <= 1 for k in ('sft_p', 'grpo_p'))
        assert len(r['grpo_reward_curve']) == res['params']['UPDATES']
    assert_provenance(res)

def test_readme_demo_spread_is_generated_from_its_results_file():
    "README's demo table and summary are what `spread_table`/`spread_summary` make of the committed results file, every row from a clean commit"
    import subprocess

    from knowlyr_lab.demo import spread_summary, spread_table
    spread = json.loads((EXP / 'demo_spread.results.json').read_text())
    rows, readme = spread['rows'], (ROOT / 'README.md').read_text()
    assert spread_table(rows) in readme and spread_summary(rows) in readme
    levels = {r['level'] for r in rows}
    assert {'default', 'avx2'} <= levels and len({r['seed'] for r in rows}) >= 3, levels
    for r in rows:
        assert_provenance(r)
        assert r['provenance']['dirty'] is False, r
        assert r['provenance']['ATEN_CPU_CAPABILITY'] == r['level']
    git = lambda *a: subprocess.run(['git', *a], cwd=ROOT, capture_output=True, text=True)
    if git('rev-parse', '--is-shallow-repository').stdout.strip() == 'false':   # a shallow clone may lack the commits
        for c in {r['provenance']['commit'] for r in rows}: assert git('cat-file', '-t', c).stdout.strip() == 'commit', c

"""Execute the experiment notebooks headless at CI size (nbclient), and check what they wrote.

Only experiment 1 runs in CI (`slow`, well under a minute): at CI size it checks the plumbing and the held-out
guard; the claim itself (SFT beats the untrained policy on >= 100 fingerprint-disjoint tasks) is made by the `small`
run stored in the notebook and by `make demo`. Experiments 2-5 take many minutes even at CI size and are marked `long`, which no CI run
enables: `KNOWLYR_TEST_FLAGS=long pytest tests/test_experiments.py` (experiment 5 also needs the real model's wheel: `real`)."""
import json
import os
import subprocess
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
    nb = run_notebook('04_agent_evol.ipynb', out)
    res = json.loads((out / 'results.json').read_text())
    P = res['params']; W, I = P['WARM_SEEDS'], P['ITERATIONS']
    assert res['size'] == 'ci' and len(W) >= 2
    # independent warm starts, each a BC checkpoint chosen on validation tasks, with its test success recorded
    assert [w['seed'] for w in res['warm_starts']] == W
    for w in res['warm_starts']:
        assert w['step'] == w['curve'][-1]['step'] and w['reached_band'] == (w['validation'] >= P['BAND'])
        assert all(c['validation'] < P['BAND'] for c in w['curve'][:-1])          # the first checkpoint in the band, not a later one
        assert 0 <= w['validation'] <= 1 and 0 <= w['held_out'] <= 1
    # both arms, every warm start, every iteration (0: the warm start), with the same data budget
    rows = {(r['arm'], r['warm_start'], r['iteration']): r for r in res['iterations']}
    assert set(rows) == {(a, w, i) for a in ('agentevol', 'control') for w in W for i in range(I + 1)}
    for w in W:
        assert rows['agentevol', w, 0]['held_out'] == rows['control', w, 0]['held_out'] == res['warm_starts'][W.index(w)]['held_out']
        for i in range(1, I + 1):
            e, c = rows['agentevol', w, i], rows['control', w, i]
            assert e['samples'] == P['N_EXPLORE'] * P['K'] and e['kept'] == e['tasks_solved'] <= min(e['successes'], P['N_EXPLORE'])  # one success per task
            assert c['kept'] == e['kept'] == c['samples'] and c['successes'] <= c['samples']    # the control: as many rows, chosen without the verifier
            assert all(0 <= r['held_out'] <= 1 for r in (e, c))
    assert any(rows['agentevol', w, i]['kept'] > 0 for w in W for i in range(1, I + 1))      # at ci a noisy expert explores: rows to choose from
    assert [b['warm_start'] for b in res['bc_only']] == W
    # the comparisons: crossed bootstrap over warm starts x tasks, per-warm-start exact McNemar with Holm-adjusted p
    assert set(res['comparisons']) >= {'agentevol vs control', 'agentevol vs warm start'}
    for c in res['comparisons'].values():
        assert c['n_runs'] == len(W) and c['n_tasks'] == P['N_EVAL'] and c['ci'][0] <= c['ci'][1] and 0 <= c['p_bootstrap'] <= 1
        assert c['p_adjustment'].startswith('holm') and [r['run'] for r in c['runs']] == list(range(len(W)))
        assert all(r['test'] == 'mcnemar_exact' and 0 <= r['p'] <= r['p_holm'] <= 1 for r in c['runs'])
    assert 'Holm-adjusted' in res['conclusion'] and 'trend' not in res and 'crossed-bootstrap' in res['conclusion']
    assert res['held_out_check']['test']['shared'] == 0 and res['held_out_check']['test']['n_eval'] == P['N_EVAL']
    assert res['held_out_check']['validation']['shared'] == 0
    assert res['conclusion'] in ''.join(o.get('text', '') for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', []))
    assert_provenance(res)

def assert_warm_starts(res):
    "Independent warm starts, each the first BC checkpoint in the validation band (`demo.bc_warm_start`), its test success recorded"
    P = res['params']
    assert [w['seed'] for w in res['warm_starts']] == P['WARM_SEEDS'] and len(P['WARM_SEEDS']) >= 2
    for w in res['warm_starts']:
        assert w['step'] == w['curve'][-1]['step'] and w['reached_band'] == (w['validation'] >= P['BAND'])
        assert all(c['validation'] < P['BAND'] for c in w['curve'][:-1])          # the first checkpoint in the band, not a later one
        assert [c['step'] for c in w['curve']] == [P['CKPT_EVERY'] * (i + 1) for i in range(len(w['curve']))] and w['step'] <= w['of_steps']
        assert 0 <= w['validation'] <= 1 and 0 <= w['held_out'] <= 1

def assert_comparisons(res, keys):
    "Crossed bootstrap over warm starts x tasks; per-warm-start exact McNemar with Holm-adjusted p, labelled as adjusted"
    P = res['params']
    assert set(res['comparisons']) == set(keys)
    for c in res['comparisons'].values():
        assert c['n_runs'] == len(P['WARM_SEEDS']) and c['n_tasks'] == P['N_EVAL'] and c['ci'][0] <= c['ci'][1] and 0 <= c['p_bootstrap'] <= 1
        assert c['p_adjustment'].startswith('holm') and [r['run'] for r in c['runs']] == list(range(len(P['WARM_SEEDS'])))
        assert all(r['test'] == 'mcnemar_exact' and 0 <= r['p'] <= r['p_holm'] <= 1 for r in c['runs'])
    assert 'Holm-adjusted' in res['conclusion'] and 'crossed-bootstrap' in res['conclusion'] and 'gain_ci' not in res
    assert all(h['shared'] == 0 for h in res['held_out_check'].values()) and res['held_out_check']['test']['n_eval'] == P['N_EVAL']
    assert {'conclusion', 'provenance', 'comparisons', 'params', 'timings'} <= set(res) and res['timings']['total'] > 0

@pytest.mark.long
def test_02_dpo_from_preferences(tmp_path):
    out = tmp_path / 'exp02'
    nb = run_notebook('02_dpo_from_preferences.ipynb', out)
    res = json.loads((out / 'results.json').read_text())
    P, W = res['params'], res['params']['WARM_SEEDS']
    assert res['size'] == 'ci'
    assert_warm_starts(res)
    # pairs per warm start; the control's training pairs are the same pairs, some swapped
    assert [p['warm_start'] for p in res['pairs']] == W and all(p['train_pairs'] > 0 and p['val_pairs'] > 0 for p in res['pairs'])
    assert all(0 <= p['shuffled_swapped'] <= p['train_pairs'] for p in res['pairs']) and any(p['shuffled_swapped'] > 0 for p in res['pairs'])
    # every setting from every warm start, scored on the validation tasks; the chosen one has the best mean validation success
    assert sorted((s['lr'], s['rpo_alpha'], s['warm_start']) for s in res['sweep']) == sorted(
        (lr, rpo, w) for lr in P['LRS'] for rpo in P['RPO'] for w in W)
    means = {(m['lr'], m['rpo_alpha']): m['val_success'] for m in res['sweep_means']}
    assert all(0 <= s['val_success'] <= 1 for s in res['sweep']) and len(means) == len(P['LRS']) * len(P['RPO'])
    assert means[res['chosen']['lr'], res['chosen']['rpo_alpha']] == max(means.values())
    assert res['held_out_check']['validation']['shared'] == 0
    runs = {(r['arm'], r['warm_start']): r for r in res['runs']}
    assert set(runs) == {(a, w) for a in ('dpo', 'shuffled') for w in W}
    for w in W: assert runs['dpo', w]['steps'] == runs['shuffled', w]['steps'] > 0       # the same number of updates
    assert all(0 <= r['held_out'] <= 1 and 0 <= r['val_pair_accuracy'] <= 1 for r in res['runs'])
    assert_comparisons(res, ['dpo vs shuffled', 'dpo vs warm start', 'shuffled vs warm start'])
    assert res['held_out_check']['preference']['shared'] == 0
    assert res['conclusion'] in ''.join(o.get('text', '') for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', []))
    assert_provenance(res)

@pytest.mark.long
def test_03_online_grpo(tmp_path):
    out = tmp_path / 'exp03'
    nb = run_notebook('03_online_grpo.ipynb', out)
    res = json.loads((out / 'results.json').read_text())
    P, W = res['params'], res['params']['WARM_SEEDS']
    assert res['size'] == 'ci'
    assert_warm_starts(res)
    runs = {(r['arm'], r['warm_start']): r for r in res['runs']}
    assert set(runs) == {(a, w) for a in ('grpo', 'shuffled') for w in W}
    for w in W:
        g, s = runs['grpo', w], runs['shuffled', w]
        assert g['updates'] == s['updates'] == P['UPDATES'] and g['before'] == res['warm_starts'][W.index(w)]['held_out']   # the same updates, from the same warm start
        assert all(0 <= r[k] <= 1 for r in (g, s) for k in ('before', 'after'))
    assert len(res['curves']) == 2 * len(W) * P['UPDATES']
    assert_comparisons(res, ['grpo vs shuffled', 'grpo vs warm start', 'shuffled vs warm start'])
    assert res['conclusion'] in ''.join(o.get('text', '') for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', []))
    assert_provenance(res)

@pytest.mark.long
@pytest.mark.real
def test_05_real_model(tmp_path):
    out = tmp_path / 'exp05'
    run_notebook('05_real_model.ipynb', out, timeout=3600)
    res = json.loads((out / 'results.json').read_text())
    P, W = res['params'], res['params']['WARM_SEEDS']
    assert res['model'] == 'SmolLM2-135M-Instruct' and res['env_id'] == 'knowlyr/arith-medium' and 'Q4_1' in res['model_file']
    assert [w['seed'] for w in res['warm_starts']] == W
    for w in res['warm_starts']:
        assert 0 <= w['sampled'] <= 1 and w['curve'][-1]['step'] == w['step'] and w['step'] <= P['MAX_SFT']
    runs = {(r['arm'], r['warm_start']): r for r in res['runs']}
    for w in W:
        g, s = runs['grpo', w], runs['shuffled', w]
        assert g['before'] == s['before'] and all(0 <= r[k] <= 1 for r in (g, s) for k in ('before', 'after'))   # one warm start, greedy
    assert len(res['curves']) == 2 * len(W) * P['UPDATES']
    assert_comparisons(res, ['grpo vs shuffled', 'grpo vs warm start', 'shuffled vs warm start'])
    assert_provenance(res)
    assert not any(r['resumed'] for r in res['runs'])
    run_notebook('05_real_model.ipynb', out, timeout=3600)          # a rerun resumes every stored part and concludes the same
    again = json.loads((out / 'results.json').read_text())
    assert all(r['resumed'] for r in again['runs']) and again['comparisons'] == res['comparisons'] and again['warm_starts'] == res['warm_starts']

def test_readme_demo_spread_is_generated_from_its_results_file():
    "README's demo table and summary are what `spread_table`/`spread_summary` make of the committed results file, every row from committed code"
    import subprocess

    from knowlyr_lab.demo import spread_summary, spread_table
    from knowlyr_lab.provenance import results_only
    spread = json.loads((EXP / 'demo_spread.results.json').read_text())
    rows, readme = spread['rows'], (ROOT / 'README.md').read_text()
    assert spread_table(rows) in readme and spread_summary(rows) in readme
    levels = {r['level'] for r in rows}
    assert {'default', 'avx2'} <= levels and len({r['seed'] for r in rows}) >= 3, levels
    for r in rows:
        assert_provenance(r)
        assert results_only(r['provenance']), r      # a clean checkout, or one that differed only in results files
    # the run on tasks and a seed the recipe's choice never saw: rendered from its file, tasks disjoint from the recipe's
    fresh = json.loads((EXP / 'demo_fresh.results.json').read_text())['rows']
    assert spread_table(fresh) in readme and spread_summary(fresh) in readme
    recipe_seeds = {r['seed'] for r in rows} | {1, 3, 4}            # the spread's and the recipe search's seeds
    for r in fresh:
        assert r['shared_with_recipe_eval'] == 0 and r['eval_seed_offset'] != 10_000_000 and r['seed'] not in recipe_seeds, r
        assert_provenance(r); assert results_only(r['provenance']), r
        assert r['provenance']['ATEN_CPU_CAPABILITY'] == r['level']
    git = lambda *a: subprocess.run(['git', *a], cwd=ROOT, capture_output=True, text=True)
    if git('rev-parse', '--is-shallow-repository').stdout.strip() == 'false':   # a shallow clone may lack the commits
        for c in {r['provenance']['commit'] for r in rows}: assert git('cat-file', '-t', c).stdout.strip() == 'commit', c

def _git(*a): return subprocess.run(['git', *a], cwd=ROOT, capture_output=True, text=True)

def _committed(path:str)->bool: return _git('ls-files', '--error-unmatch', path).returncode == 0

def test_readme_experiment_lines_are_generated_from_committed_results_files():
    "README's line for each experiment is what `experiment_statement` makes of its committed results file, or says it has not been run"
    from knowlyr_lab.eval.results import EXPERIMENTS, experiment_statements, load_results, rerun_names, results_path
    from knowlyr_lab.provenance import results_only
    readme, shallow = (ROOT / 'README.md').read_text(), _git('rev-parse', '--is-shallow-repository').stdout.strip() != 'false'
    for name in EXPERIMENTS:
        assert experiment_statements([name], ROOT) in readme, f"README's line for {name} is not what its results files give: python tools/render_readme.py --results"
        for run in [name] + rerun_names(name, ROOT):   # the main run and its reruns at other kernel levels or on other CPUs
            res, path = load_results(run, ROOT), results_path(run)
            if res is None: continue
            assert _committed(path), f"{path} is quoted by README but not committed: git add it"
            assert res['size'] != 'ci', f"{path}: a CI-size run is not a result to quote"
            assert_provenance(res)
            assert results_only(res['provenance']), f"{path}: made from uncommitted code ({res['provenance'].get('modified')})"
            if not shallow: assert _git('cat-file', '-t', res['provenance']['commit']).stdout.strip() == 'commit', path   # a shallow clone may lack it

def test_readme_gpu_sentence_is_generated_from_its_results_file():
    "README's GPU sentence is what `gpu_statement` makes of the committed benchmark file, and names where it was made, flaws included"
    from knowlyr_lab.eval.results import gpu_statement, made_with
    path = 'experiments/benchmarks/gpu_real_model.results.json'
    res = json.loads((ROOT / path).read_text())
    assert _committed(path) and gpu_statement(res) in (ROOT / 'README.md').read_text(), "python tools/render_readme.py --results"
    assert made_with(res['provenance']) in gpu_statement(res)

def test_readme_prose_quotes_no_result():
    "A result reaches README only through a generated cell of the index: its markdown quotes no rate, ratio, fraction, p-value or speed"
    import re

    import nbformat
    number = re.compile(r'\d+(?:\.\d+)?%|\b\d+(?:\.\d+)?x\b|\b\d+/\d+\b|\bp = \d|\d[\d,.]* ?(?:tokens/s|s/step|s a step|minutes|GiB)')
    nb = nbformat.read(ROOT / 'nbs' / 'index.ipynb', as_version=4)
    threshold = re.compile(r'(?:>=|at or above) \d+%')   # a threshold the text defines ("first >= 90% at") is not a result
    hits = [(c.get('id'), m) for c in nb.cells if c.cell_type == 'markdown' for m in number.findall(threshold.sub('', c.source))]
    assert not hits, f"results quoted by hand in nbs/index.ipynb (cell id, text): {hits}; render them from a results file (knowlyr_lab.eval.results) or drop them"

def test_demo_page_tables_are_generated_from_their_results_files():
    "The demo page's stored spread and recipe-search tables (the docs site shows stored outputs) are what the committed files give"
    import nbformat

    from knowlyr_lab.demo import recipe_search_table, spread_summary, spread_table
    nb = nbformat.read(ROOT / 'nbs' / '90_demo.ipynb', as_version=4)
    def stored(call): return next(''.join(o.get('text', '') for o in c.outputs) for c in nb.cells if c.cell_type == 'code' and call in c.source)
    rows = json.loads((EXP / 'demo_spread.results.json').read_text())['rows']
    search = [json.loads(l) for l in (EXP / 'demo_recipe_search.results.jsonl').read_text().splitlines() if l.strip()]
    assert stored('print(spread_table(') == f"{spread_summary(rows)}\n{spread_table(rows)}\n", 'run the cell again and commit its output'
    assert stored('print(recipe_search_table(') == recipe_search_table(search) + '\n', 'run the cell again and commit its output'
    assert all(_committed(f'experiments/{f}') for f in ('demo_spread.results.json', 'demo_recipe_search.results.jsonl'))

def test_gpu_benchmark_notes_quote_their_results_files():
    "gpu_real_model.results.md's figures are its JSON files' (rounded as printed), and no sentence about an MFU aim reads as met"
    import re
    B = EXP / 'benchmarks'
    md = (B / 'gpu_real_model.results.md').read_text()
    res = {k: json.loads((B / f'gpu_real_model.{k}results.json').read_text()) for k in ('', 'b64.', 'loop.', 'sft_b64.')}
    for r in res.values():
        full, lora = r['sft_full'], r['sft_lora']
        for quoted in (f"{full['tokens_per_s']:,.0f}", f"{lora['tokens_per_s']:,.0f}", f"{full['mfu']:.1%}", f"{lora['mfu']:.1%}"):
            assert quoted in md, (r['started'], quoted)
    g = res['']['grpo']
    grpo = (f"**{g['generated_tokens_per_s']:,.0f} generated tokens/s, {g['episodes_per_s']:.1f} episodes/s** ({g['episodes']} episodes, "
            f"{g['generated_tokens']:,} tokens in {g['generate_seconds']:.1f} s of\n  `generate`; {g['update_seconds']:.1f} s in the {g['updates']} updates)")
    assert grpo in md, grpo
    aims = [s for s in re.split(r'(?<=[.])\s', ' '.join(md.split())) if 'MFU' in s and re.search(r'\b(?:target|aim|goal)\b', s)]
    assert aims and all('not met' in s for s in aims), [s for s in aims if 'not met' not in s]

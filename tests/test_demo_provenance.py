"The demo report's provenance line words the commit as the results pages do (one function: eval.results.made_with)"
from knowlyr_lab.demo import _made_with

PROV = {'commit': 'abcdef1234', 'modified': ['nbs/90_demo.ipynb'], 'cpu': 'x86_64', 'cpu_capability': 'AVX2', 'torch_threads': 2,
        'python': '3.11.7', 'seed': 7, 'packages': {'knowlyr-lab': '0.1.0', 'torch': '2.5.1', 'transformers': '4.46.0'}}


def test_a_modified_checkout_is_worded_as_on_the_results_pages():
    "The demo said 'at abcdef1234 (modified)' where README and the results pages say the code that ran is in no commit"
    line = _made_with({**PROV, 'dirty': True})
    assert line.startswith('commit abcdef1 with uncommitted changes, so no commit holds the code that ran; x86_64, torch CPU kernels AVX2, 2 threads')
    assert '(modified)' not in line and line.endswith('knowlyr-lab 0.1.0, torch 2.5.1, transformers 4.46.0, Python 3.11.7; seed 7')
    assert _made_with({**PROV, 'dirty': False}).startswith('commit abcdef1; x86_64')


def test_a_run_whose_checkout_git_could_not_read_is_not_called_modified():
    "made_at said 'with uncommitted changes, so no commit holds the code that ran' when git could not say (dirty None)"
    from knowlyr_lab.eval.results import made_at
    assert made_at({**PROV, 'dirty': None}) == 'commit abcdef1 (git could not say whether it was modified)'
    assert _made_with({**PROV, 'dirty': None}).startswith('commit abcdef1 (git could not say whether it was modified); x86_64')

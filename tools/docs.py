"""The docs build: nbdev's notebook processing, then (with --render) Quarto.

    python tools/docs.py            # process notebooks into _proc/ (what CI checks: the build gets past its Python stage)
    python tools/docs.py --render   # the whole site into _docs/ (needs Quarto; the docs workflow installs it)

Figures: the notebooks set no plotly renderer (JupyterLab's plotly extension and exported HTML draw offline); only the
docs site loads plotly.js from a CDN, so its pages stay small. That is decided here, for the build, and nowhere else.
"""
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault('PLOTLY_RENDERER', 'notebook_connected')   # read by plotly.io at import, in every worker
import nbdev.quarto as quarto

ROOT = Path(__file__).resolve().parent.parent

def _with_experiments(proc):
    "nbdev's processing, then the experiment notebooks (kept outside nbs/, with their stored outputs) copied in for Quarto"
    def run(*a, **kw):
        cache = proc(*a, **kw)
        dest = Path(cache) / 'experiments'
        dest.mkdir(parents=True, exist_ok=True)
        for nb in sorted((ROOT / 'experiments').glob('*.ipynb')): shutil.copy2(nb, dest / nb.name)
        return cache
    return run

def main(argv=sys.argv[1:]):
    assert hasattr(quarto, 'proc_nbs'), "nbdev changed: check where the docs build processes notebooks before wrapping it"
    quarto.proc_nbs = _with_experiments(quarto.proc_nbs)
    if '--render' in argv: return quarto.nbdev_docs.__wrapped__()
    # nbdev-proc-nbs first makes sure Quarto is installed and otherwise runs `sudo dpkg -i` on a download; processing
    # does not use Quarto, so that check is switched off here
    assert hasattr(quarto, '_ensure_quarto'), "nbdev changed: check how nbdev-proc-nbs installs Quarto before patching it"
    quarto._ensure_quarto = lambda: None
    quarto.nbdev_proc_nbs.__wrapped__()

if __name__ == '__main__': main()

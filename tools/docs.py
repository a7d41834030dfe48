"""The docs build: nbdev's notebook processing, then (with --render) Quarto.

    python tools/docs.py            # process notebooks into _proc/ (what CI checks: the build gets past its Python stage)
    python tools/docs.py --render   # the whole site into _docs/ (needs Quarto; the docs workflow installs it)

Figures: the notebooks set no plotly renderer (JupyterLab's plotly extension and exported HTML draw offline); only the
docs site loads plotly.js from a CDN, so its pages stay small. That is decided here, for the build, and nowhere else.
"""
import os
import sys

os.environ.setdefault('PLOTLY_RENDERER', 'notebook_connected')   # read by plotly.io at import, in every worker
import nbdev.quarto as quarto


def main(argv=sys.argv[1:]):
    if '--render' in argv: return quarto.nbdev_docs.__wrapped__()
    # nbdev-proc-nbs first makes sure Quarto is installed and otherwise runs `sudo dpkg -i` on a download; processing
    # does not use Quarto, so that check is switched off here
    assert hasattr(quarto, '_ensure_quarto'), "nbdev changed: check how nbdev-proc-nbs installs Quarto before patching it"
    quarto._ensure_quarto = lambda: None
    quarto.nbdev_proc_nbs.__wrapped__()

if __name__ == '__main__': main()

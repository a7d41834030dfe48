#!/usr/bin/env python
"""Round-trip notebooks through jupytext percent scripts for editing outside Jupyter.

    python tools/nb.py to-py nbs/00ab_core.ipynb /tmp/00ab_core.py   # edit the script...
    python tools/nb.py to-nb /tmp/00ab_core.py nbs/00ab_core.ipynb    # ...and write it back (then nbdev-clean)
"""
import sys

import jupytext
import nbformat


def to_nb(src, dst):
    nb = jupytext.read(src, fmt='py:percent')
    nb.metadata = {'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}}
    for c in nb.cells:
        c.metadata = {}
        if c.cell_type == 'code': c.outputs, c.execution_count = [], None
    nbformat.write(nb, dst)

def to_py(src, dst): jupytext.write(nbformat.read(src, as_version=4), dst, fmt='py:percent')

if __name__ == '__main__':
    cmd, src, dst = sys.argv[1:4]
    {'to-nb': to_nb, 'to-py': to_py}[cmd](src, dst)

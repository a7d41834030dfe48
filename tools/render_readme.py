"""Render README.md from nbs/index.ipynb without Quarto (CI checks the two agree).

Markdown cells are copied; visible code cells become ```python blocks followed by their text output.
Cells marked `#| hide` are left out and nbdev directives are stripped.

`--results` first recomputes the stored outputs of the index's generated results cells (`#| echo: false` cells that
return `Markdown(...)`: the demo spread, the experiments' lines, the GPU sentence) from the results files on disk, in
this process, without re-running the rest of the page; then renders. Use it when a results file arrives or changes:

    python tools/render_readme.py --results && nbdev-clean --fname nbs/index.ipynb
"""
import ast
import os
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent

def _directives(c): return [l.replace(' ', '') for l in c.source.splitlines() if l.startswith('#|')]

def _results_cell(c)->bool:
    "A generated results cell: code, `#| echo: false`, its last line a `Markdown(...)` expression"
    lines = [l for l in c.source.splitlines() if l.strip()]
    return c.cell_type == 'code' and '#|echo:false' in _directives(c) and bool(lines) and lines[-1].startswith('Markdown(')

def refresh_results(nb_path=ROOT/'nbs'/'index.ipynb')->list[str]:
    "Recompute the outputs of the index's results cells from the files on disk; returns the ids of the cells refreshed"
    nb, ns, done, cwd = nbformat.read(nb_path, as_version=4), {}, [], os.getcwd()
    os.chdir(Path(nb_path).parent)   # the cells read their files relative to nbs/, as the notebook does
    try:
        for c in nb.cells:
            if c.cell_type != 'code': continue
            code = '\n'.join(l for l in c.source.splitlines() if not l.startswith('#|'))
            tree = ast.parse(code)
            if '#|hide' in _directives(c) and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body):
                exec(compile(tree, f'<cell {c.get("id")}>', 'exec'), ns)   # the page's import cells
            elif _results_cell(c):
                *body, last = tree.body
                exec(compile(ast.Module(body, []), f'<cell {c.get("id")}>', 'exec'), ns)
                md = eval(compile(ast.Expression(last.value), f'<cell {c.get("id")}>', 'eval'), ns)
                c.outputs = [nbformat.v4.new_output('execute_result', data={'text/markdown': md.data, 'text/plain': repr(md)})]
                done.append(c.get('id'))
    finally: os.chdir(cwd)
    nbformat.write(nb, nb_path)
    return done

def render(nb_path=ROOT/'nbs'/'index.ipynb')->str:
    nb = nbformat.read(nb_path, as_version=4)
    parts = ["<!-- Generated from nbs/index.ipynb by tools/render_readme.py: edit the notebook, not this file. -->"]
    for c in nb.cells:
        src = c.source.splitlines()
        directives = [l for l in src if l.startswith('#|')]
        if any(d.replace(' ', '') in ('#|hide', '#|default_exp') or d.startswith('#| default_exp') for d in directives): continue
        body = '\n'.join(l for l in src if not l.startswith('#|')).strip()
        if c.cell_type == 'markdown': parts.append(body)
        elif c.cell_type == 'code' and body:
            if any(d.replace(' ', '') == '#|echo:false' for d in directives): body = ''
            if body: parts.append(f"```python\n{body}\n```")
            texts = []
            for o in c.get('outputs', []):
                if o.output_type == 'stream': texts.append(o.text)
                elif 'text/markdown' in o.get('data', {}): parts.append(o.data['text/markdown'])
                elif 'text/plain' in o.get('data', {}): texts.append(o.data['text/plain'])
            if texts: parts.append("```\n" + ''.join(t if t.endswith('\n') else t + '\n' for t in texts).rstrip('\n') + "\n```")
    return '\n\n'.join(parts).rstrip() + '\n'

if __name__ == '__main__':
    if '--results' in sys.argv[1:]: print('refreshed results cells:', *refresh_results())
    (ROOT/'README.md').write_text(render())

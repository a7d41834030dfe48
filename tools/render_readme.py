"""Render README.md from nbs/index.ipynb without Quarto (CI checks the two agree).

Markdown cells are copied; visible code cells become ```python blocks followed by their text output.
Cells marked `#| hide` are left out and nbdev directives are stripped.
"""
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent

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
    (ROOT/'README.md').write_text(render())

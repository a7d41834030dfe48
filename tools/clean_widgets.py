"""Strip saved ipywidgets state from notebooks (nbdev-clean keeps it): the notebook's `metadata.widgets` and the
widget-view part of each output (a progress bar's text fallback stays). Runs over nbs/ and experiments/; prints what
it changed. CI runs it with nbdev-clean and fails when it changes anything.

    python tools/clean_widgets.py [paths...]"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json'

def clean(nb:dict)->int:
    "Remove widget state in place; returns how many bytes of JSON it removed (0: nothing to do)"
    before = len(json.dumps(nb))
    nb.get('metadata', {}).pop('widgets', None)
    for c in nb.get('cells', []):
        outs = []
        for o in c.get('outputs', []):
            d = o.get('data')
            if isinstance(d, dict) and WIDGET_VIEW in d:
                d.pop(WIDGET_VIEW)
                if not d: continue          # nothing else to show: drop the output
            outs.append(o)
        if 'outputs' in c: c['outputs'] = outs
    return before - len(json.dumps(nb))

def main(paths)->int:
    files = [Path(p) for p in paths] or sorted([*ROOT.glob('nbs/**/*.ipynb'), *ROOT.glob('experiments/**/*.ipynb')])
    for p in files:
        if '.ipynb_checkpoints' in p.parts: continue
        nb = json.loads(p.read_text())
        if n := clean(nb):
            # nbdev-clean's layout: one-space indent, keys as written, trailing newline
            p.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
            print(f"{p.relative_to(ROOT) if p.is_absolute() else p}: removed {n:,} bytes of widget state")
    return 0

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))

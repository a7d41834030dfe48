"""Wrap code lines over `WIDTH` characters in notebook cells without changing what the code means (issue 40).
Each change is kept only when the cell's syntax tree (`ast.dump`) is unchanged, so only layout moves:
- a trailing comment that makes a line long goes on its own line(s) above it (a comment line directly above a
  parameter or a dataclass field still documents it for docments; `def`/`class`/decorator lines and lines that start
  with a closing bracket keep their comments);
- a long string literal is cut at a space into two adjacent literals (inside parentheses where it has none);
- code inside brackets breaks after a comma or an opening bracket, or before `and`/`or`/`if`/`else`/`for`;
- a one-line compound statement (`if x: y`) becomes a block; `a; b` becomes two lines; a long `return`/assignment
  value gets parentheses so it can break inside them.
Lines it cannot shorten are left as they are and listed with `--report`.
Usage: python tools/wrap_lines.py [--all-cells] [--check] [--report] NOTEBOOK_OR_DIR ...
(default: export cells only, as they become the package; --check exits 1 when a line would change)"""
import argparse
import ast
import io
import json
import sys
import textwrap
import tokenize
from pathlib import Path

WIDTH = 120
OPEN, CLOSE = '([{', ')]}'
COMPOUND = {'if', 'elif', 'else', 'for', 'while', 'with', 'try', 'except', 'finally', 'def', 'class', 'async'}
BREAK_BEFORE = {'and', 'or', 'if', 'else', 'for'}

def same_tree(a:str, b:str)->bool:
    try: return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except SyntaxError: return False

def tokens(src:str)->list:
    return list(tokenize.generate_tokens(io.StringIO(src).readline))

def depths(toks:list)->dict:
    "Bracket depth before each token (by index), and the stack of open brackets (row, col) before it"
    out, stack = {}, []
    for i, t in enumerate(toks):
        out[i] = list(stack)
        if t.type == tokenize.OP and t.string in OPEN: stack.append((t.start[0], t.start[1]))
        elif t.type == tokenize.OP and t.string in CLOSE and stack: stack.pop()
    return out

def line_tokens(toks, row):
    return [(i, t) for i, t in enumerate(toks) if t.start[0] == row and t.type not in (tokenize.NL, tokenize.NEWLINE,
            tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)]

def replace_lines(lines, row, new:list[str])->str:
    return '\n'.join(lines[:row - 1] + new + lines[row:])

def move_comment(lines, row, toks):
    "The trailing comment on its own line(s) above the code"
    lt = line_tokens(toks, row)
    if len(lt) < 2 or lt[-1][1].type != tokenize.COMMENT: return None
    first, com = lt[0][1], lt[-1][1]
    if first.start[0] != row or first.string in ('def', 'class', 'async', '@'): return None
    if first.string in CLOSE and not (len(lt) > 2 and lt[1][1].string == '->'): return None  # `)->T:` keeps docments
    text = com.string
    if text.startswith('#|') or any(p in text for p in ('noqa', 'type:', 'pragma', 'fmt:')): return None
    line = lines[row - 1]
    code = line[:com.start[1]].rstrip()
    if len(code) > WIDTH: return None
    ind = ' ' * first.start[1]
    body = text.lstrip('#').strip()
    width = max(WIDTH - len(ind) - 2, 40)
    return replace_lines(lines, row, [f'{ind}# {l}' for l in textwrap.wrap(body, width) or ['']] + [code])

def split_string(lines, row, toks, dep):
    "Cut the string literal that crosses the width at a space into two adjacent literals"
    line = lines[row - 1]
    for i, t in line_tokens(toks, row):
        if t.type != tokenize.STRING or t.start[0] != t.end[0] or t.end[1] <= WIDTH: continue
        s = t.string
        q_at = next(k for k, ch in enumerate(s) if ch in '\'"')
        prefix, q = s[:q_at], s[q_at]
        if s[q_at:q_at + 3] in ('"""', "'''"): continue
        body = s[q_at + 1:-1]
        # room for the body of the first part (and the parenthesis that goes before it at depth 0)
        limit = WIDTH - 1 - t.start[1] - len(prefix) - 1 - (not dep[i])
        fmt, brace, cut = 'f' in prefix.lower(), 0, None
        for k, ch in enumerate(body):
            if fmt and ch == '{': brace += 1
            elif fmt and ch == '}': brace -= 1
            if ch == ' ' and brace == 0 and k + 1 <= limit and k > 0 and body[k - 1] != '\\': cut = k + 1
        if cut is None or cut >= len(body): continue
        a, b = f'{prefix}{q}{body[:cut]}{q}', f'{prefix}{q}{body[cut:]}{q}'
        head, tail = line[:t.start[1]], line[t.end[1]:]
        if dep[i]: new = [head + a, ' ' * t.start[1] + b + tail]
        else: new = [head + '(' + a, ' ' * (t.start[1] + 1) + b + ')' + tail]
        return replace_lines(lines, row, new)
    return None

def closes_at(toks, i)->int:
    "Index of the token that closes the bracket opened at token `i`"
    d = 0
    for j in range(i, len(toks)):
        if toks[j].type == tokenize.OP and toks[j].string in OPEN: d += 1
        elif toks[j].type == tokenize.OP and toks[j].string in CLOSE:
            d -= 1
            if not d: return j
    return len(toks) - 1

def break_in_brackets(lines, row, toks, dep):
    """Break at the shallowest bracket depth that fits: after a comma, before a boolean/conditional keyword, or after
    an opening bracket whose contents are long; the rightmost such place"""
    line = lines[row - 1]
    lt = line_tokens(toks, row)
    cands = []
    for n, (i, t) in enumerate(lt[:-1]):
        nxt_i, nxt = lt[n + 1]
        if nxt.type == tokenize.COMMENT or nxt.start[0] != row or t.start[0] != row: continue
        inner = dep[nxt_i]
        if not inner: continue
        if t.type == tokenize.OP and t.string == ',':
            if n + 2 < len(lt) and lt[n + 2][1].string == 'in': continue           # `for k, v in`: not here
            at, kind = t.end[1], 2
        elif nxt.type == tokenize.NAME and nxt.string in BREAK_BEFORE: at, kind = nxt.start[1], 2
        elif t.type == tokenize.OP and t.string in OPEN:
            close = toks[closes_at(toks, i)]
            if close.start[0] == row and close.start[1] - t.end[1] < 40: continue   # short contents stay together
            at, kind = t.end[1], 1
        else: continue
        if len(line[:at].rstrip()) > WIDTH or at < 10: continue
        cands.append((len(inner), kind, at, inner))
    if not cands: return None
    top = min(c[0] for c in cands)
    best = max((c for c in cands if c[0] == top), key=lambda c: (c[1], c[2]))
    if best[1] == 1 and any(c[1] == 2 and c[0] <= top + 1 for c in cands):
        best = max((c for c in cands if c[1] == 2), key=lambda c: (-c[0], c[2]))
    _, _, at, inner = best
    orow, ocol = inner[-1]
    first_tok = lt[0][1]
    base = len(line) - len(line.lstrip())
    if orow == row and ocol + 1 <= 60 and line[ocol] in OPEN and at > ocol + 1: ind = ocol + 1
    elif orow == row: ind = base + (8 if first_tok.string in COMPOUND else 4)
    else: ind = first_tok.start[1] if first_tok.start[0] == row else base
    rest = line[at:].lstrip()
    if len(line[:at].rstrip()) <= ind + 4 and len(rest) > WIDTH - ind: return None
    return replace_lines(lines, row, [line[:at].rstrip(), ' ' * ind + rest])

def top_level(lines, row, toks, dep, compound_only=False):
    "A one-line compound statement as a block, `a; b` as two lines, or a long value in parentheses"
    line = lines[row - 1]
    lt = line_tokens(toks, row)
    if not lt or lt[0][1].start[0] != row or dep[lt[0][0]]: return None
    ind = ' ' * lt[0][1].start[1]
    if lt[0][1].string in COMPOUND:
        for i, t in lt:
            if t.type == tokenize.OP and t.string == ':' and not dep[i]:
                rest = line[t.end[1]:].strip()
                if rest and not rest.startswith('#'): return replace_lines(lines, row, [line[:t.end[1]], ind + '    ' + rest])
                return None
        return None
    if compound_only: return None
    for i, t in lt:
        if t.type == tokenize.OP and t.string == ';' and not dep[i]:
            return replace_lines(lines, row, [line[:t.start[1]].rstrip(), ind + line[t.end[1]:].strip()])
    for i, t in lt:
        if (t.string in ('return', 'yield') and i == lt[0][0]) or (t.type == tokenize.OP and t.string == '=' and not dep[i]):
            end = lt[-1][1]
            stop = end.start[1] if end.type == tokenize.COMMENT else len(line)
            value = line[t.end[1]:stop].strip()
            if not value or value.startswith('('): return None
            return replace_lines(lines, row, [line[:t.end[1]] + ' (' + value + ')' + ('  ' + end.string if stop < len(line) else '')])
    return None

def wrap_source(src:str, width:int=WIDTH)->tuple[str, list[int]]:
    "`src` with long lines wrapped, and the rows of lines still too long"
    global WIDTH
    WIDTH = width
    stuck = set()
    for _ in range(500):
        lines = src.split('\n')
        rows = [r for r, l in enumerate(lines, 1) if len(l) > WIDTH and r not in stuck]
        if not rows: break
        row = rows[0]
        try: toks = tokens(src)
        except (tokenize.TokenError, IndentationError, SyntaxError): return src, sorted(stuck | set(rows))
        dep = depths(toks)
        if '# noqa' in lines[row - 1] or '# type:' in lines[row - 1]:
            stuck.add(row); continue                               # a pragma belongs to its line
        if any(t.type == tokenize.STRING and t.start[0] < row <= t.end[0] and t.start[0] != t.end[0] for t in toks):
            stuck.add(row); continue                               # inside a multi-line string: text, not code
        fixes = ((top_level, (lines, row, toks, dep, True)), (move_comment, (lines, row, toks)),
                 (break_in_brackets, (lines, row, toks, dep)), (split_string, (lines, row, toks, dep)),
                 (top_level, (lines, row, toks, dep)))
        for fix, args in fixes:
            new = fix(*args)
            if new is not None and new != src and same_tree(src, new):
                src = new; break
        else: stuck.add(row)
    return src, sorted(r for r, l in enumerate(src.split('\n'), 1) if len(l) > WIDTH)

def is_export(src): return any(l.startswith('#| export') for l in src.splitlines())

def wrap_notebook(path:Path, all_cells=False, write=True)->tuple[int, list]:
    "Number of cells changed and the (cell id, line) pairs still too long"
    nb = json.loads(path.read_text())
    changed, left = 0, []
    for c in nb['cells']:
        src = ''.join(c['source'])
        if c['cell_type'] != 'code' or not (all_cells or is_export(src)) or max(map(len, src.split('\n'))) <= WIDTH: continue
        if any(l.lstrip().startswith(('%', '!')) for l in src.split('\n')): continue
        try: ast.parse(src)
        except SyntaxError: continue
        new, rows = wrap_source(src)
        left += [(c.get('id'), new.split('\n')[r - 1][:60]) for r in rows]
        if new != src:
            changed += 1
            c['source'] = new.splitlines(keepends=True)
    if changed and write: path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
    return changed, left

def main():
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument('paths', nargs='+'); ap.add_argument('--all-cells', action='store_true')
    ap.add_argument('--check', action='store_true'); ap.add_argument('--report', action='store_true')
    a = ap.parse_args()
    files = [q for p in map(Path, a.paths) for q in (sorted(p.rglob('*.ipynb')) if p.is_dir() else [p])]
    total = 0
    for f in files:
        n, left = wrap_notebook(f, a.all_cells, write=not a.check)
        total += n
        if n: print(f"{f}: {n} cell(s) {'would change' if a.check else 'wrapped'}")
        if a.report:
            for cid, l in left: print(f"  {f} cell {cid}: still long: {l}...")
    if a.check and total: sys.exit(1)

if __name__ == '__main__': main()

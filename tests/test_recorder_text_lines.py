"""The recorder loses nothing of a text log, line by line: test_recorder_leaves.py audits the structured (JSON) logs
leaf by leaf; the text formats (Aider, Rovo Dev, ReAct) have no leaves, so each non-blank line is stripped of its
format's own markers (each on a per-format list with its reason) and what is left must reach the trajectory (a
thought, an action, an observation, metadata) or the side file, or the line is on a per-format list with its reason."""
import json
import re
from pathlib import Path

import pytest
import yaml

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport
from knowlyr_lab.recorder.values import parse_time

FIXTURES = Path(__file__).parent / 'fixtures'
REC = FIXTURES / 'recorder'

# Per format: (pattern, reason). A pattern matches a whole line; its named groups (c, c2, ...) are the content left
# once the marker is gone (no group: the line is a marker only). A line is first looked for whole; the markers are
# tried only when it is not found as it is (a '#### ' user line, a 'TOOL CALL (bash)' header).
MARKERS = {
    'aider': [
        (r'# aider chat started at (?P<t>.+?)\s*', 'the session header: its time is started_at'),
        (r'#### ?(?P<c>.*?)(?:  )?', "a user line's prefix and its Markdown line break"),
        (r'>(?: (?P<c>.*?))?(?:  )?', "a CLI line's prefix and its Markdown line break"),
        (r'\s*(?:`{3,}|</?(?:source|code|pre|codeblock|sourcecode)>)\w*\s*', 'an edit fence: the edit is the params'),
        (r'[`*]+(?P<c>[^`*]+)[`*]+\s*', "a whole-file edit's path line, in Markdown code or bold: params.path"),
        (r'<{5,9} SEARCH\s*|={5,9}\s*|>{5,9} REPLACE\s*', 'the SEARCH/REPLACE marks: their parts are params'),
        (r'(?:TO LLM|LLM RESPONSE) (?P<t>\S+)\s*', "an --llm-history-file block head: its time is the step's"),
        (r'-------', '--llm-history-file: the message boundary'),
        (r'(?:SYSTEM|USER|ASSISTANT|TOOL|FUNCTION)(?: (?P<c>.*))?', '--llm-history-file: the role of a message line'),
    ],
    'rovo-dev': [
        (r'#{20,}\s*', 'a phase banner'),
        (r'={20,}\s*', 'the block separator'),
        (r'PHASE \d+\s*', 'the phase number: metadata.phase of the calls'),
        (r'(?:AGENT|USER PROMPT):\s*', 'a block head: the block is a thought, the task or a user step'),
        (r'TOOL (?:CALL|RETURN) \((?P<c>[^)]*)\):?\s*', 'a call or result head: the tool name is the action'),
        (r'```\w*\s*', 'the fence around a tool result'),
    ],
    'react-text': [
        (r'\s*(?:Question|Task|Thought|Action Input|Action|Observation|Final Answer)\s*(?:\d+\s*)?:\s?(?P<c>.*)',
         'the ReAct keyword (and its step number) that says what the text is'),
        (r'`?(?P<c>[A-Za-z_][\w.\-]*)\s*\[(?P<c2>.*)\]`?\s*', 'tool[arg]: the tool and its input'),
    ],
}
def _rovo_calls(lines:list[str])->list[tuple[range, object]]:
    "(lines, parsed value) of each Rovo Dev TOOL CALL body: YAML, whose quoted scalars may fold over lines"
    out, i = [], 0
    while i < len(lines):
        if re.match(r'TOOL CALL \(', lines[i]):
            j = next((k for k in range(i + 1, len(lines)) if re.fullmatch(r'={20,}\s*', lines[k])), len(lines))
            try: out.append((range(i + 2, j + 1), yaml.safe_load('\n'.join(lines[i + 1:j]))))    # 1-based lines
            except yaml.YAMLError: pass
            i = j
        else: i += 1
    return out

# Per format: a function giving (lines, value) of blocks read as a whole (a value's leaves must reach), and why.
BLOCKS = {'rovo-dev': (_rovo_calls, "a TOOL CALL's YAML arguments: each key and value is in the params")}
# Per format: (pattern, reason) of whole lines that reach no output on purpose.
LISTED = {'aider': [], 'rovo-dev': [], 'react-text': []}

def _values(x, strs:list, nums:set):
    if isinstance(x, dict):
        for k, v in x.items(): strs.append(str(k)); _values(v, strs, nums)
    elif isinstance(x, list):
        for v in x: _values(v, strs, nums)
    elif isinstance(x, str): strs.append(x)
    elif isinstance(x, (int, float)) and not isinstance(x, bool): nums.add(float(x))

def _output(path, fmt, tmp_path, change=lambda ts: ts)->tuple[str, set]:
    "All strings of the trajectories and the side file, joined, and all their numbers"
    side = tmp_path / 'side.jsonl'
    side.unlink(missing_ok=True)
    ts = change(list(convert(path, format=fmt, report=ConversionReport(side_file=side), redact=False)))
    strs, nums = [], set()
    for t in ts: _values(t.model_dump(mode='json'), strs, nums)
    if side.exists():
        for x in side.read_text().splitlines(): _values(json.loads(x), strs, nums)
    return '\x00'.join(strs), nums

def _json_reaches(s, big)->bool:
    "A JSON object in a line (ReAct's Action Input) reaches when each of its values and keys does"
    try: x = json.loads(s)
    except ValueError: return False
    strs, nums = [], set()
    _values(x, strs, nums)
    return isinstance(x, (dict, list)) and all(v in big for v in strs) and all(
        (str(int(n)) if n == int(n) else str(n)) in big for n in nums)

def _reaches(s:str, big:str, nums:set)->bool:
    s = s.strip()
    if re.fullmatch(r'-?\d+(?:\.\d+)?', s) and float(s) in nums: return True        # a YAML number: a param
    return not s or s in big or _json_reaches(s, big)

def _time_reaches(s:str, nums:set, big:str)->bool:
    t = parse_time(s.strip())
    return s.strip() in big or (t is not None and any(abs(t - n) < 1e-3 for n in nums))

def _line_ok(fmt, line:str, big:str, nums:set, used:set|None, depth=0)->bool:
    "Does `line` reach the output, as it is or once a marker is stripped (a marker may hold another: 'ASSISTANT ```')"
    if not line.strip() or _reaches(line, big, nums): return True
    if depth > 3: return False
    for pat, _why in MARKERS[fmt]:
        if not (m := re.fullmatch(pat, line)): continue
        if all(_time_reaches(v, nums, big) if k == 't' else _line_ok(fmt, v, big, nums, used, depth + 1)
               for k, v in m.groupdict().items() if v is not None):
            if used is not None: used.add((fmt, pat))
            return True
    return False

def lost_lines(path, fmt, tmp_path, change=lambda ts: ts, used:set|None=None)->dict:
    "Line number -> the line, for each non-blank line whose content reaches no output and is not listed"
    big, nums = _output(path, fmt, tmp_path, change)
    lost, lines, covered = {}, Path(path).read_text(errors='replace').split('\n'), set()
    if fmt in BLOCKS:
        for rng, v in BLOCKS[fmt][0](lines):
            strs, ns = [], set()
            _values(v, strs, ns)
            if all(x.strip() in big for x in strs) and ns <= nums:
                covered.update(rng)
                if used is not None and any(not _line_ok(fmt, lines[k - 1], big, nums, None) for k in rng):
                    used.add((fmt, 'BLOCKS'))
    for i, line in enumerate(lines, 1):
        if i in covered or _line_ok(fmt, line, big, nums, used): continue
        if not any(re.fullmatch(p, line) for p, _ in LISTED[fmt]): lost[i] = line[:80]
    return lost

TEXT_LOGS = [(p, fmt) for fmt, folder in (('aider', 'aider'), ('rovo-dev', 'rovo-dev'), ('react-text', 'react-text'))
             for p in sorted((REC / folder).iterdir()) if p.is_file()]

@pytest.mark.parametrize('path,fmt', TEXT_LOGS, ids=[f'{f}/{p.name}' for p, f in TEXT_LOGS])
def test_every_line_reaches_the_output_or_is_listed(path, fmt, tmp_path):
    assert lost_lines(path, fmt, tmp_path) == {}

def conv(path, fmt=None):
    return list(convert(path, format=fmt, report=ConversionReport(), redact=False))

def test_aider_llm_history_keeps_the_start_the_feedback_times_and_the_chat_files():
    "The first call's time, the time each reply to an edit was sent, and the chat files Aider sends before the task"
    (t,) = conv(REC / 'aider' / '.aider.llm.history')
    assert t.metadata['started_at'] == parse_time('2026-01-12T10:05:00')
    assert [s.t_end for s in t.steps if s.action] == [parse_time('2026-01-12T10:05:08'), parse_time('2026-01-12T10:06:00')]
    assert [(m['role'], m['content'].split('\n')[0], m['line']) for m in t.metadata['context_messages']] == [
        ('user', 'I have *added these files to the chat*:', 1), ('assistant', 'Ok.', 1)]

def test_aider_llm_history_keeps_a_context_message_the_task_only_contains(tmp_path):
    "Review: 'Ok.' was dropped from context_messages when the task read 'Ok. Fix ...' (a substring test, not whole texts)"
    text = (REC / 'aider' / '.aider.llm.history').read_text()
    assert '\nUSER Fix the greeting typo in app.py\n' in text
    p = tmp_path / '.aider.llm.history'
    p.write_text(text.replace('\nUSER Fix the greeting typo in app.py\n', '\nUSER Ok. Fix the greeting typo in app.py\n'))
    (t,) = conv(p)
    assert t.task.instruction.startswith('Ok. Fix')
    assert [m['content'] for m in t.metadata['context_messages']][-1] == 'Ok.'

# A chat history with a whole-file edit under a bold path line, as Aider's models write (the real Simple-Calulator log)
BOLD = """# aider chat started at 2025-05-04 17:02:36

#### Rewrite greet.py  

Here is the whole file:

**greet.py**
```
print('hello')
```

> Applied edit to greet.py  
"""

def _samples(tmp_path)->list:
    (tmp_path / 'bold.aider.chat.history.md').write_text(BOLD)
    return TEXT_LOGS + [(tmp_path / 'bold.aider.chat.history.md', 'aider')]

def test_each_marker_and_block_rule_is_used(tmp_path):
    "A marker no sample needs is no marker: every one strips something the audit would otherwise report"
    used = set()
    for p, fmt in _samples(tmp_path):
        (tmp_path / 'o').mkdir(exist_ok=True)
        assert lost_lines(p, fmt, tmp_path / 'o', used=used) == {}, p
    assert {(f, p) for f, ms in MARKERS.items() for p, _ in ms} | {(f, 'BLOCKS') for f in BLOCKS} == used

# ---------------------------------------------------------------- the audit fails when a line is lost

def test_an_observation_removed_from_the_output_fails_the_audit(tmp_path):
    p = REC / 'react-text' / 'hotpot.txt'
    def drop(ts):
        ts[0].steps[0].observation = None
        return ts
    assert lost_lines(p, 'react-text', tmp_path, drop) == {
        6: 'Observation 1: The Colorado orogeny was an episode of mountain building (an orog',
        7: 'It extended into the High Plains.'}

def test_a_call_argument_removed_from_the_output_fails_the_audit(tmp_path):
    p = REC / 'rovo-dev' / 'acme__csv-7'
    def drop(ts):
        next(s for s in ts[0].steps if s.action and s.action.tool == 'bash').action.params.pop('command')
        return ts
    assert lost_lines(p, 'rovo-dev', tmp_path, drop) == {17: 'command: pytest -q'}

def test_the_audit_fails_without_the_aider_call_context(tmp_path, monkeypatch):
    "The lines the --llm-history-file fix keeps, reported once their handling is gone"
    import knowlyr_lab.recorder.aider_llm as aider_llm
    monkeypatch.setattr(aider_llm, '_llm_context', lambda *a: {})
    lost = lost_lines(REC / 'aider' / '.aider.llm.history', 'aider', tmp_path)
    assert lost == {1: 'TO LLM 2026-01-12T10:05:00', 6: 'USER I have *added these files to the chat*:', 13: 'ASSISTANT Ok.',
                    32: 'USER I have *added these files to the chat*:', 39: 'ASSISTANT Ok.',
                    73: 'USER I have *added these files to the chat*:', 80: 'ASSISTANT Ok.'}

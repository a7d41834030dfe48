"Odd but plausible values in real logs: each record is converted or quarantined alone, never a whole session"
from pathlib import Path

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

ODD = Path(__file__).parent / 'fixtures' / 'recorder_odd'


def test_claude_code_task_with_a_non_string_prompt_keeps_the_session():
    "A Task tool_use whose input.prompt is a dict dropped the whole session (AttributeError on .strip())"
    rep = ConversionReport()
    ts = list(convert(ODD / 'claude_code_task_prompt_dict.jsonl', format='claude-code', report=rep))
    assert len(ts) == 1 and len(ts[0].steps) >= 2 and not rep.failed
    task = next(s for s in ts[0].steps if s.action and s.action.tool == 'Task')
    assert isinstance(task.action.params['prompt'], dict)          # the odd value itself is kept as it was


def test_a_byte_order_mark_is_read_past():
    "A JSON array saved with a UTF-8 BOM (Windows editors) was not detected, and with the format forced gave no steps"
    from knowlyr_lab.recorder.convert import detect
    bom = ODD / 'openai_chat_bom.json'
    assert bom.read_bytes()[:3] == b'\xef\xbb\xbf'
    assert detect(bom).format == 'openai-chat'
    rep = ConversionReport()
    ts = list(convert(bom, report=rep))
    assert len(ts) == 1 and ts[0].steps and not rep.failed and rep.totals['quarantined'] == 0


def test_a_cut_off_array_is_reported_on_one_line_without_its_text():
    "ijson's error quotes the document on the lines after the first: only the first line is kept"
    rep = ConversionReport()
    ts = list(convert(ODD / 'openai_chat_cut_off.json', format='openai-chat', report=rep))
    assert len(ts) == 1                                              # the items before the cut are kept
    reasons = [str(e) for e in rep.errors]
    assert any('not valid JSON after item 2 (parse error: premature EOF)' in r for r in reasons), reasons
    assert not any('\n' in r or 'right here' in r for r in reasons)

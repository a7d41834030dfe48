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

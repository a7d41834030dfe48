"""A client cannot make the MCP server work on arguments of any size or depth (memory, a long stall, a huge echo).

`ArgLimits` caps the arguments of one tool call, all of them together: their size (about the length of their JSON
text) and how deep lists and objects nest in them. A call past a cap is refused with one line naming the cap and the
flag that raises it, before the tool or its argument validation sees it. Driven by the MCP SDK's own client, in
process (`mcp.Client(app)`)."""
import time

from helpers import call_tool

from knowlyr_lab.mcp import ArgLimits, build_server, main


def _nested(n):
    d = x = {}
    for _ in range(n): x['a'] = {}; x = x['a']
    return d

def test_a_big_argument_is_refused_in_one_line_before_any_work(tmp_path):
    app = build_server(tmp_path, arg_limits=ArgLimits(max_mb=1))
    t = time.monotonic()
    r = call_tool(app, 'convert_logs', {'paths': ['x' * 2**21], 'output': 'c.jsonl'})
    text = r.content[0].text
    assert r.is_error and 'more than 1 MiB' in text and '--max-args-mb' in text, text[:300]
    assert '\n' not in text and len(text) < 300 and 'xxxx' not in text         # one line; the argument not echoed
    assert not (tmp_path/'c.jsonl').exists() and time.monotonic() - t < 10

def test_many_small_items_count_as_much_as_one_big_one(tmp_path):
    r = call_tool(build_server(tmp_path, arg_limits=ArgLimits(max_mb=1)), 'validate_logs', {'paths': ['a'] * 300_000})
    assert r.is_error and '--max-args-mb' in r.content[0].text, r.content[0].text[:300]

def test_a_deep_argument_is_refused(tmp_path):
    app = build_server(tmp_path, arg_limits=ArgLimits(max_depth=16))
    r = call_tool(app, 'score_trajectory', {'trajectory': _nested(20)})
    assert r.is_error and 'nested more than 16 levels' in r.content[0].text and '--max-args-depth' in r.content[0].text
    r = call_tool(app, 'score_trajectory', {'trajectory': _nested(10)})       # under the cap: the tool reads it
    assert r.is_error and 'TrajectoryError' in r.content[0].text, r.content[0].text

def test_the_default_caps_hold(tmp_path):
    app = build_server(tmp_path)
    r = call_tool(app, 'list_rubrics', {'domain': 'x' * (ArgLimits.max_mb * 2**20 + 10)})
    assert r.is_error and '--max-args-mb' in r.content[0].text, r.content[0].text[:300]
    r = call_tool(app, 'list_rubrics', {'domain': 'generic'})
    assert not r.is_error, r.content[0].text

def test_the_cli_takes_the_caps_and_refuses_a_bad_one(capsys):
    assert main(['--max-args-mb', '0']) == 2
    assert 'error: --max-args-mb must be a finite number above 0, got 0.0' in capsys.readouterr().err
    assert main(['--max-args-depth', '-1']) == 2
    assert 'error: --max-args-depth must be a positive integer, got -1' in capsys.readouterr().err

"""A text action meant as a tool call (Hermes/Qwen `<tool_call>`, Mistral `[TOOL_CALLS]`, a bare JSON object) that is
malformed is refused naming its format and its defect, by `parse_action`, `parse_reply` and an env's `step` alike;
ReAct-shaped text keeps the ReAct message, and valid calls parse (pages `00aa_action_text`, `00aab_tool_call_formats`)."""
import json
import re

import pytest

from knowlyr_lab.chat import parse_reply
from knowlyr_lab.core import AgentEnv, InvalidActionError, TimeStep, Verdict, parse_action, tool_schema
from knowlyr_lab.tool_call_formats import parse_action_text

MALFORMED = [
    ('<tool_call>{"name": "move", </tool_call>', r"^malformed <tool_call>: not valid JSON at line 1 column 17: Expecting property name"),
    ('<tool_call>{"arguments": {"direction": "east"}}</tool_call>', r"^<tool_call> tool call has no 'name'"),
    ('<tool_call>{"name": "move", "arguments": {"direction": "east"}',
     r"^malformed <tool_call> \(no closing </tool_call>\): not valid JSON at line 1 column"),
    ('<tool_call></tool_call>', r"^empty <tool_call>"),
    ('<tool_call>{"name": "move", "arguments": [1]}</tool_call>', r"^<tool_call> tool call 'move': arguments must be an"),
    ('[TOOL_CALLS] [{"name": "move", "arguments": {}', r"^malformed \[TOOL_CALLS\]: not valid JSON at line 1 column"),
    ('[TOOL_CALLS] [{"arguments": {}}]', r"^\[TOOL_CALLS\] tool call has no 'name'"),
    ('{"tool": "move", "params": {"direction": }}', r"^malformed JSON tool call: not valid JSON at line 1 column 42: "),
    ('```json\n{"params": {"direction": "east"}}\n```', r"^JSON tool call has no 'name'"),
    ('  {"name": "", "arguments": {}}', r"^JSON tool call has no 'name'"),
]

@pytest.mark.parametrize('text, why', MALFORMED)
def test_malformed_tool_call_names_its_format(text, why):
    for parse in (parse_action, parse_reply):
        with pytest.raises(InvalidActionError, match=why) as e: parse(text)
        assert 'ReAct' not in str(e.value) and '\n' not in str(e.value)

def test_react_text_keeps_the_react_message():
    with pytest.raises(InvalidActionError, match=r"text has no 'Action:' line, so it is not a ReAct action"):
        parse_action("I think I should go north")
    with pytest.raises(InvalidActionError, match=r"ReAct action .* is not `tool\(key=value"):
        parse_action('Action: move(direction="north"')
    assert parse_reply("I think I should go north") == ("I think I should go north", [])

def test_valid_tool_call_text_is_one_action():
    east = {'tool': 'move', 'params': {'direction': 'east'}}
    assert parse_action('Go east.\n<tool_call>{"name": "move", "arguments": {"direction": "east"}}</tool_call>') \
        == {**east, 'thought': 'Go east.'}
    assert parse_action('[TOOL_CALLS] [{"name": "move", "arguments": {"direction": "east"}}]') == east
    assert parse_action('{"tool": "move", "params": {"direction": "east"}}') == east
    assert parse_reply('```json\n{"name": "move", "parameters": {"direction": "east"}}\n```') == ('', [east])
    with pytest.raises(InvalidActionError, match=r"^<tool_call> reply holds 2 tool calls; a step takes one"):
        parse_action('<tool_call>{"name": "look"}</tool_call><tool_call>{"name": "look"}</tool_call>')

class MoveEnv(AgentEnv):
    "One tool, `move`; any valid move ends the episode"
    tool_schemas = [tool_schema('move', 'Move', {'direction': {'type': 'string'}}, ['direction'])]
    def _reset(self, task=None, seed=None): return TimeStep('Move.')
    def _step(self, tool, params): return TimeStep('moved', 1.0, terminated=True, verdict=Verdict(success=True))

def test_env_step_observation_names_the_tool_call_format():
    env = MoveEnv(); env.reset()
    bad = env.step('<tool_call>{"name": "move", "arguments": {"direction": "east"</tool_call>')
    assert bad.info['invalid_action'] and bad.observation.startswith('Error: malformed <tool_call>: not valid JSON')
    ok = env.step('<tool_call>{"name": "move", "arguments": {"direction": "east"}}</tool_call>')
    assert ok.terminated and ok.call == {'tool': 'move', 'params': {'direction': 'east'}}

# The three entry points that read an agent's text (the core reader, an env server's wire, the widget's typed call)
# give the same action or the same refusal for the same text: one reader, no branch of their own.
SAME = ['Thought: go east\nAction: move(direction="east")',
        'Go east.\n<tool_call>{"name": "move", "arguments": {"direction": "east"}}</tool_call>',
        '<tool_call>{"name": "move", </tool_call>',
        '{"type": "function", "function": {"name": "move", "arguments": "{\\"direction\\": \\"east\\"}"}}',
        '{"name": "move", "arguments": {"direction": "east"}}',
        '{"type": "tool_use", "id": "toolu_1", "name": "move", "input": {"direction": "east"}}',
        '{"type": "tool_use", "name": "move", "input": "east"}',
        '{"tool": "move", "params": {"direction": }}']

def _outcome(parse, text):
    try: return parse(text)
    except InvalidActionError as e: return f'refused: {e}'

@pytest.mark.parametrize('text', SAME)
def test_every_text_reader_gives_the_same_action(text):
    from knowlyr_lab.envs.text_actions import parse_text_action
    from knowlyr_lab.tool_call_formats import parse_action_text
    from knowlyr_lab.widgets import parse_typed_action
    want = _outcome(parse_action_text, text)
    assert _outcome(parse_text_action, text) == want and _outcome(parse_typed_action, text) == want

def test_openai_and_anthropic_json_text_is_their_call():
    from knowlyr_lab.tool_call_formats import parse_action_text
    east = {'tool': 'move', 'params': {'direction': 'east'}}
    assert parse_action_text(SAME[3]) == east and parse_action_text(SAME[4]) == east
    assert parse_action_text(SAME[5]) == {**east, 'call_id': 'toolu_1'}   # the input is read, not dropped
    with pytest.raises(InvalidActionError, match=r"^JSON tool call: tool_use 'input' must be an object, got str"):
        parse_action_text(SAME[6])
    for bad in ('{"type": "tool_use", "input": {}}', '{"type": "function", "function": {"arguments": "{}"}}'):
        with pytest.raises(InvalidActionError, match=r"^JSON tool call: "): parse_action_text(bad)

def test_a_bare_call_is_read_on_the_wire_and_typed():
    from knowlyr_lab.envs.text_actions import parse_text_action
    from knowlyr_lab.widgets import parse_typed_action
    for parse in (parse_text_action, parse_typed_action):
        assert parse('move(direction="Action")') == {'tool': 'move', 'params': {'direction': 'Action'}}
        assert parse(' look ') == {'tool': 'look', 'params': {}}

# The recorder's ReAct reader and the hub 0.1 seed reader read an action through parse_action_text too: no
# `Action: ` prefix rule of their own (one skipped names starting with "action"; one lost the text before a call).
def test_recorder_reads_a_tool_named_action_like_any_other(tmp_path):
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.react import react_action
    assert react_action('actions_list(n=1)') == ({'tool': 'actions_list', 'params': {'n': 1}}, True)
    assert react_action('Action_log[x]') == ({'tool': 'Action_log', 'params': {'input': 'x'}}, True)
    log = tmp_path / 'run.log'
    log.write_text('Question: list one\nThought: list them\nAction: actions_list(n=1)\nObservation: a\n'
                   'Final Answer: a\n')
    (t,) = convert(log)
    assert (t.steps[0].action.tool, t.steps[0].action.params) == ('actions_list', {'n': 1})

def test_seed_step_keeps_the_text_before_its_call():
    from knowlyr_lab.chat import seed_messages
    msgs, _ = seed_messages([{'action': 'Go.<tool_call>{"name": "move", "arguments": {"direction": "east"}}</tool_call>',
                              'observation': 'moved'}])
    assert msgs[0]['content'] == 'Go.' and msgs[0]['tool_calls'][0]['function']['name'] == 'move'
    assert msgs[1] == {'role': 'tool', 'tool_call_id': 'call_0', 'content': 'moved'}
    said, _ = seed_messages([{'thought': 'East.', 'action': 'Thought: East.\nAction: move(direction="east")'},
                             {'thought': 'Stuck.', 'action': 'I give up'}])
    assert [m['content'] for m in said] == ['East.', 'Stuck.\nAction: I give up']   # free text stays the step's action

# Text with an `Action:` line is ReAct, as it was before the tool-call formats were read: what its thought quotes
# (an observation's JSON, a format's tag) or an argument holds is text, and the `Action:` line is the call.
# A bare call on the wire (`tool(...)`) is read as a call first; a JSON call must be the whole text.
REACT_AS_WRITTEN = [
    ('Thought: the schema is {"name": "db", "parameters": {"host": "h"}}; write it.\n'
     'Action: write_file(path="s.json", content="x")',
     {'tool': 'write_file', 'params': {'path': 's.json', 'content': 'x'},
      'thought': 'the schema is {"name": "db", "parameters": {"host": "h"}}; write it.'}),
    ('Thought: this model does not use <tool_call> tags.\nAction: ls(path=".")',
     {'tool': 'ls', 'params': {'path': '.'}, 'thought': 'this model does not use <tool_call> tags.'}),
    ('Action: write_file(path="notes.md", content="Mistral emits [TOOL_CALLS] first")',
     {'tool': 'write_file', 'params': {'path': 'notes.md', 'content': 'Mistral emits [TOOL_CALLS] first'}}),
]

@pytest.mark.parametrize('text, want', REACT_AS_WRITTEN)
def test_react_text_is_read_as_written(text, want):
    from knowlyr_lab.envs.text_actions import parse_text_action
    assert parse_action(text) == want and parse_text_action(text) == want
    thought, calls = parse_reply(text)
    assert calls == [{'tool': want['tool'], 'params': want['params']}] and thought == want.get('thought', '')

def test_react_text_round_trip_keeps_its_tool():
    from knowlyr_lab.chat import react_text
    text = react_text('ls', {'path': '.'}, thought='earlier I sent {"name": "rm", "arguments": {"path": "/"}}')
    assert parse_action(text) == {'tool': 'ls', 'params': {'path': '.'},
                                  'thought': 'earlier I sent {"name": "rm", "arguments": {"path": "/"}}'}

def test_env_step_runs_the_action_line_not_json_its_thought_quotes():
    env = MoveEnv(); env.reset()
    ts = env.step('Thought: the page said {"name": "submit", "arguments": {}}\nAction: move(direction="east")')
    assert (ts.call['tool'], ts.call['params']) == ('move', {'direction': 'east'}) and ts.terminated

def test_format_call_round_trip_on_the_wire():
    from knowlyr_lab.envs.serve import format_call
    from knowlyr_lab.envs.text_actions import parse_text_action
    for tool, params in [('register_tool', {'spec': {'name': 'get_weather', 'parameters': {}}}),
                         ('note', {'text': '<tool_call>{"name": "rm"}</tool_call>'}),
                         ('note', {'text': '[TOOL_CALLS] [{"name": "rm"}]'})]:
        assert parse_text_action(format_call(tool, params)) == {'tool': tool, 'params': params}

def test_a_json_call_with_text_after_it_is_refused():
    from knowlyr_lab.envs.text_actions import parse_text_action
    for parse in (parse_action, parse_text_action, parse_reply):
        with pytest.raises(InvalidActionError,
                           match=r"^malformed JSON tool call: text after the call at line 1 column 30: 'rm -rf'$"):
            parse('{"tool": "ls", "params": {}} rm -rf')
    assert parse_action('```json\n{"tool": "ls", "params": {}}\n```\n') == {'tool': 'ls', 'params': {}}

def test_json_an_observation_showed_is_not_a_llama_call():
    quoted = 'The tool list was {"name": "rm", "parameters": {"path": "/"}} and more; I am done.'
    assert parse_reply(quoted) == (quoted, [])
    with pytest.raises(InvalidActionError, match=r"no 'Action:' line, so it is not a ReAct action"): parse_action(quoted)
    called = quoted + '\n{"name": "look", "parameters": {}}'
    assert parse_reply(called) == (quoted, [{'tool': 'look', 'params': {}}])

# Text nested past what a parser takes stopped the reader with RecursionError (or MemoryError from `ast`): an env's step
# raised, a recorder failed the whole log for one line, an env server answered {'error': 'RecursionError: ...'}.
# It is the agent's text: an invalid action whose one-line message names the nesting.
DEEP = ['<tool_call>' + '[' * 100_000, '[TOOL_CALLS] ' + '[' * 100_000, '{"name": "move", "arguments": ' + '[' * 100_000,
        '{"name": "move", "arguments": "' + '[' * 100_000 + '"}', '<tool_call>{"x": ' + '[' * 995 + ']' * 995 + '}',
        'Action: move\nAction Input: ' + '[' * 100_000, 'Action: move(direction=' + '1+' * 100_000 + '1)',
        'Action: move(direction=' + '-' * 100_000 + '1)', 'Action: move' + '.b' * 100_000 + '()',
        'Action: move({"direction": ' + '[' * 100_000 + '})', 'Action: move({"direction": ' + '[' * 300 + ']' * 300 + ', "x": null})',
        'Ok. {"name": "move", "parameters": ' + '[' * 100_000,   # Llama's call after a thought: RecursionError on main
        'Ok. {"name": "a", "parameters": {}}; {"name": "move", "parameters": ' + '[' * 100_000,
        '[TOOL_CALLS]move[ARGS]' + '[' * 100_000]

@pytest.mark.parametrize('text', DEEP, ids=range(len(DEEP)))
def test_deep_nesting_is_an_invalid_action(text):
    from knowlyr_lab.envs.text_actions import parse_text_action
    for parse in (parse_action, parse_text_action):
        with pytest.raises(InvalidActionError, match=r'nested too deeply') as e: parse(text)
        assert '\n' not in str(e.value) and len(str(e.value)) < 300
    try: thought, calls = parse_reply(text)              # ReAct that is no call is the reply's text; a format's call refused
    except InvalidActionError as e: assert 'nested too deeply' in str(e)
    else: assert calls == [] and thought == text.strip()

def test_env_step_answers_deep_nesting_with_an_error_observation():
    env = MoveEnv(); env.reset()
    bad = env.step('<tool_call>' + '[' * 100_000)
    assert bad.info['invalid_action'] and not bad.done
    assert bad.observation.startswith('Error: malformed <tool_call> (no closing </tool_call>): JSON nested too deeply')
    assert env.step('Action: move(direction="east")').terminated

def test_recorder_keeps_the_other_lines_of_a_log_with_a_deep_action(tmp_path):
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.react import react_action
    from knowlyr_lab.recorder.report import ConversionReport
    deep = '<tool_call>' + '[' * 100_000
    assert react_action(deep) == ({'tool': 'unparsed_action', 'params': {'_raw': deep}}, False)
    log = tmp_path / 'run.log'
    log.write_text(f'Question: q\nThought: a\nAction: ls(path=".")\nObservation: x\nThought: b\nAction: {deep}\n'
                   'Observation: y\nThought: c\nAction: cat(path="a")\nObservation: z\nFinal Answer: done\n')
    r = ConversionReport()
    (t,) = convert(log, report=r)
    assert not r.failed and r.totals['quarantined'] == 0
    assert [(s.action.tool, s.action.params) for s in t.steps][:3] == [
        ('ls', {'path': '.'}), ('unparsed_action', {'_raw': deep}), ('cat', {'path': 'a'})]

def test_agentgym_server_answers_deep_nesting_with_an_observation():
    "Under the server's cap of 4096 values: on main the parser's RecursionError came back as {'error': ...}"
    import httpx
    from helpers import served

    from knowlyr_lab.envs.serve import agentgym_app
    from knowlyr_lab.registry import make
    with served(agentgym_app(lambda: make('knowlyr/maze-easy'))) as url, httpx.Client(timeout=60) as c:
        sid = c.post(url + '/create').json()['id']
        c.post(url + '/reset', json={'id': sid})
        r = c.post(url + '/step', content=json.dumps({'id': sid, 'action': '<tool_call>' + '[' * 3000}).encode(),
                   headers={'content-type': 'application/json'})
        assert r.status_code == 200 and 'error' not in r.json(), r.text[:300]
        assert 'nested too deeply' in r.json()['observation'] and not r.json()['done'], r.text[:300]

# `steps_text` (dpo-seed) writes `Action: tool({json})`; the reader took Python literals only, so a call whose arguments
# hold true/false/null, or whose tool name holds a '-' (an MCP server's), lost its tool call in the round trip.
def _fixture_steps():
    from pathlib import Path

    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.report import ConversionReport
    for p in sorted((Path(__file__).parent / 'fixtures').rglob('*')):
        if not p.is_file() or p.suffix == '.md' or '_result.json' in p.name: continue
        for t in convert(p, report=ConversionReport()): yield from ((p.name, s) for s in t.steps if s.action)

def test_seed_text_round_trip_keeps_every_fixture_call():
    from knowlyr_lab.chat import parse_steps_text, react_text, seed_messages, steps_text
    n, lost = 0, []
    for name, s in _fixture_steps():
        n += 1
        (msg, *_), _ = seed_messages(parse_steps_text(steps_text([s])))
        if not re.fullmatch(r"[A-Za-z_][\w.\-]*", s.action.tool):   # no name (a redacted one): the call stays text
            if s.action.tool not in msg['content'] or msg.get('tool_calls'): lost.append((name, 'kept as text'))
            continue
        want = {'name': s.action.tool, 'arguments': s.action.params}
        fn = (msg.get('tool_calls') or [{}])[0].get('function')
        if not fn or {'name': fn['name'], 'arguments': json.loads(fn['arguments'])} != want: lost.append((name, want))
        a = parse_action(react_text(s.action.tool, s.action.params))
        if (a['tool'], a['params']) != (s.action.tool, s.action.params): lost.append((name, 'react_text', want))
    assert n > 600 and not lost, (n, len(lost), lost[:3])

def test_a_call_python_reads_is_read_as_before():
    "The JSON reading is tried only where Python refused: Python's reading of a call is unchanged"
    from knowlyr_lab.chat import steps_text
    from knowlyr_lab.trajectory import Step, ToolCall
    assert parse_action('Action: f({"a": 1, "b": [1.5, "x"]})') == {'tool': 'f', 'params': {'a': 1, 'b': [1.5, 'x']}}
    assert parse_action('Action: f({"ok": true, "n": null, "big": 1e300})') == {'tool': 'f', 'params': {'ok': True, 'n': None, 'big': 1e300}}
    for text, why in [('Action: a-b(x=1)', "is not a call like"), ('Action: f({"a": 1}, {"b": true})', "must be literals"),
                      ('Action: f(x={[1]: 2})', "must be literals")]:
        with pytest.raises(InvalidActionError, match=why): parse_action(text)
    s = Step(index=0, action=ToolCall(tool='mcp__gh-api__search', params={'q': 'x', 'all': False}))
    assert parse_action(steps_text([s]).split('Action: ', 1)[1], bare=True) == {'tool': 'mcp__gh-api__search', 'params': {'q': 'x', 'all': False}}

# A line of a word, many spaces and another word made the text readers backtrack quadratically (a lazy group followed by
# `\s*` and an anchor, `^\s*` over blank lines, two `\s*` around an optional part): 32,000 spaces took 8 s, so these
# 200,000-character inputs would take minutes. That each finishes at all is the check; each is read (its tool, as a bare
# call) or refused (the start of the refusal, one short line, not the input echoed).
SPACES = ' ' * 200_000
WIDE = [('Action: a' + SPACES + 'b', "ReAct action 'a "), ('a' + SPACES + 'b', "ReAct action 'a "),
        ('Action: f' + SPACES + '({"q": 1} x', "ReAct action 'f "), ('\n' * 200_000 + 'x', 'x'),
        ('Thought: a' + '\n' * 200_000 + 'y\nAction: look', 'look'), ('<tool_call>a' + SPACES + 'b', 'malformed <tool_call>'),
        ('{"name": "a", "arguments": {}}' + SPACES + 'x', 'malformed JSON tool call: text after the call'),
        ('"arguments"' + SPACES + 'x', 'ReAct action \'"arguments" '), ('Action: move\nAction Input: {}' + SPACES, 'move')]

@pytest.mark.parametrize('text, bare_reading', WIDE, ids=range(len(WIDE)))
def test_wide_whitespace_is_read_in_linear_work(text, bare_reading):
    from knowlyr_lab.tool_call_formats import parse_action_text
    for i, parse in enumerate((lambda t: parse_action_text(t, bare=True), parse_action_text, parse_reply)):
        try: out = parse(text)
        except InvalidActionError as e: out = str(e); assert '\n' not in out and len(out) < 300, out[:300]
        if i == 0: assert out['tool'] == bare_reading if isinstance(out, dict) else out.startswith(bare_reading), str(out)[:120]
    assert parse_reply('Thought: a' + '\n' * 200_000 + 'y\nAction: look') == ('a' + '\n' * 200_000 + 'y', [{'tool': 'look', 'params': {}}])

# `tool({json})` (dpo-seed's call) took any prose before the `(` as the tool's name; a name is an identifier.
@pytest.mark.parametrize('action', ['Next I will use search({"q": "x"})', 'rm -rf / && search({"q": "x"})',
                                    'Then run the tests with run_tests({"verbose": true})'])
def test_prose_before_a_json_call_is_no_tool_name(action):
    from knowlyr_lab.recorder.react import react_action
    from knowlyr_lab.tool_call_formats import parse_action_text
    with pytest.raises(InvalidActionError, match=r"is not `tool\(key=value, \.\.\.\)`"): parse_action_text(f'Action: {action}')
    assert react_action(action)[1] is False
    assert parse_action_text('Action: mcp__gh-api__search({"q": "x", "all": true})') == \
        {'tool': 'mcp__gh-api__search', 'params': {'q': 'x', 'all': True}}

# A Hermes/Qwen reply whose preamble has an `Action:` line that is no ReAct call keeps its <tool_call>.
def test_a_tool_call_after_an_action_preamble_is_read():
    from knowlyr_lab.tool_call_formats import parse_action_text
    text = ('Plan: first look the term up.\nAction: call the search tool.\n'
            '<tool_call>\n{"name": "search", "arguments": {"q": "fizzbuzz"}}\n</tool_call>')
    call, said = {'tool': 'search', 'params': {'q': 'fizzbuzz'}}, 'Plan: first look the term up.\nAction: call the search tool.'
    assert parse_reply(text) == (said, [call]) and parse_action_text(text) == {**call, 'thought': said}
    quoted = 'Thought: I sent <tool_call>{"name": "rm", "arguments": {}}</tool_call>\nAction: look('   # a quote stays text
    with pytest.raises(InvalidActionError, match=r"^ReAct action 'look\('"): parse_action_text(quoted)
    assert parse_reply(quoted) == (quoted, [])

# A <tool_call> block and a [TOOL_CALLS] list were read up to the end of their JSON and the rest was dropped: a command
# or a second object after the JSON vanished while the first call ran. A block holds one JSON value, a list runs to the
# end of the reply or to the next [TOOL_CALLS] (as vLLM's Hermes parser `json.loads` each block); what real Qwen/Hermes
# and Mistral replies hold around them (newlines, several blocks, <|im_end|>, a tag before each list) still reads.
AFTER_JSON = [
    ('<tool_call>{"name": "bash", "arguments": {"command": "ls"}} rm -rf /</tool_call>',
     r"^malformed <tool_call>: text after the call at line 1 column 50: 'rm -rf /'$"),
    ('<tool_call>\n{"name": "look"}\n{"name": "move", "arguments": {"direction": "east"}}\n</tool_call>',
     r"^malformed <tool_call>: text after the call at line 2 column 1: '\{\"name\": \"move\""),
    ('Go.\n<tool_call>{"name": "look"} and then move east',
     r"^malformed <tool_call> \(no closing </tool_call>\): text after the call at line 1 column 18: 'and then"),
    ('[TOOL_CALLS] [{"name": "look"}] rm -rf /', r"^malformed \[TOOL_CALLS\]: text after the call at line 1 column 20: 'rm -rf /'$"),
    ('[TOOL_CALLS] [{"name": "look"}] [{"name": "move"}]', r"^malformed \[TOOL_CALLS\]: text after the call at line 1 column 20: '\[\{"),
]

@pytest.mark.parametrize('text, why', AFTER_JSON, ids=range(len(AFTER_JSON)))
def test_text_after_the_json_of_a_block_is_refused(text, why):
    from knowlyr_lab.envs.text_actions import parse_text_action
    for parse in (parse_action, parse_text_action, parse_reply):
        with pytest.raises(InvalidActionError, match=why): parse(text)
    env = MoveEnv(); env.reset()
    ts = env.step(text)
    assert ts.info['invalid_action'] and not ts.done and ts.observation.startswith('Error: malformed ')

def test_real_block_layouts_still_read():
    look, east = {'tool': 'look', 'params': {}}, {'tool': 'move', 'params': {'direction': 'east'}}
    qwen = ('<think>\nLook first.\n</think>\n\n<tool_call>\n{"name": "look", "arguments": {}}\n</tool_call>\n'
            '<tool_call>\n{"name": "move", "arguments": {"direction": "east"}}\n</tool_call><|im_end|>')
    assert parse_reply(qwen) == ('<think>\nLook first.\n</think>', [look, east])
    assert parse_reply('<tool_call>\n{"name": "look", "arguments": {}}\n<|im_end|>') == ('', [look])   # stopped unclosed
    mistral = '[TOOL_CALLS] [{"name": "look", "arguments": {}}]\n[TOOL_CALLS] [{"name": "move", "arguments": {"direction": "east"}}]'
    assert parse_reply(mistral) == ('', [look, east])   # a tag before each list: every call read, none dropped

# `tool(k=v)` was read with `ast.literal_eval`, which also reads sets, bytes, complex numbers, tuples and `...`: the call
# passed as an action whose params JSON cannot carry (orjson failed on it when the trajectory was written, or turned a
# tuple into a list). A call's values are JSON values; the refusal names the argument (a sequence is written as a list).
PYTHON_NOT_JSON = [('f(x={1, 2})', "'x'"), ("f(x=b'ab')", "'x'"), ('f(x=1+2j)', "'x'"), ('f(path=[(0, 1)])', r"'path'\[0\]"),
                   ('f(x=...)', "'x'"), ('f({1: "a"})', '1'), ('f(d={"a": {"b": {3}}})', r"'d'\['a'\]\['b'\]"),
                   ('f(d={"a": {1: 2}})', r"'d'\['a'\]\[1\]")]

@pytest.mark.parametrize('action, arg', PYTHON_NOT_JSON, ids=range(len(PYTHON_NOT_JSON)))
def test_python_call_values_are_json_values(action, arg):
    from knowlyr_lab.envs.text_actions import parse_text_action
    why = rf"^ReAct action: tool 'f': argument {arg} holds a value JSON cannot carry \(a (tuple|set|bytes|complex|ellipsis|key)"
    for parse in (lambda t: parse_action(f'Action: {t}'), parse_text_action):
        with pytest.raises(InvalidActionError, match=why): parse(action)
    env = MoveEnv(); env.reset()
    ts = env.step(f'Action: {action}')
    assert ts.info['invalid_action'] and not ts.done and 'holds a value JSON cannot carry' in ts.observation

def test_python_call_json_values_still_read():
    import orjson
    a = parse_action('Action: f(x=[1, -2.5, None, True], y={"k": "v"}, z="s", big=1e300, neg=-0.0)')
    assert a['params'] == {'x': [1, -2.5, None, True], 'y': {'k': 'v'}, 'z': 's', 'big': 1e300, 'neg': -0.0}
    assert orjson.loads(orjson.dumps(a['params'])) == a['params'] and str(a['params']['neg']) == '-0.0'
    with pytest.raises(InvalidActionError, match=r"argument 'big' holds inf, not JSON"): parse_action('Action: f(big=1e999)')
    assert parse_action('Action: read("a.py")', positional=['path']) == {'tool': 'read', 'params': {'path': 'a.py'}}
    with pytest.raises(InvalidActionError, match=r"argument 'lines' holds a value JSON cannot carry"):
        parse_action('Action: read("a.py", (1, 2))', positional=['path', 'lines'])

# `_json_calls` searched for Llama's call again after `tool_call_format` had found it (`_JSON_START.match(text) or
# _llama_call(text)` in both): each reply in that format was decoded twice. The format is decided once (`_format_at`)
# and its reader is handed where the call starts; what is read is unchanged.
def test_llama_call_is_searched_for_once(monkeypatch):
    import knowlyr_lab.tool_call_formats as at
    searched, real = [], at._llama_call
    monkeypatch.setattr(at, '_llama_call', lambda text: searched.append(text) or real(text))
    text, look = 'Looking.\n<|python_tag|>{"name": "look", "parameters": {}}', {'tool': 'look', 'params': {}}
    assert at.parse_reply(text) == ('Looking.', [look]) and len(searched) == 1
    searched.clear()
    assert at.parse_action_text(text) == {**look, 'thought': 'Looking.'} and len(searched) == 1

# An integer past 64 bits in a call's arguments (a hostile or broken model's output) was accepted in every format, and
# orjson, which writes rows and reads logs here, refuses to write it ("Integer exceeds 64-bit range") and reads it as a
# float. A literal past 4,300 digits raised a plain ValueError (Python's int limit) that an env's step did not catch.
BIG = 123456789012345678901234567890
HUGE = '9' * 5000
def _calls(n):
    return [f'{{"name": "bash", "arguments": {{"n": {n}}}}}', f'<tool_call>{{"name": "bash", "arguments": {{"n": {n}}}}}</tool_call>',
            f'[TOOL_CALLS] [{{"name": "bash", "arguments": {{"n": {n}}}}}]', f'Ok.<|python_tag|>{{"name": "bash", "parameters": {{"n": {n}}}}}',
            f'Action: bash(n={n})', f'Action: bash\nAction Input: {{"n": {n}}}', f'Action: bash({{"n": {n}}})',
            f'{{"tool": "bash", "params": {{"opts": [{{"n": {n}}}]}}}}',
            {'type': 'function', 'function': {'name': 'bash', 'arguments': f'{{"n": {n}}}'}}]

class BashEnv(AgentEnv):
    "One tool, `bash`, that takes an integer"
    tool_schemas = [tool_schema('bash', 'Run', {'n': {'type': 'integer'}, 'opts': {'type': 'array'}})]
    def _reset(self, task=None, seed=None): return TimeStep('Go.')
    def _step(self, tool, params): return TimeStep(f'ran {params}', 1.0, terminated=True, verdict=Verdict(success=True))

@pytest.mark.parametrize('n', [BIG, -BIG, 2**64, -2**63 - 1, HUGE])
def test_an_integer_past_64_bits_is_an_invalid_action(n):
    for action in _calls(n) + ([{'tool': 'bash', 'params': {'n': n}}] if n != HUGE else []):
        if n == HUGE and 'bash(n=' in str(action): want = r"is not `tool\(key=value"   # Python's parser refuses it
        else: want = r"argument '(n|opts)'(\[0\]\['n'\])? holds an integer outside 64 bits"
        with pytest.raises(InvalidActionError, match=want): parse_action(action)
        env = BashEnv(); env.reset()
        ts = env.step(action)
        assert ts.info.get('invalid_action') and ts.observation.startswith('Error: ') and ts.call is None, action
        if isinstance(action, str) and not action.startswith('Action:'):
            with pytest.raises(InvalidActionError, match=want): parse_reply(action)

def test_integers_within_64_bits_still_read():
    for n in (2**64 - 1, -2**63, 0):
        for action in _calls(n): assert str(n) in json.dumps(parse_action(action)['params']), action

def test_a_rollout_with_a_huge_integer_writes_with_orjson(tmp_path):
    "The step is an invalid action; the trajectory holds no such integer, so orjson writes it and reads it back"
    import orjson

    from knowlyr_lab.agents import ScriptedAgent
    from knowlyr_lab.rollout.collect import collect
    (t,) = collect(BashEnv, ScriptedAgent([_calls(BIG)[1], 'Action: bash(n=3)']), 1, progress=False)
    assert [s.action is None for s in t.steps] == [True, False] and t.outcome.success
    assert orjson.loads(orjson.dumps(t.model_dump()))['steps'][1]['action']['params'] == {'n': 3}

# A reply decoded with its end-of-sequence token (HF `decode(skip_special_tokens=False)`, which a Mistral reply needs:
# [TOOL_CALLS] is itself a special token) was refused as "text after the call": only a fence, <|eot_id|>, <|eom_id|> and
# <|im_end|> could follow a call, never Mistral's </s>, Qwen's <|endoftext|> or Llama's <|end_of_text|>; after an
# `Action:` preamble line the refused call was even read as prose, with no calls (the call lost). Each family's end
# tokens may end a call, repeated as padding; a call after an Action line that does not read raises its format's error.
EAST = {'tool': 'move', 'params': {'direction': 'east'}}
END_TAILS = ['[TOOL_CALLS] [{"name": "move", "arguments": {"direction": "east"}}]</s>',                 # Mistral v3
             '[TOOL_CALLS] [{"name": "move", "arguments": {"direction": "east"}}]</s></s></s>',         # padded with eos
             '<tool_call>\n{"name": "move", "arguments": {"direction": "east"}}\n<|endoftext|>',        # Qwen, stopped unclosed
             '<tool_call>\n{"name": "move", "arguments": {"direction": "east"}}\n<|im_end|>\n<|endoftext|><|endoftext|>',
             '<|python_tag|>{"name": "move", "parameters": {"direction": "east"}}<|eom_id|>',           # Llama 3.1 ipython
             'Going.\n{"name": "move", "parameters": {"direction": "east"}}<|eot_id|><|end_of_text|>',  # Llama 3.x
             '```json\n{"name": "move", "arguments": {"direction": "east"}}\n```<|eot_id|>']

@pytest.mark.parametrize('text', END_TAILS, ids=range(len(END_TAILS)))
def test_a_call_may_end_with_its_family_end_tokens(text):
    from knowlyr_lab.envs.text_actions import parse_text_action
    assert parse_reply(text)[1] == [EAST]
    for parse in (parse_action, parse_text_action): assert {k: v for k, v in parse(text).items() if k != 'thought'} == EAST
    env = MoveEnv(); env.reset()
    assert not env.step(text).info.get('invalid_action')

def test_a_reply_decoded_with_eos_and_padding_reads():
    "A batch's reply as the tiny Qwen tokenizer decodes it: the call, its eos `<|im_end|>`, then `<|endoftext|>` padding"
    from knowlyr_lab.trainer.tiny import train_tokenizer
    tok = train_tokenizer()
    ids = tok('<tool_call>\n{"name": "move", "arguments": {"direction": "east"}}\n</tool_call>')['input_ids']
    text = tok.decode(ids + [tok.eos_token_id] + [tok.pad_token_id] * 3, skip_special_tokens=False)
    assert text.endswith('<|im_end|><|endoftext|><|endoftext|><|endoftext|>') and parse_reply(text) == ('', [EAST])
    unclosed = tok.decode(ids[:-1] + [tok.pad_token_id] * 2, skip_special_tokens=False)   # stopped before </tool_call>
    assert parse_reply(unclosed) == ('', [EAST])

def test_a_call_after_an_action_line_is_never_lost():
    from knowlyr_lab.tool_call_formats import parse_action_text
    text = 'Action: call the weather tool\n[TOOL_CALLS] [{"name": "move", "arguments": {"direction": "east"}}]</s>'
    assert parse_reply(text) == ('Action: call the weather tool', [EAST])
    assert parse_action_text(text) == {**EAST, 'thought': 'Action: call the weather tool'}
    for broken, why in [(text.replace('</s>', ' rm -rf /'), r"^malformed \[TOOL_CALLS\]: text after the call"),
                        (text.replace('}}]</s>', '}'), r"^malformed \[TOOL_CALLS\]: not valid JSON"),
                        ('Action: search it.\n<tool_call>{"arguments": {}}</tool_call>', r"^<tool_call> tool call has no 'name'")]:
        for parse in (parse_reply, parse_action_text):
            with pytest.raises(InvalidActionError, match=why): parse(broken)
    assert parse_reply('Action: none needed, the answer is 4.') == ('Action: none needed, the answer is 4.', [])   # prose

# The JSON readers kept an integer literal past 21 characters as a `str` subclass, which escaped where it sat outside
# params: a numeric tool name read as the tool '1234...' (a number was refused as a name before), a numeric `id` became a
# string call_id, and `"arguments": <N>` was refused as "got _LongInt". It is an int outside 64 bits now, refused as
# such everywhere; OpenAI arguments that are no string or object were a TypeError, not an invalid action.
N = '1234567890123456789012345'
LONG_OUTSIDE_PARAMS = [
    (f'<tool_call>{{"name": {N}, "arguments": {{}}}}</tool_call>', rf"'name' must be a string, got {N}$"),
    (f'{{"tool": {N}, "params": {{}}}}', rf"'tool' must be a non-empty string, got {N}$"),
    (f'[TOOL_CALLS] [{{"type": "tool_use", "name": {N}, "input": {{}}}}]', rf"tool_use 'name' must be a non-empty string, got {N}$"),
    (f'{{"type": "tool_use", "id": {N}, "name": "a", "input": {{}}}}', r"tool_use 'a': 'id' must be a string, got int$"),   # an id, refused as one
    (f'{{"tool": "a", "params": {{}}, "thought": -{N}}}', r"tool 'a': 'thought' holds an integer outside 64 bits"),
    (f'<tool_call>{{"name": "a", "arguments": {N}}}</tool_call>', r"tool call 'a': arguments must be an object, got int$"),
    (f'<tool_call>{{"name": "a", "arguments": "{N}"}}</tool_call>', r"tool call 'a': arguments must be a JSON object, got int$"),
    (f'<tool_call>{{"type": "function", "function": {{"name": "a", "arguments": {N}}}}}</tool_call>',
     r"tool_call 'a': arguments must be a JSON object, got int$"),
    ({'type': 'function', 'function': {'name': 'a', 'arguments': [1]}}, r"tool_call 'a': arguments must be a JSON object, got list$"),
]

@pytest.mark.parametrize('action, why', LONG_OUTSIDE_PARAMS, ids=range(len(LONG_OUTSIDE_PARAMS)))
def test_a_long_integer_outside_params_is_refused_as_an_integer(action, why):
    with pytest.raises(InvalidActionError, match=why): parse_action(action)
    if isinstance(action, str):
        with pytest.raises(InvalidActionError, match=why): parse_reply(action)
    env = BashEnv(); env.reset()
    ts = env.step(action)
    assert ts.info.get('invalid_action') and ts.call is None and 'got _LongInt' not in ts.observation

# `int64_call` walked only dicts and lists, and only `_python_call` checked that values are JSON values: a dict action (a
# Python caller's, an MCP server's) holding a tuple, a set or a numpy integer passed, an integer past 64 bits inside a
# tuple too, and orjson then refused the trajectory (or wrote the tuple as a list). One walk, `json_call`, checks every
# value of a call from every reader: a dict action's non-JSON containers and scalars are refused like a ReAct call's.
def test_a_dict_action_holds_json_values_only():
    import numpy as np

    from knowlyr_lab.envs.text_actions import parse_text_action
    for params, where in [({'xs': (1, 2**70)}, "'xs'"), ({'xs': {2**70}}, "'xs'"), ({'x': np.uint64(2**64 - 1)}, "'x'"),
                          ({'x': np.int64(3)}, "'x'"), ({'x': [np.float32(1.5)]}, r"'x'\[0\]"), ({'x': {'k': (1,)}}, r"'x'\['k'\]"),
                          ({1: "a"}, "1"), ({"x": {None: 1}}, r"'x'\[None\]"), ({'x': b'ab'}, "'x'")]:
        for action in ({'tool': 'bash', 'params': params}, {'type': 'tool_use', 'name': 'bash', 'input': params}):
            with pytest.raises(InvalidActionError, match=rf"^tool 'bash': argument {where} holds a value JSON cannot carry \(a "):
                parse_action(action)
            env = BashEnv(); env.reset()
            ts = env.step(action)
            assert ts.info.get('invalid_action') and ts.call is None
    with pytest.raises(InvalidActionError, match=r"argument 'x' holds a value JSON cannot carry \(a set\)"):
        parse_text_action('Action: f(x={1, 2})')
    ok = {'x': [1, -2.5, None, True, 'é'], 'd': {'k': {'n': 2**64 - 1}}}
    assert parse_action({'tool': 'bash', 'params': ok}) == {'tool': 'bash', 'params': ok}

# Non-finite numbers and lone surrogates passed as JSON values in every format: `f(x=1e999)`, `{"x": NaN}` and
# `Action Input: {"x": Infinity}` gave inf/nan params, which orjson writes as null (the argument silently changed), and
# `"\\ud800"` was a valid step whose trajectory then failed to write (UnicodeEncodeError). NaN and Infinity are not JSON
# (RFC 8259) and no UTF-8 encodes a lone surrogate: both make the call an invalid action, in every format.
def _calls_of(value, key='x'):
    "The call bash(x=<value>) in every format, `value` as JSON text (or a Python literal for `tool(k=v)`)"
    return [f'{{"name": "bash", "arguments": {{"{key}": {value}}}}}', f'<tool_call>{{"name": "bash", "arguments": {{"{key}": {value}}}}}</tool_call>',
            f'[TOOL_CALLS] [{{"name": "bash", "arguments": {{"{key}": {value}}}}}]', f'Ok.<|python_tag|>{{"name": "bash", "parameters": {{"{key}": {value}}}}}',
            f'Action: bash\nAction Input: {{"{key}": {value}}}', f'Action: bash({{"{key}": {value}}})',
            f'{{"tool": "bash", "params": {{"opts": [{{"{key}": {value}}}]}}}}',
            {'type': 'function', 'function': {'name': 'bash', 'arguments': f'{{"{key}": {value}}}'}}]

NOT_JSON_VALUES = [('NaN', r'nan, not JSON'), ('-Infinity', r'-inf, not JSON'), ('1e999', r'inf, not JSON'),
                   ('"\\ud800"', 'a lone surrogate'), ('["ok", "a\\udfffb"]', 'a lone surrogate')]

@pytest.mark.parametrize('value, why', NOT_JSON_VALUES, ids=range(len(NOT_JSON_VALUES)))
def test_non_finite_numbers_and_lone_surrogates_are_invalid_actions(value, why):
    from knowlyr_lab.envs.text_actions import parse_text_action
    for action in _calls_of(value) + (_calls_of('1', value[1:-1])[:2] if value[0] == '"' else []):   # a key too
        with pytest.raises(InvalidActionError, match=why): parse_action(action)
        if isinstance(action, str):
            with pytest.raises(InvalidActionError, match=why): parse_text_action(action)
        env = BashEnv(); env.reset()
        ts = env.step(action)
        assert ts.info.get('invalid_action') and ts.call is None, action
    py = {'NaN': 'float("nan")', '-Infinity': '-1e999', '1e999': '1e999'}.get(value, value)
    if not py.startswith('float'):
        with pytest.raises(InvalidActionError, match=why): parse_action(f'Action: bash(x={py})')
    with pytest.raises(InvalidActionError, match=why): parse_action({'tool': 'bash', 'params': {'x': json.loads(value)}})

def test_a_rollout_with_a_lone_surrogate_writes(tmp_path):
    "The step is an invalid action; the trajectory holds no lone surrogate or non-finite number, so it is written"
    from knowlyr_lab.agents import ScriptedAgent
    from knowlyr_lab.rollout.collect import collect
    from knowlyr_lab.trajectory_io import read_trajectories, write_trajectories
    calls = ['<tool_call>{"name": "bash", "arguments": {"n": 1, "opts": ["\\ud800"]}}</tool_call>',
             '<tool_call>{"name": "bash", "arguments": {"n": 1e999}}</tool_call>', 'Action: bash(n=3, opts=[1e300, -0.0])']
    (t,) = collect(BashEnv, ScriptedAgent(calls), 1, progress=False)
    assert [s.action is None for s in t.steps] == [True, True, False]
    write_trajectories([t], tmp_path / 't.jsonl')
    (back,) = read_trajectories(tmp_path / 't.jsonl')
    assert back.steps[2].action.params == {'n': 3, 'opts': [1e300, -0.0]}

# A dict action that holds itself (`a['x'] = a`, a list inside itself, a call whose thought is the call) sent `json_call`'s
# walk round the cycle for ever, the path it names growing with each turn: `parse_action` and an env's `step` never
# returned. An SDK object that holds itself was a RecursionError out of `_as_dict`. Each is an invalid action now, naming
# where the cycle closes; a list shared by two arguments is no cycle, and is walked once however often it is shared.
def _cyclic_actions():
    a = {'n': 1}; a['x'] = a
    ring = []; ring.append({'up': ring})
    call = {'tool': 'bash', 'params': {'n': 1}}; call['thought'] = call
    tool_use = {'type': 'tool_use', 'name': 'bash', 'input': a}
    return [({'tool': 'bash', 'params': a}, r"^tool 'bash': argument 'x' holds a cycle"),
            ({'tool': 'bash', 'params': {'opts': ring}}, r"^tool 'bash': argument 'opts'\[0\]\['up'\] holds a cycle"),
            (call, r"^tool 'bash': 'thought'\['thought'\] holds a cycle"), (tool_use, r"argument 'x' holds a cycle")]

def test_a_dict_action_that_holds_itself_is_an_invalid_action():
    import threading
    from types import SimpleNamespace
    out = {}
    def run():   # on main the walk never ends: run it where a test can give up on it
        for action, why in _cyclic_actions():
            with pytest.raises(InvalidActionError, match=why): parse_action(action)
            env = BashEnv(); env.reset()
            ts = env.step(action)
            assert ts.info.get('invalid_action') and ts.call is None and 'holds a cycle' in ts.observation
        me = SimpleNamespace(name='bash'); me.input = SimpleNamespace(back=me)
        with pytest.raises(InvalidActionError, match="cannot read an action from a SimpleNamespace that holds itself"):
            parse_action(me)
        shared = [1, 2]; wide = [0]
        for _ in range(64): wide = [wide, wide]   # 2**64 paths through 65 lists
        out['ok'] = parse_action({'tool': 'bash', 'params': {'n': 1, 'opts': [shared, shared, wide]}})['params']['n']
    t = threading.Thread(target=run, daemon=True); t.start(); t.join(30)
    assert not t.is_alive(), "reading a cyclic action did not return"
    assert out.get('ok') == 1

# `_LongInt` (the integer the JSON readers keep for a literal past 21 characters) renamed its class `int`, so that errors
# read "got int": `type(v).__name__` said `int` of a value whose int is a stand-in (2**64), while `type(v)` and its
# qualname said `_LongInt`. The class keeps its name; the errors name a value's type with `value_type`, which calls a
# `_LongInt` an int, so every message still reads as JSON has it.
def test_a_long_integer_says_its_class_and_errors_name_it_an_int():
    from knowlyr_lab.action_text import json_int
    long = json.loads(N, parse_int=json_int)
    assert (type(long).__name__, type(long).__qualname__, isinstance(long, int)) == ('_LongInt', '_LongInt', True)
    from knowlyr_lab.action_text import value_type
    assert [value_type(v) for v in (long, 3, False, 'x', None)] == ['int', 'int', 'bool', 'str', 'NoneType']
    for action, why in [({'tool': 'bash', 'params': long}, r"'params' of tool 'bash' must be a dict, got int$"),
                        ({'type': 'tool_use', 'name': 'bash', 'input': long}, r"'input' must be an object, got int$"),
                        (f'[TOOL_CALLS] {N}', r"^\[TOOL_CALLS\] tool call must be a JSON object, got int$")]:
        with pytest.raises(InvalidActionError, match=why): parse_action(action)

# Mistral's tokenizers from v11 on write each call as `[TOOL_CALLS]name[ARGS]{arguments}`, one tag per call (v11 writes
# `[CALL_ID]id` before `[ARGS]`, v13 does not: mistral-common's InstructTokenizerV11/V13), and a decode that drops the
# `[ARGS]` token leaves `name{...}`, which vLLM's mistral parser reads too; before v11 a JSON list follows the tag, each
# call with its "id". Llama 3.x may write several JSON calls joined by `;` (vLLM's llama3_json parser). The v11 forms
# were refused as "not valid JSON"; Llama's run was refused as "text after the call", and after a thought its first
# calls were taken into the thought and only the last was read (a call silently lost). The strings are vLLM's tests'
# (tests/tool_parsers/test_mistral_tool_parser.py, test_llama3_json_tool_parser.py): no installed template renders
# them (trl ships no Mistral template, and its Llama 3.1/3.2 templates refuse more than one call).
ADD, MUL = {'tool': 'add', 'params': {'a': 3.5, 'b': 4}}, {'tool': 'multiply', 'params': {'a': 3, 'b': 6}}
SEARCH = [{'tool': 'searchTool', 'params': {'query': 'test1'}}, {'tool': 'getOpenIncidentsTool', 'params': {}},
          {'tool': 'searchTool', 'params': {'query': 'test2'}}]
RUN = ('{"name": "searchTool", "parameters": {"query": "test1"}}; {"name": "getOpenIncidentsTool", "parameters": {}}; '
       '{"name": "searchTool", "parameters": {"query": "test2"}}')
NEW_FORMATS = [
    ('[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}', '', [ADD]),
    ('[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}[TOOL_CALLS]multiply[ARGS]{"a": 3, "b": 6}', '', [ADD, MUL]),
    ('[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6}', '', [ADD, MUL]),
    ('hi[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}</s>', 'hi', [ADD]),
    ('[TOOL_CALLS]add[CALL_ID]a1b2c3d4e[ARGS]{"a": 3.5, "b": 4}</s>', '', [{**ADD, 'call_id': 'a1b2c3d4e'}]),
    ('[TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}, "id": "a1b2c3d4e"}]</s>', '', [{**ADD, 'call_id': 'a1b2c3d4e'}]),
    (RUN, '', SEARCH),
    (RUN.replace('; ', ' ; '), '', SEARCH),
    (f'Here are the results: {RUN}<|eot_id|>', 'Here are the results:', SEARCH),
    (f'```json\n{RUN}\n```', '', SEARCH)]

@pytest.mark.parametrize('text, thought, calls', NEW_FORMATS, ids=range(len(NEW_FORMATS)))
def test_mistral_v11_and_llama_runs_of_calls_read(text, thought, calls):
    assert parse_reply(text) == (thought, calls)
    if len(calls) > 1:
        with pytest.raises(InvalidActionError, match=rf"reply holds {len(calls)} tool calls; a step takes one"): parse_action(text)
    else: assert parse_action(text) == {**calls[0], **({'thought': thought} if thought else {})}

def _new_format_calls(value):
    "bash(x=<value>) as Mistral v11+ writes it and in a run of Llama calls, `value` as JSON text"
    args = f'{{"x": {value}}}'
    return [f'[TOOL_CALLS]bash[ARGS]{args}', f'[TOOL_CALLS]bash{args}</s>', f'[TOOL_CALLS]bash[CALL_ID]a1b2c3d4e[ARGS]{args}',
            f'[TOOL_CALLS]look[ARGS]{{}}[TOOL_CALLS]bash[ARGS]{args}', f'{{"name": "bash", "parameters": {args}}}; {{"name": "look", "parameters": {{}}}}',
            f'Ok.\n{{"name": "look", "parameters": {{}}}}; {{"name": "bash", "parameters": {args}}}<|eot_id|>']

RULES = NOT_JSON_VALUES + [(str(BIG), 'an integer outside 64 bits'), (HUGE, 'an integer outside 64 bits'),
                           ('[1, "\\udfff"]', 'a lone surrogate')]

@pytest.mark.parametrize('value, why', RULES, ids=range(len(RULES)))
def test_mistral_v11_and_llama_runs_keep_every_rule(value, why):
    for action in _new_format_calls(value):
        for parse in (parse_reply, parse_action):
            with pytest.raises(InvalidActionError, match=why): parse(action)
        env = BashEnv(); env.reset()
        ts = env.step(action)
        assert ts.info.get('invalid_action') and ts.call is None, action

AFTER_A_CALL = [('[TOOL_CALLS]bash[ARGS]{"n": 1} rm -rf /', r"^malformed \[TOOL_CALLS\]: text after the call at line 1 column 10: 'rm -rf /'"),
                ('[TOOL_CALLS]bash[ARGS]{"n": 1}{"n": 2}', r"^malformed \[TOOL_CALLS\]: text after the call at line 1 column 9"),
                ('[TOOL_CALLS]bash[ARGS]{"n": 1', r"^malformed \[TOOL_CALLS\]: not valid JSON at line 1 column"),
                ('[TOOL_CALLS]bash[ARGS][1]', r"^\[TOOL_CALLS\] tool call 'bash': arguments must be an object, got list$"),
                ('[TOOL_CALLS]bash now', r"^malformed \[TOOL_CALLS\]: text after the call at line 1 column 6: 'now'"),
                ('[TOOL_CALLS] [{"name": "bash", "arguments": {}, "id": 7}]', r"^\[TOOL_CALLS\] tool call 'bash': 'id' must be a string, got int$"),
                ('{"name": "bash", "parameters": {}}; rm -rf /', r"^malformed JSON tool call: text after the call at line 1 column 35: ';"),
                ('{"tool": "bash", "params": {}};', r"^malformed JSON tool call: text after the call at line 1 column 31: ';'$"),
                ('{"name": "a", "parameters": {}}; {"name": "bash", "parameters": ', r"^malformed JSON tool call: not valid JSON")]

@pytest.mark.parametrize('text, why', AFTER_A_CALL, ids=range(len(AFTER_A_CALL)))
def test_mistral_v11_and_llama_runs_refuse_what_is_no_call(text, why):
    for parse in (parse_reply, parse_action):
        with pytest.raises(InvalidActionError, match=why): parse(text)
    env = BashEnv(); env.reset()
    assert env.step(text).info.get('invalid_action')

def test_a_quoted_llama_run_is_still_text():
    "A run of objects the thought quotes, more text after it, is no call, as a single quoted object is not (as on main)"
    text = f'Thought: I could send {RUN}\nAction: look'
    assert parse_reply(f'I could send {RUN} and wait.') == (f'I could send {RUN} and wait.', [])
    assert parse_action(text) == {'tool': 'look', 'params': {}, 'thought': f'I could send {RUN}'}

# A call's id ties it to its tool result. 48b129a took a string "id" as call_id, but refused `"id": 1` (read, the id
# ignored, before it), let `"id": 0`, `false`, `[]` and `""` through silently (`d.get('id') or ''`), and accepted two
# calls with one id, whose tool results could not be told apart. Now, in every format, a given id (not null) is the
# call_id when it is a string (OpenAI's message schema; "" is none, as null), is refused otherwise, and a reply's ids are distinct.
def _id_forms(v):
    "A call to `f` with id `v` (JSON text) in each format that can carry one"
    return [f'<tool_call>{{"name": "f", "arguments": {{}}, "id": {v}}}</tool_call>', f'{{"name": "f", "parameters": {{}}, "id": {v}}}',
            f'Ok.\n{{"name": "f", "parameters": {{}}, "id": {v}}}', f'[TOOL_CALLS] [{{"name": "f", "arguments": {{}}, "id": {v}}}]',
            f'<tool_call>{{"type": "function", "id": {v}, "function": {{"name": "f", "arguments": "{{}}"}}}}</tool_call>',
            f'{{"tool": "f", "params": {{}}, "call_id": {v}}}']

BAD_IDS = [('1', 'int'), ('0', 'int'), ('false', 'bool'), ('true', 'bool'), ('[]', 'list'), ('{}', 'dict'), ('1.5', 'float')]

@pytest.mark.parametrize('value, got', BAD_IDS, ids=[v for v, _ in BAD_IDS])
def test_a_call_id_that_is_no_string_is_refused_in_every_format(value, got):
    for text in _id_forms(value):
        for parse in (parse_reply, parse_action):
            with pytest.raises(InvalidActionError, match=rf"'f': '(call_)?id' must be a string, got {got}$"): parse(text)
        env = BashEnv(); env.reset()
        assert env.step(text).info.get('invalid_action'), text

def test_a_string_call_id_is_read_and_null_is_none():
    for text in _id_forms('"c1"'):
        assert parse_action(text)['call_id'] == 'c1', text
    for text in _id_forms('null') + _id_forms('""'):   # "": none, as Gemini's and LM Studio's servers send it
        assert 'call_id' not in parse_action(text), text

TWICE = ['<tool_call>{"name": "f", "id": "c1"}</tool_call>\n<tool_call>{"name": "g", "id": "c1"}</tool_call>',
         '[TOOL_CALLS] [{"name": "f", "arguments": {}, "id": "c1"}, {"name": "g", "arguments": {}, "id": "c1"}]',
         '[TOOL_CALLS]f[CALL_ID]c1[ARGS]{}[TOOL_CALLS]g[CALL_ID]c1[ARGS]{}',
         '{"name": "f", "parameters": {}, "id": "c1"}; {"name": "g", "parameters": {}, "id": "c1"}']

@pytest.mark.parametrize('text', TWICE, ids=range(len(TWICE)))
def test_two_calls_with_one_id_are_refused(text):
    with pytest.raises(InvalidActionError, match=r"reply holds two calls with id 'c1': ambiguous results$"):
        parse_reply(text)
    assert parse_reply(text.replace('"c1"', '"c2"', 1).replace('[CALL_ID]c1', '[CALL_ID]c2', 1))[1][0]['call_id'] == 'c2'

# A run of Llama calls joined by `;` took any `{"name": ...}` object in: a thought that ends quoting `{"name": "x"};`
# before the real call was read as two calls (x with no arguments, then the call), so parse_action refused the reply;
# before 48b129a the call was read with that text as its thought. A run holds calls only (a "name" and "parameters" or
# "arguments"): after an object that is no call, a `;` is text, as it was.
SCHEMA = 'The schema is {"name": "x"}; {"name": "search", "parameters": {"q": "cats"}}'
CATS = {'tool': 'search', 'params': {'q': 'cats'}}
QUOTED_THEN_CALL = [(SCHEMA, 'The schema is {"name": "x"};', [CATS]),
                    (SCHEMA + '<|eot_id|>', 'The schema is {"name": "x"};', [CATS]),
                    ('Sent {"name": "a", "parameters": {}}; {"name": "x"}; ' + SCHEMA[14 + 15:],
                     'Sent {"name": "a", "parameters": {}}; {"name": "x"};', [CATS]),
                    ('Ok. {"name": "a", "arguments": {}}; {"name": "b", "parameters": {}}', 'Ok.',
                     [{'tool': 'a', 'params': {}}, {'tool': 'b', 'params': {}}])]

@pytest.mark.parametrize('text, thought, calls', QUOTED_THEN_CALL, ids=range(len(QUOTED_THEN_CALL)))
def test_a_llama_run_holds_calls_only(text, thought, calls):
    assert parse_reply(text) == (thought, calls)
    if len(calls) == 1: assert parse_action(text) == {**calls[0], 'thought': thought}

def test_an_object_that_is_no_call_does_not_start_a_run():
    for text in [SCHEMA[14:], '{"name": "a", "parameters": {}}; {"name": "x"}']:
        with pytest.raises(InvalidActionError, match=r"^malformed JSON tool call: text after the call at line 1 column \d+: '; \{"):
            parse_reply(text)

# A pydantic model that holds itself (`m.child = m`, or `m.params = {'x': m}`) given as an action: `_as_dict` read it with
# `model_dump`, whose cycle check raises ValueError ("Circular reference detected"), and that ValueError escaped
# `parse_action` and an env's `step` (the dict and plain-object cycles above were covered, the pydantic one was not).
# It is an invalid action now, its reason in one line.
def test_a_pydantic_model_that_holds_itself_is_an_invalid_action():
    from pydantic import BaseModel
    class Call(BaseModel): tool: str = 'bash'; params: dict = {}; child: 'Call | None' = None
    knot, held = Call(), Call()
    knot.child, held.params = knot, {'x': held}
    why = r"^cannot read an action from a Call: model_dump\(\) failed: Circular reference detected \(id repeated\)$"
    for action in (knot, held):
        with pytest.raises(InvalidActionError, match=why): parse_action(action)
        env = BashEnv(); env.reset()
        ts = env.step(action)
        assert ts.info.get('invalid_action') and ts.call is None and 'Circular reference' in ts.observation

# The dict readers of page 00aa had their own id rule: the OpenAI and Anthropic readers kept `d.get('id')` only when truthy,
# so `"id": 0`, `""`, `false` or `[]` was dropped silently before the rule of the text formats could see it, and an int id
# (`"id": 1`, a canonical `"call_id": 7`) was passed through as the call_id (a dict action, or one an SDK object gives).
# Every reader now reads the id with `call_id_of`: absent, null or "" is none, another string is the call_id, anything
# else is refused naming the field it was given in (the openai and anthropic SDK types declare the id a required str).
def _id_dicts(v):
    "A call to `f` with id `v` as each dict dialect carries one"
    return [({'type': 'function', 'id': v, 'function': {'name': 'f', 'arguments': '{}'}}, 'tool_call', 'id'),
            ({'type': 'tool_use', 'id': v, 'name': 'f', 'input': {}}, 'tool_use', 'id'),
            ({'tool': 'f', 'params': {}, 'call_id': v}, 'action', 'call_id')]

@pytest.mark.parametrize('value, got', [(0, 'int'), (1, 'int'), (False, 'bool'), ([], 'list'), (1.5, 'float')])
def test_a_dict_call_id_that_is_no_string_is_refused(value, got):
    for action, what, key in _id_dicts(value):
        with pytest.raises(InvalidActionError, match=rf"^{what} 'f': '{key}' must be a string, got {re.escape(got)}$"):
            parse_action(action)
        env = BashEnv(); env.reset()
        assert env.step(action).info.get('invalid_action'), action

def test_a_dict_call_id_string_is_read_and_null_is_none():
    from openai.types.chat import ChatCompletionMessageToolCall
    sdk = ChatCompletionMessageToolCall(id='', type='function', function={'name': 'f', 'arguments': '{}'})
    assert parse_action(sdk) == {'tool': 'f', 'params': {}}   # "" (Gemini's, LM Studio's servers): no id, not refused
    assert parse_action(sdk.model_copy(update={'id': 'call_1'}))['call_id'] == 'call_1'
    for action, _, _ in _id_dicts('c1'): assert parse_action(action)['call_id'] == 'c1', action
    for action, _, _ in _id_dicts(None) + _id_dicts(''): assert 'call_id' not in parse_action(action), action

# Mistral v11+: a name written alone after the tag (`[TOOL_CALLS]look`, no `[ARGS]` and no `{`: a generation that stops
# after the name) was refused as "not valid JSON". vLLM's newer mistral parser (vllm/parser/mistral.py, which
# vllm/tool_parsers/mistral_tool_parser.py hands v11 output to) reads it as a call without arguments ("{}"), the name
# being all up to `[ARGS]`, `{` or the next tag, stripped (tests/tool_parsers/test_mistral_tool_parser.py::
# test_extract_tool_calls_v11_without_args_skipped). Read so here; other text after the name is refused (vLLM would
# call a tool named "look around").
LOOK, MOVE = {'tool': 'look', 'params': {}}, {'tool': 'move', 'params': {'to': 'east'}}
BARE_NAMES = [('[TOOL_CALLS]toolname_no_args', '', [{'tool': 'toolname_no_args', 'params': {}}]),
              ('Looking.[TOOL_CALLS]look</s>', 'Looking.', [LOOK]),
              ('[TOOL_CALLS]look \n', '', [LOOK]),
              ('[TOOL_CALLS]fs.read-all', '', [{'tool': 'fs.read-all', 'params': {}}]),
              ('[TOOL_CALLS]look[TOOL_CALLS]move[ARGS]{"to": "east"}', '', [LOOK, MOVE]),
              ('[TOOL_CALLS]move [ARGS] {"to": "east"}[TOOL_CALLS]look', '', [MOVE, LOOK]),
              ('[TOOL_CALLS]move {"to": "east"}', '', [MOVE]),
              ('[TOOL_CALLS]look[CALL_ID]a1b2c3d4e</s>', '', [{**LOOK, 'call_id': 'a1b2c3d4e'}])]

@pytest.mark.parametrize('text, thought, calls', BARE_NAMES, ids=range(len(BARE_NAMES)))
def test_a_mistral_name_alone_is_a_call_without_arguments(text, thought, calls):
    assert parse_reply(text) == (thought, calls)
    if len(calls) == 1:
        assert parse_action(text) == {**calls[0], **({'thought': thought} if thought else {})}
    if calls == [{**calls[0], 'params': {}}]:   # a call without arguments steps an env
        env = BashEnv(); env.reset()
        assert not env.step(text.replace(calls[0]['tool'], 'bash')).info.get('invalid_action')

@pytest.mark.parametrize('text, at', [('[TOOL_CALLS]look around', "column 6: 'around'"), ('[TOOL_CALLS]look\nok', "line 2 column 1: 'ok'"),
                                      ('[TOOL_CALLS]look[CALL_ID]c1 x', "column 17: 'x'")])
def test_text_after_a_mistral_name_alone_is_refused(text, at):
    for parse in (parse_reply, parse_action):
        with pytest.raises(InvalidActionError, match=rf"^malformed \[TOOL_CALLS\]: text after the call at (line 1 )?{re.escape(at)}$"):
            parse(text)

# Llama 3.x runs: a `<|python_tag|>` before a later call of a `;`-joined run (`{...}; <|python_tag|>{...}`) and a `;` after
# the last call were refused as "text after the call" (after a thought, the reply was taken for prose: its calls lost).
# vLLM reads both: vllm/tool_parsers/llama_tool_parser.py decodes every top-level object and skips the text between and
# after them, and the newer vllm/parser/llama_json.py drops all text after the first call. Llama's own templates (trl's
# llama3_1/llama3_2.jinja) write one call with no `;` and `<|python_tag|>` only before a built-in `name.call(...)`. Both
# read now; other text between or after the calls (a newline between two calls, prose after them), which vLLM drops,
# is still refused, as is a `;` after an object that is no Llama call.
A, B = {'tool': 'a', 'params': {}}, {'tool': 'b', 'params': {}}
TAG = '<|python_tag|>'
TAGGED_RUNS = [(f'{TAG}{{"name": "a", "parameters": {{}}}}; {TAG}{{"name": "b", "parameters": {{}}}}', '', [A, B]),
               (RUN.replace('; ', f'; {TAG}'), '', SEARCH),
               (RUN.replace('; ', f';{TAG}') + ';', '', SEARCH),
               (f'{RUN};', '', SEARCH),
               (f'Here are the results: {TAG}{RUN.replace("; ", f"; {TAG}")} ;<|eot_id|>', 'Here are the results:', SEARCH),
               ('{"name": "a", "parameters": {}};', '', [A]),
               ('Sent.\n{"name": "a", "arguments": {}} ;\n<|eom_id|>', 'Sent.', [A]),
               ('```json\n{"name": "a", "parameters": {}};\n```', '', [A])]

@pytest.mark.parametrize('text, thought, calls', TAGGED_RUNS, ids=range(len(TAGGED_RUNS)))
def test_a_llama_run_may_tag_each_call_and_end_with_a_semicolon(text, thought, calls):
    assert parse_reply(text) == (thought, calls)
    if len(calls) == 1:
        assert parse_action(text) == {**calls[0], **({'thought': thought} if thought else {})}
        env = BashEnv(); env.reset()
        assert not env.step(text.replace('"a"', '"bash"')).info.get('invalid_action')

NOT_A_RUN = [('{"name": "a", "parameters": {}}; <|python_tag|>', "column 32: '; <|python_tag|>'"),
             ('{"name": "a", "parameters": {}};;', "column 32: ';;'"),
             ('{"name": "a", "parameters": {}}; {"name": "b", "parameters": {}}; ok', "column 32: '; ok'"),
             ('{"name": "a", "parameters": {}}\n{"name": "b", "parameters": {}}', "line 2 column 1: '{\"name\": \"b\""),
             ('{"tool": "a", "params": {}};', "column 28: ';'"),
             ('{"name": "x"}; {"name": "a", "parameters": {}};', "column 14: '; {\"name\": \"a\"")]

@pytest.mark.parametrize('text, at', NOT_A_RUN, ids=range(len(NOT_A_RUN)))
def test_other_text_around_a_llama_run_is_refused(text, at):
    for parse in (parse_reply, parse_action):
        with pytest.raises(InvalidActionError, match=rf"^malformed JSON tool call: text after the call at (line 1 )?{re.escape(at)}"):
            parse(text)

# A hub 0.1 step whose action is a dict `parse_action` refuses (since af89be5 that includes a `call_id` of false or an
# int, which seed_messages read before) lost its call silently: `_seed_action` answered "no call, no text", so the
# step became an empty assistant turn and its observation a user turn. The record is refused now, naming the step.
def test_a_seed_step_whose_dict_action_is_no_call_refuses_the_record():
    from knowlyr_lab.chat import ChatFormatError, seed_messages
    for action, why in [({'tool': 'move', 'params': {}, 'call_id': False}, "action 'move': 'call_id' must be a string, got bool"),
                        ({'tool': 'move', 'params': {}, 'call_id': 7}, "action 'move': 'call_id' must be a string, got int"),
                        ({'name': 'move'}, 'unrecognised action')]:
        with pytest.raises(ChatFormatError, match=rf"^sft\.jsonl:3: steps\[1\]\.action: {re.escape(why)}"):
            seed_messages([{'action': 'look()', 'observation': 'dark'}, {'action': action, 'observation': 'ok'}], 'sft.jsonl:3')
    msgs, _ = seed_messages([{'action': None, 'thought': 'Done.'}, {'action': {'tool': 'move', 'params': {}, 'call_id': 'c1'}}])
    assert msgs[0] == {'role': 'assistant', 'content': 'Done.'} and msgs[1]['tool_calls'][0]['id'] == 'c1'

# e96ec99 read any word after the tag as a call without arguments, so prose that names the tag became a call: 'Use
# [TOOL_CALLS] first.' a call `first.`, '[TOOL_CALLS]true' a call `true` (refused before as no JSON object). A name
# alone is a call only when shaped as a tool's name: not ending in `.` or `-`, and not a JSON literal.
NOT_A_NAME = 'malformed [TOOL_CALLS]: not valid JSON at line 1 column 1: Expecting value: '
PROSE_AFTER_THE_TAG = [('Use [TOOL_CALLS] first.', NOT_A_NAME + "'first.'"),
                       ('[TOOL_CALLS]Done.', NOT_A_NAME + "'Done.'"),
                       ('[TOOL_CALLS]look-', NOT_A_NAME + "'look-'"),
                       ('[TOOL_CALLS]true', '[TOOL_CALLS] tool call must be a JSON object, got bool'),
                       ('[TOOL_CALLS]false</s>', '[TOOL_CALLS] tool call must be a JSON object, got bool'),
                       ('[TOOL_CALLS]null', '[TOOL_CALLS] tool call must be a JSON object, got NoneType')]

@pytest.mark.parametrize('text, why', PROSE_AFTER_THE_TAG, ids=range(len(PROSE_AFTER_THE_TAG)))
def test_prose_after_a_mistral_tag_is_no_call(text, why):
    for parse in (parse_reply, parse_action):
        with pytest.raises(InvalidActionError, match=f'^{re.escape(why)}'):
            parse(text)
    env = BashEnv(); env.reset()
    assert env.step(text).info.get('invalid_action')

def test_a_mistral_name_with_arguments_on_its_line_is_still_read():
    assert parse_reply('[TOOL_CALLS] search {"q": 1}\n') == ('', [{'tool': 'search', 'params': {'q': 1}}])
    assert parse_reply('Go.[TOOL_CALLS]search [ARGS]\n{"q": 1}') == ('Go.', [{'tool': 'search', 'params': {'q': 1}}])

# 01ee0d6 refused a lone name after whitespace ('[TOOL_CALLS] look') and a line break between a name and its `{` or
# [ARGS], which vLLM's mistral parser reads (it strips the name: vllm/parser/mistral.py, ParserEngine); and without the
# tools offered, '[TOOL_CALLS]Sorry' was a call `Sorry`. Now whitespace around a name is read as vLLM reads it, and a
# caller that knows the tools (parse_reply/parse_action_text `tools`) gets no call for a lone name that is none of them.
SEARCH_Q = {'tool': 'search', 'params': {'q': 1}}
AS_VLLM_READS = [('[TOOL_CALLS] look', '', [LOOK]),
                 ('Ok.[TOOL_CALLS]\n  look</s>', 'Ok.', [LOOK]),
                 ('[TOOL_CALLS]search\n{"q": 1}', '', [SEARCH_Q]),
                 ('[TOOL_CALLS]search\n[ARGS]{"q": 1}', '', [SEARCH_Q]),
                 ('[TOOL_CALLS]look\n[TOOL_CALLS] search\n{"q": 1}</s>', '', [LOOK, SEARCH_Q])]

@pytest.mark.parametrize('text, thought, calls', AS_VLLM_READS, ids=range(len(AS_VLLM_READS)))
def test_whitespace_around_a_mistral_name_is_read_as_vllm_reads_it(text, thought, calls):
    assert parse_reply(text) == (thought, calls)
    assert parse_reply(text, tools=['look', 'search']) == (thought, calls)

@pytest.mark.parametrize('text', ['[TOOL_CALLS]Sorry', 'I cannot.[TOOL_CALLS]\nSorry</s>', 'Emit the [TOOL_CALLS] token',
                                  '[TOOL_CALLS]look[TOOL_CALLS]Sorry'])
def test_a_lone_mistral_name_that_is_no_offered_tool_is_no_call(text):
    word = text.rsplit(']', 1)[-1].split('<')[0].strip()
    for parse in (parse_reply, parse_action_text):
        with pytest.raises(InvalidActionError, match=f"^{re.escape(NOT_A_NAME)}'{word}"):
            parse(text, tools=['look', 'move'])
    assert parse_reply(text)[1][-1] == {'tool': word, 'params': {}}   # tools not known: read as vLLM reads it

# 46579ac checked only a LONE name against the tools offered, and let a line break stand between a name and its '{':
# '[TOOL_CALLS]Note\n{"name": "f", ...}' (a word, then a call on its own line; 01ee0d6 refused it) became a call of
# 'Note' given {name, arguments}, with or without tools=['f'], and the model server answered it as a tool call.
# Now every v11 name must be an offered tool where the tools are known, and a word above a JSON call is prose.
NOTE = '[TOOL_CALLS]Note\n{"name": "f", "arguments": {"x": 1}}'

@pytest.mark.parametrize('tools', [None, ['f'], ['Note', 'f']])
def test_a_word_above_a_mistral_json_call_is_no_call(tools):
    for parse in (parse_reply, parse_action_text):
        with pytest.raises(InvalidActionError, match=f"^{re.escape(NOT_A_NAME)}'Note"):
            parse(NOTE, tools=tools)

def test_a_mistral_name_with_arguments_must_be_an_offered_tool_where_known():
    "Where the form could be prose (a name above its `{`); `[ARGS]` or `{` on the name's line is a call of any tool"
    with pytest.raises(InvalidActionError, match=f"^{re.escape(NOT_A_NAME)}'search"):
        parse_reply('[TOOL_CALLS]search\n{"q": 1}', tools=['look'])
    for text in ('[TOOL_CALLS]search[ARGS]{"q": 1}', '[TOOL_CALLS]search{"q": 1}', '[TOOL_CALLS]search\n{"q": 1}'):
        assert parse_reply(text, tools=['search']) == parse_reply(text) == ('', [SEARCH_Q])
    for text in ('[TOOL_CALLS]search[ARGS]{"q": 1}', '[TOOL_CALLS]search{"q": 1}'):   # as a Hermes call of it is
        assert parse_reply(text, tools=['look']) == parse_reply('<tool_call>{"name": "search", "arguments": {"q": 1}}'
                                                                '</tool_call>', tools=['look']) == ('', [SEARCH_Q])
    from knowlyr_lab.serving.completions import reply_message
    msg, why = reply_message({'text': NOTE, 'finish_reason': 'stop'}, [tool_schema('f')])
    assert (msg, why) == ({'role': 'assistant', 'content': NOTE}, 'stop')


# The two readers of model replies that know the tools offered pass their names: the model server (the request's
# `tools`, whatever a client sends) and `LocalAgent` (the env's schemas). Before, neither did, so a reply ending in
# `[TOOL_CALLS]Sorry` became a call of a tool `Sorry` (finish_reason 'tool_calls') though `look` was the only tool.
def test_the_server_and_the_local_agent_read_a_lone_name_against_the_tools_offered():
    from types import SimpleNamespace

    from knowlyr_lab.core import tool_schema
    from knowlyr_lab.serving.completions import reply_message
    from knowlyr_lab.serving.model import LocalAgent
    tools = [tool_schema('look'), {'type': 'function', 'function': {'name': 7}}, {'oops': 1}]   # a client's list
    msg, why = reply_message({'text': '[TOOL_CALLS]Sorry', 'finish_reason': 'stop'}, tools)
    assert (msg, why) == ({'role': 'assistant', 'content': '[TOOL_CALLS]Sorry'}, 'stop')
    msg, why = reply_message({'text': '[TOOL_CALLS] look', 'finish_reason': 'stop'}, tools)
    assert why == 'tool_calls' and msg['tool_calls'][0]['function'] == {'name': 'look', 'arguments': '{}'}
    assert reply_message({'text': '[TOOL_CALLS]Sorry', 'finish_reason': 'stop'}, [{'oops': 1}])[1] == 'tool_calls'
    out = {'text': '[TOOL_CALLS]Sorry', 'prompt_tokens': 3, 'completion_tokens': 2}
    agent = SimpleNamespace(tools=[tool_schema('look')], _own=[], temperature=0.0)
    assert LocalAgent._reply(agent, out, False).action == '[TOOL_CALLS]Sorry'   # text: the env says what is wrong
    assert LocalAgent._reply(agent, {**out, 'text': '[TOOL_CALLS]look'}, False).action == {'tool': 'look', 'params': {}}

# 0ac915d made `"id": ""` no id in every reader, but a Mistral v11 call with an empty [CALL_ID] was refused as "text
# after the call at line 1 column 5: '[CALL_ID][ARGS]...'": `_V11_CALL` read the id as `\w+`. It is read as `\w*` and
# passed to `call_id_of`, the one rule, so an empty one is none, as in a JSON list's `"id": ""`.
EMPTY_CALL_IDS = [('[TOOL_CALLS]bash[CALL_ID][ARGS]{"n": 1}', [{'tool': 'bash', 'params': {'n': 1}}]),
                  ('[TOOL_CALLS]bash[CALL_ID]</s>', [{'tool': 'bash', 'params': {}}]),
                  ('[TOOL_CALLS]bash[CALL_ID][ARGS]{"n": 1}[TOOL_CALLS]bash[CALL_ID][ARGS]{"n": 2}',   # not one id twice
                   [{'tool': 'bash', 'params': {'n': 1}}, {'tool': 'bash', 'params': {'n': 2}}]),
                  ('[TOOL_CALLS]bash[CALL_ID][ARGS]{"n": 1}[TOOL_CALLS]bash[CALL_ID]a1b2c3d4e[ARGS]{"n": 2}',
                   [{'tool': 'bash', 'params': {'n': 1}}, {'tool': 'bash', 'params': {'n': 2}, 'call_id': 'a1b2c3d4e'}])]

@pytest.mark.parametrize('text, calls', EMPTY_CALL_IDS, ids=range(len(EMPTY_CALL_IDS)))
def test_an_empty_mistral_call_id_is_no_id(text, calls):
    assert parse_reply(text) == ('', calls)
    assert parse_reply(text)[1] == parse_reply(f'[TOOL_CALLS] {json.dumps([_as_list_call(c) for c in calls])}')[1]
    if len(calls) == 1:
        assert parse_action(text) == calls[0]
        env = BashEnv(); env.reset()
        assert not env.step(text).info.get('invalid_action')

def _as_list_call(c):
    "The call `c` as a pre-v11 list item, an absent id written as `\"id\": \"\"`"
    return {'name': c['tool'], 'arguments': c['params'], 'id': c.get('call_id', '')}


def test_the_server_reads_tool_names_with_schema_name_and_skips_a_malformed_tool():
    "A client's list of tools: a tool without a string name (no schema, a non-dict function, a list name) is skipped"
    from knowlyr_lab.serving.completions import reply_message
    tools = [{'function': 'x'}, {'function': None}, {'function': {'name': ['look']}}, {'oops': 1}, {'name': 'look'}]
    msg, why = reply_message({'text': '[TOOL_CALLS]look', 'finish_reason': 'stop'}, tools)
    assert why == 'tool_calls' and msg['tool_calls'][0]['function'] == {'name': 'look', 'arguments': '{}'}
    assert reply_message({'text': '[TOOL_CALLS]Sorry', 'finish_reason': 'stop'}, tools)[1] == 'stop'


def test_keyword_arguments_passed_as_a_literal_dict_are_read_not_dropped(tmp_path):
    "`search(**{\"q\": \"SF\"})` gave params {} with no word: `**` keywords were skipped (review24 kwargs_drop.py)"
    from knowlyr_lab.core import parse_action
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.report import ConversionReport
    assert parse_action('search(**{"q": "SF"}, n=3)', bare=True)['params'] == {'q': 'SF', 'n': 3}
    p = tmp_path / 'run.txt'
    p.write_text('Question: q\nThought: t\nAction: search(**{"q": "SF"})\nObservation: ok\n'
                 'Thought: again\nAction: search(**opts)\nObservation: ok\nFinal Answer: x\n')
    t, = convert(p, format='react-text', report=ConversionReport())
    assert t.steps[0].action.params == {'q': 'SF'}
    # not a literal dict: the action's text kept raw, flagged, never read as no arguments
    assert t.steps[1].action.params == {'_raw': 'search(**opts)'} and t.steps[1].metadata['bad_arguments'] is True


@pytest.mark.parametrize('call', ['search(q=1, **{"q": 2})', 'search(**{"q": 1}, q=2)', 'search(**{"q": 1}, **{"q": 2})'])
def test_a_keyword_given_twice_is_refused_and_kept_raw_never_read_as_one_value(tmp_path, call):
    "`search(q=1, **{\"q\": 2})` read as {'q': 2}: q=1 was lost with no word (Python refuses the call: multiple values)"
    from knowlyr_lab.action_text import parse_react
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.report import ConversionReport
    with pytest.raises(InvalidActionError, match=r"keyword 'q' is given twice"): parse_action(call, bare=True)
    with pytest.raises(InvalidActionError, match=r"keyword 'path' is given twice"):   # a positional one named too
        parse_react('Action: read("a.py", path="b.py")', positional=['path'])
    p = tmp_path / 'run.txt'
    p.write_text(f'Question: q\nThought: t\nAction: {call}\nObservation: ok\nFinal Answer: x\n')
    t, = convert(p, format='react-text', report=ConversionReport())
    assert t.steps[0].action.params == {'_raw': call} and t.steps[0].metadata['bad_arguments'] is True


@pytest.mark.parametrize('action', ['search({"q": "a", "q": "b"})', 'search({"q": "a", "q": "b", "n": null})',
                                    'search(opts={"q": "a", "q": "b"})', 'search\nAction Input: {"q": "a", "q": "b"}',
                                    'search(**{"q": "a", "q": "b"})'])   # Python keeps 'b': no keyword given twice
def test_a_key_repeated_in_a_react_actions_json_object_is_warned_like_the_json_readers(tmp_path, action):
    "`search({\"q\": \"a\", \"q\": \"b\"})` kept 'b' and lost 'a' with no word, where a JSON reader warns the last value is kept"
    from knowlyr_lab.recorder.convert import convert
    from knowlyr_lab.recorder.report import ConversionReport
    p, rep = tmp_path / 'run.txt', ConversionReport()
    p.write_text(f'Question: q\nThought: t\nAction: {action}\nObservation: ok\nFinal Answer: x\n')
    t, = convert(p, format='react-text', report=rep)
    params = t.steps[0].action.params
    assert (params.get('opts') or params)['q'] == 'b'
    line = 4 if 'Action Input' in action else 3
    assert rep.warning_lines() == [f"{p}:{line}: duplicate key 'q' in one object (the last value is kept)"]

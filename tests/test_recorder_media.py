"Images in real logs (a screenshot a tool returned, a picture the user gave) are kept whole, not only as `[image]`"
import json
from pathlib import Path

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

CC = Path(__file__).parent / 'fixtures' / 'agent_logs' / 'claude-code'
# a 1x1 PNG; its base64 must come through the redactor byte for byte
PNG = {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png',
       'data': 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='}}


def _claude_code_with_images(src:Path, out:Path)->Path:
    "The real session `src` with the first tool result's content a text block and a PNG, and a PNG in a user turn"
    lines, done = [], False
    for l in src.read_text().splitlines():
        r = json.loads(l)
        c = (r.get('message') or {}).get('content')
        if not done and r.get('type') == 'user' and isinstance(c, list) and c and c[0].get('type') == 'tool_result':
            c[0]['content'] = [{'type': 'text', 'text': 'the page'}, PNG]; done = True
            lines.append(json.dumps(r))
            u = {**r, 'uuid': r['uuid'] + '-pic', 'parentUuid': r['uuid'], 'toolUseResult': None,
                 'message': {'role': 'user', 'content': [{'type': 'text', 'text': 'and this one'}, PNG]}}
            lines.append(json.dumps(u)); continue
        lines.append(l)
    assert done
    out.write_text('\n'.join(lines) + '\n'); return out


def test_claude_code_images_are_kept(tmp_path):
    src = sorted(CC.glob('*.jsonl'))[0]
    rep = ConversionReport()
    ts = list(convert(_claude_code_with_images(src, tmp_path / src.name), format='claude-code', report=rep))
    assert ts and not rep.failed
    shot = [s for t in ts for s in t.steps if s.metadata.get('media')]
    assert len(shot) == 1 and shot[0].metadata['media'] == [PNG], shot      # the data byte for byte, after redaction
    assert shot[0].observation.content == 'the page\n[image]'
    kept = [u['record'] for t in ts for u in t.metadata.get('unmapped', []) if u['record_type'] == 'block:image']
    assert kept == [PNG], kept


def test_anthropic_messages_tool_result_image_is_kept(tmp_path):
    msgs = [{'role': 'user', 'content': 'take a screenshot'},
            {'role': 'assistant', 'content': [{'type': 'tool_use', 'id': 'c1', 'name': 'screenshot', 'input': {}}]},
            {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 'c1',
                                          'content': [{'type': 'text', 'text': 'shot'}, PNG]}]},
            {'role': 'assistant', 'content': 'done'}]
    (tmp_path / 'a.json').write_text(json.dumps({'messages': msgs}))
    t, = convert(tmp_path / 'a.json')
    assert t.steps[0].observation.content == 'shot\n[image]' and t.steps[0].metadata['media'] == [PNG]


def test_codex_user_images_are_kept(tmp_path):
    src = sorted((Path(__file__).parent / 'fixtures' / 'agent_logs' / 'codex-cli').glob('rollout-*.jsonl'))[0]
    url = 'data:image/png;base64,' + PNG['source']['data']
    lines = [json.loads(l) for l in src.read_text().splitlines()]
    ev = next(r for r in lines if r.get('payload', {}).get('type') == 'user_message')
    ev['payload']['images'] = [url]
    (tmp_path / src.name).write_text('\n'.join(map(json.dumps, lines)) + '\n')
    ts = list(convert(tmp_path / src.name, format='codex-cli'))
    kept = [u['record'] for t in ts for u in t.metadata.get('unmapped', []) if u['record_type'] == 'event_msg:user_message']
    assert kept == [{'images': [url]}], kept
    assert ts[0].task.instruction.endswith('[image]')


def test_codex_tool_output_image_is_kept(tmp_path):
    src = sorted((Path(__file__).parent / 'fixtures' / 'agent_logs' / 'codex-cli').glob('rollout-*.jsonl'))[0]
    img = {'type': 'input_image', 'image_url': 'data:image/png;base64,' + PNG['source']['data']}
    lines = [json.loads(l) for l in src.read_text().splitlines()]
    out = next(r for r in lines if r.get('payload', {}).get('type') == 'function_call_output')
    out['payload']['output'] = [{'type': 'input_text', 'text': 'the screen'}, img]
    (tmp_path / src.name).write_text('\n'.join(map(json.dumps, lines)) + '\n')
    ts = list(convert(tmp_path / src.name, format='codex-cli'))
    shot = [s for t in ts for s in t.steps if s.metadata.get('media')]
    assert len(shot) == 1 and shot[0].metadata['media'] == [img] and shot[0].observation.content == 'the screen\n[input_image]'


def test_atif_result_image_is_kept(tmp_path):
    src = Path(__file__).parent / 'fixtures' / 'atif' / 'atif_multiagent_v1_7.json'
    d = json.loads(src.read_text())
    img = {'type': 'image', 'source': {'media_type': 'image/png', 'path': 'shots/1.png'}}   # ATIF's ContentPart
    r = d['steps'][1]['observation']['results'][0]
    r['content'] = [{'type': 'text', 'text': r['content']}, img]
    (tmp_path / src.name).write_text(json.dumps(d))
    ts = list(convert(tmp_path / src.name, format='atif'))
    shot = [s for t in ts for s in t.steps if s.metadata.get('media')]
    assert len(shot) == 1 and shot[0].metadata['media'] == [img] and shot[0].observation.content.endswith('\n[image]')


FX = Path(__file__).parent / 'fixtures' / 'agent_logs'
B64 = PNG['source']['data']


def _shots(ts):
    return [s for t in ts for s in t.steps if s.metadata.get('media')]


def test_mini_swe_tool_output_image_is_kept(tmp_path):
    "mini-swe-agent v2's multimodal output (MSWEA_MULTIMODAL_CONTENT -> an image_url block) in the real run's shape"
    d = json.loads((FX / 'mini-swe-agent' / 'django__django-10999.traj.json').read_text())
    img = {'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,' + B64}}
    m = next(m for m in d['messages'][2:] if m['role'] == 'user')
    m['content'] = [{'type': 'text', 'text': m['content']}, img]
    (tmp_path / 'x.traj.json').write_text(json.dumps(d))
    shot, = _shots(convert(tmp_path / 'x.traj.json', format='mini-swe-agent'))
    assert shot.metadata['media'] == [img] and shot.observation.content.endswith('\n[image_url]')


def test_gemini_cli_tool_result_images_are_kept(tmp_path):
    "Gemini CLI: inlineData beside the functionResponse, inside its parts (Gemini 3), and a fileData part"
    recs = [json.loads(l) for l in (FX / 'gemini-cli' / 'gemini.jsonl').read_text().splitlines()]
    calls = [tc for r in recs for tc in (r.get('toolCalls') or [])]
    inl = {'inlineData': {'mimeType': 'image/png', 'data': B64}}
    fd = {'fileData': {'mimeType': 'application/pdf', 'fileUri': 'gs://b/doc.pdf'}}
    fr = calls[0]['result'][0]['functionResponse']
    calls[0]['result'] = [{'functionResponse': {**fr, 'response': {'output': 'Binary content provided (1 item(s)).'}}}, inl]
    fr = calls[-1]['result'][0]['functionResponse']
    calls[-1]['result'] = [{'functionResponse': {**fr, 'response': {'output': 'the chart'}, 'parts': [inl]}}, fd]
    (tmp_path / 'gemini.jsonl').write_text('\n'.join(map(json.dumps, recs)) + '\n')
    a, b = _shots(convert(tmp_path / 'gemini.jsonl', format='gemini-cli'))
    assert a.metadata['media'] == [inl] and a.observation.content.endswith('[image/png]')
    assert b.metadata['media'] == [inl, fd] and b.observation.content == 'the chart\n[image/png]\n[application/pdf]'


def test_smolagents_observation_images_are_kept(tmp_path):
    "smolagents writes a step's observations_images as a user message of image blocks next to the tool-response"
    row = json.loads((FX / 'smolagents' / 'gpt-4o__tool-calling__math__2025-07-24.jsonl').read_text().splitlines()[0])
    st = row['intermediate_steps']
    img = {'type': 'image', 'image': 'data:image/png;base64,' + B64}
    k = next(i for i, m in enumerate(st) if m['role'] == 'tool-call')
    st.insert(k + 1, {'role': 'user', 'content': [img], 'tool_calls': None, 'raw': None, 'token_usage': None})
    st[1]['content'].append(img)                                       # and the task's own image (task_images)
    (tmp_path / 'x.jsonl').write_text(json.dumps(row) + '\n')
    t, = convert(tmp_path / 'x.jsonl', format='smolagents')
    shot, = _shots([t])
    assert shot.index == 0 and shot.metadata['media'] == [img] and 'Output: 12.0' in shot.observation.content
    assert [s.observation.content for s in t.steps if s.action is None and s.observation] == []   # no '[image]' turn
    assert [u['record'] for u in t.metadata['unmapped'] if u['record_type'] == 'block:image'] == [img]


def test_iswe_result_image_is_kept(tmp_path):
    "iSWE's turns are {role, content} chat messages: a result given as a block list with an image keeps it"
    import yaml
    d = yaml.safe_load((Path(__file__).parent / 'fixtures' / 'recorder' / 'iswe' / 'acme__csv-7.yaml').read_text())
    img = {'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,' + B64}}
    msgs = d['localization']['trajectory']
    m = next(m for i, m in enumerate(msgs) if m['role'] == 'user' and i > 1 and msgs[i - 1]['role'] == 'assistant')
    m['content'] = [{'type': 'text', 'text': m['content']}, img]
    (tmp_path / 'x.yaml').write_text(yaml.safe_dump(d))
    shot, = _shots(convert(tmp_path / 'x.yaml', format='iswe'))
    assert shot.metadata['media'] == [img] and shot.observation.content.endswith('\n[image_url]')


def _user_media(ts):
    return [(u['record_type'], u['record']) for t in ts for u in t.metadata.get('unmapped', [])
            if u['record_type'].startswith('block:')]


def test_gemini_cli_user_images_are_kept(tmp_path):
    "Gemini CLI: an image in the task and in a later user turn was only a [image/png] marker, the data dropped"
    recs = [json.loads(l) for l in (FX / 'gemini-cli' / 'gemini.jsonl').read_text().splitlines()]
    inl = {'inlineData': {'mimeType': 'image/png', 'data': B64}}
    users = [r for r in recs if r.get('type') == 'user']
    users[0]['content'].append(inl)
    last = {**users[0], 'id': 'later-turn', 'content': [{'text': 'and this one'}, inl]}
    (tmp_path / 'gemini.jsonl').write_text('\n'.join(map(json.dumps, recs + [last])) + '\n')
    rep = ConversionReport()
    (t,) = convert(tmp_path / 'gemini.jsonl', format='gemini-cli', report=rep)
    assert t.task.instruction.endswith('[image/png]') and t.steps[-1].observation.content == 'and this one\n[image/png]'
    assert _user_media([t]) == [('block:inlineData', inl)] * 2 and rep.parts == {'block:inlineData': 2}
    assert all('the user gave' in u['why'] for u in t.metadata['unmapped'] if u['record_type'].startswith('block:'))


def test_mini_swe_user_images_are_kept(tmp_path):
    "mini-swe-agent: an image in the task message was only an [image_url] marker, the data dropped"
    d = json.loads((FX / 'mini-swe-agent' / 'django__django-10999.traj.json').read_text())
    img = {'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,' + B64}}
    m = next(m for m in d['messages'] if m['role'] == 'user')
    m['content'] = [{'type': 'text', 'text': m['content']}, img]
    (tmp_path / 'x.traj.json').write_text(json.dumps(d))
    (t,) = convert(tmp_path / 'x.traj.json', format='mini-swe-agent')
    assert t.task.instruction.endswith('\n[image_url]') and _user_media([t]) == [('block:image_url', img)]

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

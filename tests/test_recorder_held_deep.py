"""A file's trajectories held to its end (page 21a, `HeldTrajectories`) are read back from their JSON text. pydantic's
JSON parser stops at 200 levels of nesting, so a trajectory holding a value nested ~240 deep (which orjson wrote and
pydantic validated as an object) failed the whole file when redacting (the default): 0 trajectories, one adapter
error, where `redact=False` gave every one. Found by rec37; fails on 49685d71."""
import json

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport


def _nested(depth:int):
    v = 'x'
    for _ in range(depth): v = [v]
    return v

def _converted(path, redact:bool)->tuple[list, list]:
    r = ConversionReport()
    out = [json.loads(t.model_dump_json()) for t in convert(path, format='openai-chat', report=r, redact=redact)]
    for t in out: t['metadata'].pop('redactions', None)
    return out, list(r.errors)

def test_a_held_trajectory_nested_past_pydantics_json_depth_is_read_back(tmp_path):
    p = tmp_path / 'deep.jsonl'
    p.write_text(''.join(json.dumps({'id': f'ep-{i}', 'meta': {'deep': _nested(240)},
                                     'messages': [{'role': 'user', 'content': f'task {i}'},
                                                  {'role': 'assistant', 'content': 'ok'}]}) + '\n' for i in range(3)))
    held, errors = _converted(p, redact=True)
    plain, _ = _converted(p, redact=False)
    assert errors == [] and len(held) == 3, errors
    assert held == plain

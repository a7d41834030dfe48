"""A file that is one long trajectory (a Codex CLI rollout, a Claude Code or Gemini CLI session) costs the trajectory,
not the trajectory and its JSON: `serialise_error` (page 21a), which asks whether each trajectory can be written,
wrote the whole trajectory as one JSON document and threw it away, so a 50 MB session peaked at about twice the
memory it did before the check (claude-code 45 -> 95 MB above imports). It now writes one step at a time."""
import json
import tracemalloc

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.scrub import serialise_error

OUT = ''.join(f'{i:4d}  def f{i}(x): return x + {i}\n' for i in range(40))


def _line(i):
    "Line `i` of a Codex CLI rollout: the session, the user's request, then reasoning, a call, its output, token counts"
    if i == 0: return {'timestamp': '2026-01-01T00:00:00Z', 'type': 'session_meta',
                       'payload': {'id': 'x', 'cwd': '/w', 'cli_version': '0.30.0'}}
    if i == 1: return {'timestamp': '2026-01-01T00:00:00Z', 'type': 'event_msg',
                       'payload': {'type': 'user_message', 'message': 'Refactor the parser.'}}
    k, r = divmod(i - 2, 4)
    payload = [{'type': 'reasoning', 'summary': [{'type': 'summary_text', 'text': f'Read module {k}.'}]},
               {'type': 'function_call', 'name': 'shell', 'call_id': f'call_{k}',
                'arguments': json.dumps({'command': ['cat', f'src/m{k}.py']})},
               {'type': 'function_call_output', 'call_id': f'call_{k}',
                'output': json.dumps({'output': OUT, 'metadata': {'exit_code': 0}})},
               {'type': 'token_count', 'info': {'total_token_usage': {'input_tokens': 1000 * (k + 1),
                                                                      'output_tokens': 50 * (k + 1)}}}][r]
    return {'timestamp': '2026-01-01T00:00:01Z', 'type': 'event_msg' if r == 3 else 'response_item', 'payload': payload}


def _rollout(path, turns):
    path.write_text(''.join(json.dumps(_line(i)) + '\n' for i in range(2 + 4 * turns)))
    return path


def test_one_long_trajectory_is_not_also_held_as_one_json_document(tmp_path):
    warm = _rollout(tmp_path / 'rollout-2026-01-01T00-00-00-w.jsonl', 3)
    list(convert(warm, format='codex-cli'))               # the redactor and the caches made before measuring
    log = _rollout(tmp_path / 'rollout-2026-01-01T00-00-00-x.jsonl', 1200)   # ~2.3 MB, one trajectory
    tracemalloc.start()
    try:
        (t,) = [(t, tracemalloc.get_traced_memory()[0]) for t in convert(log, format='codex-cli')]
        peak = tracemalloc.get_traced_memory()[1]
    finally: tracemalloc.stop()
    t, held = t                                           # the trajectory handed on, and the memory it was handed on with
    size = len(t.model_dump_json())
    assert len(t.steps) > 1000 and size > 2_000_000 and serialise_error(t) is None
    # main wrote the whole trajectory as JSON to check it could be (transient 1.2x its JSON above what it handed on);
    # now one step's JSON at a time: the rest of the transient is the reader's chunk and a record's objects
    assert peak - held < 0.25 * size, (peak - held, size)

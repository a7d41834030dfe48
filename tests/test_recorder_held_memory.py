"""A file's trajectories wait for its end (`HeldTrajectories`) in bounded memory: about `HELD_BYTES` of JSON text
plus a trajectory, not objects. The bound used to count JSON bytes while it held the trajectories' models, five to
seven times larger: a 50 MB file of many episodes peaked at 58 MB for a bound of 8 MiB."""
import json
import tracemalloc

from knowlyr_lab.recorder import convert as convert_mod
from knowlyr_lab.recorder.convert import convert

TOK = 'Zq8vN3xR7tL2pW9kQ4mB'     # no pattern knows it bare; `API_KEY=` names it a secret


def _episode(i, note=''):
    msgs = [{'role': 'user', 'content': f'Fix issue #{i}: ' + 'lorem ipsum ' * 20 + note}]
    for k in range(4):
        call = {'name': 'shell', 'arguments': json.dumps({'cmd': f'grep -rn foo{k} src/'})}
        msgs += [{'role': 'assistant', 'content': f'Step {k}.',
                  'tool_calls': [{'id': f'c{i}_{k}', 'type': 'function', 'function': call}]},
                 {'role': 'tool', 'tool_call_id': f'c{i}_{k}', 'content': 'src/a.py:12: foo()\n' * 15}]
    return json.dumps({'id': f'task-{i}', 'messages': msgs + [{'role': 'assistant', 'content': 'Done.'}]})


def _peak(path, **kw):
    "tracemalloc's peak while `convert` runs over `path`, its trajectories consumed one at a time (as the CLI writes)"
    tracemalloc.start()
    try:
        n = sum(1 for _ in convert(path, **kw))
        return tracemalloc.get_traced_memory()[1], n
    finally: tracemalloc.stop()


def test_held_trajectories_cost_about_held_bytes_not_their_objects(tmp_path, monkeypatch):
    held = 128 * 2**10
    monkeypatch.setattr(convert_mod, 'HELD_BYTES', held)
    log = tmp_path / 'episodes.jsonl'      # ~1 MB of JSON, 400 episodes: held to the end, past the bound
    log.write_text(''.join(_episode(i, f' header {TOK}' if i == 7 else '') + '\n' for i in range(400))
                   + json.dumps({'id': 'late', 'messages': [{'role': 'user', 'content': f'export API_KEY={TOK}'}]}) + '\n')
    warm = tmp_path / 'warm.jsonl'; warm.write_text(log.read_text().split('\n', 3)[0] + '\n')
    list(convert(warm)); list(convert(warm, redact=False))     # the redactor and caches made before measuring
    streamed, n = _peak(log, redact=False)                        # nothing held: each trajectory handed on
    waited, m = _peak(log)                                        # every trajectory held to the file's end
    assert n == m == 401
    # main held up to `held` bytes of JSON as objects, ~6x that: 0.87 MB above the streamed run; now 0.19 MB
    assert waited - streamed < 2 * held, (waited, streamed)


def test_the_late_secret_is_still_gone_from_the_trajectories_waiting_on_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(convert_mod, 'HELD_BYTES', 4096)         # a few episodes in memory, the rest on disk
    log = tmp_path / 'episodes.jsonl'
    log.write_text(''.join(_episode(i, f' header {TOK}' if i in (1, 30) else '') + '\n' for i in range(40))
                   + json.dumps({'id': 'late', 'messages': [{'role': 'user', 'content': f'export API_KEY={TOK}'}]}) + '\n')
    out = list(convert(log))
    assert [t.task.id for t in out] == [f'task-{i}' for i in range(40)] + ['late']
    assert not any(TOK in t.model_dump_json() for t in out)
    assert [i for i, t in enumerate(out) if t.metadata['redactions']] == [1, 30, 40]

"""The duplicate-key check of `iter_jsonl` (page 20b) costs no memory beyond its chunk: it wrote the objects it
handed on back with `orjson.dumps` to count their colons, and CPython then keeps a UTF-8 copy inside every non-ASCII
string written, for as long as the string lives. A Gemini CLI session, which the adapter keeps whole until its end,
is full of such text: a 50 MB session peaked ~34 MB higher. The check now dumps a parse of its own."""
import json
import tracemalloc
from pathlib import Path

from knowlyr_lab.recorder.reading import iter_jsonl
from knowlyr_lab.recorder.report import ConversionReport

SRC = Path(__file__).parent / 'fixtures' / 'agent_logs' / 'gemini-cli' / 'gemini.jsonl'


def _accented(o):
    "`o` with the long strings (the messages, the tool output) written in French-like accented text"
    if isinstance(o, str): return o.replace('e', '\xe9') if len(o) > 40 else o
    if isinstance(o, dict): return {k: _accented(v) for k, v in o.items()}
    return [_accented(v) for v in o] if isinstance(o, list) else o


def _session(path, copies):
    "A Gemini CLI JSONL session: the sample's messages replayed `copies` times with new ids, non-ASCII escaped"
    recs = [_accented(json.loads(line)) for line in SRC.read_text().splitlines() if line.strip()]
    with open(path, 'w') as f:
        f.write(json.dumps(recs[0]) + '\n')
        for k in range(copies):
            for r in recs[1:]: f.write(json.dumps(dict(r, id=f"{r['id']}-{k}") if 'id' in r else r) + '\n')
    return path


def test_objects_read_keep_no_utf8_copies(tmp_path):
    list(iter_jsonl(_session(tmp_path / 'warm.jsonl', 1), ConversionReport()))     # caches made before measuring
    log = _session(tmp_path / 'session-x.jsonl', 8)
    size = log.stat().st_size
    r = ConversionReport()
    tracemalloc.start()
    try:
        kept = list(iter_jsonl(log, r))                   # kept whole, as the Gemini CLI adapter keeps its messages
        held, peak = tracemalloc.get_traced_memory()
    finally: tracemalloc.stop()
    assert len(kept) > 200 and size > 1_000_000 and r.n_warnings == 0
    # main: 2.54x the file held (1.88x of it the objects, the rest UTF-8 copies), 3.02x at the peak; now 1.88x, 2.57x
    assert held < 2.2 * size and peak < 2.8 * size, (held / size, peak / size)


def test_a_repeated_key_is_still_warned(tmp_path):
    "The same answer: a key written twice in a line of non-ASCII text is warned at its line, the others are not"
    log = tmp_path / 'session-x.jsonl'
    log.write_text('{"id": "1", "text": "caf\\u00e9 \\u2014 a:b"}\n{"id": "2", "text": "caf\\u00e9", "text": "th\\u00e9"}\n'
                   '{"id": "3", "text": "na\\u00efve: \\u003a"}\n')
    r = ConversionReport()
    got = list(iter_jsonl(log, r))
    assert [o['text'] for _, o in got] == ['caf\xe9 \u2014 a:b', 'th\xe9', 'na\xefve: :']
    assert [(w['line'], w['reason']) for w in r.warnings] == [(2, "duplicate key 'text' in one object (the last value is kept)")]

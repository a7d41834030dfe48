"""The recording proxy's open episodes are bounded (srv10): one episode id used to grow a chain without limit, written
only after 3,600 s idle or when pushed out past 4,096 open chains. Now an episode is written as a part when it reaches
`max_exchanges` exchanges or `max_chain_tokens` token ids, and the next exchange starts the next part; no exchange is
lost. The recorder alone (no model): `record` is what `serve` calls for each answered request."""
from knowlyr_lab.hub.store import TrajectoryStore
from knowlyr_lab.serving.recording import ExchangeRecorder


def _exchange(rec, k:int, prompt_ids:list, episode='ep-long'):
    "Exchange `k` of one episode, as `serve` hands it over: completion ids [k] tell the exchanges apart"
    out = {'prompt_token_ids': prompt_ids, 'token_ids': [k], 'logprobs': None, 'finish_reason': 'stop'}
    return rec.record([{'role': 'user', 'content': f'turn {k}'}], None, [out], [{'role': 'assistant', 'content': f'r{k}'}],
                      float(k), float(k) + 0.5, 'tiny', episode=episode, task_id='t1', client='c')

def test_a_long_episode_is_written_in_parts_at_max_exchanges_and_loses_nothing(tmp_path):
    rec = ExchangeRecorder(tmp_path / 'store')                     # the defaults serve uses: max_exchanges=512
    for k in range(1100): _exchange(rec, k, [1, 2, 3])
    # on main: nothing written, one open chain of 1,100 exchanges
    assert len(rec.written) == 2 and [len(ch) for ch in rec._chains.values()] == [76], (len(rec.written), [len(c) for c in rec._chains.values()])
    assert rec.max_exchanges == 512
    rec.flush()
    parts = sorted((rec.store.get(t) for t in rec.written), key=lambda t: t.steps[0].token_ids[0])
    assert [len(p.steps) for p in parts] == [512, 512, 76]
    assert [p.metadata.get('cut') for p in parts] == ['max_exchanges', 'max_exchanges', None]
    assert {p.metadata['episode'] for p in parts} == {'ep-long'} and {p.task.id for p in parts} == {'t1'}
    assert [s.token_ids[0] for p in parts for s in p.steps] == list(range(1100))   # every exchange once, in order
    assert not rec.errors and len(list(TrajectoryStore(tmp_path / 'store'))) == 3

def test_an_episode_is_written_when_it_holds_max_chain_tokens_token_ids(tmp_path):
    rec = ExchangeRecorder(tmp_path / 'store')
    big = list(range(2**20))             # a long prompt: two exchanges reach the default bound, max_chain_tokens=2**21
    _exchange(rec, 0, big); assert not rec.written
    _exchange(rec, 1, big)
    assert len(rec.written) == 1 and not rec._chains               # on main: still open, holding 2 M ids
    part = rec.store.get(rec.written[0])
    assert part.metadata['cut'] == 'max_chain_tokens' and len(part.steps) == 2 and part.steps[1].prompt_token_ids == big
    _exchange(rec, 2, [1, 2])                                       # the episode goes on in a part of its own
    assert [len(ch) for ch in rec._chains.values()] == [1]

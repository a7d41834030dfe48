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

def test_open_episodes_hold_at_most_max_tokens_held_in_total(tmp_path):
    """Each open episode was bounded (max_chain_tokens) but not all of them together: max_open=4,096 episodes of 2**21
    ids each. Now past `max_tokens_held` ids in all the least recently continued episodes are written as parts
    (cut 'max_tokens_held'), never dropped. 40 episodes from 4 threads, 300 ids an exchange, a total bound of 5,000."""
    import threading
    import time
    rec, now = ExchangeRecorder(tmp_path / 'store', max_tokens_held=5_000), time.time()
    def client(t:int):
        for turn in range(6):
            for e in range(10):
                k = (t * 10 + e) * 6 + turn                    # the exchange's number: its completion id
                out = {'prompt_token_ids': [k] * 299, 'token_ids': [k], 'logprobs': None, 'finish_reason': 'stop'}
                rec.record([{'role': 'user', 'content': f'turn {k}'}], None, [out], [{'role': 'assistant', 'content': f'r{k}'}],
                           now + turn, now + turn + 0.5, 'tiny', episode=f'ep-{t}-{e}', task_id='t1', client='c')
    ts = [threading.Thread(target=client, args=(t,)) for t in range(4)]
    for t in ts: t.start()
    for t in ts: t.join(120)
    # the most held after any exchange (the recorder's own count, under its lock); on main: a TypeError, no such bound
    assert 4_700 < rec.tokens_held_peak <= 5_000, rec.tokens_held_peak
    cut = list(rec.written)
    assert cut, 'no episode was written as a part before flush'
    rec.flush()
    parts = [rec.store.get(t) for t in rec.written]
    assert {rec.store.get(t).metadata.get('cut') for t in cut} == {'max_tokens_held'}
    steps = sorted(s.token_ids[0] for p in parts for s in p.steps)
    assert steps == list(range(240)), (len(steps), len(set(steps)))      # every exchange once
    for p in parts:                                                       # a part holds one episode's exchanges, in order
        ks = [s.token_ids[0] for s in p.steps]
        assert ks == sorted(ks) and len({k // 6 for k in ks}) == 1 and p.metadata['episode'] == f'ep-{ks[0] // 60}-{ks[0] // 6 % 10}'
    assert not rec.errors and rec.tokens_held == 0 and not rec._tokens

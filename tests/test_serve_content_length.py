"""srv27: the inference server (page 54) read a request's body size with `int(headers.get('Content-Length'))`, which
takes `+5`, `5_0` (as 50) and a vertical tab or a no-break space around the digits, and, of two Content-Length headers
that disagree, the first. A proxy in front that reads the size otherwise (or the other header) then frames a
different body than the server does: request smuggling. Now both stdlib servers (this one and `FakeLLMServer`, page 08)
size a body by one rule, `content_length` of page 07b (h11's): such a request is a 400 naming the header, its body
dropped after the answer and never read as a request; spaces or tabs around the digits, and a size given twice
alike, are still read."""
import json
import socket
import time

import pytest


@pytest.fixture(scope='module')
def srv():
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    s = AgentInference(*make_tiny_model(hidden_size=32), name='tiny').serve()
    yield s
    s.shutdown(); s.server_close()

BODY = json.dumps({'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 2}).encode()
N = b'%d' % len(BODY)
SMUGGLED = b'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'        # after the body: a request, if a size frames it so

def _exchange(address, lengths:list)->bytes:
    "All the server answers to a chat POST of `BODY` with these Content-Length values (then a smuggled GET), to the close"
    head = b''.join(b'Content-Length: %s\r\n' % v for v in lengths)
    c = socket.create_connection(address, timeout=60)
    try:
        c.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' + head + b'\r\n'
                  + BODY + SMUGGLED)
        answer = b''
        while piece := c.recv(65536): answer += piece
        return answer
    finally: c.close()

def _status_and_message(answer:bytes)->tuple:
    head, _, body = answer.partition(b'\r\n\r\n')
    return int(head.split(b' ')[1]), json.loads(body)

BAD = {'signed': [b'+' + N], 'underscore': [N[:-1] + b'_' + N[-1:]], 'vertical tab': [b'\x0b' + N],
       'no-break space': [b'\xa0' + N], 'two that disagree': [N, b'%d' % (len(BODY) + len(SMUGGLED))],
       'a list that disagrees': [N + b', %d' % (len(BODY) + len(SMUGGLED))]}

@pytest.mark.parametrize('case', list(BAD))
def test_a_length_int_takes_but_h11_refuses_is_a_400_naming_the_header_and_no_desync(srv, case):
    "main: 200 (the body read by int()'s size, or by the first of two headers), the header never named"
    answer = _exchange(srv.server_address, BAD[case])
    assert answer.count(b'HTTP/1.') == 1, answer                    # one answer: the rest is never read as a request
    status, body = _status_and_message(answer)
    msg = body['error']['message']
    assert (status, body['error']['type']) == (400, 'invalid_request_error'), answer
    assert 'Content-Length' in msg and ('disagree' in msg or 'is not a size in bytes' in msg), msg

@pytest.mark.parametrize('lengths', [[b' ' + N + b' \t'], [N, N], [N + b', ' + N]], ids=['spaces', 'twice', 'a list'])
def test_one_size_with_spaces_around_or_given_twice_alike_is_read(srv, lengths):
    "Spaces and tabs around a value are no part of it (RFC 9110's OWS); a size given twice alike is one size"
    answer = _exchange(srv.server_address, lengths)
    status, body = _status_and_message(answer)
    assert (status, answer.count(b'HTTP/1.')) == (200, 1), answer
    assert body['object'] == 'chat.completion', body


# srv28: every route refuses a bad size alike; a header line with a lone CR; a body that stops coming.

def _answer(address, data:bytes, wait:float=60)->tuple:
    "(all the server answers `data` up to its close, seconds it took)"
    c = socket.create_connection(address, timeout=wait)
    try:
        c.sendall(data); t0, out = time.monotonic(), b''
        while piece := c.recv(65536): out += piece
        return out, time.monotonic() - t0
    finally: c.close()

@pytest.mark.parametrize('case', ['signed', 'two that disagree'])
@pytest.mark.parametrize('route', [b'GET /v1/models', b'GET /nope', b'POST /nope'])
def test_a_bad_size_is_the_same_400_on_a_get_and_an_unknown_path(srv, route, case):
    "main: 200 (the model list) or 404, the size never looked at; a proxy in front framed the body otherwise"
    head = b''.join(b'Content-Length: %s\r\n' % v for v in BAD[case])
    answer, _ = _answer(srv.server_address, route + b' HTTP/1.1\r\nHost: x\r\n' + head + b'\r\n' + BODY + SMUGGLED)
    assert answer.count(b'HTTP/1.') == 1, answer
    status, body = _status_and_message(answer)
    assert (status, body['error']['type']) == (400, 'invalid_request_error'), answer
    assert 'Content-Length' in body['error']['message'], body

@pytest.mark.parametrize('route', [b'POST /v1/chat/completions', b'GET /v1/models'])
def test_a_header_line_with_a_lone_cr_is_a_400_and_no_desync(srv, route):
    "main: the stdlib's parser read `X-A: a\\rContent-Length: N` as two headers, where a proxy reads one (no body)"
    hidden = b'X-A: a\rContent-Length: %d\r\n' % len(SMUGGLED)
    answer, _ = _answer(srv.server_address, route + b' HTTP/1.1\r\nHost: x\r\n' + hidden + b'\r\n' + SMUGGLED)
    assert answer.count(b'HTTP/1.') == 1, answer
    status, body = _status_and_message(answer)
    assert (status, body['error']['type']) == (400, 'invalid_request_error'), answer
    assert 'request head line 3 holds a CR that ends no line' in body['error']['message'], body

def test_a_body_that_stops_coming_is_a_408_after_the_read_timeout(srv):
    "main: the handler waited out the whole request_timeout (120 s) for the 90 missing bytes, then closed unanswered"
    srv.read_timeout = 0.5
    try:
        answer, took = _answer(srv.server_address, b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'
                               b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n' + b'{' * 10, wait=10)
    finally: del srv.read_timeout                       # the class's again
    status, body = _status_and_message(answer)
    assert status == 408 and took < 5, (answer, took)
    assert 'the request body stopped: 10 of 100 bytes came' in body['error']['message'], body
    assert srv.body_bytes_held == 0

def test_the_read_timeout_is_a_few_seconds_by_default():
    from knowlyr_lab.serving.server import InferenceServer
    assert 1 <= InferenceServer.read_timeout <= 30


# srv28: a server-wide `date_string` that names no one day (page 53a's `check_template_kwargs`, by page 07a's rule).

def test_a_servers_date_string_that_names_no_one_day_is_refused_when_the_server_is_made(srv):
    "main: the server was made; then every request to a model whose template reads the clock failed (a 400 blaming it)"
    from knowlyr_lab.serving.server import InferenceServer
    with pytest.raises(ValueError, match=r"'chat_template_kwargs': date_string '01/02/2025' names no one day"):
        InferenceServer(srv.inf, chat_template_kwargs={'date_string': '01/02/2025'})

def test_a_requests_date_string_that_names_no_one_day_is_a_400_naming_the_field(srv):
    "main: 200 for a template that does not read the clock (the value never looked at), a render error for one that does"
    body = json.dumps({'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 2,
                       'chat_template_kwargs': {'date_string': 'someday'}}).encode()
    answer, _ = _answer(srv.server_address, b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n'
                        % len(body) + body)
    status, got = _status_and_message(answer)
    assert (status, got['error']['param']) == (400, 'chat_template_kwargs.date_string'), answer
    assert "date_string 'someday' names no one day" in got['error']['message'], got


def test_a_size_of_thousands_of_digits_is_a_400_naming_the_header(srv):
    "before: 4,400 digits passed the digit check and int() raised Python's own 'Exceeds the limit (4300 digits)' error"
    answer, _ = _answer(srv.server_address, b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: '
                        + b'9' * 4400 + b'\r\n\r\n' + BODY)
    status, body = _status_and_message(answer)
    assert (status, answer.count(b'HTTP/1.')) == (400, 1), answer[:300]
    assert 'Content-Length of 4400 digits is past any body size' in body['error']['message'], body


# srv29: what page 08's FakeLLMServer got wrong, checked here the same way: Expect, idle connections, dead branches.

@pytest.mark.parametrize('head', [b'Content-Length: +5\r\n', b'X-A: a\rContent-Length: 5\r\n'], ids=['size', 'lone CR'])
def test_a_refused_head_with_expect_gets_the_400_alone(srv, head):
    "No `100 Continue` before the 400 (StrictHead checks the head first; this server speaks HTTP/1.0, so sends none)"
    answer, _ = _answer(srv.server_address, b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n' + head +
                        b'Expect: 100-continue\r\n\r\n', wait=10)
    assert answer.count(b'HTTP/1.') == 1 and b' 100 ' not in answer.split(b'\r\n')[0], answer
    assert _status_and_message(answer)[0] == 400, answer

def test_each_answer_closes_its_connection_so_no_pooled_connection_is_closed_under_a_client(srv):
    "The server keeps no connection alive (HTTP/1.0): an SDK's pool never holds one of its connections to reuse"
    c = socket.create_connection(srv.server_address, timeout=10)
    try:
        c.sendall(b'GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n'); out = b''
        while piece := c.recv(65536): out += piece                 # to the close, which comes after the answer
    finally: c.close()
    assert out.startswith(b'HTTP/1.0 200 '), out[:100]

def test_every_bad_size_is_answered_by_the_head_check_before_any_route(srv, monkeypatch):
    "The routes' own bad-size branches (`_body_size`, removed) could not be reached: no do_GET or do_POST runs"
    from knowlyr_lab.serving import server
    routed = []
    for name in ('do_GET', 'do_POST'):
        f = getattr(server._Handler, name)
        monkeypatch.setattr(server._Handler, name, lambda self, f=f: (routed.append(self.path), f(self))[1])
    bad = [*BAD.values(), [b'abc'], [b'-5'], [b'9' * 4400]]
    for lengths, route in [(v, r) for v in bad for r in (b'POST /v1/chat/completions', b'GET /v1/models')]:
        head = b''.join(b'Content-Length: %s\r\n' % v for v in lengths)
        answer, _ = _answer(srv.server_address, route + b' HTTP/1.1\r\nHost: x\r\n' + head + b'\r\n' + BODY)
        assert _status_and_message(answer)[0] == 400 and b'Content-Length' in answer, answer[:300]
    chunked, _ = _answer(srv.server_address, b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'
                         b'Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n')
    assert _status_and_message(chunked)[0] == 400 and b'Transfer-Encoding' in chunked, chunked
    assert _status_and_message(_exchange(srv.server_address, [N]))[0] == 200
    assert routed == ['/v1/chat/completions']                     # only the good request reached a route

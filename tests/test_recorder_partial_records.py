"A record only partly mapped is kept once, whole, counted once, and says which of its pieces had no place (review24)"
import json

import pytest

from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

FX = __import__('pathlib').Path(__file__).parent / 'fixtures'


def _stored(ts, rep): return rep.orphans + [e for t in ts for e in t.metadata.get('unmapped', [])]


def test_a_nemo_gym_item_with_no_place_counts_unmapped_once(tmp_path):
    "An item (a record of its own) of a kind with no place was a part of nothing counted: totals['unmapped'] said 0"
    row = json.loads((FX / 'atif' / 'ng_trajectory_rollouts.jsonl').read_text().splitlines()[0])
    row['ng_trajectory']['invocations'][0]['conversation'].insert(-1, {'type': 'web_search_call', 'id': 'ws1'})
    p = tmp_path / 'rollouts.jsonl'; p.write_text(json.dumps(row) + '\n')
    rep = ConversionReport()
    ts = list(convert(p, format='ng-trajectory', report=rep))
    stored = _stored(ts, rep)
    assert [e['record']['type'] for e in stored] == ['web_search_call'], stored
    assert rep.totals['unmapped'] == 1 and rep.parts == {}, (rep.totals, rep.parts)
    assert rep.counts['item:web_search_call'] == {'mapped': 0, 'unmapped': 1, 'quarantined': 0}


def _cc(tmp_path, *later):
    "A Claude Code session: a Bash call t1, then the `later` user records' content (parent: the record before)"
    rec = lambda typ, uid, parent, content: {'parentUuid': parent, 'isSidechain': False, 'sessionId': 's-1', 'type': typ,
                                             'uuid': uid, 'timestamp': '2025-09-03T00:47:19.293Z',
                                             'message': {'role': typ, 'content': content,
                                                         **({'id': 'msg_' + uid, 'model': 'm'} if typ == 'assistant' else {})}}
    recs = [rec('user', 'u1', None, 'do it'),
            rec('assistant', 'a1', 'u1', [{'type': 'tool_use', 'id': 't1', 'name': 'Bash', 'input': {'command': 'ls'}}])]
    for k, content in enumerate(later): recs.append(rec('user', f'u{k + 2}', recs[-1]['uuid'], content))
    p = tmp_path / 's-1.jsonl'; p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    rep = ConversionReport()
    ts = list(convert(p, format='claude-code', report=rep))
    return _stored(ts, rep), rep


res = lambda i, c='out': {'type': 'tool_result', 'tool_use_id': i, 'content': c}
IMG = {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': 'AAAA'}}


def test_a_claude_code_block_with_no_place_is_kept_once_beside_a_result_whose_call_is_missing(tmp_path):
    "The image was kept as a part AND inside the whole record kept for the orphan result: stored twice, two entries"
    stored, rep = _cc(tmp_path, [res('t1'), res('tX'), IMG])
    assert len(stored) == 1 and stored[0]['record_type'] == 'user', stored      # the record, whole, once
    assert rep.parts == {} and rep.totals['unmapped'] == 1, (rep.parts, rep.totals)
    why = stored[0]['why']                                                      # every piece left out is named
    assert "content[1]: tool_result for a tool_use not in this conversation ('tX')" in why and 'block:image' in why, why
    assert stored[0]['mapped'] == ['content[0]'], stored[0]                     # the paired result is in the steps


def test_a_claude_code_record_of_which_nothing_was_mapped_is_not_called_partly_mapped(tmp_path):
    "A second result for an answered call said 'not in this conversation', and 'only partly mapped' of a record unmapped"
    stored, rep = _cc(tmp_path, [res('t1')], [res('t1', 'again')])
    assert len(stored) == 1 and rep.warning_lines() == [], (stored, rep.warning_lines())
    assert stored[0]['why'] == "content[0]: tool_result for a tool_use answered already ('t1'): a second result for it"
    assert 'mapped' not in stored[0]


def _chat(tmp_path, msgs, **kw):
    p = tmp_path / 'chat.jsonl'; p.write_text(json.dumps({'messages': msgs}) + '\n')
    rep = ConversionReport()
    ts = list(convert(p, format='openai-chat', report=rep))
    return _stored(ts, rep), rep


def test_a_chat_message_kept_whole_names_every_piece_with_no_place_and_where_its_mapped_pieces_are(tmp_path):
    "Its `why` named only the missing result, not the document beside it; nothing said the paired result was a copy"
    msgs = [{'role': 'user', 'content': 'go'},
            {'role': 'assistant', 'content': [{'type': 'tool_use', 'id': 'toolu_1', 'name': 'bash', 'input': {}}]},
            {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 'toolu_1', 'content': 'PAIRED'},
                                         {'type': 'tool_result', 'tool_use_id': 'toolu_9', 'content': 'late'},
                                         {'type': 'document', 'source': {'type': 'text', 'data': 'DOC'}},
                                         {'type': 'text', 'text': 'and this?'}]}]
    stored, rep = _chat(tmp_path, msgs)
    assert len(stored) == 1 and stored[0]['record'] == msgs[2] and rep.parts == {}, stored    # whole, once
    assert stored[0]['why'] == ("partly mapped: messages[2]: content[1] is a tool result whose call is not in the log "
                                "('toolu_9'); content[2] is a document block with no place in a step")
    assert stored[0]['mapped'] == ['content[0]', 'content[3]']


def test_a_call_logs_final_response_and_its_warnings_keep_their_record_type():
    "A final response kept whole was counted under message:assistant; a coerced value's warning said record type 'unmapped'"
    from knowlyr_lab.recorder.chat import convert_messages
    final = {'message': {'role': 'assistant', 'timestamp': 'yesterday',
                         'content': [{'type': 'text', 'text': 'found'},
                                     {'type': 'web_search_tool_result', 'tool_use_id': 'srvtoolu_9', 'content': []}]}}
    rep = ConversionReport()
    t = convert_messages('anthropic-messages', 'call.json', rep, [{'role': 'user', 'content': 'search it'}], 1, final=final)
    assert rep.counts.keys() == {'message:user', 'response'} and rep.counts['response']['unmapped'] == 1, rep.counts
    assert [e['record_type'] for e in t.metadata['unmapped']] == ['response']
    assert {w['record_type'] for w in rep.warnings} == {'response'}, rep.warnings


def test_a_claude_code_sidechain_record_whose_parent_is_a_bookkeeping_record_stays_in_its_chain(tmp_path):
    "Only user/assistant uuids were given a chain: a sidechain record under an attachment began a new conversation"
    side = lambda typ, uid, parent, content: {'parentUuid': parent, 'isSidechain': True, 'sessionId': 's-1', 'type': typ,
                                              'uuid': uid, 'message': {'role': typ, 'content': content}}
    recs = [{'parentUuid': None, 'isSidechain': False, 'sessionId': 's-1', 'type': 'user', 'uuid': 'u1',
             'message': {'role': 'user', 'content': 'do it'}},
            side('user', 'su1', None, 'sub task'),
            side('assistant', 'sa1', 'su1', [{'type': 'tool_use', 'id': 't2', 'name': 'Read', 'input': {}}]),
            {'type': 'attachment', 'uuid': 'at1', 'parentUuid': 'sa1', 'isSidechain': True, 'sessionId': 's-1',
             'attachment': {}},
            side('user', 'su2', 'at1', [res('t2', 'file text')])]
    p = tmp_path / 's-1.jsonl'; p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    rep = ConversionReport()
    ts = list(convert(p, format='claude-code', report=rep))
    assert len(ts) == 2, [t.task.id for t in ts]                            # the session and its one sidechain
    sub, = [t for t in ts if any(s.action and s.action.call_id == 't2' for s in t.steps)]
    assert [s.observation.content for s in sub.steps if s.action] == ['file text']     # its result found its call
    assert [e['record_type'] for e in _stored(ts, rep)] == ['attachment'], _stored(ts, rep)


@pytest.mark.parametrize('typ', ['attachment', 'assistant'])
def test_a_claude_code_sidechain_record_without_a_uuid_does_not_draw_the_next_sidechain_into_its_chain(tmp_path, typ):
    "A uuid-less sidechain record's chain was kept under None: the next sidechain (parentUuid null) joined it"
    side = lambda t, uid, parent, content: {'parentUuid': parent, 'isSidechain': True, 'sessionId': 's-1', 'type': t,
                                            'uuid': uid, 'message': {'role': t, 'content': content}}
    odd = side(typ, None, 'sa1', 'no uuid'); odd.pop('uuid')
    recs = [{'parentUuid': None, 'isSidechain': False, 'sessionId': 's-1', 'type': 'user', 'uuid': 'u1',
             'message': {'role': 'user', 'content': 'do it'}},
            side('user', 'su1', None, 'sub task one'), side('assistant', 'sa1', 'su1', 'done one'), odd,
            side('user', 'su2', None, 'sub task two'), side('assistant', 'sa2', 'su2', 'done two')]
    p = tmp_path / 's-1.jsonl'; p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    ts = list(convert(p, format='claude-code', report=ConversionReport()))
    assert [t.task.instruction for t in ts] == ['do it', 'sub task one', 'sub task two'], [t.task.id for t in ts]

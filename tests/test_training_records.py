"What SFT and DPO make of their records: every label trained once, orders that do not depend on the file, errors that name the field"
import pytest

from knowlyr_lab.trainer.data import chunk_sample, tokenize_chat
from knowlyr_lab.trainer.tiny import train_tokenizer


@pytest.fixture(scope='module')
def tok(): return train_tokenizer()

def _chat(n_steps:int)->dict:
    msgs = [{'role': 'system', 'content': 'SYS prompt here'}, {'role': 'user', 'content': 'USER task text'}]
    for k in range(n_steps):
        msgs += [{'role': 'assistant', 'content': f'step {k} reply ' + 'x' * (5 * k)}, {'role': 'user', 'content': f'obs {k}'}]
    return {'messages': msgs}

@pytest.mark.parametrize('max_length', [60, 90, 150])
def test_chunks_of_an_unmasked_chat_train_its_prompt_once(tok, max_length):
    "mask_observations=False labels the prompt: the chunks train it once, not once per chunk (334 labels became 549)"
    s = tokenize_chat(tok, _chat(6), mask_observations=False)
    chunks = chunk_sample(s, max_length, 1)
    assert len(chunks) > 1
    labelled = [sum(l != -100 for l in c['labels'][1:]) for c in chunks]
    assert sum(labelled) == sum(l != -100 for l in s['labels'][1:]), labelled
    pre = s['step_starts'][0]
    assert all(l == -100 for c in chunks[1:] for l in c['labels'][:pre])
    assert chunks[0]['labels'][:pre] == s['labels'][:pre]

"""A chat template that writes today's date (issue tmpl2).

trl's `llama3_2.jinja` writes `Today Date: <strftime_now("%d %b %Y")>` into the system header unless the template is
given a `date_string`, and gpt-oss's writes `Current date: <strftime_now("%Y-%m-%d")>` (transformers hands every
template a `strftime_now` that reads the clock). Before, `render_chats` passed the template neither, so the same
conversation rendered to other tokens on another day: offline GRPO with beta > 0 looked the reference log-probs it
stored before training up by token ids the next day's rendering no longer had (a bare `KeyError` mid-run), and an
evaluation, a served prompt or a resumed run changed with the calendar. Now a template that reads the clock is given
the pinned date `PINNED_DATE_STRING` (the date Llama 3's templates write when given none) unless the caller passes a
`date_string`. The clock is moved the way transformers' own tests do: by replacing the `datetime` its template
helpers read."""
import copy
import json
from datetime import datetime

import pytest
import transformers.utils.chat_template_utils as ctu
from test_chat_templates import tokenizer_with, trl_template

from knowlyr_lab.chat import render_chat

MSGS = [{'role': 'system', 'content': 'You solve arithmetic.'}, {'role': 'user', 'content': 'Compute 2 + 3.'}]


class Clock(datetime):
    "`datetime` whose `now()` is a day we set (what the template's `strftime_now` reads)"
    day = datetime(2026, 12, 1, 23, 59)

    @classmethod
    def now(cls, tz=None): return cls.day


@pytest.fixture
def clock(monkeypatch):
    monkeypatch.setattr(ctu, 'datetime', Clock)
    monkeypatch.setattr(Clock, 'day', Clock.day)
    return Clock


def on(clock, day, fn, *a, **k):
    "`fn(*a, **k)` with the clock at `day`"
    clock.day = day
    return fn(*a, **k)


DAY1, DAY2 = datetime(2026, 12, 1, 23, 59), datetime(2026, 12, 2, 0, 1)


@pytest.mark.parametrize('name,line', [('llama3_2', 'Today Date: 26 Jul 2024'), ('gptoss', 'Current date: 2024-07-26')])
def test_the_render_is_the_same_whatever_day_it_is(clock, name, line):
    "Before the fix, 01 Dec 2026 and 02 Dec 2026 rendered into the prompt: two texts for one chat"
    tok = tokenizer_with(trl_template(name))
    texts = [on(clock, d, render_chat, tok, MSGS, add_generation_prompt=True) for d in (DAY1, DAY2)]
    assert texts[0] == texts[1], [t[:200] for t in texts]
    assert line in texts[0] and '2026' not in texts[0], texts[0][:300]


@pytest.mark.parametrize('name,kw,line', [('llama3_2', {'date_string': '01 Jan 2025'}, 'Today Date: 01 Jan 2025'),
                                          ('gptoss', {'date_string': '01 Jan 2025'}, 'Current date: 2025-01-01'),
                                          ('gptoss', {'date_string': '1 January 2025'}, 'Current date: 2025-01-01'),
                                          ('gptoss', {'date_string': 'January 1, 2025'}, 'Current date: 2025-01-01')])
def test_a_callers_date_string_wins(clock, name, kw, line):
    "'January 1, 2025' (neither `%d %b %Y` nor ISO) rendered gpt-oss's `Current date: 2024-07-26`: the pinned day, unsaid"
    tok = tokenizer_with(trl_template(name))
    texts = [on(clock, d, render_chat, tok, MSGS, template_kwargs=kw) for d in (DAY1, DAY2)]
    assert texts[0] == texts[1] and line in texts[0], texts[0][:300]


@pytest.mark.parametrize('date_string', ['someday', 'January 2025', '01/02/2025'])
def test_a_date_string_that_names_no_one_day_is_refused_never_replaced(clock, date_string):
    "A date_string read as no day, or as two ('01/02/2025': January or February), rendered the pinned day instead"
    tok = tokenizer_with(trl_template('gptoss'))
    with pytest.raises(ValueError, match=f"date_string '{date_string}' names no one day: write it as ISO"):
        render_chat(tok, MSGS, template_kwargs={'date_string': date_string})


def test_a_template_that_reads_no_clock_gets_no_date():
    "Llama 3.1's template has its own fallback and reads no clock: nothing is added, its text is its own"
    tok = tokenizer_with(trl_template('llama3_1'))
    assert render_chat(tok, MSGS) == tok.apply_chat_template(MSGS, tokenize=False)


def test_served_prompts_use_the_pinned_date(clock):
    "The OpenAI-compatible server renders through `render_chats`: a served prompt is the prompt training rendered"
    from knowlyr_lab.serving import AgentInference
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template('llama3_2'))
    inf = AgentInference(make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok, name='tiny', prefix_cache=0)
    served = [on(clock, d, inf.render, MSGS) for d in (DAY1, DAY2)]
    assert served[0] == served[1] == render_chat(tok, MSGS, add_generation_prompt=True)
    assert 'Today Date: 26 Jul 2024' in served[0]


def test_offline_grpo_with_stored_reference_trains_across_midnight(clock, tmp_path):
    """Offline GRPO, full fine-tuning, beta > 0 stores the warm start's log-probs keyed by the token ids before training
    and looks them up by each batch's ids: a run that passed midnight between the two raised a bare KeyError in
    `_stored_ref` (and a run on another day trained other text). Now it trains, and as a run on another day does"""
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    from knowlyr_lab.trainer.grpo_updates import GRPOUpdates
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template('llama3_2'))
    base = make_tiny_model(tokenizer=tok, hidden_size=32)[0]
    say = lambda t: [{'role': 'assistant', 'content': t}]
    data = [{'prompt': MSGS, 'completions': [say('It is 5.'), say('It is 6.')], 'rewards': [1, 0]}]
    cfg = dict(learning_rate=1e-2, tasks_per_step=1, num_epochs=1, beta=0.2, progress_bar=False, mixed_precision='no',
               seed=0)
    reference_rows = GRPOUpdates._reference_rows

    def run(out, then=None):
        "Train offline; with `then`, the clock passes to day `then` once the reference log-probs are stored"
        tr = GRPOTrainer(GRPOConfig(output_dir=str(tmp_path / out), **cfg), copy.deepcopy(base), tok)
        def stored_then_midnight(self, groups):
            reference_rows(self, groups)
            if then: clock.day = then
        tr._reference_rows = stored_then_midnight.__get__(tr)
        return tr.train_offline(data)
    clock.day = DAY1
    crossed = run('crossed', then=DAY2)
    clock.day = datetime(2027, 3, 4, 12, 0)
    other_day = run('other')
    assert len(crossed) == 1 and crossed[0]['kl'] is not None
    assert abs(crossed[0]['loss'] - other_day[0]['loss']) < 1e-6, (crossed, other_day)


@pytest.mark.parametrize('name,line', [('llama3_2', 'Today Date: Wed, 2 Dec 2026'), ('gptoss', 'Current date: 2026-12-02')])
def test_a_weekday_that_disagrees_with_its_date_is_refused(clock, name, line):
    """'Mon, 2 Dec 2026' (2 Dec 2026 is a Wednesday) was read as 2 Dec 2026, the weekday dropped unsaid: Llama 3.2's
    template wrote `Today Date: Mon, 2 Dec 2026` into a prompt whose clock reads said Wednesday"""
    tok = tokenizer_with(trl_template(name))
    with pytest.raises(ValueError, match="date_string 'Mon, 2 Dec 2026' says Mon but 02 Dec 2026 is a Wednesday"):
        render_chat(tok, MSGS, template_kwargs={'date_string': 'Mon, 2 Dec 2026'})
    assert line in render_chat(tok, MSGS, template_kwargs={'date_string': 'Wed, 2 Dec 2026'})   # the right weekday: kept


def test_a_trained_model_records_the_chat_date_its_prompts_carry(clock, tmp_path):
    """A model folder's provenance.json said nothing of the day its template wrote into every training prompt, so a run
    could not be rendered again as it was: it records `chat_date`, the pinned day (None for a template reading no clock)"""
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    from knowlyr_lab.trainer.tiny import make_tiny_model
    say = lambda t: [{'role': 'assistant', 'content': t}]
    data = [{'prompt': MSGS, 'completions': [say('It is 5.'), say('It is 6.')], 'rewards': [1, 0]}]
    cfg = dict(learning_rate=1e-2, tasks_per_step=1, num_epochs=1, progress_bar=False, mixed_precision='no', seed=0)
    got = {}
    for name in ('llama3_2', 'llama3_1'):   # 3.2's reads the clock; 3.1's has its own fallback and reads none
        tok = tokenizer_with(trl_template(name))
        tr = GRPOTrainer(GRPOConfig(output_dir=str(tmp_path / name), **cfg), make_tiny_model(tokenizer=tok, hidden_size=32)[0], tok)
        tr.train_offline(data)
        got[name] = json.loads((tr.save_model() / 'provenance.json').read_text())['chat_date']
    assert got == {'llama3_2': '26 Jul 2024', 'llama3_1': None}, got


def test_a_trained_model_records_the_days_its_rows_carried(tmp_path):
    """trn10: rows that carry their own `date_string` (their `chat_template_kwargs`) render with their day, yet
    provenance.json recorded only the run-wide `chat_date`: it now counts the days the rows rendered with, for SFT, DPO
    and offline GRPO alike (a row without its own day renders with the run's)"""
    from knowlyr_lab.trainer.dpo import DPOConfig, DPOTrainer
    from knowlyr_lab.trainer.grpo import GRPOTrainer
    from knowlyr_lab.trainer.grpo_groups import GRPOConfig
    from knowlyr_lab.trainer.sft import SFTConfig, SFTTrainer
    from knowlyr_lab.trainer.tiny import make_tiny_model
    tok = tokenizer_with(trl_template('llama3_2'))
    say = lambda t: [{'role': 'assistant', 'content': t}]
    days = [{'date_string': '01 Jan 2025'}, {'date_string': '2025-03-04'}, None, {'date_string': '01 Jan 2025'}]
    own = lambda kw: {'chat_template_kwargs': kw} if kw else {}
    sft = [{'messages': MSGS + say('It is 5.'), **own(kw)} for kw in days]
    dpo = [{'prompt': MSGS, 'chosen': say('It is 5.'), 'rejected': say('It is 6.'), **own(kw)} for kw in days]
    grpo = [{'prompt': MSGS, 'completions': [say('It is 5.'), say('It is 6.')], 'rewards': [1, 0], **own(kw)} for kw in days]
    cfg = dict(learning_rate=1e-2, max_steps=1, progress_bar=False, mixed_precision='no', seed=0)
    model = lambda: make_tiny_model(tokenizer=tok, hidden_size=32)[0]
    got = {}
    for name, cls, config, data in [('sft', SFTTrainer, SFTConfig, sft), ('dpo', DPOTrainer, DPOConfig, dpo)]:
        tr = cls(config(output_dir=str(tmp_path / name), batch_size=2, **cfg), model(), tok, train_data=data)
        tr.train(); got[name] = json.loads((tr.save_model() / 'provenance.json').read_text())['chat_dates']
    tr = GRPOTrainer(GRPOConfig(output_dir=str(tmp_path / 'grpo'), tasks_per_step=1, num_epochs=1, **cfg), model(), tok)
    tr.train_offline(grpo); got['grpo'] = json.loads((tr.save_model() / 'provenance.json').read_text())['chat_dates']
    per_row = {'distinct': 3, 'counts': {'01 Jan 2025': 2, '2025-03-04': 1, '26 Jul 2024': 1}}
    assert got == {'sft': {'rows': 4, **per_row}, 'dpo': {'rows': 4, **per_row},
                   'grpo': {'rows': 8, 'distinct': 3, 'counts': {'01 Jan 2025': 4, '2025-03-04': 2, '26 Jul 2024': 2}}}, got

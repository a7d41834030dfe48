"Held-out checks by content: every scored episode's task is checked, text in any task field, keys that rest on ids"
import warnings

import pytest

from knowlyr_lab.agents import ExpertAgent
from knowlyr_lab.eval.evaluate import evaluate_agent
from knowlyr_lab.tasks import TaskOverlapError, check_held_out, suite_tasks, task_key


def flaky(fails:int):
    "The expert whose first `fails` calls lose the connection (counted on the class: rollouts may copy the agent)"
    class Flaky(ExpertAgent):
        def __call__(self, obs, hist):
            if Flaky.fails > 0: Flaky.fails -= 1; raise ConnectionError("server went away")
            return super().__call__(obs, hist)
    Flaky.fails = fails
    return Flaky(name='flaky')


def test_a_scored_later_attempt_is_checked_when_the_first_attempt_was_invalid():
    "review22 heldout_invalid.py: the first attempt lost every task, the second was scored on the training tasks"
    train = suite_tasks('knowlyr/arith-easy', range(5))
    kw = dict(tasks=train, n_attempts=2, seeds=[0, 1], train_tasks=train, progress=False)
    with pytest.raises(TaskOverlapError, match='5 of 5 evaluation tasks share content'):
        evaluate_agent(flaky(5), 'knowlyr/arith-easy', strict=True, **kw)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        res = evaluate_agent(flaky(5), 'knowlyr/arith-easy', **kw)
    assert (res.n_invalid, len(res.valid)) == (5, 5)
    assert (res.held_out.n_eval, len(res.held_out.shared)) == (5, 5)
    assert any('not held out' in str(x.message) for x in w)


@pytest.mark.parametrize('field', ['prompt', 'question', 'problem_statement'])
def test_a_renamed_copy_with_its_text_in_another_field_is_not_held_out(field):
    "review22 heldout.py: a task whose text is in `prompt`/`question` was keyed by its id, so a renamed copy passed"
    train, ev = [{'id': 'a', field: 'Compute 2+3'}], [{'id': 'b', field: 'Compute 2+3'}]
    assert check_held_out(train, ev).shared == [task_key(ev[0])]
    with pytest.raises(TaskOverlapError, match='not held out'): check_held_out(train, ev, strict=True)
    # the same id with other content is another task
    assert check_held_out(train, [{'id': 'a', field: 'Compute 9*9'}]).disjoint


def test_a_structured_observation_in_another_field_order_is_the_same_task():
    a = {'id': 'a', 'initial_observation': {'q': '2+3', 'tools': ['x']}}
    b = {'id': 'b', 'initial_observation': {'tools': ['x'], 'q': '2+3'}}
    assert task_key(a) == task_key(b) and not check_held_out([a], [b]).disjoint


def test_eval_repeats_are_counted_as_they_read():
    r = check_held_out([], [{'id': 'b', 'instruction': 'Compute 2+3'}, {'id': 'c', 'instruction': ' Compute  2+3\n'}])
    assert (r.n_eval, r.n_eval_items) == (1, 2) and 'repeats in eval' in repr(r)


def test_keys_that_fell_back_to_ids_are_counted_warned_and_refused_under_strict():
    with pytest.warns(UserWarning, match='compared by id alone'): r = check_held_out(['a', 'b'], ['b', 'c'])
    assert r.basis == {'fingerprint': 0, 'text': 0, 'id': 4} and 'keys by 4 id' in repr(r)
    with pytest.raises(TaskOverlapError, match=r"2 of 3 tasks are compared by id alone \(e.g. \['x', 'y'\]\)"):
        check_held_out([{'id': 'x'}], [{'id': 'y'}, {'id': 'z', 'prompt': 'Compute 2+3'}], strict=True)
    tr = suite_tasks('knowlyr/arith-easy', range(2))
    assert check_held_out(tr, suite_tasks('knowlyr/arith-easy', [7]), strict=True).basis == {'fingerprint': 3, 'text': 0, 'id': 0}
    assert check_held_out(['arith-easy-s9'], tr, strict=True).basis['fingerprint'] == 3   # an id its env names: content


def test_values_json_cannot_sort_or_test_for_emptiness_still_key_a_task():
    "review27 keys_edge.py: mixed key types raised TypeError from sort_keys; a numpy prompt raised 'truth value ... ambiguous'"
    import hashlib

    import numpy as np
    mixed = {'id': 'a', 'initial_observation': {1: 'x', 'b': 2}}
    assert task_key(mixed) == 'text:' + hashlib.sha1(str({1: 'x', 'b': 2}).encode()).hexdigest()   # str(), as keyed before
    arr = {'id': 'n1', 'prompt': np.array([1, 2, 3])}
    assert task_key(arr).startswith('text:') and task_key(arr) == task_key({'id': 'n2', 'prompt': np.array([1, 2, 3])})
    assert task_key(arr) != task_key({'id': 'n1', 'prompt': np.array([1, 2, 4])})
    assert not check_held_out([mixed], [arr]).shared


def test_tasks_matching_by_id_only_are_refused_as_such_not_as_sharing_content():
    "review27 item 4: under strict, ids on both sides were refused with 'share content' (the overlap check ran first)"
    with pytest.raises(TaskOverlapError, match=r"1 evaluation tasks match training tasks by id only \(e\.g\. \['b'\]\)") as e:
        check_held_out(['a', 'b'], ['b', 'c'], strict=True)
    assert 'share content' not in str(e.value)
    with pytest.raises(TaskOverlapError, match='1 of 2 evaluation tasks share content'):   # content still comes first
        check_held_out([{'id': 'x', 'prompt': 'P'}, 'b'], [{'id': 'y', 'prompt': 'P'}, 'b'], strict=True)


def test_an_id_only_match_in_an_evaluation_is_not_said_to_share_content():
    """Without strict, evaluate_agent warned '1 of 3 evaluation tasks share content with the training tasks' when the
    only match was by id (tasks with no fingerprint, no text, no env): check_held_out had already said 'by id only'"""
    from knowlyr_lab import AgentEnv, TimeStep

    class Named(AgentEnv):
        "An adapter whose reset names its task by id alone: no fingerprint, an empty first observation"
        tool_schemas = [{'type': 'function', 'function': {'name': 'finish', 'parameters': {'type': 'object', 'properties': {}}}}]
        def list_tasks(self): return [{'id': f't{i}'} for i in range(3)]
        def reset(self, *, task=None, seed=None):
            self._ep_done, self._ep_started, self._ep_steps = False, True, 0
            return TimeStep('', info={'task': {'id': (task or {}).get('id', 't0')}})
        def _reset(self, task=None, seed=None): raise NotImplementedError
        def _step(self, tool, params): return TimeStep('done', 1.0, terminated=True)

    class Finisher:
        name = 'finisher'
        def __call__(self, obs, history): return {'tool': 'finish', 'params': {}}

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        res = evaluate_agent(Finisher(), Named, n_tasks=3, train_tasks=['t0'], progress=False)
    said = [str(x.message) for x in w]
    assert res.held_out.shared == ['t0'] and res.held_out.basis['id'] == 4
    assert [s for s in said if '1 evaluation tasks match training tasks by id only' in s], said
    assert not [s for s in said if 'share content' in s], said


NESTED = {'a chat prompt rewrapped': ([{'role': 'user', 'content': 'Fix\n    the bug'}], [{'role': 'user', 'content': 'Fix the bug'}]),
          'a key composed otherwise': ({'\u00e9t\u00e9': 1, 'f': 2}, {'e\u0301te\u0301': 1, 'f': 2}),   # NFD sorts before 'f', NFC after
          'a value composed otherwise': ({'q': ['Caf\u00e9']}, {'q': ['Cafe\u0301']}),
          'a whole float': ({'x': 1, 'tools': ['add']}, {'x': 1.0, 'tools': ['add']})}     # pyarrow reads 1 beside 1.5 as 1.0


@pytest.mark.parametrize('case', list(NESTED))
def test_a_structured_text_is_compared_as_it_reads_at_every_depth(case):
    """_text_as_read made the text as it reads (_plain_text) of the sorted-key JSON of a structured value, so a string
    inside a list or dict was never rewrapped (JSON writes a newline as \\n), a key's NFC/NFD form changed the key order,
    and 1.0 (as datasets loads an integer beside a float) differed from 1: a renamed copy was called held out"""
    a, b = NESTED[case]
    for field in ('prompt', 'initial_observation'):
        train, ev = [{'id': 'a', field: a}], [{'id': 'b', field: b}]
        assert check_held_out(train, ev).shared == [task_key(ev[0])], (case, field)
        with pytest.raises(TaskOverlapError, match='1 of 1 evaluation tasks share content'):
            check_held_out(train, ev, strict=True)
    assert check_held_out([{'id': 'a', 'prompt': a}], [{'id': 'b', 'prompt': {'other': a}}]).disjoint   # other content
    cycle = {'q': 'Fix the bug'}; cycle['again'] = cycle                     # a cycle: its text as keyed, no crash
    assert check_held_out([{'id': 'a', 'prompt': cycle}], [{'id': 'b', 'prompt': 'Fix the bug'}]).disjoint


def test_tasks_of_an_env_that_names_none_are_not_said_to_show_no_text():
    """Tasks whose env_id names no registered env (a plugin not installed) are keyed by id even when they show a
    prompt (an env's text may be every task's): the refusal said they had 'no text', which their prompt contradicts"""
    tr = [{'id': 'a', 'env_id': 'elsewhere/not-installed', 'prompt': 'Compute 2+3'}]
    with pytest.raises(TaskOverlapError, match='compared by id alone') as e:
        check_held_out(tr, [{**tr[0], 'id': 'b'}], strict=True)
    assert 'no fingerprint, no text' not in str(e.value) and 'no text (initial_observation' in str(e.value)
    assert 'or carry an env_id (an env\'s task is not keyed by its text' in str(e.value), str(e.value)


def test_a_task_read_back_from_parquet_is_the_task_it_was(tmp_path):
    """pandas reads a Parquet list column back as a numpy array (of dicts, of strings): its text was str() of the array,
    not the JSON of the list, so training tasks read from Parquet never matched the same tasks from JSON (leak missed)"""
    import numpy as np
    import pandas as pd
    rows = [{'id': 'a', 'prompt': [{'role': 'user', 'content': 'Compute 2+3'}]},
            {'id': 'c', 'initial_observation': {'q': '2+3', 'tools': ['add', 'mul']}}]
    for r in rows:
        pd.DataFrame([r]).to_parquet(tmp_path / f"{r['id']}.parquet")
        back = pd.read_parquet(tmp_path / f"{r['id']}.parquet").to_dict('records')
        assert isinstance(back[0]['prompt'] if 'prompt' in r else back[0]['initial_observation']['tools'], np.ndarray)
        assert check_held_out(back, [{**r, 'id': 'b'}]).shared == [task_key({**r, 'id': 'b'})], r
    x = np.arange(2000); y = x.copy(); y[1000] = -1                          # str() of either elides the middle
    assert check_held_out([{'id': 'a', 'prompt': x}], [{'id': 'b', 'prompt': y}]).disjoint


def test_task_key_reads_a_numpy_array_as_its_list(tmp_path):
    """task_key wrote a numpy array with str(): a task read back from Parquet (pandas gives a list column as an array)
    had another key than its JSON twin, so it split and paired as another task; and str() elides the middle of an array
    past 1000 items, so two such prompts that differ there had one key (a false leak, too few distinct tasks)"""
    import numpy as np
    import pandas as pd

    from knowlyr_lab.tasks import distinct_tasks, split_tasks
    rows = [{'id': 'a', 'prompt': [{'role': 'user', 'content': 'Compute 2+3'}]},
            {'id': 'c', 'initial_observation': {'q': '2+3', 'tools': ['add', 'mul']}},
            {'id': 'd', 'question': ['one', 'two'], 'n': 3}]
    pd.DataFrame(rows).to_parquet(tmp_path / 'tasks.parquet')
    back = [{k: v for k, v in r.items() if v is not None} for r in pd.read_parquet(tmp_path / 'tasks.parquet').to_dict('records')]
    assert isinstance(back[2]['question'], np.ndarray)
    assert [task_key(t) for t in back] == [task_key(r) for r in rows]
    assert split_tasks(back, 0.5, seed=3)[1] == [b for b, r in zip(back, rows) if r in split_tasks(rows, 0.5, seed=3)[1]]
    assert task_key({'id': 'e', 'prompt': np.int64(7)}) == task_key({'id': 'e', 'prompt': 7})      # a numpy number
    assert task_key({'id': 'f', 'initial_observation': np.array([]), 'instruction': 'Go'}) == \
           task_key({'id': 'f', 'initial_observation': [], 'instruction': 'Go'})             # an empty array shows nothing
    x = np.arange(2000); y = x.copy(); y[1000] = -1                          # str() of either elides the middle
    assert task_key({'id': 'a', 'prompt': x}) != task_key({'id': 'b', 'prompt': y})
    assert distinct_tasks([{'id': 'a', 'prompt': x}, {'id': 'b', 'prompt': y}]) == 2
    assert task_key({'id': 'a', 'prompt': x}) == task_key({'id': 'b', 'prompt': x.tolist()})



class Finisher:
    "An agent that finishes at once"
    name = 'finisher'
    def __call__(self, obs, history): return {'tool': 'finish', 'params': {}}


def adapter(tasks:list, shown:bool):
    "An env adapter of `tasks` with no fingerprint and no env_id; its first observation is the instruction, or empty"
    from knowlyr_lab import AgentEnv, TimeStep
    class Adapter(AgentEnv):
        tool_schemas = [{'type': 'function', 'function': {'name': 'finish', 'parameters': {'type': 'object', 'properties': {}}}}]
        def list_tasks(self): return [dict(t) for t in tasks]
        def reset(self, *, task=None, seed=None):
            self._ep_done, self._ep_started, self._ep_steps = False, True, 0
            t = next(t for t in tasks if t['id'] == (task or tasks[0])['id'])
            return TimeStep(t.get('instruction', '') if shown else '', info={'task': dict(t)})
        def _reset(self, task=None, seed=None): raise NotImplementedError
        def _step(self, tool, params): return TimeStep('done', 1.0, terminated=True)
    return Adapter


TEXTS = [{'id': f't{i}', 'instruction': f'Compute {i}+{i}'} for i in range(3)]
OTHER = [task_key({'id': f'x{i}', 'instruction': f'Compute {i}*{i}'}) for i in (7, 8)]   # keys of tasks not evaluated


def evaluated(env, train_tasks, strict=False):
    "evaluate_agent's result on `env`'s 3 tasks, and the texts of its warnings"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        res = evaluate_agent(Finisher(), env, n_tasks=3, train_tasks=train_tasks, strict=strict, progress=False)
    return res, [str(x.message) for x in w]


def test_training_tasks_given_as_their_keys_are_compared_as_written_in_an_evaluation():
    """ev6: training tasks given as their `task_key`s ('text:...', as an episodes table's task_key column holds them)
    all read as the text of nothing (one hash), so the key of an evaluated task matched nothing: not held out, unseen"""
    res, said = evaluated(adapter(TEXTS, True), OTHER, strict=True)
    assert res.held_out.disjoint and res.held_out.basis == {'fingerprint': 0, 'text': 5, 'id': 0}, res.held_out
    assert not [s for s in said if 'share content' in s], said
    mine = task_key({'id': 'elsewhere', 'instruction': 'Compute 2+2'})          # the key of an evaluated task
    with pytest.raises(TaskOverlapError, match='1 of 3 evaluation tasks share content'):
        evaluated(adapter(TEXTS, True), OTHER + [mine], strict=True)


def test_disjoint_tasks_named_by_keys_do_not_share_content_in_an_evaluation():
    """ev6: tasks named by their keys that show nothing (a log replayed by its task_key column) and training keys all
    read as one hash: evaluate_agent warned that 2 different tasks 'share content' and held 1 distinct task"""
    named = [{'id': task_key(t)} for t in TEXTS]
    res, said = evaluated(adapter(named, False), OTHER)
    assert (res.held_out.shared, res.held_out.n_eval) == ([], 3), res.held_out
    assert not [s for s in said if 'share content' in s or 'hold only' in s], said
    assert [s for s in said if 'compared by id alone' in s], said                # names only: said so


def test_rows_of_a_data_frame_are_tasks_read_by_their_task_id_and_text():
    """ev7: after 'refuse an item that is no task', rows of df.itertuples() or df.iterrows() (columns task_id, prompt)
    were refused as 'not a task' (task_id read only `.id`), and the refusal of a Series spanned several lines"""
    import pandas as pd
    tr = pd.DataFrame({'task_id': ['a', 'b'], 'prompt': ['Compute 2+2', 'Compute 3+3']})
    ev = pd.DataFrame({'task_id': ['c', 'd'], 'prompt': ['Compute 2+2', 'Compute 5+5']})
    for rows in (lambda d: list(d.itertuples()), lambda d: [r for _, r in d.iterrows()]):
        r = check_held_out(rows(tr), rows(ev))
        assert repr(r) == 'HeldOutReport(2 distinct eval tasks vs 2 training tasks, 1 shared; keys by 4 text)', r
        assert r.shared == [task_key({'id': 'x', 'prompt': 'Compute 2+2'})]
    only_ids = pd.DataFrame({'task_id': ['a', 'e']})                      # no text: keyed (and warned of) by id
    with pytest.warns(UserWarning, match='compared by id alone'):
        assert check_held_out(list(only_ids.itertuples()), ['e']).by_id == ['e']
    nothing = pd.DataFrame({'reward': [1.0], 'n': [2]}).iloc[0]          # no id, no text: refused in one line
    with pytest.raises(TypeError, match=r'eval\[1\] is reward 1\.0 n 2\.0 Name: 0, dtype: float64, not a task') as e:
        check_held_out(['a'], ['a', nothing])
    assert '\n' not in str(e.value)
    with pytest.raises(TypeError, match=r"train\[0\] is \{'id': None\}, not a task"):   # was the id 'None'
        check_held_out([{'id': None}], [{'id': None}])


def test_a_frame_row_without_an_id_is_no_id_not_the_name_nan():
    """ev8: a data frame's empty task_id cell (NaN, pd.NA, None in an object column) was read as the id 'nan' or
    '<NA>', and an empty text or fingerprint cell as a value: two different tasks without ids were called shared"""
    import numpy as np
    import pandas as pd
    tr = pd.DataFrame({'task_id': [np.nan], 'prompt': [np.nan], 'question': ['Compute 2+2'], 'fingerprint': [np.nan]})
    ev = pd.DataFrame({'task_id': [np.nan], 'prompt': [np.nan], 'question': ['Compute 5+5'], 'fingerprint': [np.nan]})
    for rows in (lambda d: d.to_dict('records'), lambda d: list(d.itertuples()), lambda d: [r for _, r in d.iterrows()]):
        r = check_held_out(rows(tr), rows(ev), strict=True)
        assert r.disjoint and r.basis == {'fingerprint': 0, 'text': 2, 'id': 0}, r
        assert check_held_out(rows(tr), rows(tr.assign(task_id=['b']))).shared == [task_key({'question': 'Compute 2+2'})]
    for gone in (np.nan, pd.NA, None):                    # no id and no text: refused in one line, naming list and place
        bare = pd.DataFrame({'task_id': pd.Series([gone], dtype=object), 'reward': [1.0]})
        for rows in (bare.to_dict('records'), list(bare.itertuples())):
            with pytest.raises(TypeError, match=r'check_held_out: eval\[1\] is .*, not a task \(no id, no text\)') as e:
                check_held_out(['a'], ['a', *rows], strict=True)
            assert '\n' not in str(e.value)


def test_a_text_task_without_an_id_beside_an_env_s_task_is_no_key_error():
    """ev8: _fingerprints looked up the id of every task without a fingerprint in the envs of the others, so a text
    task without an id (training tasks given as {'instruction': ...}) raised a bare KeyError from task_id"""
    r = check_held_out([{'instruction': 'Compute 2+3'}], [{'id': 'x', 'env_id': 'elsewhere/not-installed'}])
    assert r.disjoint and r.basis == {'fingerprint': 0, 'text': 1, 'id': 1}, r       # no env behind them: text, id
    with pytest.raises(ValueError, match=r"""1 task\(s\) without a fingerprint \(e.g. \["no id: \{'instruction': 'Compute """
                                         r"""2\+3'\}"\]\) name no task of \['knowlyr/arith-easy'\]""") as e:
        evaluate_agent(ExpertAgent(), 'knowlyr/arith-easy', seeds=[0], n_tasks=1, progress=False,
                       train_tasks=[{'instruction': 'Compute 2+3'}])
    assert '\n' not in str(e.value)

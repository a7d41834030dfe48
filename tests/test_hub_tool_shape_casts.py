"""An `openai` export whose splits' tools differ in shape warned that `load_dataset('json', data_files={...})` "fails"
to load them together. It casts every split to the types of the split loaded first, and where the cast can be made it
changes values silently: beside a train split's float default, a test split's `1` loads as `1.0`; beside a boolean,
its `1.5` loads as `true`. The warning now says so, names the first value that changes (and with which split loaded
first), and keeps the advice to load each split on its own. Checked here against real loads with `datasets`."""
import re

import datasets
import pytest

from knowlyr_lab.hub.export import DatasetExporter

TEST = ('t3', 't4', 't6')         # the test split of tasks t0..t9 at test_fraction=0.3
FIELD = 'tools[0].function.parameters.properties.n.default'
SAID = re.compile(r"; with split '(\w+)' first, split '(\w+)' field '([^']+)': (.+?) loads as (.+?)\); load each split")

def _tools(default)->list:
    return [{'type': 'function', 'function': {'name': 'move', 'description': 'move', 'parameters': {
        'type': 'object', 'properties': {'n': {'type': 'number', 'default': default}}, 'required': ['n']}}}]

def _trajs()->list[dict]:
    "Two trajectories per task t0..t9, the test split's tasks in env b, the others in env a"
    return [{'id': f't{t}-{k}', 'agent': {'name': 'a', 'model': 'm'}, 'outcome': {'success': True, 'terminated': True},
             'task': {'id': f't{t}', 'instruction': f'Reach column {t}.', 'domain': 'maze',
                      'env_id': 'knowlyr/b' if f't{t}' in TEST else 'knowlyr/a'},
             'steps': [{'index': 0, 'thought': 'go', 'action': {'tool': 'move', 'params': {'n': 1}},
                        'observation': {'content': 'moved'}, 'reward': 0.5}]} for t in range(10) for k in range(2)]

def _export(tmp_path, train_default, test_default):
    tools = {'knowlyr/a': _tools(train_default), 'knowlyr/b': _tools(test_default)}
    with pytest.warns(UserWarning, match='differ in shape'):
        res = DatasetExporter(_trajs(), test_fraction=0.3, tools=tools).export('openai', tmp_path / 'o')
    assert list(res.paths) == ['train', 'test'] and res.counts['test'] == 6
    said = [w for w in res.warnings if 'differ in shape' in w]
    assert len(said) == 1 and 'changes values silently' in said[0] and 'load each split on its own' in said[0]
    return res, said[0]

def _default(ds)->object: return ds[0]['tools'][0]['function']['parameters']['properties']['n']['default']

@pytest.mark.parametrize('train_default,test_default,loaded', [(1.5, 1, 1.0), (True, 1.5, True)])
def test_the_warning_names_the_value_a_joint_load_changes(tmp_path, train_default, test_default, loaded):
    res, said = _export(tmp_path, train_default, test_default)
    assert SAID.search(said).groups() == ('train', 'test', FIELD, repr(test_default), repr(loaded)), said
    dd = datasets.load_dataset('json', data_files=res.paths, cache_dir=str(tmp_path / 'c'))   # no error, as the warning says
    assert _default(dd['train']) == train_default and repr(_default(dd['test'])) == repr(loaded) != repr(test_default)
    alone = datasets.load_dataset('json', data_files=res.paths['test'], split='train', cache_dir=str(tmp_path / 'c'))
    assert repr(_default(alone)) == repr(test_default)                    # the advice: each split on its own, exact

def test_a_joint_load_that_fails_in_one_order_changes_values_in_the_other(tmp_path):
    "Train 1, test 1.5: train first fails (1.5 is no int64); test first loads the train split's 1 as 1.0, as named"
    res, said = _export(tmp_path, 1, 1.5)
    assert SAID.search(said).groups() == ('test', 'train', FIELD, '1', '1.0'), said
    with pytest.raises(datasets.exceptions.DatasetGenerationError):
        datasets.load_dataset('json', data_files=res.paths, cache_dir=str(tmp_path / 'c'))
    order = {'test': res.paths['test'], 'train': res.paths['train']}
    dd = datasets.load_dataset('json', data_files=order, cache_dir=str(tmp_path / 'c2'))
    assert _default(dd['test']) == 1.5 and repr(_default(dd['train'])) == '1.0'

"verl rows read back from Parquet as verl reads them: every tools_kwargs entry a dict, none null"
import pyarrow.parquet as pq

from knowlyr_lab.hub.export import DatasetExporter
from knowlyr_lab.trajectory import Outcome, Step, Task, ToolCall, Trajectory


def _t(tid, task, env, tool):
    return Trajectory(id=tid, task=Task(id=task, instruction=f'do {task}', env_id=env), outcome=Outcome(success=True),
                      steps=[Step(index=0, action=ToolCall(tool=tool, params={'path': 'x'}))])

def test_verl_tools_kwargs_have_no_null_entries(tmp_path):
    "Two tasks with different tools: Parquet made one struct of both names, the missing one read back as None"
    r = DatasetExporter([_t('tr-a', 't1', 'e1', 'read'), _t('tr-b', 't2', 'e2', 'write')]).export('verl', tmp_path / 'v')
    rows = pq.read_table(r.paths['train']).to_pylist()
    assert len(rows) == 2
    for row in rows:
        kw, ei = row['extra_info']['tools_kwargs'], row['extra_info']
        assert set(kw) == {'read', 'write'} and all(isinstance(v, dict) for v in kw.values())
        # what verl does with it: tools_kwargs.get(name, {}).get("create_kwargs", {})
        assert all(kw.get(n, {}).get('create_kwargs', {}) == {'env_id': ei['env_id'], 'task_id': ei['task_id']} for n in kw)

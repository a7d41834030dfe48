"""A ReAct action written as a Python call of literals (`search({'q': 'a', 'q': 'b'})`) is read by
`ast.literal_eval`, which keeps a repeated key's last value: the first value was lost without a word, while the JSON
readers (and a JSON object in the same place) warn. The `react-text` adapter (page 22b) now warns the same way."""
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.report import ConversionReport

LOG = """Question: find pets
Thought: search
Action: search({'q': 'cats', 'limit': 1,
               'q': 'dogs'})
Observation: 3 dogs
Action: search(**{'q': 'x', 'q': 'y'}, opts={'n': 1, "n": 2})
Observation: none
Action: search({"q": "a", "q": "b"})
Observation: ok
Action: search({'q': 'one'}, {'q': 'two'})
Observation: refused
Final Answer: dogs
"""


def test_python_literal_repeated_key_is_warned_like_json(tmp_path):
    log = tmp_path / 'run.txt'
    log.write_text(LOG)
    r = ConversionReport()
    (t,) = convert(log, format='react-text', report=r)
    assert [s.action.params for s in t.steps[:3]] == [{'q': 'dogs', 'limit': 1}, {'q': 'y', 'opts': {'n': 2}},
                                                      {'q': 'b'}]
    dup = [(w['path'], w['line'], w['record_type'], w['reason']) for w in r.warnings
           if w['record_type'] == '(duplicate key)']
    said = "duplicate key {!r} in one object (the last value is kept)".format
    assert dup == [(str(log), 3, '(duplicate key)', said('q')), (str(log), 6, '(duplicate key)', said('q')),
                   (str(log), 6, '(duplicate key)', said('n')), (str(log), 8, '(duplicate key)', said('q'))], dup

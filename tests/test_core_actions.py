"""`parse_action` refuses malformed actions with the reason (the page `00ab_core` shows three of them): each kind of
refusal and its message."""
import pytest

from knowlyr_lab.core import InvalidActionError, parse_action


@pytest.mark.parametrize('bad, why', [
    ("I think I should go north", "no .Action:. line"),
    ({"id": "c", "function": {"name": "move", "arguments": "{direction: north"}}, "not valid JSON"),
    ('Action: move(direction=os.system("rm -rf /"))', "must be literals"),
    ('Action: move("north", "fast")', "positional"),
    ({"name": "move"}, "unrecognised action"),
    ({"tool": "move", "params": "north"}, "'params'.*must be a dict"),
])
def test_malformed_action_is_refused_with_its_reason(bad, why):
    with pytest.raises(InvalidActionError, match=why): parse_action(bad)

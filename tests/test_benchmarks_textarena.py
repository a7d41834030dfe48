"textarena games: registered, seeded random baseline (the same with 1 or 3 threads), experts, fingerprints. (Gymnasium's check_env runs on every registered env in test_foundation.py and on every game in nbs/19a.)"
import pytest

from knowlyr_lab.agents import ExpertAgent, RandomAgent
from knowlyr_lab.envs.textarena import TEXTARENA_GAMES
from knowlyr_lab.registry import list_envs, make
from knowlyr_lab.rollout.collect import collect

GAMES = sorted(TEXTARENA_GAMES)

def test_at_least_ten_textarena_games_registered():
    ids = [e for e in list_envs() if e.startswith('knowlyr/textarena/')]
    assert len(ids) >= 10 and sorted(ids) == sorted(f'knowlyr/textarena/{g}' for g in GAMES)

@pytest.mark.parametrize('game', GAMES)
def test_seeded_random_baseline(game):
    env_id = f'knowlyr/textarena/{game}'
    a = collect(env_id, RandomAgent, 6, seed=3, max_episode_steps=60, progress=False)
    b = collect(env_id, RandomAgent, 6, seed=3, max_episode_steps=60, n_workers=3, progress=False)   # threads share the global `random`
    assert [t.id for t in a] == [t.id for t in b]
    assert all(t.outcome.success is not None or t.outcome.truncated for t in a)
    c = collect(env_id, RandomAgent, 6, seed=4, max_episode_steps=60, progress=False)
    assert [t.id for t in c] != [t.id for t in a]

@pytest.mark.parametrize('game', [g for g in GAMES if TEXTARENA_GAMES[g].oracle])
def test_experts_win(game):
    trajs = collect(f'knowlyr/textarena/{game}', ExpertAgent, 8, progress=False)
    assert all(t.outcome.success for t in trajs), [(t.task.id, t.outcome.reason) for t in trajs if not t.outcome.success]

def test_fingerprints_follow_content_not_names():
    env = make('knowlyr/textarena/Sudoku')
    fps = [env.task_fingerprint(f'Sudoku-s{s}') for s in range(5)]
    assert len(set(fps)) == 5 and fps[2] == make('knowlyr/textarena/Sudoku').task_fingerprint({'id': 'Sudoku-s2'})

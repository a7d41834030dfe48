"""Issue 40: each trainer config's field groups have one source (the class's `_groups`): every field is in exactly one
group, no group names a field the class lacks, and none is left to 'other'."""
from dataclasses import fields

import pytest

from knowlyr_lab.trainer.dpo import DPOConfig
from knowlyr_lab.trainer.grpo_config import GRPOConfig
from knowlyr_lab.trainer.sft import SFTConfig
from knowlyr_lab.trainer.train_config import TrainConfig


@pytest.mark.parametrize('cls', [TrainConfig, SFTConfig, DPOConfig, GRPOConfig])
def test_every_field_is_in_exactly_one_group(cls):
    groups = cls.field_groups()
    named = [n for names in groups.values() for n in names]
    assert 'other' not in groups, groups.get('other')
    assert sorted(named) == sorted(f.name for f in fields(cls)), set(named) ^ {f.name for f in fields(cls)}
    listed = [n for k in cls.__mro__ for names in vars(k).get('_groups', {}).values() for n in names]
    assert set(listed) <= {f.name for f in fields(cls)}, set(listed) - {f.name for f in fields(cls)}

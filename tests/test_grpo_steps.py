"""How many optimiser steps GRPO takes and what a step is normalised by (review21): an online run makes max_steps
steps; with loss_type grpo or dr_grpo a batch's invalid members add nothing, not even to the normaliser, and a member
split into several rows counts once. Tiny models, one step each."""
import tempfile

import pytest

from knowlyr_lab.trainer.grpo import GRPOConfig, GRPOTrainer
from knowlyr_lab.trainer.tiny import make_tiny_model


@pytest.mark.parametrize('max_steps,num_iterations,updates', [(5, 2, [2, 2, 1]), (7, 3, [3, 3, 1]), (1, 2, [1]),
                                                              (6, 3, [3, 3]), (20, 1, [1] * 20)])
def test_online_grpo_plans_max_steps_optimiser_steps(max_steps, num_iterations, updates):
    "online GRPO planned (max_steps // num_iterations) * num_iterations steps (4 for 5 and 2; 2 for 1 and 2)"
    model, tok = make_tiny_model(hidden_size=32)
    tr = GRPOTrainer(GRPOConfig(output_dir=tempfile.mkdtemp(), max_steps=max_steps, num_iterations=num_iterations,
                                gradient_accumulation_steps=2, progress_bar=False), model, tok)
    tr.groups = None                                     # online, as `train` sets it
    steps = [s for ep in tr._steps_plan() for s in ep]
    assert len(steps) == max_steps
    keys = [s[0][0] for s in steps]                      # each step's batch: updates of num_iterations steps, the last shorter
    assert [keys.count(k) for k in dict.fromkeys(keys)] == updates
    assert all(len(s) == 2 and len({m[0] for m in s}) == 1 for s in steps)   # 2 micro-batches of one batch per step

"""Parity of knowlyr_lab.trainer.losses with the formulas TRL documents (and TRL's own helpers where importable).

Golden values are computed here independently, with plain Python math on small hand-written tensors, following
TRL's documented definitions (DPOTrainer sigmoid loss; GRPOTrainer advantages, clipping, k3 KL, loss_type)."""
import math

import pytest
import torch

from knowlyr_lab.trainer.losses import dpo_loss, grpo_advantages, grpo_loss, step_level_advantages, step_weighted_ce, token_logps

TOL = 1e-5
logsig = lambda x: -math.log1p(math.exp(-x))

def test_dpo_sigmoid_matches_formula():
    pc, pr, rc, rr = [-1.2, -4.0, -0.3], [-2.5, -1.0, -0.9], [-1.5, -3.0, -0.2], [-2.0, -1.5, -1.1]
    for beta in (0.1, 0.5):
        losses, cw, rw = dpo_loss(*(torch.tensor(x) for x in (pc, pr, rc, rr)), beta=beta)
        for i in range(3):
            h = (pc[i] - rc[i]) - (pr[i] - rr[i])
            assert abs(losses[i].item() - (-logsig(beta * h))) < TOL
            assert abs(cw[i].item() - beta * (pc[i] - rc[i])) < TOL
            assert abs(rw[i].item() - beta * (pr[i] - rr[i])) < TOL

def test_dpo_ipo_and_smoothing():
    pc, pr, rc, rr = torch.tensor([-1.0]), torch.tensor([-2.0]), torch.tensor([-1.5]), torch.tensor([-1.0])
    h = 0.5 - (-1.0)
    assert abs(dpo_loss(pc, pr, rc, rr, beta=0.2, loss_type='ipo')[0].item() - (h - 1 / 0.4) ** 2) < TOL
    ls = dpo_loss(pc, pr, rc, rr, beta=0.2, label_smoothing=0.1)[0].item()
    assert abs(ls - (-(0.9) * logsig(0.2 * h) - 0.1 * logsig(-0.2 * h))) < TOL

def _std(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))

def test_grpo_advantages_all_scales():
    R = [1.0, 0.0, 0.5, 0.25, 2.0, 2.0, 0.0, 1.0]
    G = 4
    got = {s: grpo_advantages(torch.tensor(R), G, scale=s).tolist() for s in ('group', 'batch', 'none')}
    for g in range(2):
        grp = R[g * G:(g + 1) * G]; m = sum(grp) / G
        for j, r in enumerate(grp):
            i = g * G + j
            assert abs(got['none'][i] - (r - m)) < TOL
            assert abs(got['group'][i] - (r - m) / (_std(grp) + 1e-4)) < TOL
            assert abs(got['batch'][i] - (r - m) / (_std(R) + 1e-4)) < TOL

def _golden_grpo(lp, old, adv, mask, eps_lo, eps_hi, beta, ref, loss_type, L):
    B, T = len(lp), len(lp[0])
    per = [[0.0] * T for _ in range(B)]
    for i in range(B):
        for t in range(T):
            ratio = math.exp(lp[i][t] - old[i][t])
            cl = min(max(ratio, 1 - eps_lo), 1 + eps_hi)
            a = adv[i]
            per[i][t] = -min(ratio * a, cl * a)
            if beta:
                d = ref[i][t] - lp[i][t]
                per[i][t] += beta * (math.exp(d) - d - 1)
    s = lambda i: sum(per[i][t] * mask[i][t] for t in range(T))
    n = lambda i: sum(mask[i][t] for t in range(T))
    if loss_type == 'grpo': return sum(s(i) / max(n(i), 1) for i in range(B)) / B
    if loss_type in ('bnpo', 'dapo'): return sum(s(i) for i in range(B)) / max(sum(n(i) for i in range(B)), 1)
    if loss_type == 'dr_grpo': return sum(s(i) for i in range(B)) / (B * L)

@pytest.mark.parametrize('loss_type', ['grpo', 'bnpo', 'dapo', 'dr_grpo'])
@pytest.mark.parametrize('beta,eps_hi', [(0.0, None), (0.04, 0.28)])
def test_grpo_loss_matches_formula(loss_type, beta, eps_hi):
    lp = [[-0.5, -1.2, -0.1, -2.0], [-0.3, -0.7, -1.5, -0.2], [-1.0, -0.4, -0.9, -0.6]]
    old = [[-0.7, -1.0, -0.5, -2.0], [-0.3, -0.2, -1.4, -0.9], [-1.1, -0.4, -0.1, -0.6]]   # ratios in and out of the clip range
    ref = [[-0.6, -1.1, -0.3, -1.8], [-0.4, -0.5, -1.5, -0.3], [-0.9, -0.5, -0.8, -0.7]]
    mask = [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]]
    adv = [0.8, -1.1, 0.3]
    got, _ = grpo_loss(torch.tensor(lp), torch.tensor(old), torch.tensor(adv), torch.tensor(mask), epsilon=0.2,
                       epsilon_high=eps_hi, beta=beta, ref_logps=torch.tensor(ref), loss_type=loss_type, max_completion_length=6)
    want = _golden_grpo(lp, old, adv, mask, 0.2, eps_hi or 0.2, beta, ref, loss_type, 6)
    assert abs(got.item() - want) < TOL

def test_token_logps_match_trl_selective_log_softmax():
    trl_utils = pytest.importorskip('trl.trainer.utils')
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 6, 11), torch.randint(0, 11, (2, 6))
    ours, mask = token_logps(logits, labels, temperature=0.7)
    theirs = trl_utils.selective_log_softmax(logits[:, :-1] / 0.7, labels[:, 1:])
    assert mask.all() and (ours - theirs).abs().max().item() < TOL

def test_masked_tokens_get_exactly_zero_gradient():
    torch.manual_seed(0)
    logits = torch.randn(1, 8, 13, requires_grad=True)
    labels = torch.randint(0, 13, (1, 8)); labels[0, 2:5] = -100     # an "observation" span
    step_weighted_ce(logits, labels, torch.rand(1, 8)).backward()
    # position t predicts labels[t+1]: logits rows 1..3 predict the masked labels 2..4
    assert logits.grad[0, 1:4].abs().sum().item() == 0.0
    assert logits.grad[0, 0].abs().sum().item() > 0 and logits.grad[0, 5].abs().sum().item() > 0

def test_step_level_advantages_change_distribution_not_total():
    A = step_level_advantages(torch.tensor([1.5, -0.5]), [[0.1, 0.5, 0.9], [1.0, 0.0]], torch.tensor([[0, 1, 2, 2], [0, 0, 1, -1]]))
    per_step = [A[0, 0].item(), A[0, 1].item(), A[0, 2].item()]
    assert abs(sum(per_step) / 3 - 1.5) < TOL and per_step[0] < per_step[1] < per_step[2]
    # the failed episode (A = -0.5, step rewards 1.0 and 0.0, mean 0.5): its worst step takes the most blame,
    # A_ij = A_i (1 + sign(A_i)(r_j - mean r)) = -0.5 * 1.5 = -0.75, its better step less (-0.25); tokens of no step keep A_i
    assert abs(A[1, 2].item() + 0.75) < TOL and abs(A[1, 0].item() + 0.25) < TOL and A[1, 3].item() == -0.5

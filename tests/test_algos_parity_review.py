"""Parity review of mmevo.grpo.algos against verl (volcengine/verl, trainer/ppo/core_algos.py and
utils/torch_functional.py at commit b178a3c).

Every expected number below was computed by running verl's functions (``agg_loss``, ``masked_mean``,
``compute_policy_loss_vanilla``) on the same inputs; the comment next to each says which output it is.
"""

import math

import torch

from mmevo.grpo.algos import agg_loss, masked_mean, policy_loss

inf, nan = math.inf, math.nan


def close(actual, expected, atol=1e-6):
    assert math.isfinite(float(actual)), actual
    assert abs(float(actual) - expected) <= atol, (float(actual), expected)


def test_junk_outside_the_mask_is_never_read():
    # verl's masked_sum is where(mask, x, 0) * mask: a -inf log-prob at padding (log-ratio -inf - -inf = NaN) or an
    # inf loss there does not reach the loss or the metrics. mmevo multiplied by the mask: 0 * nan = nan.
    lp = torch.tensor([[-1.0, -0.7, -inf], [-0.2, -inf, -inf]])
    old = torch.tensor([[-1.1, -0.5, -inf], [-0.4, -inf, -inf]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    loss, m = policy_loss(lp, old, torch.tensor([1.0, -0.5]), mask, clip_low=0.2, clip_high=0.28)
    close(loss, -0.4377335011959076)  # verl pg_loss, token-mean
    close(m["approx_kl"], -0.033333346247673035)  # verl actor/ppo_kl
    close(m["clip_frac"], 0.0)  # verl actor/pg_clipfrac
    close(m["clip_frac_dual"], 0.0)  # verl actor/pg_clipfrac_lower
    close(m["ratio_mean"], (math.exp(0.1) + math.exp(-0.2) + math.exp(0.2)) / 3)

    L = torch.tensor([[0.5, 2.0, inf], [nan, nan, nan], [1.5, -inf, nan]])
    M = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    close(agg_loss(L, M, "token-mean"), 1.3333333730697632)  # verl agg_loss token-mean
    close(masked_mean(L, M), 1.3333333730697632)  # verl masked_mean
    rows = masked_mean(L, M, dim=-1)
    assert rows.tolist() == [1.25, 0.0, 1.5]  # verl masked_mean(axis=-1)


def test_seq_mean_masked_out_row_with_nan_adds_zero():
    # verl drops fully masked rows with where() (NaN there never reaches the loss); mmevo counts the row in B (its
    # documented deviation), so verl's value with global_batch_size=3 is the one to match.
    L = torch.tensor([[0.5, 2.0, 0.0], [nan, inf, nan], [1.5, 0.0, 0.0]])
    M = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    close(agg_loss(L, M, "seq-mean-token-mean"), 0.9166666865348816)  # verl, global_batch_size=3 (no B: 1.375)
    close(agg_loss(L, M, "seq-mean-token-sum"), 1.3333333730697632)  # verl, global_batch_size=3 (no B: 2.0)


def test_clip_frac_counts_what_verl_counts():
    # ratio one float below 1 - clip_low with a tiny negative advantage: -A*r and -A*clip(r) round to the same
    # float32, so the clipped term is not larger and verl's pg_clipfrac is 0; comparing r with 0.8 counted it.
    r = torch.tensor(0.8).nextafter(torch.tensor(0.0))
    lp = torch.log(r).reshape(1, 1)
    assert torch.exp(lp).item() == r.item()
    _, m = policy_loss(lp, torch.zeros(1, 1), torch.tensor([-1e-30]), torch.ones(1, 1))
    assert m["clip_frac"] == 0.0  # verl actor/pg_clipfrac
    assert m["clip_frac_low"] == 0.0 and m["clip_frac_high"] == 0.0
    close(m["approx_kl"], 0.22314360737800598)  # verl actor/ppo_kl
    _, m = policy_loss(lp, torch.zeros(1, 1), torch.tensor([-3.7]), torch.ones(1, 1))
    assert m["clip_frac"] == 1.0 and m["clip_frac_low"] == 1.0  # verl actor/pg_clipfrac: 1.0


def test_bf16_metrics_are_exact_shares():
    # bf16 log-probs and old log-probs, 301 of 600 tokens clipped: a bf16 sum of the 0/1 flags rounds 301 to 300
    lp = torch.zeros(1, 600, dtype=torch.bfloat16)
    lp[0, :301] = 0.5
    loss, m = policy_loss(lp, torch.zeros(1, 600, dtype=torch.bfloat16), torch.tensor([1.0]), torch.ones(1, 600))
    close(loss, -1.1019010543823242)  # verl pg_loss
    close(m["clip_frac"], 0.5016666650772095)  # verl actor/pg_clipfrac
    close(m["clip_frac_high"], 0.5016666650772095)
    close(m["approx_kl"], -0.25083333253860474)  # verl actor/ppo_kl


def test_seq_mean_token_sum_norm_sums_rows_first():
    # verl: sum(sum(L * M, -1)) / factor. Summing all elements at once rounds differently in float32: here
    # 1 + 1e8 - 1e8 + 1 gives 1.0, row by row (1e8) + (-1e8) gives verl's 0.0
    L = torch.tensor([[1.0, 1e8], [-1e8, 1.0]])
    assert agg_loss(L, torch.ones(2, 2), "seq-mean-token-sum-norm", loss_scale_factor=1.0).item() == 0.0  # verl: 0.0

"""CSRS review 15: boxed blanks other than the wide spaces (``\\underline{\\quad}``, ``\\phantom{0}``, ``?``) are no
answer for the votes and the accuracy head; a wide space between two numbers parts them (``1 \\quad 2`` is no 12);
CSRS / MM-UPT settings that a run would accept and ignore are refused, naming the key."""

import math

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, canonical_answer, extract_answer, group_answer_keys
from mmevo.rewards.heads import ScoredSample, SFRHead
from mmevo.rewards.majority import majority_vote_rewards

BLANKS = ["\\underline{\\quad}", "\\underline{\\hspace{2cm}}", "\\phantom{0}", "\\hphantom{00}", "\\vphantom{x}",
          "\\phantom{\\frac{1}{2}}", "?", "??", "\\text{?}", "\\_\\_", "___"]


@pytest.mark.parametrize("blank", BLANKS)
def test_a_boxed_blank_is_no_answer_for_majority_vote(blank):
    # "\boxed{?}" was the answer "?": three of them out-voted two 7s, became the pseudo label and scored 1
    responses = [f"<think>fill in</think> \\boxed{{{a}}}" for a in [blank, blank, blank, "7", "7"]]
    rewards, info = majority_vote_rewards(responses, [0] * 5)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert info["pseudo_labels"] == {0: "7"} and info["no_answer_frac"] == 0.6 and info["distinct_answers_mean"] == 1
    assert canonical_answer(extract_answer(responses[0])) is None


@pytest.mark.parametrize("blank", BLANKS)
def test_a_boxed_blank_is_no_answer_for_sfr(blank):
    # 2 maternal (blank, 7), 4 re-inferences (blank, blank, 7, blank): 7 counts 2 of 6 in all, 1 of 4 re-inferences
    samples = [ScoredSample(f"\\boxed{{{a}}}", 0, None, None, role=role) for a, role in
               [(blank, "maternal"), ("7", "maternal"), (blank, "reinference"), (blank, "reinference"),
                ("7", "reinference"), (blank, "reinference")]]
    sfr, metrics = SFRHead().score(samples)
    r_base = 2 / 6
    expected_7 = (0.2 * math.tanh(5.0 * ((1 / 4) / (r_base + 1e-6) - 1.0)) + 1.0) * r_base
    assert sfr[0].item() == 0.0 and sfr[1].item() == pytest.approx(expected_7, rel=1e-6)
    assert metrics["distinct_answers"] == 1


@pytest.mark.parametrize("blank", BLANKS)
def test_the_accuracy_head_never_credits_a_blank(blank):
    # math-verify reads "\phantom{0}" as 0: the accuracy head credited a blank against gold 0; a gold "?" is no answer
    golds = ["0", "00", "x", "?", "\\frac{1}{2}"]
    assert accuracy_rewards([f"\\boxed{{{blank}}}"] * len(golds), golds).tolist() == [0.0] * len(golds)
    assert not answers_equivalent(blank, blank)


def test_underline_is_presentation_only():
    assert canonical_answer("\\underline{5}") == ("num", 5)
    assert answers_equivalent("\\underline{5}", "5") and answers_equivalent("\\underline{B}", "40", ["30", "40"])
    assert canonical_answer("x_1") == ("str", "x_1")  # an underscore inside an answer is kept


@pytest.mark.parametrize("spelling", ["1 \\quad 2", "1\\quad2", "1 \\qquad 2", "1\\hspace{1cm}2", "1 \\quad\\quad 2",
                                      "1\\enspace 2"])
def test_two_numbers_parted_by_a_wide_space_stay_two_numbers(spelling):
    # "1 \quad 2" read as 12 (the space dropped), and math-verify reads "1 2" as 3: both matched it
    assert canonical_answer(spelling) == ("str", "1, 2")
    for single in ("12", "3", "1", "2"):
        assert not answers_equivalent(spelling, single) and not answers_equivalent(single, spelling)
    assert answers_equivalent(spelling, "1, 2") and answers_equivalent(spelling, "1 \\qquad 2")
    keys = group_answer_keys([spelling, "12", "12", "1, 2"])
    assert keys[0] == keys[3] != keys[1] == keys[2]
    rewards, _ = majority_vote_rewards([f"\\boxed{{{a}}}" for a in [spelling, "12", "12"]], [0] * 3)
    assert rewards.tolist() == [0.0, 1.0, 1.0]


def test_spaces_that_are_not_a_gap_between_numbers_keep_their_meaning():
    assert canonical_answer("1\\,000") == ("num", 1000)  # a thin space is a thousands separator
    assert canonical_answer("5\\quad") == canonical_answer("\\quad 5") == ("num", 5)
    assert canonical_answer("5 \\quad \\text{cm}") == ("num", 5)


# -- CSRS / MM-UPT settings accepted and ignored -----------------------------------------------------------------------
def _ignored(*overrides, config="configs/csrs_tiny.yaml"):
    from mmevo.config import csrs_settings_without_effect, load_config

    return csrs_settings_without_effect(load_config(config, list(overrides)))


def test_random_anchor_without_retrace_is_refused_at_start_naming_both_keys(no_runs, capsys):
    from mmevo.cli import main

    # before: accepted, and the run re-inferred every response from scratch: sample_omegas was never called
    assert main(["train", "configs/csrs_tiny.yaml", "csrs.random_anchor=true", "csrs.retrace=false"]) == 2
    err = capsys.readouterr().err
    assert "csrs.random_anchor=true has no effect in this run: csrs.retrace=false re-infers from scratch" in err
    assert no_runs == []
    assert main(["train", "configs/csrs_tiny.yaml", "csrs.random_anchor=true"]) == 0  # with retracing it acts
    assert main(["train", "configs/csrs_tiny.yaml", "csrs.retrace=false"]) == 0
    assert no_runs == ["train", "train"]


def test_sfr_gamma_beta_with_another_head_are_refused_at_start(no_runs, capsys):
    from mmevo.cli import main

    # before: accepted with the majority-vote head (MM-UPT), which never reads them: a gamma sweep of identical runs
    for knob in ("csrs.gamma=0.35", "csrs.beta=8"):
        assert main(["train", "configs/csrs_tiny.yaml", "reward.heads={majority: 1.0}", knob]) == 2
        err = capsys.readouterr().err
        assert f"{knob.replace('8', '8.0')} has no effect in this run: only the sfr reward head reads it" in err
        assert "reward.heads={'majority': 1.0} has none" in err
    assert main(["train", "configs/mmupt_qwen2_5_vl_7b_geometry3k.yaml", "csrs.gamma=0.35"]) == 2
    assert "csrs.gamma=0.35 has no effect in this run: csrs.enabled=false" in capsys.readouterr().err
    # reward.head_args.sfr.gamma wins over csrs.gamma (trainer.head_arguments): two values, one of them ignored
    assert main(["train", "configs/csrs_tiny.yaml", "reward.head_args={sfr: {gamma: 0.1}}", "csrs.gamma=0.3"]) == 2
    assert "csrs.gamma=0.3 has no effect in this run: reward.head_args.sfr.gamma=0.1 is the value" in \
        capsys.readouterr().err
    assert no_runs == []
    assert main(["train", "configs/csrs_tiny.yaml", "csrs.gamma=0.35", "csrs.beta=8"]) == 0  # the sfr head reads them
    assert main(["train", "configs/csrs_tiny.yaml", "reward.heads={majority: 1.0, sfr: 0.5}", "csrs.gamma=0.35"]) == 0
    assert main(["train", "configs/mmupt_qwen2_5_vl_7b_geometry3k.yaml"]) == 0
    assert no_runs == ["train"] * 3


def test_the_demo_and_the_loops_refuse_a_key_only_when_every_run_ignores_it(no_runs, capsys, tmp_path):
    from mmevo.cli import main

    out = ["--out", str(tmp_path / "demo")]
    # csrs.gamma is for the demo's CSRS run; its majority-vote run ignoring it is no reason to refuse
    assert main(["demo", *out, "csrs.gamma=0.3"]) == 0
    assert main(["demo", *out, "csrs.random_anchor=true", "csrs.retrace=false"]) == 2
    err = capsys.readouterr().err
    assert "csrs.random_anchor=true has no effect in the demo's csrs run: csrs.retrace=false re-infers" in err
    assert "; the demo's mv run: csrs.enabled=false samples plain groups" in err
    assert main(["demo", *out, "--method", "grpo", "csrs.m=3"]) == 2  # the verifiable-reward run has no CSRS
    assert "csrs.m=3 has no effect in the demo's grpo run: csrs.enabled=false" in capsys.readouterr().err
    # MM-Zero: CSRS is for the solver role only; csrs.gamma read there (sfr) is kept, and refused where no role has CSRS
    mz = [f"mmzero.output_dir={tmp_path / 'mz'}"]
    assert main(["evolve", "mmzero", "configs/mmzero_tiny_csrs_solver.yaml", *mz, "csrs.gamma=0.3"]) == 0
    assert main(["evolve", "mmzero", "configs/mmzero_tiny.yaml", *mz, "csrs.gamma=0.3"]) == 2
    assert "csrs.gamma=0.3 has no effect in the mmzero loop's proposer, coder, solver roles" in capsys.readouterr().err
    assert main(["evolve", "mmzero", "configs/mmzero_tiny_csrs_solver.yaml", *mz, "csrs.perturb=false",
                 "csrs.sigma=5"]) == 2
    err = capsys.readouterr().err
    assert "csrs.sigma=5.0 has no effect in the mmzero loop's proposer, coder roles: csrs.enabled=false" in err
    assert "; the mmzero loop's solver role: csrs.perturb=false shows the re-inferences the clean image" in err
    assert no_runs == ["demo", "mmzero"]


@pytest.mark.parametrize("overrides, ignored", [
    # CSRS off (MM-UPT): every CSRS knob is unread
    (["csrs.enabled=false", "reward.heads={majority: 1.0}", "csrs.m=3", "csrs.omega=0.5", "csrs.sigma=5"],
     {"csrs.m", "csrs.omega", "csrs.sigma"}),
    # Table 5 without RRM and VSP: no re-inference at all
    (["csrs.retrace=false", "csrs.perturb=false", "csrs.m=3", "csrs.random_anchor=true"],
     {"csrs.m", "csrs.random_anchor"}),
    (["csrs.retrace=false", "csrs.omega=0.5"], {"csrs.omega"}),
    (["csrs.random_anchor=true", "csrs.omega=0.5"], {"csrs.omega"}),
    (["csrs.perturb=false", "csrs.sigma=5"], {"csrs.sigma"}),
    (["csrs.sigma=0"], {"csrs.sigma"}),  # VSP with no noise: the clean image at a perturbed prefill's cost
    (["csrs.gamma=0", "csrs.beta=8"], {"csrs.beta"}),  # R = R_base whatever beta
    (["csrs.beta=0", "csrs.gamma=0.35"], {"csrs.gamma"}),  # tanh(0) = 0
    (["reward.head_args={sfr: {beta: 3}}", "csrs.beta=8"], {"csrs.beta"}),
    # what acts is not reported
    (["csrs.random_anchor=true", "csrs.m=3", "csrs.sigma=5", "csrs.gamma=0.35", "csrs.beta=8"], set()),
    (["csrs.retrace=false", "csrs.m=3", "csrs.sigma=5"], set()),  # VSP alone re-infers m times from scratch
    (["csrs.perturb=false", "csrs.omega=0.5", "reward.heads={majority: 1.0}"], set()),  # RRM with the pooled vote
    (["reward.head_args={sfr: {gamma: 0.3}}", "csrs.gamma=0.3"], set()),  # one value, written twice
])
def test_csrs_settings_without_effect(overrides, ignored):
    assert set(_ignored(*overrides)) == ignored


def test_sfr_gamma_above_one_is_refused_as_it_ranks_a_dropped_answer_below_no_answer():
    from mmevo.config import ConfigError, load_config
    from mmevo.rewards.heads import RewardMixer
    from mmevo.rewards.sfr import softened_frequency_rewards

    # why: maternal [a, None], re-inferences [b, b]: a has R_base 1/4 and f_r 0, so its factor is 1 + gamma tanh(-5)
    r = softened_frequency_rewards(["a", None], ["b", "b"], gamma=1.5, beta=5.0).tolist()
    assert r[0] == pytest.approx((1 - 1.5 * math.tanh(5.0 * (1 - 0 / (0.25 + 1e-6)))) * 0.25) and r[0] < 0 == r[1]
    with pytest.raises(ConfigError, match=r"csrs\.gamma=1\.5 must be in \[0, 1\] \(above 1 an answer"):
        load_config(None, ["csrs.gamma=1.5"])
    with pytest.raises(ValueError, match=r"sfr gamma must be in \[0, 1\], got 1\.5"):
        RewardMixer({"sfr": 1.0}, {"sfr": {"gamma": 1.5}})
    assert load_config(None, ["csrs.gamma=1"]).csrs.gamma == 1.0  # factor in (0, 2): an answer stays above none
    assert RewardMixer({"sfr": 1.0}, {"sfr": {"gamma": 1.0}}).heads["sfr"].gamma == 1.0


def test_omega_zero_is_refused_for_the_ablation_switch():
    from mmevo.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"csrs\.omega=0 must be in \(0, 1\): .*csrs\.retrace=false"):
        load_config("configs/csrs_tiny.yaml", ["csrs.omega=0"])
    assert load_config("configs/csrs_tiny.yaml", ["csrs.omega=0.9"]).csrs.omega == 0.9  # Table 4's largest
    assert load_config("configs/csrs_tiny.yaml", ["csrs.omega=0.1"]).csrs.omega == 0.1  # Table 4's smallest


def test_csrs_with_only_a_zero_weight_head_reading_reinferences_is_refused(no_runs, capsys):
    from mmevo.cli import main

    # before: accepted; the sfr head of weight 0 added nothing to the reward, so the run sampled m re-inferences per
    # maternal response and trained on accuracy alone, as plain GRPO
    assert main(["train", "configs/grpo_tiny.yaml", "csrs.enabled=true", "reward.heads={sfr: 0.0, accuracy: 1.0}"]) == 2
    assert "sfr of weight 0 adds nothing to the reward and the others score each sample on its own" in \
        capsys.readouterr().err
    assert no_runs == []
    assert main(["train", "configs/grpo_tiny.yaml", "csrs.enabled=true", "reward.heads={sfr: 0.5, accuracy: 1.0}"]) == 0
    # a zero-weight head beside a weighted one that reads re-inferences is a logged diagnostic, still accepted
    assert main(["train", "configs/csrs_tiny.yaml", "reward.heads={sfr: 1.0, majority: 0.0}"]) == 0
    assert no_runs == ["train", "train"]


@pytest.mark.parametrize("overrides, key, why", [
    (["algo.kl_coef=0", "algo.kl_type=k3"], "algo.kl_type", "algo.kl_coef=0 adds no KL term"),
    (["algo.adv_scale=none", "algo.adv_eps=0.01"], "algo.adv_eps", "algo.adv_scale=none divides the advantages by no"),
])
def test_algo_settings_without_effect_are_refused(no_runs, capsys, overrides, key, why):
    from mmevo.cli import main

    # before: accepted; the trainer builds no reference model at kl_coef 0 and adds eps to no std with adv_scale none
    assert main(["train", "configs/csrs_tiny.yaml", *overrides]) == 2
    assert f"{key}=" in (err := capsys.readouterr().err) and why in err
    from mmevo.config import load_config, settings_without_effect

    assert list(settings_without_effect(load_config("configs/csrs_tiny.yaml", overrides))) == [key]
    assert main(["train", "configs/csrs_tiny.yaml", overrides[1]]) == 0  # where it is read
    assert no_runs == ["train"]

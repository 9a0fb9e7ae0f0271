"""Tests written from a mutation-testing pass over the GRPO math, CSRS (RRM / VSP / strategy) and the SFR / majority
rewards: each one pins a behaviour that a deliberately broken implementation still passed the rest of the suite with.

Expected values come from the CSRS paper (Eq. 6: anchor floor(omega * len(R_p)); Algorithm 1: one visual perturbation
per maternal response; Eq. 7-8: SFR) and from the documented definitions in the docstrings (Bessel-corrected batch std),
computed by hand in the comments, never copied from the code's output.
"""

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from mmevo.config import CSRSConfig
from mmevo.csrs.retrace import anchor_position, sample_omegas
from mmevo.csrs.strategy import CSRSStrategy
from mmevo.grpo.algos import group_advantages
from mmevo.models.inputs import EncodedPrompt
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards
from mmevo.rollout.base import Completion, SamplingParams
from mmevo.rollout.strategy import RolloutContext


# --------------------------------------------------------------------------- #
# group_advantages, scale="batch"
# --------------------------------------------------------------------------- #
def test_batch_scale_with_exactly_two_samples_uses_their_unbiased_std():
    # B = 2, one group, rewards [1, 0]: mu = 0.5, centred +-0.5; batch std (Bessel) = sqrt((0.25 + 0.25) / 1)
    # = 0.707106781186548 -> A = +-0.5 / (0.707106781186548 + 1e-6) = +-0.707105781187962
    # (treating a 2-sample batch as std 0 gives +-0.5 / 1e-6 = +-5e5)
    adv = group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), scale="batch")
    assert adv.tolist() == pytest.approx([0.707105781187962, -0.707105781187962], abs=1e-6)


# --------------------------------------------------------------------------- #
# RRM: anchor position and retracing rates
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("length, omega, expected", [
    (3, Fraction(1, 3), 1),  # floor(1/3 * 3) = 1 exactly (the double 0.333...3 would give floor(0.999...) = 0)
    (6, Fraction(2, 3), 4),  # floor(2/3 * 6) = 4 (the double 0.666...6 gives 3.999... -> 3)
    (9, Fraction(7, 9), 7),
])
def test_anchor_position_of_an_exact_rational_rate_is_exact(length, omega, expected):
    assert anchor_position(length, omega) == expected


class _ScriptedRandom:
    """A random.Random stand-in returning the given draws in order."""

    def __init__(self, draws):
        self.draws = list(draws)

    def random(self):
        return self.draws.pop(0)


def test_random_anchor_redraws_an_exact_zero():
    # omega ~ U(0, 1) on the open interval: a draw of exactly 0.0 (rng.random() is in [0, 1)) is drawn again
    assert sample_omegas(2, 0.7, True, _ScriptedRandom([0.0, 0.25, 0.0, 0.0, 0.5])) == [0.25, 0.5]


# --------------------------------------------------------------------------- #
# CSRS strategy on a scripted engine (no model): what each re-inference request and sample carries
# --------------------------------------------------------------------------- #
STOP = 0


def _decode(ids, skip_special_tokens=True):
    return " ".join(map(str, ids))


class ScriptedEngine:
    """Maternal call: request r, sample k -> tokens [10 + 10 r + k, 2, 3, ..., 9, STOP] (9 content tokens and a stop;
    ``content`` [k] shortens sample k's content to that many tokens); re-inference call: [50 + k, STOP] after the
    request's prefix. Records every request."""

    def __init__(self, supports_kv_reuse=False, content=None):
        self.calls = []
        self.supports_kv_reuse = supports_kv_reuse
        self.content = content

    def generate(self, requests, params):
        self.calls.append(list(requests))
        out = []
        for r, req in enumerate(requests):
            if len(self.calls) == 1:
                comps = []
                for k in range(req.n):
                    toks = [10 + 10 * r + k, 2, 3, 4, 5, 6, 7, 8, 9][: self.content[k] if self.content else 9]
                    comps.append(Completion(toks + [STOP], [0.0] * (len(toks) + 1), "stop",
                                            kv={"kept": True} if req.keep_kv else None))
            else:
                comps = [Completion([50 + k, STOP], [0.0] * 2, "stop", prefix_ids=list(req.prefix_ids))
                         for k in range(req.n)]
            out.append(comps)
        return out


class FakeImageProcessor:
    """Pixel rows = the image's RGB pixels (one row per pixel), grid [1, H, W]: each image keeps its own rows."""

    def __call__(self, images, return_tensors="pt"):
        grids, rows = [], []
        for im in images:
            a = np.asarray(im.convert("RGB"), dtype=np.float32)
            grids.append([1, a.shape[0], a.shape[1]])
            rows.append(torch.from_numpy(a.reshape(-1, 3).copy()))
        return {"image_grid_thw": torch.tensor(grids), "pixel_values": torch.cat(rows)}


def _image(value, size=(4, 3)):
    return Image.fromarray(np.full((size[1], size[0], 3), value, dtype=np.uint8))


def _prompt(ex):
    """A text prompt, or one with the example's images (grey levels) encoded by FakeImageProcessor."""
    images = [_image(v) for v in ex.grey]
    if not images:
        return EncodedPrompt("p", [], [1, 2, 3], [0, 0, 0])
    enc = FakeImageProcessor()(images)
    return EncodedPrompt("p", images, [1, 2, 3], [0, 0, 0], pixel_values=enc["pixel_values"],
                         image_grid_thw=enc["image_grid_thw"])


def _rollout(cfg, examples, n=2, engine=None, seed=7):
    engine = engine or ScriptedEngine()
    processor = SimpleNamespace(image_processor=FakeImageProcessor())
    tok = SimpleNamespace(decode=_decode)
    ctx = RolloutContext(engine, processor, tok, _prompt, SamplingParams(max_tokens=16, seed=seed), n, 100, 0, seed,
                         [STOP])
    return CSRSStrategy(cfg).rollout(ctx, examples), engine


def _ex(name, grey=()):
    return SimpleNamespace(id=name, grey=list(grey))


def test_anchor_is_cut_from_the_length_without_the_trailing_stop_token():
    # each maternal response is 9 content tokens + a stop token: anchor floor(0.7 * 9) = 6 (Eq. 6 on the content);
    # counting the stop token would give floor(0.7 * 10) = 7
    ro, eng = _rollout(CSRSConfig(enabled=True, m=1, perturb=False), [_ex("a")])
    reqs = eng.calls[1]
    assert [list(r.prefix_ids) for r in reqs] == [[10, 2, 3, 4, 5, 6], [11, 2, 3, 4, 5, 6]]
    assert [r.max_tokens for r in reqs] == [16 - 6, 16 - 6]


def test_reinferences_carry_their_own_maternal_example_and_full_text():
    ro, _ = _rollout(CSRSConfig(enabled=True, m=2, perturb=False), [_ex("a"), _ex("b")], n=1)
    assert ro.parents == [-1, -1, 0, 0, 1, 1]
    assert [e.id for e in ro.examples] == ["a", "b", "a", "a", "b", "b"]
    # a re-inference's text is its whole response, the maternal prefix included (the answer may lie anywhere in it)
    prefix_b = [20, 2, 3, 4, 5, 6]
    assert ro.texts[4] == _decode(prefix_b + [50, STOP])
    assert ro.texts[5] == _decode(prefix_b + [51, STOP])


@pytest.mark.parametrize("omega, mean, zero_frac", [
    (0.5, 3.0, 0.0),  # contents of 9 and 4 tokens: anchors floor(4.5) = 4 and floor(2.0) = 2
    (0.2, 0.5, 0.5),  # anchors floor(1.8) = 1 and floor(0.8) = 0
    (0.1, 0.0, 1.0),  # anchors floor(0.9) = 0 and floor(0.4) = 0
])
def test_anchor_metrics(omega, mean, zero_frac):
    eng = ScriptedEngine(content=[9, 4])
    ro, _ = _rollout(CSRSConfig(enabled=True, m=1, perturb=False, omega=omega), [_ex("a")], engine=eng)
    assert ro.extra_metrics["csrs/anchor_mean"] == mean
    assert ro.extra_metrics["csrs/anchor_zero_frac"] == zero_frac
    assert ro.extra_metrics["csrs/reinference_frac"] == 0.5  # 2 re-inferences of 4 samples
    assert ro.extra_metrics["csrs/reinference_tokens"] == 4.0  # 2 new tokens each, prefixes not counted


def test_random_anchors_follow_the_step_seed():
    # A.5: omega ~ U(0, 1) per maternal response, drawn from the step's seed: reproducible for one seed, and another
    # step (seed) draws other anchors
    def anchors(seed):
        ro, eng = _rollout(CSRSConfig(enabled=True, m=1, perturb=False, random_anchor=True), [_ex("a"), _ex("b")],
                           n=4, seed=seed)
        return [len(r.prefix_ids) for r in eng.calls[1]]

    assert anchors(11) == anchors(11)
    assert len({tuple(anchors(s)) for s in (11, 12, 13)}) == 3


@pytest.mark.parametrize("retrace, perturb, reuse", [(True, False, True), (True, True, False), (False, True, False),
                                                     (False, False, False)])
def test_kv_caches_are_kept_and_continued_only_for_clean_image_retrace(retrace, perturb, reuse):
    # a re-inference may continue the maternal KV cache only when it re-reads exactly what the maternal pass read:
    # the clean image (perturb off) and a real prefix (retrace on); with both off there is no re-inference at all
    eng = ScriptedEngine(supports_kv_reuse=True)
    ro, _ = _rollout(CSRSConfig(enabled=True, m=1, retrace=retrace, perturb=perturb), [_ex("a")], engine=eng)
    assert [r.keep_kv for r in eng.calls[0]] == [reuse]
    if len(eng.calls) > 1:
        assert all((r.continue_from is not None) == reuse for r in eng.calls[1])
    assert all(c.kv is None for c in ro.completions)  # no cache outlives the rollout


def test_kv_cache_is_not_continued_on_an_engine_without_reuse():
    eng = ScriptedEngine(supports_kv_reuse=False)
    _rollout(CSRSConfig(enabled=True, m=1, perturb=False), [_ex("a")], engine=eng)
    assert all(r.continue_from is None for r in eng.calls[1])


def test_vsp_draws_one_noise_per_maternal_response_for_every_image():
    # Algorithm 1 perturbs the image inside the loop over the n maternal responses: the two anchors of one prompt get
    # different noise; a prompt with two images gets both perturbed (2 x 12 pixel rows)
    ro, eng = _rollout(CSRSConfig(enabled=True, m=1, sigma=30.0), [_ex("a", grey=(128, 60))], n=2)
    clean = _prompt(_ex("a", grey=(128, 60)))
    over = [r.image_override for r in eng.calls[1]]
    assert all(o is not None for o in over)
    for o in over:
        assert o.pixel_values.shape == clean.pixel_values.shape == (24, 3)
        assert torch.equal(o.image_grid_thw, clean.image_grid_thw)
        for rows in (slice(0, 12), slice(12, 24)):  # both images are noised
            assert not torch.equal(o.pixel_values[rows], clean.pixel_values[rows])
        assert o.input_ids == clean.input_ids
    assert not torch.equal(over[0].pixel_values, over[1].pixel_values)
    # each re-inference sample keeps the clean prompt; only the request saw the noised pixels
    assert ro.prompts[2] is ro.prompts[0] and ro.prompts[3] is ro.prompts[1]


class GridChangingImageProcessor(FakeImageProcessor):
    """Returns each image's grid transposed ([1, W, H]): the same number of rows, another layout."""

    def __call__(self, images, return_tensors="pt"):
        enc = super().__call__(images, return_tensors)
        enc["image_grid_thw"] = enc["image_grid_thw"][:, [0, 2, 1]]
        return enc


def test_vsp_refuses_a_processor_that_changes_the_image_grid():
    # the prompt's image placeholders were expanded for the clean grid: other pixel rows would not fit them
    eng = ScriptedEngine()
    processor = SimpleNamespace(image_processor=GridChangingImageProcessor())
    ctx = RolloutContext(eng, processor, SimpleNamespace(decode=_decode), _prompt, SamplingParams(max_tokens=16, seed=1),
                         2, 100, 0, 1, [STOP])
    with pytest.raises(RuntimeError, match="grid"):
        CSRSStrategy(CSRSConfig(enabled=True, m=1)).rollout(ctx, [_ex("a", grey=(128,))])


# --------------------------------------------------------------------------- #
# SFR (Eq. 7-8)
# --------------------------------------------------------------------------- #
def test_sfr_no_answer_maternal_is_zero_even_with_eps_zero():
    # maternal [a, None], re-inference [a]: total 3.  a: R_base = 2/3, f_r = 1/1 = 1
    #   f_r / R_base - 1 = 0.5; tanh(2.5) = 0.986614298151430 -> R = (1 + 0.197322859630286) * 2/3 = 0.798215239753524
    # None: reward 0 without evaluating Eq. 8 (its f_base is 0, and with eps = 0 that is 0 / 0)
    r = softened_frequency_rewards(["a", None], ["a"], eps=0.0)
    assert r.tolist() == pytest.approx([0.798215239753524, 0.0], abs=1e-12)


# --------------------------------------------------------------------------- #
# majority vote
# --------------------------------------------------------------------------- #
def test_majority_vote_reads_the_groups_options_from_any_member():
    # the group's options come from its first member that has them: with them, the letter B is the option "60°",
    # so B + 60° (2 votes) tie with C + C and the earlier first occurrence wins; without them C would win alone
    ch4 = ["45°", "60°", "90°", "120°"]
    responses = [r"\boxed{B}", r"\boxed{60°}", r"\boxed{C}", r"\boxed{C}"]
    rewards, m = majority_vote_rewards(responses, [0] * 4, [None, ch4, ch4, ch4])
    assert rewards.tolist() == [1.0, 1.0, 0.0, 0.0]
    assert m["distinct_answers_mean"] == 2.0

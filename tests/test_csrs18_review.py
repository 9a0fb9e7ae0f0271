"""Review csrs18: CSRS rewards against the seed on spelled-out answers, text given for a list, VSP on a real diagram."""

import math

import numpy as np
import pytest
import torch
from PIL import Image

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import group_answer_keys
from mmevo.rewards.heads import MajorityHead, ScoredSample, SFRHead
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards
from datapaths import FIXTURES


def _eq7_eq8(maternal_classes, reinference_classes, gamma=0.2, beta=5.0, eps=1e-6):
    """Eq. 7-8 written from the seed: R_base = Count(a, A_all) / ((m+1) n), f_r = Count(a, A_m) / (m n)."""
    everything = maternal_classes + reinference_classes
    out = []
    for a in maternal_classes:
        if a is None:
            out.append(0.0)
            continue
        r_base = everything.count(a) / len(everything)
        f_r = reinference_classes.count(a) / len(reinference_classes)
        out.append((gamma * math.tanh(beta * (f_r / (r_base + eps) - 1)) + 1) * r_base)
    return out


def _boxed(x):
    return f"so the answer is \\boxed{{{x}}}"


def _samples(maternal, reinference, choices=None):
    return ([ScoredSample(_boxed(t) if t is not None else "no final answer", 0, None, choices) for t in maternal]
            + [ScoredSample(_boxed(t) if t is not None else "no final answer", 0, None, choices, role="reinference")
               for t in reinference])


@pytest.mark.parametrize("maternal, reinference, choices, mat_classes, re_classes", [
    # five spellings of one half are one answer in A_all; "3" is another
    (["0.5", "1/2", "\\frac{1}{2}"], [" 0.50 ", "\\dfrac12", "3"], None, [0, 0, 0], [0, 0, 1]),
    # a choice letter, the letter in parentheses and the option's text are one answer
    (["B", "(B)", "24", "A"], ["B", "24", "20", "(A)"] * 2, ["20", "24", "28", "32"], [0, 0, 0, 1], [0, 0, 1, 1] * 2),
    # no answer in some responses: it counts in (m+1)n but never matches, and scores 0
    (["3", None, "3"], ["3", None, None, "5", "3.0", "5"], None, [0, None, 0], [0, None, None, 1, 0, 1]),
    (["7"], ["7", "8", "7.00", "9", "7"], None, [0], [0, 1, 0, 2, 0]),  # n = 1, m = 5
])
def test_sfr_head_counts_spellings_of_one_answer_together(maternal, reinference, choices, mat_classes, re_classes):
    got = SFRHead().score(_samples(maternal, reinference, choices))[0]
    want = _eq7_eq8(mat_classes, re_classes) + [0.0] * len(reinference)  # re-inferences are never trained on
    assert got.tolist() == pytest.approx(want, abs=1e-6)


def test_majority_head_spellings_ties_and_no_answers():
    half = ["0.5", "1/2", "\\frac{1}{2}", " 0.50 ", "3", "3", "3"]  # 4 halves beat three 3s only if grouped
    assert MajorityHead().score(_samples(half, []))[0].tolist() == [1, 1, 1, 1, 0, 0, 0]
    assert MajorityHead().score(_samples(["4", "3", "3", "4"], []))[0].tolist() == [1, 0, 0, 1]  # tie: first seen
    assert MajorityHead().score(_samples([None, None], []))[0].tolist() == [0, 0]


@pytest.mark.parametrize("call, name", [
    (lambda: majority_vote_rewards("\\boxed{12}", [0] * 10), "responses"),
    (lambda: majority_vote_rewards(["\\boxed{1}", "\\boxed{2}"], "00"), "group_ids"),
    (lambda: accuracy_rewards("\\boxed{12}", ["12"] * 10), "responses"),
    (lambda: accuracy_rewards(["\\boxed{1}", "\\boxed{3}"], "12"), "golds"),
    (lambda: softened_frequency_rewards("12", ["1", "2"]), "maternal"),
    (lambda: softened_frequency_rewards(["1", "2"], "1122"), "reinference"),
    (lambda: group_answer_keys("12"), "answers"),
])
def test_one_text_given_for_a_list_is_refused_by_name(call, name):
    # a str is a sequence of its characters: "\\boxed{12}" was ten one-character responses scored 0 each, golds "12"
    # were the golds "1" and "2" (the first response scored 1), maternal "12" were two trajectories "1" and "2"
    with pytest.raises(ValueError, match=rf"^{name} must be a list"):
        call()


def test_vsp_noise_reaches_the_pixel_values_of_a_real_diagram(tiny_vl_path):
    """A real Geometry3K diagram at the tiny processor's own size (no resize): the perturbed request's pixel_values,
    mapped back to 0-255 units, are exactly the clipped noise added to the image, with std near sigma where nothing
    clips, and the image grid (so the placeholder tokens) is unchanged."""
    from mmevo.csrs.perturb import derive_seed, perturb_image
    from mmevo.csrs.strategy import perturbed_prompt
    from mmevo.data.images import to_rgb
    from mmevo.models.inputs import encode_prompt
    from mmevo.models.loader import load_model

    path = FIXTURES / "geometry3k_samples" / "12" / "img_diagram.png"
    lm = load_model(tiny_vl_path)
    diagram = to_rgb(Image.open(path))
    # 56 x 56 (the tiny processor's whole pixel budget, so no resize) of strokes, moved to mid-grey
    arr = np.asarray(diagram.crop((60, 160, 116, 216)), dtype=np.int16)
    img = Image.fromarray((arr // 3 + 85).astype(np.uint8))  # 85..170: 4 sigma from either end
    prompt = encode_prompt(lm.processor, True, "<image>Find x.", [img])
    sigma, seed = 20.0, 11
    noisy = perturbed_prompt(lm.processor, prompt, sigma, seed)
    assert noisy.input_ids == prompt.input_ids and torch.equal(noisy.image_grid_thw, prompt.image_grid_thw)
    assert noisy.pixel_values.dtype == prompt.pixel_values.dtype == torch.float32
    expected = np.asarray(perturb_image(img, sigma, derive_seed(seed, 0)), dtype=np.float64) - np.asarray(img)
    std = torch.tensor(lm.processor.image_processor.image_std, dtype=torch.float64).view(1, 3, 1)
    delta = (noisy.pixel_values.double() - prompt.pixel_values.double())
    delta = (delta.view(delta.shape[0], 3, -1) * std * 255).flatten().numpy()
    # each pixel sits in both frames of a temporal patch (temporal_patch_size 2), hence every value twice
    assert np.sort(delta) == pytest.approx(np.sort(np.repeat(expected.flatten(), 2)), abs=0.02)
    assert float(expected.std()) == pytest.approx(sigma, rel=0.1)  # 9408 draws (56 x 56 x 3), none clipped


# real multiple-choice rows whose option texts evaluate to one value (MathVista testmini 288 and 513, MATH-Vision 90
# and 1680): math-verify reads a range "0.2 - 0.4" as a subtraction and an order "5-4-3-2-1" as one
RANGES = ["0.0 - 0.2", "0.2 - 0.4", "0.4 - 0.6", "0.6 - 0.8", "0.8 - 1.0"]
PERCENT_RANGES = ["43.2%-63.6%", "45.2%-65.6%", "42.2%-62.6%", "41.2%-61.6%", "44.2%-64.6%"]
ORDERS = ["5-4-3-2-1", "5-2-3-4-1", "5-4-2-3-1", "5-3-2-1-4", "5-2-3-1-4"]
LISTS = ["$3,5,4,2,1$", "$3,4,5,1,2$", "$3,2,1,4,5$", "$3,1,2,4,5$", "$3,4,2,1,5$"]
PAIRS = ["(u1, u2) = (0, 0)", "(u1, u2) = (1, 0)", "(u1, u2) = (0, 1)", "(u1, u2) = (1, 1)"]


@pytest.mark.parametrize("choices", [RANGES, PERCENT_RANGES, ORDERS, LISTS, PAIRS])
def test_distinct_options_are_distinct_answers_even_when_their_texts_evaluate_equal(choices):
    from mmevo.rewards.answers import answers_equivalent

    for i, gold in enumerate(choices):
        for j in range(len(choices)):
            letter = chr(65 + j)
            assert answers_equivalent(letter, gold, choices) == (i == j), (letter, gold)
            assert answers_equivalent(f"({letter})", chr(65 + i), choices) == (i == j)
    # a letter and its own option's text stay one answer; a duplicated option text is one answer too
    assert answers_equivalent("B", choices[1], choices) and answers_equivalent(f"${choices[1]}$", "B", choices)
    assert answers_equivalent("C", "D", ["9", "12", "18", "18"])


def test_majority_and_sfr_keep_options_with_equal_values_apart():
    # MathVista 288: three votes for B, two for A, one for D. Before, all three letters were one class: every
    # response scored 1 under majority vote and SFR rewarded the whole group as one answer
    votes = ["B", "B", "A", "B", "D", "A"]
    r, info = majority_vote_rewards([_boxed(v) for v in votes], [0] * 6, [RANGES] * 6)
    assert r.tolist() == [1, 1, 0, 1, 0, 0] and info["distinct_answers_mean"] == 3
    keys = group_answer_keys(votes, RANGES)
    assert len(set(keys)) == 3
    got = SFRHead().score(_samples(["B", "A", "D"], ["B", "B", "A", "B", "D", "A"], RANGES))[0]
    assert got.tolist()[:3] == pytest.approx(_eq7_eq8([0, 1, 2], [0, 0, 1, 0, 2, 1]), abs=1e-6)


def test_no_two_options_of_a_real_multiple_choice_row_are_one_answer():
    """Every multiple-choice row of MathVista testmini (choice texts) and MATH-Vision testmini: option j's letter is
    the gold option i's answer only when i == j or the two options repeat one text."""
    import json

    from datapaths import SHARED
    from mmevo.rewards.answers import _option_key, answers_equivalent

    rows = []
    vista = SHARED / "mathvista_testmini" / "testmini.json"
    vision = SHARED / "mathvision" / "testmini.jsonl"
    if not (vista.exists() and vision.exists()):
        pytest.skip("needs the full MathVista / MATH-Vision testmini files (MMEVO_SHARED_DATA)")
    rows += [(f"mathvista {k}", v["choices"]) for k, v in json.loads(vista.read_text()).items() if v["choices"]]
    rows += [(f"mathvision {r['id']}", r["options"]) for r in map(json.loads, vision.read_text().splitlines())
             if r["options"]]
    assert len(rows) == 540 + 190
    wrong = [(name, chr(65 + j), gold) for name, choices in rows for i, gold in enumerate(choices)
             for j in range(len(choices))
             if answers_equivalent(chr(65 + j), gold, choices)
             != (i == j or _option_key(choices[i]) == _option_key(choices[j]))
             and gold not in "ABCDE"]  # an option whose text is a letter names another option by that letter
    assert wrong == []


def test_an_option_text_that_looks_like_a_lower_case_letter_names_that_option():
    # MathVista testmini 168: the gold is the choice TEXT "(b)", the fifth option; "(b)" was read as the letter b
    from mmevo.rewards.answers import answers_equivalent, normalize_choice

    choices = ["(c)", "(a)", "(e)", "(d)", "(b)"]
    assert normalize_choice("(b)", choices) == "(b)"
    assert accuracy_rewards([_boxed("E"), _boxed("B"), _boxed("(b)")], ["(b)"] * 3, [choices] * 3).tolist() == [1, 0, 1]
    assert answers_equivalent("option b", "(a)", choices)  # no option reads "option b": the letter b it is
    assert normalize_choice("(b)", ["20", "24"]) == "24"  # and a lower-case letter still names its option

"""Answer-style parity sweep (``scripts/parity_styles.py``) on a subset of the shipped benchmark rows.

Every 40th MATH-V test row and every 10th MathVista testmini row, each with the answer written in every style the
sweep knows (bare, boxed, "The answer is X.", units, LaTeX fractions / roots / pi, letters, "(B)", "B.", option texts,
letter + text, negatives, thousands separators, percentages, scientific notation, two answers, empty, longer than any
truncation, full-width digits, the Unicode minus): mmevo's verdict must equal the official one on every pair.
Review 26's styles (``--styles new``: markdown, code, tables, "Final answer:" / "答案", option texts in other case or
punctuation, trailing zeros, glued units, two answers, ranges, intervals, vectors, yes / no, precision edges, the
answer first in 25,000 characters) on every 160th MATH-V row (none may disagree) and every 20th MathVista row (none
but the readings README documents, ``VISTA_DOCUMENTED``).
Needs ``.venv-parity`` (``make parity-env``) and the full data files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from datapaths import SHARED, needs_shared

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "parity_styles.py"
PARITY_PY = ROOT / ".venv-parity" / "bin" / "python"

# the style families of the sweep (prefixes of its style names) that the subset must hold (the Unicode minus is
# written only for a negative gold, which this MATH-V subset lacks; thousands separators in MathVista only for a
# gold of 1,000 or more, which its subset lacks)
MATHV_FAMILIES = ["mc_letter|", "mc_paren_letter|", "mc_letter_dot|", "mc_option_text|", "mc_letter_text|",
                  "mc_fullwidth_letter|", "ff_gold|", "units_cm|", "units_degree_sign|", "dollars|", "percent_plain|",
                  "sci_e|", "fullwidth_digits|", "negated|", "thousands_comma|", "frac|", "dfrac|",
                  "ff_two_boxes_right_first", "ff_two_answer_is_right_last", "mc_two_boxes_right_last", "empty",
                  "long_answer_last", "long_answer_first"]
VISTA_FAMILIES = ["mc_letter|", "mc_option_text|", "mc_letter_text|", "gold|", "units_cm|", "fullwidth_digits|",
                  "percent|", "sci_e|", "empty", "long_answer_last"]


def _sweep(tmp_path, args: list[str]) -> dict:
    out = tmp_path / "styles.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "MMEVO_SHARED_DATA": str(SHARED),
                               "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.skipif(not PARITY_PY.exists(), reason="the reference venv .venv-parity is missing: run `make parity-env`")
@needs_shared("mathvision/test.jsonl", "MATH-V test.jsonl")
@needs_shared("mathvista_testmini/testmini.json", "MathVista testmini.json")
@pytest.mark.parametrize("bench, stride, families", [("mathvision", 40, MATHV_FAMILIES),
                                                     ("mathvista", 10, VISTA_FAMILIES)])
def test_every_answer_style_scores_as_the_official_scorer(tmp_path, bench, stride, families):
    report = _sweep(tmp_path, ["--bench", bench, "--row-stride", str(stride), "--styles", "base"])
    counts = report["by_bench"][bench]
    assert counts["pairs"] > (2000 if bench == "mathvision" else 3000)
    assert counts["disagree"] == 0, json.dumps(report["examples"], indent=1, ensure_ascii=False)[:4000]
    styles = [k.split(":", 1)[1] for k in report["by_style"]]
    missing = [f for f in families if not any(s.startswith(f) for s in styles)]
    assert not missing, missing
    # both verdicts occur: the sweep holds wrong answers too, not only right ones
    assert 0 < counts["official_true"] < counts["pairs"]


# review 26's styles (``--styles new``) the subsets must hold
NEW_MATHV_FAMILIES = ["n_mc_letter|md_code", "n_mc_letter|code_fence", "n_mc_letter|table", "n_mc_letter|zh_answer_colon",
                      "n_mc_text_upper|", "n_mc_text_latex_text|", "n_ff_gold|long_start_bare",
                      "n_ff_gold|long_end_bare", "n_num_trailing_zeros_2|", "n_num_leading_plus|", "n_num_unit_glued_cm|",
                      "n_num_deg_latex_degree|", "n_num_two_or|", "n_num_range_dash|", "n_num_interval_open|",
                      "n_num_vector|", "n_num_yes|", "n_num_int_as_float|"]
NEW_VISTA_FAMILIES = ["n_mc_letter|md_code", "n_mc_letter|long_start_bare", "n_mc_text_no_punct|", "n_mc_text_period|",
                      "n_ff_gold|long_start_answer_is", "n_num_trailing_zeros_2|", "n_num_unit_glued_cm|",
                      "n_num_float_as_int_round|", "n_num_float_plus_0049|", "n_num_two_or|", "n_num_vector|"]


# review 27's styles (``--styles third``) the subsets must hold
THIRD_MATHV_FAMILIES = ["t_mc_letter|zh_pick", "t_mc_letter|fullwidth_boxed", "t_mc_letter|boxed_nested", "t_mc_letter|fbox",
                        "t_mc_letter|html_bold", "t_mc_letter|think_only", "t_mc_letter_bracket|", "t_mc_option_colon|",
                        "t_mc_choice_lower|", "t_mc_letter_repeated|", "t_ff_gold|answer_is_because",
                        "t_num_sci_cdot|", "t_num_sci_e_mantissa_times|", "t_num_percent_of_fraction|",
                        "t_whitespace_spaces", "t_empty_box"]
THIRD_VISTA_FAMILIES = ["t_mc_letter|html_p", "t_mc_letter|fbox", "t_mc_letter_bracket|bare", "t_mc_option_colon|boxed",
                        "t_mc_letter|think_right_after_wrong", "t_num_sci_e_mantissa_times|", "t_num_tfrac|",
                        "t_num_mixed_latex|", "t_html_only"]


# review 28's styles (``--styles fourth``) the subsets must hold
FOURTH_MATHV_FAMILIES = ["f_mc_letter|md_italic_underscore", "f_mc_letter|final_answer_minerva", "f_mc_letter|bare_exclaim",
                         "f_mc_text|display_bracket", "f_mc_option_is_correct|", "f_mc_none_of_the_above|",
                         "f_ff_gold|smart_quoted", "f_num_word|", "f_num_left_right|", "f_num_dollar_circ|"]
FOURTH_VISTA_FAMILIES = ["f_mc_letter|md_bold_underscore", "f_mc_letter|bare_exclaim", "f_mc_letter|final_answer_minerva",
                         "f_mc_option_is_correct|boxed", "f_mc_answer_colon_option|boxed", "f_ff_gold|md_italic_star",
                         "f_num_left_right|", "f_num_equals_prefix|"]
# review 29's styles (``--styles fifth``) the subsets must hold
FIFTH_MATHV_FAMILIES = ["v_mc_value_paren_letter|", "v_mc_value_paren_letter_wrong_letter|", "v_mc_textrm_letter|",
                        "v_mc_nested_text_letter_wrong|", "v_mc_text_letter_space_value|", "v_mc_each_letter:",
                        "v_mc_each_text:", "v_ff_text|", "v_ff_text_textbf|", "v_ff_textstyle|"]
FIFTH_VISTA_FAMILIES = ["v_mc_textrm_letter|", "v_mc_nested_text_letter|", "v_mc_nested_text_letter_wrong|",
                        "v_mc_text_letter_space_value|", "v_mc_value_comma_option|", "v_ff_boldsymbol|",
                        "v_ff_text_dollars|"]

@pytest.mark.skipif(not PARITY_PY.exists(), reason="the reference venv .venv-parity is missing: run `make parity-env`")
@needs_shared("mathvision/test.jsonl", "MATH-V test.jsonl")
@needs_shared("mathvista_testmini/testmini.json", "MathVista testmini.json")
@pytest.mark.parametrize("styles, bench, stride, offset, families, min_pairs", [
    ("new", "mathvision", 160, 7, NEW_MATHV_FAMILIES, 1000), ("new", "mathvista", 20, 3, NEW_VISTA_FAMILIES, 3000),
    ("third", "mathvision", 160, 11, THIRD_MATHV_FAMILIES, 1000),
    ("third", "mathvista", 20, 7, THIRD_VISTA_FAMILIES, 2000),
    ("fourth", "mathvision", 160, 13, FOURTH_MATHV_FAMILIES, 700),
    ("fourth", "mathvista", 20, 11, FOURTH_VISTA_FAMILIES, 3000),
    ("fifth", "mathvision", 160, 17, FIFTH_MATHV_FAMILIES, 1500),
    ("fifth", "mathvista", 20, 13, FIFTH_VISTA_FAMILIES, 2500)])
def test_review26_and_27_styles_score_as_the_official_scorer(tmp_path, styles, bench, stride, offset, families,
                                                             min_pairs):
    """Review 26's (``--styles new``), review 27's (``--styles third``), review 28's (``--styles fourth``) and review 29's
    (``--styles fifth``) styles on a subset of rows."""
    report = _sweep(tmp_path, ["--bench", bench, "--row-stride", str(stride), "--row-offset", str(offset),
                               "--styles", styles])
    counts = report["by_bench"][bench]
    assert counts["pairs"] > min_pairs
    # MATH-V: no disagreement at all; MathVista: none but the readings README documents (VISTA_DOCUMENTED, e.g. a
    # non-empty response that states no answer, "\\boxed{}", scored wrong)
    assert counts.get("disagree_undocumented", 0) == 0, \
        json.dumps(report["examples"], indent=1, ensure_ascii=False)[:4000]
    if bench == "mathvision":
        assert counts["disagree"] == 0
    styles_seen = [k.split(":", 1)[1] for k in report["by_style"]]
    missing = [f for f in families if not any(s.startswith(f) for s in styles_seen)]
    assert not missing, missing
    assert 0 < counts["official_true"] < counts["pairs"]

"""An adversarial parity set for MATH-V: every row of testmini.jsonl (304), >= 20 responses each (the letter in every
official form, the option text in other case / spacing / with a unicode minus, two answers, two boxes, numbers with
commas, units, percent, degrees, exponents, fractions, rounding at 2 decimals, negative zero, whitespace, "",
very long responses), plus hand-made responses around the extraction rules (``is_number`` of what follows the last
"is ", the answer flags, "oxed{" counting, "(a)" / "{a}" unwrapping). Each is scored by ``score_mathvision`` and by
tests/parity24_mathv_reference.py, a plain re-statement of the official evaluate.py / utils.py run with the real
latex2sympy2 in ``.venv-parity``: the verdicts and the extracted answers must be equal.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from datapaths import SHARED, needs_shared

ROOT = Path(__file__).resolve().parents[1]
PARITY_PY = ROOT / ".venv-parity" / "bin" / "python"
REFERENCE = Path(__file__).with_name("parity24_mathv_reference.py")
DATA = SHARED / "mathvision" / "testmini.jsonl"


def letter_responses(gold: str, options: list[str]) -> list[str]:
    i = ord(gold) - ord("A")
    text, other = str(options[i]), chr(ord("A") + (i + 1) % len(options))
    other_text = str(options[(i + 1) % len(options)])
    return [gold, f"({gold})", f"{gold}.", f"The answer is {gold}", f"The answer is {gold}.", f"The answer is ({gold}).",
            gold.lower(), f"({gold.lower()})", f"\\boxed{{{gold}}}", f"\\boxed{{({gold})}}", f"\\boxed{{{gold.lower()}}}",
            f"{gold}\nbecause", f"({gold})\nbecause", f"({gold}) {gold}\nx", f"So it is {gold}.", f"So it is ({gold}).",
            text, f"\\boxed{{{text}}}", f"The answer is {text}", text.upper(), f" {text} ", text.replace("-", "\u2212"),
            f"{gold} or {other}", f"\\boxed{{{gold}}} \\boxed{{{other}}}", f"\\boxed{{{other}}} \\boxed{{{gold}}}",
            other_text, other, "", "   ", "x" * 3000 + f" {gold}.", f"The correct answer is {gold}",
            f"The answer should be {gold}", f"the final answer is {gold}\n", f"The final answer is $\\boxed{{{gold}}}$",
            f"{{{gold}}}", f"\\text{{{gold}}}", f"answer: {gold}", f"The answer is {gold}. Wait, {other}", f"**{gold}**"]


def value_responses(gold: str) -> list[str]:
    g = gold
    out = [g, f" {g} ", f"{g}\n", f"\\boxed{{{g}}}", f"The answer is {g}", f"The answer is {g}.", f"So the total is {g}.",
           f"the final answer is {g}\nblah", f"$\\boxed{{{g}}}$", f"\\boxed{{{g}}}.", f"\\boxed{{x={g}}}", f"x = {g}",
           f"\\boxed{{{g}}} and \\boxed{{0}}", f"\\boxed{{0}} and \\boxed{{{g}}}", f"{g} cm", f"\\boxed{{{g}\\text{{ cm}}}}",
           f"\\boxed{{{g} \\text{{cm}}}}", f"{g}%", f"\\boxed{{{g}\\%}}", f"{g}^\\circ", f"\\boxed{{{g}^{{\\circ}}}}", "",
           "None", "x" * 3000 + f" is {g}.", f"{g}, {g}", f"\\boxed{{\\frac{{{g}}}{{1}}}}", f"\\boxed{{{g}.0}}",
           f"\\boxed{{{g}.00}}", f"\\boxed{{+{g}}}", f"\\boxed{{-{g}}}", f"\\boxed{{{g}}}\n\nThe answer is 0",
           f"The answer is {g}\\text{{ units}}", f"\\boxed{{{g} units}}", f"\\boxed{{{g}\\,\\text{{km}}}}",
           f"\\boxed{{{g}\\approx 1}}"]
    try:
        v = float(g)
    except ValueError:
        return out + [g.replace("\\", "\\\\"), g.replace("{", " { "), f"\\boxed{{{g.upper()}}}",
                      g.replace("\\frac", "\\dfrac"), g.replace(" ", ""), f"${g}$", f"\\({g}\\)", g.replace(",", ", ")]
    return out + [
        f"{v}", f"{v:.1f}", f"{v:.2f}", f"{v:.3f}", f"{v + 0.004:.3f}", f"{v + 0.006:.3f}", f"{v - 0.004:.3f}", f"{v:e}",
        f"{v:,.0f}" if v == int(v) else f"{v:,}", f"{v:+}", g.replace("-", "\u2212") if g.startswith("-") else "\u2212" + g,
        f"\\boxed{{{v:,}}}", f"\\boxed{{{v:e}}}", f"\\boxed{{{v}e0}}", f"\\boxed{{{int(v * 2)}/2}}",
        f"\\boxed{{\\frac{{{int(v * 2)}}}{{2}}}}", f"\\boxed{{\\frac{int(v * 2) % 10}{2}}}", f"{int(v * 3)}/3",
        f"\\boxed{{{v / 100}}}", f"\\boxed{{{v * 100}\\%}}", "-0", "\\boxed{-0}", "\\boxed{-0.0}", f"\\boxed{{{g}}}" + " " * 500,
        f"{v:.2f}".replace(".", ","), f"\\boxed{{{g}}}\\boxed{{", "\\boxed{" + g, f"\\boxed {g}", f"\\fbox{{{g}}}",
        f"\\boxed{{{{{g}}}}}", f"\\boxed{{\\dfrac{{{int(v * 4)}}}{{4}}}}", f"\\boxed{{\\tfrac{int(v * 2) % 10}2}}",
        f"\\boxed{{{g}}}\n", f"is {g}", f"is  {g}.", f"It is {g}!"]


def responses(row: dict) -> list[str]:
    gold = str(row["answer"])
    return letter_responses(gold, row["options"]) if row["options"] else value_responses(gold)


EXOTIC_NUMBERS = ["1_000", "1_2", "\u0661\u0662", "\uff11\uff12", "12\u00a0", "nan", "inf", "Infinity", "-0", "+0",
                  "0.50", ".5", "5.", "1e3", "1E3", "1e+03", "12.", "2.50", "+2.5", "\u22122", "-2.0", "00", "0e0",
                  "1.5e0", "3/2", "1/2", "0.5e0"]
EXOTIC_TEMPLATES = ["The result is {}.", "is {}", "{}", "The answer is {}", "The answer is {}.\nMore", "\\boxed{{{}}}",
                    "So it is {} cm.", "The answer is: {}", "(A) {}\n", "is {}..", "This is {}. It is {}."]
FLAG_TEMPLATES = ["Answer: {g}", "the answer is \\({g}\\)", "The final answer is ${g}$.", "The answer is $\\boxed{{{g}}}$.",
                  "\\boxed{{{g}}}}}", "{{\\boxed{{{g}}}}}", "\\boxed{{ {g} }}", "\\boxed{{\\textbf{{{g}}}}}",
                  "\\boxed{{{g}}} is wrong, \\boxed{{}}", "oxed{{{g}}}", "\\[\\boxed{{{g}}}\\]", "The answer is {g} .",
                  "The answer is {g}.5", "The answer is {g}.\n\n", "THE ANSWER IS {g}", "the answer is\n{g}",
                  "the answer is {g} and the answer is 7", "{g} is the answer"]
LETTER_TEMPLATES = ["{L}", "({L})", " {L}.", "x ({L}).", "{L}\nx", "({L})\nx", "({L}) {L}\nx", "{l}", "({l})",
                    "\\boxed{{({l})}}", "\\boxed{{{{{l}}}}}", "is {L}", "\\boxed{{\\text{{({L})}}}}", "\\boxed{{{L}. {v}}}",
                    "\\boxed{{{v}}}", "{v}", "is {v}.", "Option {L}", "\\boxed{{{L}}} \\boxed{{A}}", "A and {L}", "{L}) {v}"]


def exotic_pairs() -> list[tuple[str, dict]]:
    pairs = []
    for gold in ["12", "1000", "0.5", "2.5", "-2", "0", "\\frac{1}{2}", "(3,-4)", "2\\sqrt{3}", "1.5"]:
        row = {"answer": gold, "options": []}
        pairs += [(t.format(x, x), row) for x in EXOTIC_NUMBERS for t in EXOTIC_TEMPLATES]
        pairs += [(t.format(g=gold), row) for t in FLAG_TEMPLATES]
    options = ["1", "2", "3", "4", "5"]
    for L in "ABCDE":
        row = {"answer": L, "options": options}
        pairs += [(t.format(L=L, l=L.lower(), v=options[ord(L) - 65]), row) for t in LETTER_TEMPLATES]
        latex_row = {"answer": L, "options": ["$\\frac{1}{2}$", "$2$", "3", "4", "5"]}
        pairs += [(r, latex_row) for r in (f"\\boxed{{{L}}}", "\\boxed{\\frac{1}{2}}", "\\boxed{0.5}", "\\boxed{2}")]
    return pairs


def official(pairs: list[tuple[str, dict]], tmp_path: Path) -> list[list]:
    if not PARITY_PY.exists():
        pytest.skip("the reference venv .venv-parity is missing: run `make parity-env`")
    src, dst = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps([[r, row] for r, row in pairs]), encoding="utf-8")
    proc = subprocess.run([str(PARITY_PY), str(REFERENCE), str(src), str(dst)], capture_output=True, text=True,
                          timeout=900, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(dst.read_text(encoding="utf-8"))


def assert_parity(pairs: list[tuple[str, dict]], tmp_path: Path) -> list[list]:
    from mmevo.eval.scoring import extract_mathvision_answer, score_mathvision

    ref = official(pairs, tmp_path)
    assert not [r for r in ref if not isinstance(r[0], bool)], "the official side failed or timed out on some pairs"
    disagreements = [(response[:80], row["answer"], score_mathvision(response, row), verdict,
                      extract_mathvision_answer(response), answer)
                     for (response, row), (verdict, answer) in zip(pairs, ref)
                     if (score_mathvision(response, row), extract_mathvision_answer(response)) != (verdict, answer)]
    assert not disagreements, disagreements[:20]
    return ref


@needs_shared("mathvision/testmini.jsonl", "MATH-V testmini.jsonl (304 rows)")
def test_every_testmini_row_scores_as_the_official_scorer(tmp_path):
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) == 304 and min(len(responses(r)) for r in rows) >= 20
    pairs = [(resp, {"answer": r["answer"], "options": r["options"]}) for r in rows for resp in responses(r)]
    ref = assert_parity(pairs, tmp_path)
    assert sum(r[0] for r in ref) > len(pairs) // 4  # not vacuous: many are right


def test_responses_around_the_extraction_rules_score_as_the_official_scorer(tmp_path):
    pairs = exotic_pairs()
    ref = assert_parity(pairs, tmp_path)
    assert 0 < sum(r[0] for r in ref) < len(pairs)

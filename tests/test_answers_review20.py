"""Review 20 of the trainer's answer matching (the accuracy reward with a gold, the label-free vote's answer classes).

Seven known defects, each now fixed:
1. On a choice row, a letter with its own option's value spelled with a one-digit argument without braces ("C
   (5\\sqrt3)", "D (\\frac{2\\sqrt2}{5})") or another exact form ("C (\\sqrt{75})") named no option: the value was
   compared by spelling only. 12 of 3,024 boxed (letter, option value, spelling) answers on the ten shared rows were
   scored wrong, 0 now. And "(C) 5\\sqrt3 or 5\\sqrt2" (a letter listing another option's value without braces) was
   read by its letter, right on the gold C.
2. A repeating decimal ("6.\\overline{6}", "0.\\bar{3}", "0.1\\dot{6}") was no number: wrong against 20/3.
3. Without options, a letter label before a right value ("\\text{(A) } 2\\sqrt{3}") hid the value.
4. A superscript sign is a charge: "2^{+}" is +2, so 2 (it was read as the bound "2 or more"); "2^{-}" is -2, not 2
   (it was 2). A trailing plain sign stays a bound against a bare number ("2+", "2-" are not 2); all spellings of one
   signed count are one answer ("2+", "+2", "2^{+}").
5. "1 \\approx 2" was read as its left side, right on the gold 1; sides of an approximation now name one answer only
   when they agree to the approximation's last digit (both sides are then readings: "5\\sqrt{3} \\approx 8.66").
6. Unicode "∨" / "∧" / "∪" / "∩" / "≈" (and "≥ ≤ ≠ ± π × · ÷ ∞", full-width digits) are the LaTeX commands.
7. "x = 2 (x > 0)", a value with its condition as an aside, was no answer (the fallback read the aside's 0); so was
   "x = 2 \\text{ (since } x > 0)" and "4 \\text{ (n is a positive integer)}" (the aside's words read as symbols).
Further, from the hunt below: "about 2" / "approximately 2" / "roughly 2" are 2; a thousands number in a spaced list
("1,000, 2") is one number; a letter with an exact value after a bare space ("\\text{C}\\ \\sqrt{75}") is compared in
full; more Unicode is read as LaTeX: the relations "⩾ ⩽ ≧ ≦" ("⩾ 2" matched the gold 2, a bound), "≃ ≒ ≅" and
"\\approxeq" / "\\simeq" as approximations ("1 \\approxeq 2" and "1 ≅ 2" matched the gold 1), vulgar fractions ("½",
"2½"), superscripts ("x²", "10⁻³", "2⁺"), "∛" / "∜", a dash as a sign ("x = –5"; "2–3" stays a range), "∶ ⁄ ∗ ✕".
HUNT: 366 (box, gold, verdict) cases over hedges, bounds, conditions, asides, two values, Unicode symbols, full-width
digits, \\dfrac / \\tfrac, thousands separators and lists, against single and list golds: 127 wrong verdicts before, 0
now.
"""

from __future__ import annotations

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, extract_answer, group_answer_keys
from test_answers_review19 import _verdicts, rows  # noqa: F401  (the InterGPS rows fixture and both verdicts)

T, F = True, False
HUNT = [
    # Unicode symbols
    ("1 ∨ 2", "1", F), ("1 ∨ 2", "2", F), ("1 ∨ 2", "1, 2", T), ("x=1 ∨ x=2", "1, 2", T), ("x=1 ∨ x=2", "2", F),
    ("1 ∧ 2", "1", F), ("1 ∧ 2", "2", F), ("1 ∪ 2", "1", F), ("1 ∪ 2", "2", F),
    ("(0, 1) ∪ (2, 3)", "(0,1) \\cup (2,3)", T), ("A ∩ B", "A \\cap B", T), ("≥ 2", "2", F), ("≤ 2", "2", F),
    ("≠ 2", "2", F), ("x ≥ 2", "x \\ge 2", T), ("x ≤ 2", "x \\le 2", T), ("x ≥ 2", "2", F), ("±2", "2", F),
    ("±2", "\\pm 2", T), ("x = ±2", "2", F), ("x = ±2", "-2, 2", T), ("2 ± 1", "2", F), ("√3", "\\sqrt{3}", T),
    ("2√3", "2\\sqrt{3}", T), ("√12", "2\\sqrt{3}", T), ("√(12)", "2\\sqrt{3}", T), ("2π", "2\\pi", T),
    ("π", "\\pi", T), ("π/2", "\\frac{\\pi}{2}", T), ("2π", "6.28", F), ("2π cm", "2\\pi", T), ("πr^2", "\\pi r^2", T),
    ("60°", "60", T), ("60 °", "60", T), ("60°", "61", F), ("2 × 3", "6", T), ("2×3", "6", T), ("3 · 4", "12", T),
    ("6 ÷ 2", "3", T), ("−5", "-5", T), ("−5", "5", F), ("∞", "\\infty", T), ("-∞", "-\\infty", T), ("１２", "12", T),
    ("１２", "13", F), ("３．５", "3.5", T), ("（Ａ）", "A", T), ("１，０００", "1000", T), ("1 ≈ 2", "1", F), ("1 ≈ 2", "2", F),
    ("x ≈ 2", "2", T), ("≈ 3.14", "3.14", T), ("π ≈ 3.14", "\\pi", T), ("π ≈ 3.14", "3.14", T), ("π ≈ 3", "\\pi", T),
    ("π ≈ 4", "\\pi", F),
    # approx
    ("1 \\approx 2", "1", F), ("1 \\approx 2", "2", F), ("2 \\approx 1", "2", F), ("x \\approx 2", "2", T),
    ("x \\approx 2", "3", F), ("\\approx 2", "2", T), ("\\frac{20}{3} \\approx 6.67", "\\frac{20}{3}", T),
    ("\\frac{20}{3} \\approx 6.67", "6.67", T), ("\\frac{20}{3} \\approx 6.67", "6.66", F),
    ("\\frac{20}{3} \\approx 7.67", "\\frac{20}{3}", F), ("\\frac{20}{3} \\approx 7.67", "7.67", F),
    ("5\\sqrt{3} \\approx 8.66", "5\\sqrt{3}", T), ("5\\sqrt{3} \\approx 8.66", "8.66", T),
    ("5\\sqrt{3} \\approx 8.7", "5\\sqrt{3}", T), ("5\\sqrt{3} \\approx 9", "5\\sqrt{3}", T),
    ("5\\sqrt{3} \\approx 10", "5\\sqrt{3}", F), ("5\\sqrt{3} \\approx 10", "10", F),
    ("x = 5\\sqrt{3} \\approx 8.66", "5\\sqrt{3}", T), ("AB \\approx 8.66", "8.66", T),
    ("AB = 5\\sqrt{3} \\approx 8.66", "5\\sqrt{3}", T), ("e \\approx 2.718", "e", T), ("\\pi \\approx 3.14", "\\pi", T),
    ("8.66 \\approx 5\\sqrt{3}", "5\\sqrt{3}", T), ("12 \\approx 12.0", "12", T), ("12.5 \\approx 13", "12", F),
    ("1 \\approx 2", "1, 2", F), ("\\frac{1}{3} \\approx 0.33", "\\frac{1}{3}", T),
    ("\\frac{1}{3} \\approx 0.3", "\\frac{1}{3}", T), ("\\frac{1}{3} \\approx 0.5", "\\frac{1}{3}", F),
    ("\\approx 8.66 \\text{ cm}", "8.66", T),
    # repeating decimals
    ("6.\\overline{6}", "\\frac{20}{3}", T), ("0.\\overline{3}", "\\frac{1}{3}", T),
    ("1.2\\overline{34}", "\\frac{611}{495}", T), ("0.\\overline{142857}", "\\frac{1}{7}", T),
    ("0.1\\overline{6}", "\\frac{1}{6}", T), ("0.\\bar{3}", "\\frac{1}{3}", T), ("0.\\dot{3}", "\\frac{1}{3}", T),
    ("0.1\\dot{6}", "\\frac{1}{6}", T), ("0.\\dot{1}4\\dot{2}", "\\frac{142}{999}", T), ("6.66", "\\frac{20}{3}", F),
    ("6.6", "\\frac{20}{3}", F), ("0.\\overline{9}", "1", T), ("-0.\\overline{3}", "-\\frac{1}{3}", T),
    ("0.\\overline{3}", "0.33", F), ("0.\\overline{3}", "0.3333", T), ("6.\\overline{6}", "6.67", F),
    ("\\frac{20}{3} = 6.\\overline{6}", "\\frac{20}{3}", T), (".\\overline{3}", "\\frac{1}{3}", T),
    ("0.\\overline{3} \\text{ cm}", "\\frac{1}{3}", T), ("x = 0.\\overline{6}", "\\frac{2}{3}", T),
    ("0.\\overline{3}", "\\frac{1}{3}, 2", F),
    # letter labels with no options
    ("\\text{(A) } 2\\sqrt{3}", "2\\sqrt{3}", T), ("(A) 2\\sqrt{3}", "2\\sqrt{3}", T), ("(A)", "2\\sqrt{3}", F),
    ("A. 12", "12", T), ("(B) 12", "13", F), ("(A) 2 (B) 3", "2", F), ("(A) 2 or (B) 3", "2", F),
    ("\\text{(C)}", "12", F), ("\\textbf{(A) } 12", "12", T), ("(A) 12 \\text{ cm}", "12", T), ("(A) 1, 2", "1, 2", T),
    ("(A) 1, 2", "1", F),
    # charges
    ("2^{+}", "2", T), ("2^+", "2", T), ("2+", "2", F), ("2^{+}", "+2", T), ("2^{+}", "2+", T), ("2^{-}", "2", F),
    ("2^{-}", "-2", T), ("2-", "2", F), ("2-", "-2", T), ("2^{+}", "3", F), ("3^{+}", "2+", F), ("2^{+}", "-2", F),
    ("+2", "2", T), ("-2", "2^{-}", T), ("2^{-}", "2^{+}", F), ("2", "2^{+}", T), ("2", "2+", F),
    # conditions / asides
    ("x = 2 (x > 0)", "2", T), ("x = 2 (x > 0)", "0", F), ("x = 2 \\; (x > 0)", "2", T),
    ("x = 2 \\text{ (since } x > 0)", "2", T), ("x = 2 (x \\geq 0)", "2", T), ("x = 2 (x ≥ 0)", "2", T),
    ("2 (x > 0)", "2", T), ("2 \\text{ (as } x>0)", "2", T), ("x = 2 (x \\neq 0)", "2", T), ("2 (x = 3)", "2", F),
    ("2 (x = 3)", "3", F), ("2 (> 0)", "2", F), ("x = 2 (x > 3)", "2", T),
    ("n = 4 \\text{ (n is a positive integer)}", "4", T), ("x = 2 (x > 0)", "-2, 2", F),
    ("x = 2 \\text{ (or } x = -2)", "2", F), ("x = 2 \\text{ (or } x = -2)", "-2, 2", F),
    # hedges / two values
    ("2 \\text{ or } 3", "2", F), ("2 \\text{ or } 3", "2, 3", T), ("2, 3", "2", F), ("2; 3", "2", F),
    ("2 / 3", "2", F), ("2 \\text{ and } 3", "2, 3", T), ("2 \\text{ to } 3", "2", F), ("2-3", "2", F),
    ("2 \\sim 3", "2", F), ("\\{2, 3\\}", "2", F), ("2 \\text{ maybe}", "2", F), ("\\text{probably } 2", "2", F),
    ("2?", "2", T), ("2 \\text{ (or 3)}", "2", F), ("3 \\text{ (or 2)}", "2", F), ("2 \\lor 3", "2, 3", T),
    ("2 ∨ 3", "2, 3", T), ("2 ∨ 3", "3", F),
    # bounds
    ("> 2", "2", F), ("\\ge 2", "2", F), ("x > 2", "2", F), ("2 \\le x", "2", F), ("at least 2", "2", F),
    ("\\text{at least } 2", "2", F), ("2 \\text{ or more}", "2", F), ("\\text{more than } 2", "2", F),
    ("\\text{up to } 2", "2", F), ("\\text{about } 2", "2", T), ("\\text{approximately } 2", "2", T),
    # dfrac / tfrac / short args
    ("\\dfrac{1}{2}", "0.5", T), ("\\tfrac{1}{2}", "\\frac12", T), ("\\dfrac12", "\\frac{1}{2}", T),
    ("\\tfrac{3}{4}", "0.75", T), ("\\dfrac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", T), ("\\sqrt3", "\\sqrt{3}", T),
    ("2\\sqrt3", "\\sqrt{12}", T), ("\\frac{\\sqrt3}{3}", "\\frac{1}{\\sqrt{3}}", T), ("\\sqrt12", "2\\sqrt{3}", F),
    ("\\frac12", "0.5", T), ("\\dfrac{1}{2}", "0.51", F), ("\\sqrt 3", "\\sqrt{3}", T), ("\\sqrt3", "\\sqrt{2}", F),
    # thousands separators vs lists
    ("1,000", "1000", T), ("1, 000", "1000", F), ("1,000", "1, 000", F), ("1,000,000", "1000000", T),
    ("1, 000", "1, 0", T), ("12,345", "12345", T), ("1{,}000", "1000", T), ("1\\,000", "1000", T), ("1 000", "1000", T),
    ("1,00", "100", F), ("1,000.5", "1000.5", T), ("1,000", "1", F), ("2,3", "2, 3", T),
]
HUNT += [
    # list golds
    ("1, 2", "1, 2", T), ("2, 1", "1, 2", T), ("1 ∨ 2", "\\{1, 2\\}", T), ("1 ∧ 2", "1, 2", T), ("１, ２", "1, 2", T),
    ("1 \\approx 2", "\\{1, 2\\}", F), ("x = 1 \\text{ or } x = 2", "1, 2", T), ("x = ±1", "-1, 1", T),
    ("±1", "-1, 1", T), ("1", "1, 2", F), ("2", "1, 2", F), ("1, 2, 3", "1, 2", F), ("1 \\text{ (or } 2)", "1, 2", F),
    ("0.\\overline{3}, 2", "\\frac{1}{3}, 2", T), ("\\dfrac{1}{3}, 2", "\\frac{1}{3}, 2", T),
    ("\\frac13, 2", "\\frac{1}{3}, 2", T), ("1,000, 2", "1000, 2", T), ("1, 000", "1, 0", T), ("1, 000", "1000, 2", F),
    ("(A) 1, 2", "1, 2", T), ("x = 1 (x > 0), 2", "1, 2", F), ("√2, √3", "\\sqrt{2}, \\sqrt{3}", T),
    ("π, 2π", "\\pi, 2\\pi", T), ("60°, 120°", "60, 120", T), ("≥ 1, ≥ 2", "1, 2", F), ("1 \\approx 1.0, 2", "1, 2", T),
    ("x = 1 \\lor x = 2", "x = 1, x = 2", T), ("1 ∨ 2 ∨ 3", "1, 2", F), ("1 ∪ 2", "1, 2", F),
    # single golds, more
    ("\\approx 12 \\text{ cm}", "12", T), ("12 \\text{ cm} \\approx 12", "12", T), ("x ≈ 2.5", "2.5", T),
    ("x ≈ 2.5", "2", F), ("2.5 ≈ 2", "2", F), ("\\text{about } 18", "18", T), ("about 18", "18", T),
    ("\\text{nearly } 18", "18", F), ("\\text{almost } 18", "18", F), ("roughly 3.14", "3.14", T), ("１８ cm", "18", T),
    ("１８°", "18", T), ("１/２", "0.5", T), ("－３", "-3", T), ("－３", "3", F), ("3 × 10^{4}", "30000", T),
    ("3×10^4", "30000", T), ("3 \\times 10^{4}", "30,000", T), ("30, 000", "30000", F),
    ("2 \\text{ (approx.)}", "2", T), ("x = 2 \\text{ (approx.)}", "2", T), ("x = 2 (x \\in \\mathbb{Z})", "2", T),
    ("n = 4 \\text{ (n is a positive integer)}", "4", T), ("4 \\text{ (n is a positive integer)}", "4", T),
    ("4 \\text{ (n is 4 or 5)}", "4", F), ("4 \\text{ (or more)}", "4", F), ("4 \\text{ (at least)}", "4", F),
    ("x = -2 (x < 0)", "-2", T), ("x = -2 (x < 0)", "2", F), ("x = 2 (y > 0)", "2", T), ("2 \\text{ (} 2 > 1)", "2", F),
]
HUNT += [
    ("2.5 ≈ 3", "3", T), ("2.5 ≈ 3", "2.5", T), ("-2.5 ≈ -3", "-3", T), ("-2.5 ≈ 3", "3", F),
    ("-\\frac{20}{3} \\approx -6.66", "-\\frac{20}{3}", T), ("1,000, 2,000", "1000, 2000", T),
    ("1,000 \\text{ and } 2", "1000, 2", T), ("1,000", "1000", T), ("(1,000, 2)", "(1000, 2)", T),
    ("1,0, 2", "10, 2", F),
]
HUNT += [
    # more Unicode: other relation signs, vulgar fractions, superscripts, roots, dashes as signs, other approximations
    ("⩾ 2", "2", F), ("⩽ 2", "2", F), ("≧ 2", "2", F), ("≦ 2", "2", F), ("x ⩾ 2", "x \\ge 2", T), ("1 … 2", "1", F),
    ("1 … 2", "2", F), ("1 → 2", "2", F), ("1 ⇒ 2", "2", F), ("x ∈ {1, 2}", "1", F), ("½", "0.5", T),
    ("⅓", "\\frac{1}{3}", T), ("1½", "1.5", T), ("x²", "x^2", T), ("5 cm²", "5", T), ("2³", "8", T), ("∛8", "2", T),
    ("√3/2", "\\frac{\\sqrt{3}}{2}", T), ("3√2", "\\sqrt{18}", T), ("–5", "-5", T), ("—5", "-5", T), ("1 ∼ 2", "2", F),
    ("1 ≃ 2", "1", F), ("1 ≅ 2", "1", F), ("∴ 2", "2", T), ("2 ∶ 3", "2:3", T), ("45°", "\\frac{\\pi}{4}", F),
    ("1 ⁄ 2", "0.5", T), ("2 ⋅ 3", "6", T), ("2 ∗ 3", "6", T), ("2 ✕ 3", "6", T), ("１ ∨ ２", "1", F), ("1∨2", "1", F),
    ("1∨2", "1, 2", T), ("x = 1 ∨ x = 2", "x = 1, x = 2", T), ("＋2", "2", T), ("2＋", "2", F), ("－２", "-2", T),
    ("１．５", "1.5", T), ("１，５００", "1500", T), ("-1 ≤ x ≤ 1", "-1 \\le x \\le 1", T), ("x ≠ 0", "0", F),
    ("x ≈ 2.0", "2", T), ("x ≈ 2 ± 0.1", "2", F), ("2 \\pm 0.1", "2", F), ("2.0 \\approx 2", "2", T),
    ("\\approx 2 \\text{ or } 3", "2", F), ("\\approx 2 or 3", "3", F), ("2^{+} \\text{ or } 3", "2", F),
    ("x = 2 (x > 0) \\text{ or } x = 3", "2", F), ("x = 2 (\\text{or } x = 3)", "2", F),
    ("x = 2 \\; (x \\neq 3)", "2", T), ("x = 2 \\; (x \\ne 3)", "3", F), ("x = 2 (x < 3)", "2", T),
    ("x = 2 (2 < x)", "2", F), ("2 (x \\approx 2)", "2", T), ("0.\\overline{3} \\approx 0.33", "\\frac{1}{3}", T),
    ("0.\\overline{3} \\approx 0.5", "\\frac{1}{3}", F), ("6.\\overline{6} \\text{ cm}", "\\frac{20}{3}", T),
    ("0.\\overline{12}", "\\frac{4}{33}", T), ("12.\\overline{3}", "\\frac{37}{3}", T), ("1.\\overline{0}", "1", T),
    ("\\overline{AB}", "AB", F), ("0.\\overline{3}", "0.\\bar{3}", T), ("(A) 12", "(A) 12", T), ("A) 12", "12", T),
    ("(a) 12", "12", F), ("(A) 12", "13", F), ("\\textbf{A.} 12", "12", T), ("(A) \\frac{1}{2}", "0.5", T),
    ("(A) 1 \\approx 2", "1", F), ("(A) x = 2 (x > 0)", "2", T), ("1 \\approxeq 2", "1", F),
    ("\\frac{20}{3} \\simeq 6.67", "\\frac{20}{3}", T), ("1 ≒ 2", "1", F), ("10⁻³", "0.001", T), ("2⁺", "2", T),
    ("2⁺", "2+", T), ("2⁻", "2", F), ("5 cm²", "5", T), ("x³", "x^3", T), ("2–3", "-1", F), ("2 – 3", "-1", F),
    ("x = –5", "-5", T), ("∜16", "2", T), ("2½", "2.5", T), ("¾", "0.75", T), ("½ ∨ ⅓", "\\frac{1}{2}", F),
]


@pytest.mark.parametrize("box, gold, right", HUNT)
def test_hunt(box, gold, right):
    assert answers_equivalent(extract_answer("So \\boxed{" + box + "}."), gold) is right


@pytest.mark.parametrize("box, right", [
    ("C (5\\sqrt3)", True), ("C, 5\\sqrt3", True), ("C - 5\\sqrt3", True), ("\\text{C}\\ 5\\sqrt3", True),
    ("C (\\sqrt{75})", True), ("C, \\sqrt{75}", True), ("\\text{C}\\ \\sqrt{75}", True), ("C (5√3)", True),
    ("B (5\\sqrt3)", False), ("C (5\\sqrt2)", False), ("C (\\sqrt{50})", False), ("B (5\\sqrt2)", False),
    ("D (\\sqrt{75})", False), ("C (5\\sqrt{3})", True), ("C", True), ("\\text{A}\\ x", False),
    # a letter listing another option's value without braces: "5\\sqrt2" was no spelling of the option "5 \\sqrt { 2 }",
    # so the letter decided and the hedge scored right
    ("(C) 5\\sqrt3 or 5\\sqrt2", False), ("(C) 5\\sqrt3, 5\\sqrt2", False), ("(C) \\frac12 or 5\\sqrt2", False),
])
def test_a_letter_with_its_own_value_in_any_exact_spelling(rows, box, right):
    # problem 15: 5 / 5√2 / 5√3 / 10, gold C (the brief's "D (5\sqrt3)" is this shape)
    assert _verdicts(rows["15"], "\\boxed{" + box + "}") == (right, float(right))


@pytest.mark.parametrize("box, right", [
    ("D (\\frac{2\\sqrt2}{5})", True), ("D, \\frac{2\\sqrt2}{5}", True), ("\\text{D}\\ \\frac{2\\sqrt2}{5}", True),
    ("D (\\dfrac{2\\sqrt{2}}{5})", True), ("D (\\frac{\\sqrt2}{5})", False), ("B (\\frac{2\\sqrt2}{5})", False),
])
def test_a_letter_with_its_own_fraction(rows, box, right):
    assert _verdicts(rows["19"], "\\boxed{" + box + "}") == (right, float(right))


@pytest.mark.parametrize("box, gold, right", [
    ("6.\\overline{6}", "\\frac{20}{3}", True), ("0.\\overline{3}", "\\frac{1}{3}", True),
    ("1.2\\overline{34}", "\\frac{611}{495}", True), ("0.\\dot{3}", "\\frac{1}{3}", True),
    ("6.66", "\\frac{20}{3}", False), ("6.\\overline{6}", "6.66", False),
])
def test_a_repeating_decimal_is_exact(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


@pytest.mark.parametrize("box, right", [
    ("\\text{(A) } 2\\sqrt{3}", True), ("(A) 2\\sqrt{3}", True), ("A. 2\\sqrt{3}", True), ("(A)", False),
    ("(A) 3\\sqrt{2}", False), ("(A) 2\\sqrt{3} \\text{ or } (B) 3", False),
])
def test_a_label_before_a_value_without_options(box, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], ["2\\sqrt{3}"]).tolist() == [float(right)]


def test_a_label_with_options_is_still_read_as_a_letter():
    choices = ["2\\sqrt{3}", "3\\sqrt{2}", "4", "6"]
    assert accuracy_rewards(["\\boxed{(B) 2\\sqrt{3}}"], ["A"], [choices]).tolist() == [0.0]  # names A and B
    assert accuracy_rewards(["\\boxed{(A) 2\\sqrt{3}}"], ["A"], [choices]).tolist() == [1.0]


@pytest.mark.parametrize("pred, gold, right", [
    ("2^{+}", "2", True), ("2^+", "2", True), ("\\boxed{2^{+}}", "2", True), ("2+", "2", False), ("2-", "2", False),
    ("2^{-}", "2", False), ("2^{-}", "-2", True), ("2-", "-2", True), ("2^{+}", "2+", True), ("+2", "2^{+}", True),
    ("2^{+}", "3", False), ("2^{-}", "2^{+}", False), ("2", "2+", False), ("2", "2^{+}", True),
])
def test_a_superscript_sign_is_a_charge(pred, gold, right):
    assert answers_equivalent(extract_answer(pred) or pred, gold) is right


@pytest.mark.parametrize("box, gold, right", [
    ("1 \\approx 2", "1", False), ("1 \\approx 2", "2", False), ("1 ≈ 2", "1", False), ("x \\approx 2", "2", True),
    ("\\frac{20}{3} \\approx 6.67", "\\frac{20}{3}", True), ("\\frac{20}{3} \\approx 6.67", "6.67", True),
    ("\\pi \\approx 4", "\\pi", False), ("2.5 \\approx 2", "2", False),
])
def test_an_approximation_must_agree_with_its_value(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


@pytest.mark.parametrize("box, gold, right", [
    ("1 ∨ 2", "1", False), ("1 ∨ 2", "1, 2", True), ("1 ∧ 2", "1, 2", True), ("x=1 ∨ x=2", "1, 2", True),
    ("１２", "12", True), ("x ≥ 2", "2", False),
])
def test_unicode_connectives_are_the_latex_ones(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


@pytest.mark.parametrize("box, gold, right", [
    ("x = 2 (x > 0)", "2", True), ("x = 2 (x > 0)", "0", False), ("x = 2 \\text{ (since } x > 0)", "2", True),
    ("4 \\text{ (n is a positive integer)}", "4", True), ("2 (x = 3)", "2", False), ("2 (x = 3)", "3", False),
    ("2 (> 0)", "2", False),
])
def test_a_value_with_its_condition(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


def test_ordinary_classes_are_unchanged_and_new_readings_vote_with_their_value():
    answers = ["5", "5 \\text{ cm}", "x = 5 (x > 0)", "6.\\overline{6}", "\\frac{20}{3}", "1 \\approx 2", "1", "2",
               "2^{+}", "１２", "12"]
    keys = group_answer_keys(answers)
    assert keys[0] == keys[1] == keys[2]
    assert keys[3] == keys[4] != keys[0]
    assert keys[5] not in (keys[6], keys[7])
    assert keys[8] == keys[7]
    assert keys[9] == keys[10]


def test_the_sides_of_an_approximation_are_parsed_within_math_verifys_guards():
    # each side is parsed alone, so each must pass the guards the whole answer would (`_mv_safe`): a side nested past
    # the parser's depth (seconds at 12 levels) or a long chain of sides (a parse per side) is not split
    from mmevo.rewards.answers import _approximate_sides

    assert _approximate_sides("1 \\approx 1") == ("1", "1")
    assert _approximate_sides("{{{{{{{1}}}}}}} \\approx 1") is None
    assert _approximate_sides(" \\approx ".join(["1"] * 5)) == ()  # no answer, before any parse (review 20b)
    assert answers_equivalent("{{{{{{{{{{{{x}}}}}}}}}}}} \\approx 2", "2") is False

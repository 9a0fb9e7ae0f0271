"""A plain re-statement of the official MATH-V scoring (mathllm/MATH-V evaluation/evaluate.py ``evaluate`` and
evaluation/utils.py ``find_math_answer`` / ``_strip_string`` / ``eval_tuple`` / ``is_equal``), written for
tests/test_parity24_mathvision.py from the scripts' behaviour. It imports nothing of mmevo and runs in
``.venv-parity``, where latex2sympy2 (the parser the official script uses) is installed:

    python parity24_mathv_reference.py IN.json OUT.json

IN.json holds [response, row] pairs (row: answer, options); OUT.json gets [verdict, extracted answer] for each
("timeout" / "error ..." as the verdict where the official code would not finish or would raise).
The official utils.py runs ``from math import *``: its eval of the printed sympy expression sees math's names.
Like the whole-benchmark run mmevo follows (see ``mathvision_is_equal``), latex2sympy2 first parses a differential.
"""
import json
import math
import re
import signal
import sys

import latex2sympy2  # noqa: F401 (the package, whose global parser state the first parse sets)
from latex2sympy2 import latex2sympy

MATH_NAMES = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}  # utils.py: from math import *
FLAGS = ["the final answer is", "the answer is", "the correct answer is", "the answer should be"]


def is_number(s):
    try:
        float(s)
        return True
    except ValueError:
        return False


def fix_fracs(s):
    parts = s.split("\\frac")
    out = parts[0]
    for p in parts[1:]:
        out += "\\frac"
        if p[:1] == "{":
            out += p
            continue
        if len(p) < 2:
            return s
        a, b, rest = p[0], p[1], p[2:]
        out += ("{" + a + "}{" + b + "}" + rest) if b != "{" else ("{" + a + "}" + b + rest)
    return out


def fix_slash(s):
    if len(s.split("/")) != 2:
        return s
    a, b = s.split("/")
    try:
        a, b = int(a), int(b)
    except ValueError:
        return s
    return "\\frac{" + str(a) + "}{" + str(b) + "}" if s == f"{a}/{b}" else s


def fix_sqrt(s):
    if "\\sqrt" not in s:
        return s
    parts = s.split("\\sqrt")
    out = parts[0]
    for p in parts[1:]:
        out += ("\\sqrt{" + p[0] + "}" + p[1:]) if (p and p[0] != "{") else ("\\sqrt" + p)
    return out


def strip_string(s):
    for old, new in [("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"), ("\\left", ""),
                     ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\$", ""), ("$", "")]:
        s = s.replace(old, new)
    s = s.split("\\text{ ")[0]
    s = s.replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    if len(s.split("=")) == 2:
        s = s.split("=")[-1]
    if len(s.split("\\approx")) == 2:
        s = s.split("\\approx")[-1]
    if "sqrt" in s:
        s = fix_sqrt(s)
    s = s.replace(" ", "")
    if "sqrt" in s:
        s = fix_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    return fix_slash(s)


def find_math_answer(s):
    s = s.lower().replace("{}", "")
    boxed = re.findall("oxed{(.*)}", s, flags=re.S)
    ans = boxed[-1] if boxed else s
    if ans.find("}") != -1 and (ans.find("{") == -1 or ans.find("}") < ans.find("{")):
        ans = ans.split("}")[0]
    ans = ans.split("=")[-1].split("\\approx")[-1]
    for old, new in [(" ", ""), ("\\,", ""), ("\u221e", "\\infty"), ("+\\infty", "\\infty"), ("\\\\", "\\"),
                     ("\n", ""), ("\\text", ""), ("\\mbox", ""), ("bmatrix", "pmatrix"), ("\\left", ""),
                     ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("{m}^3", ""), ("m^3", ""), ("{units}", ""),
                     ("units", ""), ("{km}", ""), ("km", "")]:
        ans = ans.replace(old, new)
    return strip_string(ans)


def value(latex):
    return eval(str(latex2sympy(latex)), dict(MATH_NAMES))


def eval_tuple(s):
    parts = s[1:-1].split(",")
    if len(parts) <= 1 or (s[0], s[-1]) not in (("(", ")"), ("[", "]")):
        return s
    try:
        return s[0] + ",".join(p if "infty" in p or p in ("a", "-a") else str(round(value(p), 2)) for p in parts) + s[-1]
    except Exception:
        return s


def is_equal(asw, gt):
    asw, gt = asw.lower(), gt.lower()
    if not asw.replace(" ", "") or not gt.replace(" ", ""):
        return False
    if gt.strip() == asw.strip():
        return True
    asw, gt = eval_tuple(asw), eval_tuple(gt)
    if gt == asw:
        return True
    try:
        return round(value(gt), 2) == round(value(asw), 2)
    except Exception:
        return False


def extract(response):
    m = response.strip()
    for c in "ABCDE":
        if (m.endswith(f" {c}.") or m.endswith(f" ({c}).") or m.startswith(f"{c}\n") or m.startswith(f"({c})\n")
                or m.startswith(f"({c}) {c}\n")):
            m = c
    if is_number(m.split("is ")[-1].rstrip(".")):
        m = m.split("is ")[-1].rstrip(".")
    if "oxed{" not in m:
        for flag in FLAGS:
            for f in (flag, flag.replace("the", "The")):
                had_flag = f in m
                m = m.split(f)[-1].strip()
                if had_flag:
                    m = m.split("\n")[0].split(". ")[0]
    elif m.count("oxed{") > 1:
        m = "\\boxed{" + m.split("oxed{")[-1]
    m = find_math_answer(m)
    for c in "abcde":
        m = m.replace(f"({c})", c)
    for c in "abcde":
        m = m.replace("{" + c + "}", c)
    return m.rstrip(".").lstrip(":").strip()


def score(response, row):
    gold = str(row["answer"])
    gold_text = row["options"][ord(gold) - ord("A")] if row["options"] else ""
    answer = extract(response)
    return is_equal(gold, answer) or is_equal(gold_text, answer), answer


class ItemTimeout(BaseException):  # not an Exception: the scorer's own "except" must not take it
    pass


def on_alarm(*_):
    raise ItemTimeout()


if __name__ == "__main__":
    latex2sympy("dx")  # the state of a whole-benchmark run
    signal.signal(signal.SIGALRM, on_alarm)
    out = []
    for response, row in json.load(open(sys.argv[1], encoding="utf-8")):
        signal.setitimer(signal.ITIMER_REAL, 10)
        try:
            out.append(list(score(response, row)))
        except ItemTimeout:
            out.append(["timeout", None])
        except BaseException as e:  # noqa: BLE001 - an eval() may raise anything
            out.append([f"error {type(e).__name__}", None])
        signal.setitimer(signal.ITIMER_REAL, 0)
    json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))

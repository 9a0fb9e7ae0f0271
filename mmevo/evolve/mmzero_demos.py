"""Embedded MM-Zero demonstrations: proposals, the SVG that draws them, and solver answers, generated from a seed.

Only for warming up tiny models (``mmzero.warmup_demos``): a randomly initialised model never writes a parsable
proposal or a renderable program, so the loop would see only -1 / 0 rewards. A real run starts from an instruct
model and needs none of this.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mmevo.evolve.mmzero import Proposal
from mmevo.validation import is_integer_number

COLORS = ("steelblue", "darkorange", "seagreen", "crimson")


@dataclass
class Demo:
    proposal: Proposal
    svg: str
    python: str  # the same picture as a few lines of matplotlib (far fewer tokens: what tiny coders can learn)

    def code_text(self, language: str = "svg") -> str:
        return f"```{language}\n{self.svg if language == 'svg' else self.python}\n```"


_PLT = "import matplotlib.pyplot as plt\nplt.figure(figsize=(1,1),dpi=64)\n"


def _svg(w: int, h: int, body: str) -> str:
    return f'<svg width="{w}" height="{h}"><rect width="{w}" height="{h}" fill="#fff"/>{body}</svg>'


def _bar_chart(rng: random.Random) -> Demo:
    names = rng.sample("ABCD", rng.randint(2, 4))
    values = [rng.randint(1, 9) for _ in names]
    bars = "".join(f'<rect x="{4 + 15 * i}" y="{56 - 5 * v}" width="9" height="{5 * v}" fill="{COLORS[i]}"/>'
                   f'<text x="{4 + 15 * i}" y="64" font-size="8">{n}{v}</text>' for i, (n, v) in enumerate(zip(names, values)))
    if rng.random() < 0.5 or values.count(max(values)) > 1:  # a tie has no single tallest bar to name
        hard_q, hard_a = f"What is bar {names[0]} plus bar {names[-1]}?", str(values[0] + values[-1])
    else:
        hard_q, hard_a = "Which bar is the tallest?", names[values.index(max(values))]
    caption = f"A bar chart with bars {', '.join(f'{n}={v}' for n, v in zip(names, values))}."
    # one bar per name+value label (a list: a string would be a single category), the labels as the x tick labels
    # under an axes raised to leave them room (at 64 px the default margins cut them off: the values were not in the
    # picture). Kept short: the tiny coders of configs/mmzero_tiny*.yaml learn these programs by heart, and the
    # longer the program, the fewer of their copies run (a text per bar left most renders broken)
    labels = ",".join(repr(f"{n}{v}") for n, v in zip(names, values))
    py = f"{_PLT}plt.axes((0,.25,1,.75))\nplt.bar([{labels}],[{','.join(map(str, values))}])"
    return Demo(Proposal("data_chart", caption, "How many bars are there?", str(len(names)), hard_q, hard_a),
                _svg(64, 66, bars), py)


def _table(rng: random.Random) -> Demo:
    a, b, c = (rng.randint(1, 20) for _ in range(3))
    cells = "".join(f'<text x="4" y="{14 + 16 * i}" font-size="10">{k}={v}</text>'
                    for i, (k, v) in enumerate((("x", a), ("y", b), ("z", c))))
    py = f"{_PLT}plt.axis('off')\nplt.text(0,0.3,'x={a}\\ny={b}\\nz={c}')"
    return Demo(Proposal("table", f"A table with rows x={a}, y={b}, z={c}.", "What is the value of x?", str(a),
                         "What is x plus y plus z?", str(a + b + c)), _svg(48, 52, cells), py)


def _rectangle(rng: random.Random) -> Demo:
    w, h = rng.randint(2, 9), rng.randint(2, 9)
    body = (f'<rect x="12" y="12" width="{5 * w}" height="{5 * h}" fill="none" stroke="#000"/>'
            f'<text x="20" y="10" font-size="8">{w}</text><text x="2" y="24" font-size="8">{h}</text>')
    # width above and height left of the rectangle as in the SVG (axis ticks at 64 px showed neither value)
    py = (f"{_PLT}plt.axis('off')\nplt.gca().add_patch(plt.Rectangle((0,0),{w},{h},fill=False))\n"
          f"plt.text({w // 2},{h + 0.5:g},{w})\nplt.text(-2,{h // 2},{h})\nplt.axis([-2,10,-1,10])")
    return Demo(Proposal("geometry", f"A rectangle with width {w} and height {h}.",
                         "What is the width of the rectangle?", str(w), "What is the area of the rectangle?", str(w * h)),
                _svg(64, 64, body), py)


KINDS = (_bar_chart, _table, _rectangle)


def demos(n: int, seed: int = 0) -> list[Demo]:
    """``n`` demonstrations, the three kinds in turn, the same for the same ``seed`` on every run."""
    if not is_integer_number(n) or n < 0:  # range(-1) would give none silently
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if not is_integer_number(seed):  # None seeds from the clock, NaN by identity
        raise ValueError(f"seed must be an integer, got {seed!r}")
    rng = random.Random(int(seed))  # a numpy integer is no seed type of random.Random
    return [KINDS[i % len(KINDS)](rng) for i in range(n)]

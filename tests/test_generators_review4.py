"""Generated data, round 4: MM-Zero's matplotlib demos show their values; figure marks and styles are checked; teacher
noise leaves figure problems alone."""

from __future__ import annotations

import pytest

from mmevo.data.figures import draw_figure, generate_figures, read_figure
from mmevo.data.synthetic import generate_geometry, with_teacher_noise
from mmevo.evolve.mmzero_demos import demos


# ------------------------------------------------------------------------------------------------- MM-Zero demos
def _on_drawn_figure(code: str, inspect):
    """Run a demo's matplotlib program headless and return ``inspect(figure, renderer)`` of the figure it drew."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close("all")
    try:
        exec(code, {})
        fig = plt.gcf()
        fig.canvas.draw()
        return inspect(fig, fig.canvas.get_renderer())
    finally:
        plt.close("all")


def _drawn_texts(code: str) -> list[str]:
    """The texts (tick labels too) a demo program draws fully inside its 64 x 64 figure."""
    def inside(fig, r):
        w, h = fig.canvas.get_width_height()
        return [t.get_text() for ax in fig.axes for t in [*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels()]
                if t.get_visible() and (bb := t.get_window_extent(r)).x0 >= 0 and bb.y0 >= 0 and bb.x1 <= w
                and bb.y1 <= h]

    return _on_drawn_figure(code, inside)


def test_matplotlib_demos_show_the_values_their_questions_ask_for():
    """The tiny MM-Zero configs (code_language: python) teach the coder the matplotlib version of each demo, "the same
    picture" as the SVG. The bar chart drew bars with no names or values (at 64 px the tick labels were cut off) and
    the rectangle had no labels at all, so "Which bar is the tallest?" (D) or "What is the width?" (5) could not be
    read from the picture the coder was taught to draw."""
    bar, table, rect = demos(3, 0)
    assert bar.proposal.caption == "A bar chart with bars D=9, A=8, B=7." and bar.proposal.hard_answer == "D"
    assert sorted(_drawn_texts(bar.python)) == ["A8", "B7", "D9"]
    assert rect.proposal.caption == "A rectangle with width 5 and height 4."
    assert sorted(_drawn_texts(rect.python)) == ["4", "5"]
    assert _drawn_texts(table.python) == ["x=10\ny=16\nz=12"]  # the table always showed its rows


def _text_boxes(code: str):
    """A demo program's patch extent and (text, extent) of its texts in drawing order (x0, y0, x1, y1, y up)."""
    def boxes(fig, r):
        def box(artist):
            x, y, w, h = artist.get_window_extent(r).bounds
            return x, y, x + w, y + h

        (ax,) = fig.axes
        (patch,) = ax.patches
        return box(patch), [(t.get_text(), box(t)) for t in ax.texts]

    return _on_drawn_figure(code, boxes)


def _rectangles_at_the_size_limits():
    """One demo rectangle per (width, height) the demos draw with a side at its limit (2 or 9)."""
    seen = {}
    for d in demos(600, 0):
        if d.proposal.content_type == "geometry":
            w, h = d.proposal.caption.removeprefix("A rectangle with width ").rstrip(".").split(" and height ")
            if {w, h} & {"2", "9"}:
                seen.setdefault((w, h), d)
    return seen


def test_rectangle_demo_labels_sit_where_the_svg_puts_them():
    """Width above the top edge, height left of the left edge, both inside the picture, at the extreme sizes (the
    width label of a 9-high rectangle was drawn past the top of the figure)."""
    cases = _rectangles_at_the_size_limits()
    assert {("9", "9"), ("2", "2"), ("2", "9"), ("9", "2")} <= set(cases)
    for (w, h), rect in cases.items():
        (px0, py0, px1, py1), texts = _text_boxes(rect.python)
        (wt, (wx0, wy0, wx1, _)), (ht, (hx0, hy0, hx1, hy1)) = texts
        assert (wt, ht) == (w, h)
        assert wy0 >= py1 - 1 and px0 <= (wx0 + wx1) / 2 <= px1, (w, h)  # above the top edge, over the rectangle
        assert hx1 <= px0 + 1 and py0 <= (hy0 + hy1) / 2 <= py1, (w, h)  # left of the left edge, beside it
        assert sorted(_drawn_texts(rect.python)) == sorted([w, h]), (w, h)  # both inside the picture


def test_tiny_coder_demo_programs_fit_the_tiny_configs_token_limit(tiny_vl_path):
    """The tiny coders learn these programs by heart and then write them under the coder's rollout.max_tokens: a
    longer program is cut off and never renders (labels drawn with a text per bar took the bar chart past 160 tokens
    and MM-Zero's tiny run rendered a third of its programs)."""
    from transformers import AutoTokenizer

    from mmevo.config import load_config

    tok = AutoTokenizer.from_pretrained(tiny_vl_path)
    longest = max(len(tok(d.code_text("python"))["input_ids"]) for seed in range(4) for d in demos(24, seed))
    for name in ("configs/mmzero_tiny.yaml", "configs/mmzero_tiny_csrs_solver.yaml"):
        cfg = load_config(name, [])
        assert cfg.mmzero.code_language == "python"
        limit = cfg.mmzero.roles["coder"]["rollout.max_tokens"]
        assert longest + 8 <= limit, (name, longest, limit)  # room for the closing fence the model may repeat


def test_demo_proposals_and_svgs_are_unchanged():
    """Only the matplotlib text changed: the random draws, proposals and SVGs of a seed are the same as before."""
    d = demos(6, 1)
    assert [x.proposal.caption for x in d] == [
        "A bar chart with bars A=2, B=8.", "A table with rows x=16, y=13, z=7.", "A rectangle with width 3 and height 9.",
        "A bar chart with bars D=1, B=8.", "A table with rows x=8, y=19, z=4.", "A rectangle with width 7 and height 2."]
    assert d[2].svg == ('<svg width="64" height="64"><rect width="64" height="64" fill="#fff"/><rect x="12" y="12" '
                        'width="15" height="45" fill="none" stroke="#000"/><text x="20" y="10" font-size="8">3</text>'
                        '<text x="2" y="24" font-size="8">9</text></svg>')


# ------------------------------------------------------------------------------------------------------- figures
@pytest.mark.parametrize("style, marks", [
    ("dots", {"red": (0, 10)}),  # drew 9 dots, read back as 9
    ("bars", {"red": (2, 12)}),  # ran into the quadrant above
    ("bars", {"red": (1, 0)}),
    ("digits", {"red": (4, 3)}),  # no quadrant 4
    ("digits", {"red": (0, 3), "blue": (0, 5)}),  # overdrawn, unreadable
    ("dots", {"red": (0, 2.5)}),
    ("dots", {"red": (0, True)}),
    ("dots", {"green": (0, 2)}),
])
def test_draw_figure_refuses_marks_it_cannot_draw_readably(style, marks):
    with pytest.raises(ValueError, match="must be an integer in|cannot be read apart|unknown mark colour"):
        draw_figure(style, marks)


def test_draw_figure_values_at_the_edges_still_round_trip():
    for style, lo in (("digits", 0), ("dots", 1), ("bars", 1)):
        for v in (lo, 9):
            marks = {"red": (3, v), "blue": (0, 9 - v if 9 - v >= lo else 9)}
            assert read_figure(draw_figure(style, marks, 56), style) == marks


@pytest.mark.parametrize("style", ["digit", "Dots", "bar", ""])
def test_read_figure_refuses_an_unknown_style(style):
    """read_figure read any style other than digits / bars as dots: "digit" silently gave {} or wrong counts."""
    img = draw_figure("digits", {"red": (0, 8), "blue": (3, 1)})
    with pytest.raises(ValueError, match="unknown figure style"):
        read_figure(img, style)
    with pytest.raises(ValueError, match="unknown figure style"):
        draw_figure(style, {})  # an empty figure of an unknown style was drawn without a word


# ------------------------------------------------------------------------------------------------- teacher noise
def test_teacher_noise_leaves_figure_problems_alone():
    """Figure problems share the kind name rectangle_area with geometry, but carry red / blue marks, not w / h:
    with_teacher_noise raised KeyError('w') on them."""
    figs = generate_figures(40, 0)
    assert sum(e.meta["kind"] == "rectangle_area" for e in figs) == 6
    noisy = with_teacher_noise(figs, 1.0, 0)
    assert [e.solution for e in noisy] == [e.solution for e in figs]
    assert not any(e.meta.get("teacher_wrong") for e in noisy)
    # geometry rectangles still get the wrong rule (2 * (w + h) for the area)
    geo = [e for e in generate_geometry(60, 0) if e.meta["kind"] == "rectangle_area"]
    w, h = geo[0].meta["params"]["w"], geo[0].meta["params"]["h"]
    out = with_teacher_noise(geo[:1], 1.0, 0)[0]
    assert out.meta.get("teacher_wrong") is True and out.solution.endswith(f"\\boxed{{{2 * (w + h)}}}")


# ------------------------------------------------------------------------------------------------ text questions
def test_text_question_count_may_be_a_numpy_integer():
    """generate_text_questions(np.int64(3)) raised "n must be an integer >= 0, got 3" (only int was accepted)."""
    np = pytest.importorskip("numpy")
    from mmevo.data.text_questions import generate_text_questions

    qs = generate_text_questions(np.int64(3), 0)
    assert [q.kind for q in qs] == ["add_sub", "multiply", "long_division"]
    assert qs == generate_text_questions(3, 0)
    for bad in (np.float64(3.0), 2.5, True, -1):
        with pytest.raises(ValueError, match="n must be an integer >= 0"):
            generate_text_questions(bad, 0)

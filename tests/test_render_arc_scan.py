"""The SVG path arc pre-pass reads a segment's arcs in place (``render.worker._path_arc_args``): slicing the rest of
the text off after each arc made a 1 MiB path of arcs quadratic (60,000 arcs: 1.4 s, now 0.4 s on the dev machine;
the job's timeout bounded it). Its result must be what the slicing reader gave, on every shape of arc list."""

import math
import random

import pytest

from render import worker


def _sliced_reference(args: str):
    """The former reader: match at the start, slice the text after the arc, strip, repeat."""
    arcs = []
    while args:
        m = worker._PATH_ARC_ARGS.match(args)
        if m is None:
            return arcs, None
        try:
            rx, ry, rotation, x, y = (float(m.group(i)) for i in (1, 2, 3, 6, 7))
        except ValueError:
            return arcs, None
        if not all(math.isfinite(v) for v in (rx, ry, rotation, x, y)):
            return arcs, None
        radii = worker._arc_radii(rx, ry, max(abs(x), abs(y)))
        arcs.append(f"L {m.group(6)} {m.group(7)}" if radii is None else
                    f"{radii[0]!r} {radii[1]!r} {math.fmod(rotation, 360.0)!r} {m.group(4)} {m.group(5)} "
                    f"{m.group(6)} {m.group(7)}")
        args = args[m.end():].strip()
    return arcs, ""


def _token(rng):
    return rng.choice(["0", "1", "2.5", "-3", "1e3", "1e400", "nan", "-inf", "0.0", "7px", "1e-320", "5",
                       "360.5", "-1e308"])


def _arcs_text(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        flags = rng.choice(["0 1", "1 0", "01", "1 1", "2 0", "0 0"])
        parts.append(" ".join([_token(rng), _token(rng), _token(rng), flags, _token(rng), _token(rng)]))
    text = (rng.choice([" ", "  ", "\n", "\t "])).join(parts)
    return text + rng.choice(["", "", " 4", " 1 2 3"])


@pytest.mark.parametrize("seed", range(8))
def test_the_in_place_reader_gives_what_the_slicing_reader_gave(seed):
    rng = random.Random(seed)
    for _ in range(300):
        text = _arcs_text(rng).strip()
        assert worker._path_arc_args(text) == _sliced_reference(text), text


def test_a_long_list_of_arcs_is_read_whole():
    text = ("1 1 0 0 1 2 2 " * 20000).strip()
    arcs, rest = worker._path_arc_args(text)
    assert rest == "" and len(arcs) == 20000 and arcs[0] == arcs[-1]

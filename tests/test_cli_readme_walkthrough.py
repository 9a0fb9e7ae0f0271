"""Defects a README walk-through found in the command line: `render -o x.jpg`, another loop's section overridden on
an evolve command line, a one-slash model.path typo tried on the hub, the resume warning's formatting."""

import pytest

from mmevo.cli import main

PLOT = "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\n"


@pytest.mark.parametrize("name", ["x.jpg", "x.jpeg", "x.webp", "x", "x.png.gif"])
def test_render_refuses_an_output_that_is_not_png(tmp_path, capsys, name):
    # the sandbox returns PNG bytes: `-o x.jpg` wrote them under a JPEG name
    src = tmp_path / "plot.py"
    src.write_text(PLOT)
    with pytest.raises(SystemExit) as e:
        main(["render", str(src), "-o", str(tmp_path / name)])
    assert e.value.code == 2
    assert f"-o {tmp_path / name}: the render is a PNG image; give a path ending in .png" in capsys.readouterr().err
    assert not (tmp_path / name).exists()


def test_render_takes_a_png_suffix_in_any_case(tmp_path):
    src = tmp_path / "plot.py"
    src.write_text(PLOT)
    out = tmp_path / "X.PNG"
    assert main(["render", str(src), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""`mmevo render FILE`: a source file is read in the encoding it declares (an SVG's XML declaration, a Python coding
cookie); one that cannot be decoded is a clear error (exit 2), not a UnicodeDecodeError traceback."""

from PIL import Image

from mmevo.cli import main

SVG = ('<?xml version="1.0" encoding="ISO-8859-1"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="40" '
       'height="40"><title>caf\u00e9 \u00e0 l\'angle</title><rect width="40" height="40" fill="#00ff00"/></svg>\n')


def _centre(path):
    img = Image.open(path).convert("RGB")
    return img.getpixel((img.width // 2, img.height // 2))


def test_latin1_svg_and_python_files_render_in_their_declared_encoding(tmp_path, capsys):
    svg = tmp_path / "a.svg"
    svg.write_bytes(SVG.encode("latin-1"))  # 'é' is the single byte 0xe9: invalid UTF-8
    assert main(["render", str(svg), "-o", str(tmp_path / "a.png")]) == 0
    assert _centre(tmp_path / "a.png") == (0, 255, 0)
    py = tmp_path / "b.py"
    py.write_bytes("# -*- coding: latin-1 -*-\n# d\u00e9j\u00e0\nimport matplotlib.pyplot as plt\n"
                   "plt.figure(figsize=(1, 1)); plt.fill([0, 1, 1, 0], [0, 0, 1, 1], 'b'); plt.xlim(0, 1); "
                   "plt.ylim(0, 1); plt.axis('off')\n".encode("latin-1"))
    assert main(["render", str(py), "-o", str(tmp_path / "b.png")]) == 0
    r, g, b = _centre(tmp_path / "b.png")
    assert b > 200 and r < 60 and g < 60
    bom = tmp_path / "c.svg"  # a UTF-8 BOM before the declaration
    bom.write_bytes(b"\xef\xbb\xbf" + SVG.replace("ISO-8859-1", "UTF-8").encode("utf-8"))
    assert main(["render", str(bom), "-o", str(tmp_path / "c.png")]) == 0


def test_an_undecodable_source_is_a_named_error(tmp_path, capsys):
    bad = tmp_path / "bad.svg"
    bad.write_bytes(SVG.replace(' encoding="ISO-8859-1"', "").encode("latin-1"))  # no declaration: UTF-8, and 0xe9
    assert main(["render", str(bad), "-o", str(tmp_path / "no.png")]) == 2
    assert f"mmevo render: error: {bad} cannot be decoded as text" in capsys.readouterr().err
    odd = tmp_path / "odd.svg"
    odd.write_bytes(SVG.replace("ISO-8859-1", "no-such-codec").encode("latin-1"))
    assert main(["render", str(odd), "-o", str(tmp_path / "no.png")]) == 2
    assert "unknown encoding: no-such-codec" in capsys.readouterr().err
    assert not (tmp_path / "no.png").exists()

"""An image's EXIF orientation: vLLM applies it to every PIL image it is given (``normalize_image``), the HF processor
does not, so a data set photo or a rendered MM-Zero image with an orientation tag reached the vLLM rollout rotated
and the update (HF log-probs) unrotated, and the sandbox-checked pixels were not those the solver saw. ``to_rgb``
now applies the orientation once and returns a copy without metadata."""

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from mmevo.data.images import to_rgb

ORIENTATION = 0x0112


def _marked(size=(6, 4)) -> Image.Image:
    """A red image with one blue pixel at the top left and one green at the bottom right: any turn or flip moves them."""
    im = Image.new("RGB", size, (255, 0, 0))
    im.putpixel((0, 0), (0, 0, 255))
    im.putpixel((size[0] - 1, size[1] - 1), (0, 255, 0))
    return im


def _png_with_exif(orientation: int, mode: str = "RGB") -> Image.Image:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    buf = io.BytesIO()
    _marked().convert(mode).save(buf, "png", exif=exif)
    return Image.open(io.BytesIO(buf.getvalue()))


@pytest.mark.parametrize("orientation,size,blue_at", [
    (1, (6, 4), (0, 0)), (2, (6, 4), (5, 0)), (3, (6, 4), (5, 3)), (6, (4, 6), (3, 0)), (8, (4, 6), (0, 5)),
])
@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
def test_the_exif_orientation_is_applied_once_and_dropped(orientation, size, blue_at, mode):
    out = to_rgb(_png_with_exif(orientation, mode))
    assert out.mode == "RGB" and out.size == size
    assert out.info == {} and ORIENTATION not in out.getexif()
    if mode != "L":
        assert out.getpixel(blue_at) == (0, 0, 255)
    # a consumer applying the orientation again (vLLM) gets the very same pixels
    again = ImageOps.exif_transpose(out)
    assert again.size == out.size and np.array_equal(np.asarray(again), np.asarray(out))


def test_vllm_sees_the_pixels_the_trainer_sees():
    image = pytest.importorskip("vllm.multimodal.image")
    out = to_rgb(_png_with_exif(6))
    seen = image.normalize_image(out)
    assert seen.size == out.size == (4, 6) and np.array_equal(np.asarray(seen), np.asarray(out))


def test_an_orientation_in_xmp_is_applied_too():
    xmp = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
           '<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="3"/></rdf:RDF></x:xmpmeta>')
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", xmp)
    buf = io.BytesIO()
    _marked().save(buf, "png", pnginfo=info)
    stored = Image.open(io.BytesIO(buf.getvalue()))
    assert ImageOps.exif_transpose(stored).getpixel((5, 3)) == (0, 0, 255)  # PIL reads it as a half turn
    out = to_rgb(stored)
    assert out.getpixel((5, 3)) == (0, 0, 255) and out.info == {}


def test_a_malformed_exif_block_keeps_the_stored_pixels():
    im = _marked()
    buf = io.BytesIO()
    im.save(buf, "png", exif=b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\xff\xff")  # an IFD count past the end
    out = to_rgb(Image.open(io.BytesIO(buf.getvalue())))
    assert out.size == (6, 4) and out.getpixel((0, 0)) == (0, 0, 255) and out.info == {}


def test_an_mmzero_render_with_an_orientation_reaches_the_solver_as_displayed():
    from mmevo.evolve.mmzero import load_image

    buf = io.BytesIO()
    exif = Image.Exif()
    exif[ORIENTATION] = 6
    _marked().save(buf, "png", exif=exif)
    img = load_image(buf.getvalue(), 1, 1 << 20)
    assert img.size == (4, 6) and img.getpixel((3, 0)) == (0, 0, 255) and ORIENTATION not in img.getexif()

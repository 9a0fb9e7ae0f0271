"""Sandboxed rendering of model-written matplotlib code and SVG into PNG images.

    from render import RenderPool, RenderJob
    with RenderPool(workers=2) as pool:
        results = pool.render_many([RenderJob(code=src, language="python")], timeout_s=10.0)

Python jobs: the image is ``out.png`` if the code writes it into its working directory, else the current
matplotlib figure. SVG jobs are screened (no entities, no external references) and rasterised with
cairosvg (``unsafe=False``) inside the same sandbox. This package never imports ``mmevo``.
"""

from .pool import RenderPool, RenderPoolError
from .types import ERROR_KINDS, LANGUAGES, RenderJob, RenderLimits, RenderResult

__all__ = ["RenderPool", "RenderPoolError", "RenderJob", "RenderResult", "RenderLimits", "ERROR_KINDS",
           "LANGUAGES"]

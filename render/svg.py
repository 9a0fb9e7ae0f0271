"""Static screening of model-written SVG before it reaches cairosvg (which also runs with unsafe=False)."""

from __future__ import annotations

import re

_ENTITY = re.compile(r"<!ENTITY", re.I)
_DOCTYPE_SUBSET = re.compile(r"<!DOCTYPE[^>\[]*\[", re.I)
_HREF = re.compile(r"""(?:^|[\s"'])(?:[\w.-]+:)?href\s*=\s*(["'])(.*?)\1""", re.I | re.S)
_CSS_URL = re.compile(r"""url\(\s*(["']?)(.*?)\1\s*\)""", re.I | re.S)
_IMPORT = re.compile(r"@import", re.I)
_XINCLUDE = re.compile(r"<\s*(?:[\w-]+:)?include\b", re.I)
_PI = re.compile(r"<\?xml-stylesheet", re.I)


def _allowed_ref(ref: str) -> bool:
    ref = ref.strip()
    return ref == "" or ref.startswith("#") or ref.lower().startswith("data:")


def screen_svg(text: str) -> str | None:
    """Return a reason string when the SVG must be refused, else None."""
    if _ENTITY.search(text):
        return "SVG entity declarations are not allowed"
    if _DOCTYPE_SUBSET.search(text):
        return "SVG DOCTYPE with an internal subset is not allowed"
    if _IMPORT.search(text) or _PI.search(text) or _XINCLUDE.search(text):
        return "SVG stylesheets imports / xml-stylesheet / XInclude are not allowed"
    for m in _HREF.finditer(text):
        if not _allowed_ref(m.group(2)):
            return f"SVG reference to an external resource is not allowed: {m.group(2)[:80]!r}"
    for m in _CSS_URL.finditer(text):
        if not _allowed_ref(m.group(2)):
            return f"SVG url() to an external resource is not allowed: {m.group(2)[:80]!r}"
    if "<svg" not in text.lower():
        return "no <svg> element"
    return None

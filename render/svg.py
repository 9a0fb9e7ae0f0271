"""Screening of model-written SVG, run inside the job sandbox before cairosvg (itself ``unsafe=False``).

The document is parsed once with the standard library's expat (linear time, no DTD loading, no entity
expansion beyond the five predefined ones and character references) after a size cap. Refused
(``forbidden``): a DOCTYPE internal subset, any entity / notation declaration, an undeclared entity,
processing instructions (``xml-stylesheet``), XInclude, a root element other than ``svg``, an ``href`` or
``xml:base`` (the base cairosvg resolves an ``<image>`` href against) in any namespace that is not empty,
``#fragment`` or a ``data:`` URL (a hyperlink's own href excepted: ``link_problem``), an ``href`` or ``id`` holding ``url(`` (once
tabs and line breaks are removed: cairosvg fetches what its own ``url\\((.+)\\)`` finds there, up to three times
over), a ``data:`` URL whose base64 does not decode (with or without its ``#fragment``), and in any attribute value
or ``<style>`` text, after CSS unescaping, ``@import`` or a ``url()`` to anything else; in style attributes and
``<style>`` text also an ``href`` / ``xlink:href`` or ``id`` property. CSS is screened with comments removed (as tokenised: not
inside strings) and as written. ``data:`` URLs holding SVG / XML documents (declared so, or sniffed from the
decoded payload as cairosvg does) or gzip are refused too (they would need their own screening). Every
check runs on parsed values (entities and character references already decoded), in time linear in the
input.
"""

from __future__ import annotations

import binascii
import re
import xml.parsers.expat as expat
from urllib.parse import unquote_to_bytes

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
XHTML_NS = "http://www.w3.org/1999/xhtml"  # a <foreignObject>'s content: its <a> is "{XHTML_NS}a" to cairosvg
XINCLUDE_NS = ("http://www.w3.org/2001/XInclude", "http://www.w3.org/2003/XInclude")
MAX_SVG_BYTES = 1 << 20
_CSS_WS = " \t\n\r\f"
_REF_ATTRS = ("href", "base")  # attributes (any namespace) that cairosvg reads as a URL: (xlink:)href, xml:base
_URL_UNSAFE = str.maketrans("", "", "\t\r\n")  # removed by urlsplit
_URL_STRIP = "".join(map(chr, range(0x21)))  # C0 controls and space (stripped by URL parsers)
# Comments as a CSS tokenizer sees them: an escape (backslash + any character) and a string (up to its
# closing quote or an unescaped newline) are kept whole (group 1), so that text between two strings that
# merely contain "/*" and "*/" is not removed; every other /* ... */ is dropped.
_CSS_COMMENT = re.compile(r"""(\\.|"(?:[^"\\\n\r\f]|\\.)*"?|'(?:[^'\\\n\r\f]|\\.)*'?)|/\*.*?(?:\*/|\Z)""", re.S)
_CSS_HREF = re.compile(r"(?:^|[^\w-])href[" + _CSS_WS + r"]*:")  # a declaration with property (xlink:)href
_CSS_ID = re.compile(r"(?:^|[^\w.#-])id[" + _CSS_WS + r"]*:")  # a declaration with property id
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})(?:\r\n|[ \t\n\r\f])?|(\r\n|[\n\r\f])|(.)|\Z)", re.S)


# the XML declaration's encoding pseudo-attribute (the declaration must open the document, after an optional BOM)
_XML_DECL_ENCODING = re.compile(r"\A(\ufeff?<\?xml\s[^>]*?\bencoding\s*=\s*)([\"'])[^\"'>]*\2")


def svg_bytes(text: str) -> bytes:
    """The UTF-8 bytes that the screen and cairosvg parse for an SVG given as text.

    A declared ``encoding`` says how a file's bytes decode, and the text is already decoded: it is rewritten to
    UTF-8, as the standard library's XML parsers ignore it for text. Kept, it would be applied to the UTF-8 bytes:
    an ISO-8859-1 declaration renders "90\u00b0" as "90\u00c2\u00b0", a multi-byte one fails to parse."""
    return _XML_DECL_ENCODING.sub(r"\1\2UTF-8\2", text, count=1).encode("utf-8", "replace")


class _Refused(Exception):
    def __init__(self, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.kind, self.msg = kind, msg


def _unescape_css(text: str, strip_comments: bool = True) -> str:
    """CSS as a CSS tokenizer sees it: comments removed, escapes (``\\75``, ``\\u``) decoded."""

    def rep(m: re.Match) -> str:
        if m.group(1):
            cp = int(m.group(1), 16)
            return "\ufffd" if cp == 0 or 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF else chr(cp)
        if m.group(3) is not None:
            return m.group(3)
        return ""  # escaped newline or a backslash at the end

    return _CSS_ESCAPE.sub(rep, _CSS_COMMENT.sub(r"\1", text) if strip_comments else text)


def _data_problem(r: str) -> str | None:
    """None unless the payload of the ``data:`` URL ``r`` is (or may be) an SVG / XML / HTML document:
    cairosvg sniffs the bytes (``<svg`` anywhere, gzip) and ignores the declared media type. Decoded the
    way urllib does (percent-decoding, then lenient base64); linear in ``r``, itself under the size cap."""
    head, _, body = r[5:].partition(",")
    payloads = []
    # <use>/<tref> (cairosvg's Tree) fetch the URL without its #fragment, <image> with it: screen both
    for part in {body, body.partition("#")[0]}:
        raw = unquote_to_bytes(part)
        payloads.append(raw)
        if "base64" in head.lower():
            try:
                payloads.append(binascii.a2b_base64(raw))
            except binascii.Error:
                # fail closed: the screen cannot know what a differently cut URL decodes to
                return f"data: URL with an undecodable base64 payload is not allowed: {r[:80]!r}"
    for data in payloads:
        start = data.lstrip(b" \t\n\r\f\x00\xef\xbb\xbf\xfe\xff")  # whitespace, UTF-8 / UTF-16 BOMs
        if start.startswith((b"<", b"\x1f\x8b")) or b"<svg" in data:  # cairosvg's own test is b"<svg" in
            return f"data: URL holding an SVG/XML/HTML document or gzip is not allowed: {r[:80]!r}"
    return None


def _cairosvg_url(value: str) -> str | None:
    """The URL cairosvg's ``parse_url`` takes out of ``value`` when it holds ``url(...)``, else None. cairosvg
    searches ``url\\((.+)\\)``: case-sensitive, no space before ``(``, the leftmost match, greedy to the last
    ``)`` of that line (``.`` stops at a line feed only), then strips quotes. Linear: one pass per line."""
    for line in value.split("\n"):
        k = line.find("url(")
        if k >= 0:
            e = line.rfind(")")
            if e > k + 4:  # ".+" takes at least one character
                return line[k + 4:e].strip("'\"")
    return None


def ref_problem(ref: str) -> str | None:
    """None when ``ref`` may be used (empty, ``#fragment``, ``data:`` of a non-document type), both as written
    and as cairosvg reads it: an ``href`` of ``#a URL('#b url(data:...)`` starts with ``#`` but cairosvg fetches
    the ``data:`` URL inside."""
    # cairosvg runs parse_url (url\((.+)\) search, quote strip, urlsplit: \t\r\n removed) up to three times in a
    # row on a <use>/<tref> href (use -> Tree -> fetch) and on "#" + id (pattern/gradient href chains): a url(
    # at any depth, or one that only appears once \t\r\n are removed, is fetched. No legitimate href has one.
    if "url(" in ref.translate(_URL_UNSAFE).lower():
        inner = _cairosvg_url(ref)
        problem = _plain_ref_problem(inner) if inner is not None else None
        return f"url() inside the reference: {problem or 'not allowed'}"
    return _plain_ref_problem(ref)


def link_problem(ref: str) -> str | None:
    """None when ``ref`` may be the target of a hyperlink (``<a href>`` / ``<a xlink:href>`` in the SVG namespace or
    none): any URL but one holding ``url(``. cairosvg draws ``<a>`` as text and reads its href only for a
    ``#fragment`` lookup of a local path (``text.py``: a ``<textPath>``'s own, else its parent's); it never fetches
    it, hrefs are not inherited (``NOT_INHERITED_ATTRIBUTES``), and ``parse_def`` registers no element by the tag
    ``a``. A link to a web page is what a chart's source note holds; refusing it was a false refusal."""
    if "url(" in ref.translate(_URL_UNSAFE).lower():
        return ref_problem(ref)
    return None


def _is_link_href(element_ns: str, element: str, attr_ns: str, attr: str) -> bool:
    """Whether an attribute is the href of a hyperlink as cairosvg reads it: element ``a`` in the SVG namespace or none
    (tag ``a``) or XHTML's (tag ``{http://www.w3.org/1999/xhtml}a``, in a ``<foreignObject>``, which cairosvg does not
    draw); in any other namespace the tag is ``{ns}a`` and ``parse_def`` registers an element whose tag contains
    ``image``, ``pattern``, ``path``, ... (``http://image.example/``), so it stays screened. The attribute: ``href``
    without a namespace or in XLink's (``Node.get_href`` reads these two only)."""
    return (element == "a" and element_ns in ("", SVG_NS, XHTML_NS) and attr == "href"
            and attr_ns in ("", XLINK_NS))


def _plain_ref_problem(ref: str) -> str | None:
    r = ref.replace("\t", "").replace("\n", "").replace("\r", "").strip(_URL_STRIP)
    if r == "" or r.startswith("#"):
        return None
    low = r.lower()
    if low.startswith("data:"):
        media = low[5:].split(",", 1)[0].split(";", 1)[0].strip(_URL_STRIP)
        if "svg" in media or "xml" in media:
            return f"nested SVG/XML document in a data: URL is not allowed: {r[:80]!r}"
        return _data_problem(r)
    return f"reference to an external resource is not allowed: {r[:80]!r}"


def css_problem(text: str, declarations: bool = False) -> str | None:
    """None when CSS text (a style sheet, a style attribute, any attribute value) has no ``@import``, only
    allowed ``url()`` references and, for ``declarations`` (style sheets and style attributes), no ``href`` /
    ``xlink:href`` property (cairosvg copies every declaration onto the element, ``href`` included).
    Linear: every character is looked at a bounded number of times."""
    if "/*" in text:
        # Screened with comments removed (as tokenised) and also as written: inside an unquoted url(...)
        # "/*" is no comment, so text the stripping drops may be live CSS.
        return _css_problem(_unescape_css(text), declarations) \
            or _css_problem(_unescape_css(text, strip_comments=False), declarations)
    return _css_problem(_unescape_css(text) if "\\" in text else text, declarations)


def _css_problem(text: str, declarations: bool) -> str | None:
    s = text.lower()
    if "@import" in s:
        return "CSS @import is not allowed"
    if declarations and _CSS_HREF.search(s):
        return "an href property in CSS is not allowed"
    if declarations and _CSS_ID.search(s):
        return "an id property in CSS is not allowed (cairosvg turns ids into URLs)"
    n, i = len(s), 0
    while True:
        k = s.find("url", i)
        if k < 0:
            return None
        j = k + 3
        while j < n and s[j] in _CSS_WS:
            j += 1
        if j >= n or s[j] != "(":
            i = k + 3
            continue
        j += 1
        while j < n and s[j] in _CSS_WS:
            j += 1
        if j < n and s[j] in "\"'":
            e = s.find(s[j], j + 1)
            arg, i = (text[j + 1:], n) if e < 0 else (text[j + 1:e], e + 1)
        else:
            e = s.find(")", j)
            arg, i = (text[j:], n) if e < 0 else (text[j:e], e + 1)
        problem = ref_problem(arg)
        if problem:
            return "url(): " + problem


def check_svg(data: bytes | str, max_bytes: int = MAX_SVG_BYTES) -> tuple[str, str] | None:
    """Return ``(error_kind, reason)`` when the SVG must not be rendered, else None."""
    if isinstance(data, str):
        data = svg_bytes(data)
    if len(data) > max_bytes:
        return "too_large", f"SVG of {len(data)} bytes exceeds {max_bytes}"
    p = expat.ParserCreate(namespace_separator=" ")
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    state = {"root": None, "style": 0}
    style_text: list[str] = []

    def refuse(msg: str):
        raise _Refused("forbidden", "SVG " + msg)

    def doctype(name, sysid, pubid, has_internal_subset):
        if has_internal_subset:
            refuse("DOCTYPE with an internal subset is not allowed")

    def start(name, attrs):
        ns, _, local = name.rpartition(" ")
        if state["root"] is None:
            state["root"] = (ns, local)
        if ns in XINCLUDE_NS or local == "include":
            refuse("XInclude is not allowed")
        for an, av in attrs.items():
            ns_an, _, local_an = an.rpartition(" ")
            # an id becomes the URL "#" + id in cairosvg's pattern / gradient href chains; xml:base is the URL an
            # <image> href is resolved against (``<image xml:base="/etc/x" href="#a">`` fetches file:///etc/x#a)
            if _is_link_href(ns, local, ns_an, local_an):
                problem = link_problem(av)
            elif local_an in _REF_ATTRS:
                problem = ref_problem(av)
            else:
                problem = ref_problem("#" + av) if local_an == "id" else None
            problem = problem or css_problem(av, declarations=local_an == "style")
            if problem:
                refuse(f"attribute {local_an}: {problem}")
        if local == "style":
            state["style"] += 1

    def end(name):
        if name.rpartition(" ")[2] == "style":
            state["style"] -= 1
            if state["style"] == 0 and style_text:
                problem = css_problem("".join(style_text), declarations=True)
                style_text.clear()
                if problem:
                    refuse(f"<style>: {problem}")

    def chars(text):
        if state["style"]:
            style_text.append(text)

    p.StartDoctypeDeclHandler = doctype
    p.EntityDeclHandler = lambda *a: refuse("entity declarations are not allowed")
    p.UnparsedEntityDeclHandler = lambda *a: refuse("entity declarations are not allowed")
    p.NotationDeclHandler = lambda *a: refuse("notation declarations are not allowed")
    p.ExternalEntityRefHandler = lambda *a: refuse("external entities are not allowed")
    p.SkippedEntityHandler = lambda name, is_pe: refuse(f"undeclared entity {name!r} is not allowed")
    p.ProcessingInstructionHandler = lambda target, d: refuse(f"processing instruction <?{target}?> is not allowed")
    p.StartElementHandler = start
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    try:
        p.Parse(data, True)
    except _Refused as e:
        return e.kind, e.msg
    except expat.ExpatError as e:
        return "syntax", f"SVG is not well-formed XML: {e}"
    except ValueError as e:  # bytes declaring an encoding expat cannot read ("multi-byte encodings are not supported")
        return "syntax", f"SVG cannot be parsed: {e}"
    root = state["root"]
    if root is None or root[1] != "svg" or root[0] not in ("", SVG_NS):
        return "forbidden", "no <svg> root element"
    return None


def screen_svg(text: str | bytes, max_bytes: int = MAX_SVG_BYTES) -> str | None:
    """Return a reason string when the SVG must be refused (or cannot be parsed), else None."""
    refused = check_svg(text, max_bytes)
    return None if refused is None else refused[1]

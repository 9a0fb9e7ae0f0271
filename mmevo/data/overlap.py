"""Held-out items that also occur in the train set.

A held-out accuracy measured on items the policy trained on measures memory, not the method. Two items are the
same when their problem text (runs of whitespace collapsed, as HONEST's held-out guard compares questions) and their
images' pixels (mode, size and bytes, after the load-time pixel bounds) are: a hash of both, so a large set costs one
pass over its pixels and no pairwise comparison.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from mmevo.data.schema import Example
from mmevo.honest.heldout import question_key

__all__ = ["item_fingerprint", "count_heldout_overlap", "same_data_source"]


def item_fingerprint(ex: Example) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(question_key(ex.problem).encode("utf-8", "surrogatepass"))
    for im in ex.images:
        h.update(f"\0{im.mode}:{im.size[0]}x{im.size[1]}\0".encode())
        h.update(im.tobytes())
    return h.hexdigest()


def count_heldout_overlap(train: Iterable[Example], heldout: Iterable[Example]) -> int:
    """How many held-out items share problem and images with some train item."""
    seen = {item_fingerprint(ex) for ex in train}
    return sum(item_fingerprint(ex) in seen for ex in heldout) if seen else 0


def same_data_source(train: tuple[str, str | None], heldout: tuple[str, str | None]) -> bool:
    """Whether two ``(source, split)`` pairs name one set of rows: the same file / folder (however the path is
    written) or hub name, with the same split."""
    (a, a_split), (b, b_split) = train, heldout
    if a_split != b_split:
        return False
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    if pa.exists() and pb.exists():
        return pa.resolve() == pb.resolve()
    return a == b

"""Common in-memory representation of one vision-language training example.

Real data (Geometry3K hub exports, ``datasets`` folders) and the embedded
synthetic generator both produce :class:`Example` objects, so the trainer,
the reward functions and the evaluator only ever see this one type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PIL import Image

IMAGE_PLACEHOLDER = "<image>"
# meta key: a system prompt for this example's SFT prompt in place of data.system_prompt (``grpo.sft.run_sft``); the
# HONEST calibration SFT offers the hindsight slot only on the targets that write it (``honest.sft``)
SFT_SYSTEM_PROMPT = "sft_system_prompt"


@dataclass
class Example:
    """One problem with its image(s) and gold answer.

    ``problem`` contains exactly one ``"<image>"`` placeholder per image when
    ``images`` is non-empty.  ``answer`` is always the gold answer *text*; for
    multiple-choice rows that is the text of the correct choice, never its
    letter.  ``solution`` is a worked solution in the trainer's output format
    (``"<think>...</think> \\boxed{ans}"``) and is only present for synthetic
    data, where it is used for the SFT warm-up.
    """

    id: str
    problem: str
    answer: str
    choices: list[str]
    images: list[Image.Image]
    solution: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class DataError(ValueError):
    """A data file or one of its rows is unusable.

    The message always names the file, the row (jsonl: ``file:line (row i,
    id 'x')``, otherwise ``file row i (id 'x')``) and the offending field, e.g.::

        data/train.jsonl:18 (row 17): field 'images': image file images/x.png not found

    The structured parts are also available as attributes so callers (for
    example the ``skip_bad`` statistics) do not have to parse the message.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        row: int | None = None,
        field: str | None = None,
        reason: str | None = None,
        row_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.file = file
        self.row = row
        self.field = field
        self.reason = reason
        self.row_id = row_id

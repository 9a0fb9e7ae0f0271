"""Job / result / limit records shared by the pool and its workers (plain dataclasses, picklable)."""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR_KINDS = (
    "timeout", "memory", "forbidden", "crash", "syntax", "no_output", "invalid_image", "too_large", "invalid_size",
    "protocol",
)
LANGUAGES = ("python", "svg")


@dataclass
class RenderJob:
    code: str
    language: str = "python"


@dataclass
class RenderLimits:
    memory_bytes: int = 1 << 30  # address space allowed on top of the pre-warmed worker's own
    max_file_bytes: int = 32 << 20  # RLIMIT_FSIZE inside the job
    disk_bytes: int = 64 << 20  # size of the tmpfs holding a worker's job dirs (all files of one job)
    max_png_bytes: int = 8 << 20
    max_side: int = 4096  # pixels, width and height
    min_side: int = 4
    max_aspect: float = 20.0
    max_code_chars: int = 200_000
    max_svg_bytes: int = 1 << 20  # UTF-8 size of an SVG, checked before it is parsed
    nofile: int = 64
    nproc: int = 256  # tasks of the job uid (threads; processes are blocked by seccomp)


@dataclass
class RenderResult:
    ok: bool
    png: bytes | None = None
    width: int = 0
    height: int = 0
    error_kind: str | None = None
    message: str = ""
    elapsed_s: float = 0.0
    isolation: dict = field(default_factory=dict)

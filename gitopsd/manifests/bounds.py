"""The errors of a limit reached: each names where, the limit, and how to raise it."""

from __future__ import annotations

from gitopsd.config import Limits, how_to_raise
from gitopsd.errors import ManifestError, ManifestReason


def check_object_size(where: str, size: int, limits: Limits) -> None:
    if size > limits.max_object_bytes:
        raise ManifestError(
            f"{where}: object is {size_text(size)}, over the per-object limit of "
            f"{size_text(limits.max_object_bytes)} ({how_to_raise('max_object_bytes')})",
            ManifestReason.SIZE_LIMIT,
        )


def revision_bytes_error(rel: str, total: int, limit: int) -> ManifestError:
    return ManifestError(
        f"{rel}: the revision's manifests reach {size_text(total)}, "
        f"over the per-revision limit of {size_text(limit)} "
        f"({how_to_raise('max_revision_bytes')})",
        ManifestReason.SIZE_LIMIT,
    )


def documents_error(where: str, limit: int) -> ManifestError:
    return ManifestError(
        f"{where}: more than {limit} YAML documents, the per-revision limit "
        f"({how_to_raise('max_documents')})",
        ManifestReason.SIZE_LIMIT,
    )


def depth_error(where: str, limits: Limits) -> ManifestError:
    return ManifestError(
        f"{where}: nested deeper than the limit of {limits.max_depth} levels",
        ManifestReason.DEPTH_LIMIT,
    )


def size_text(count: int) -> str:
    """Bytes the way limits are written: 3 MiB, 3.4 MiB, 512 KiB, 100 bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            whole, rest = divmod(count, scale)
            return f"{whole} {unit}" if not rest else f"{count / scale:.1f} {unit}"
    return f"{count} bytes"

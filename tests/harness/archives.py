"""Chart archives made by hand, byte for byte, so a test can put in them what `helm package`
never would (symlinks, odd names)."""

from __future__ import annotations

import io
import tarfile


def archive(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """A gzipped tar of `members` (name: content), with symlinks `links` (name: target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()

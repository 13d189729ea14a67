"""What an archive of a repository (a chart, an OCI artifact) unpacks to, written into the
cache whole or not at all: into a private directory first, renamed into place once every
file is written, so a reader never sees half of it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from gitopsd.errors import SourceError, SourceReason


def unpack_into(directory: Path, what: str, write: Callable[[Path], None]) -> None:
    """`directory`, holding what `write` writes into the private directory it is given."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=directory.parent))
    try:
        write(work)
        work.replace(directory)
    except OSError as error:
        if not directory.is_dir():  # else another fetch of the same digest won the rename
            raise SourceError(
                f"{what}: cannot unpack: {error.strerror}", SourceReason.NOSPACE
            ) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_files(files: Iterable[tuple[str, bytes]], work: Path) -> None:
    """Each (path, contents), checked already (`gitopsd.archives`), as a file under `work`."""
    for path, contents in files:
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(contents)

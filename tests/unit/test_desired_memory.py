"""Memory running out while a revision is read is that revision's failure (TA-03's class:
'a MemoryError anywhere is a failed revision for that source, never a dead daemon')."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsd import manifests
from gitopsd.config import SourceSpec
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.reconcile import desired
from gitopsd.source.revision import read_directory


def test_a_revision_that_runs_the_process_out_of_memory_fails_as_too_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")

    def exhausted(*_: object, **__: object) -> list[object]:
        raise MemoryError

    monkeypatch.setattr(manifests, "load", exhausted)
    spec = SourceSpec(f"file://{tmp_path}", ref="", allow_insecure=True)
    with pytest.raises(ManifestError) as raised:
        desired.read_revision(read_directory(tmp_path), spec, tmp_path / "cache")
    assert raised.value.reason == ManifestReason.SIZE_LIMIT
    assert "ran out of the daemon's memory" in str(raised.value)
    assert "maxRevisionBytes" in str(raised.value)

"""SOPS-encrypted files of a revision, read decrypted (Flux's decryption, provider sops).

`Decrypting` wraps a revision's tree: a file sops encrypted reads as its plaintext, for the
manifest reader (whole manifests) and for the renderers, whose private copy holds the
plaintext instead (the files a kustomization's generators read, a chart's values files).
So a file is decrypted before kustomize or helm runs, and its MAC checked whole, before any
transformation. `sops` decrypts; a file that does not (a wrong key, a changed value, keys
of a cloud KMS only) fails the revision's read, naming the file and why, so nothing of the
revision is applied or pruned.

A decrypted value is Secret data: each value sops encrypted may reach only the `data` and
`stringData` of Secrets, which gitopsd masks everywhere (`confine`). One found anywhere
else (a ConfigMap, an annotation, a name) refuses the revision, naming the object and the
field but never the value.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gitopsd.decryption.formats import Encrypted, encrypted, encrypted_values
from gitopsd.decryption.keys import Keys, keys_of
from gitopsd.decryption.sops import SOPS_AGE_KEY_FILE, Sops, failure
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.manifests import Tree, copy_paths
from gitopsd.objects import Manifest

__all__ = ["SOPS_AGE_KEY_FILE", "Decrypting", "Keys", "keys_of"]

SHORTEST_SEARCHED = 6
"""A decrypted value shorter than this is not looked for: `1`, `true` or `v1` are
everywhere, and would refuse revisions for values that came from elsewhere."""
SECRET_DATA = ("data", "stringData")


class Decrypting:
    """A revision's tree (a `gitopsd.manifests.Tree`) whose SOPS-encrypted files read as
    their plaintext, decrypted with `keys` (None: an encrypted file is refused)."""

    def __init__(self, tree: Tree, keys: Keys | None, tenant: str) -> None:
        self._tree, self._keys = tree, keys
        program = shutil.which("sops")
        self._sops = Sops(program, keys, tenant) if keys and program else None
        self._opened: dict[str, bytes] = {}
        self._overlay: Path | None = None
        self._values: dict[str, str] = {}
        """Each value decrypted so far, and the file it was decrypted from."""
        self._pattern: tuple[int, re.Pattern[str] | None] = (0, None)

    def mode(self, rel: str) -> int | None:
        return self._tree.mode(rel)

    def names(self, rel: str) -> list[str]:
        return self._tree.names(rel)

    def size(self, rel: str) -> int:
        return self._tree.size(rel)

    def content_id(self, rel: str) -> str | None:
        """A file's blob, with the keys it was read with: a parse made with other keys (or
        none) is not this one's."""
        blob = self._tree.content_id(rel)
        return blob if blob is None or self._keys is None else f"{blob}+{self._keys.digest}"

    def prefetch(self, rels: Iterable[str]) -> None:
        self._tree.prefetch(rels)

    def read(self, rel: str, limit: int) -> bytes:
        data = self._tree.read(rel, limit)
        return data if len(data) > limit else self._plain(rel, data)

    def materialized(self, rels: Sequence[str]) -> Path:
        """The tree's own copy when none of `rels` is encrypted; else a private copy of
        them holding the plaintext of each encrypted file."""
        root = self._tree.materialized(rels)
        found = [rel for rel in _files(root, rels) if self._opens(root, rel)]
        if not found:
            return root
        overlay = self._overlay or Path(tempfile.mkdtemp(prefix="gitopsd-decrypted-"))
        self._overlay = overlay
        copy_paths(root, rels, overlay)
        for rel in found:
            (overlay / rel).write_bytes(self._opened[rel])
        return overlay

    def confine(self, manifests: Iterable[Manifest]) -> None:
        """Raises ManifestError (decryption_failed) when a value decrypted so far appears in
        `manifests` elsewhere than a Secret's data and stringData."""
        pattern = self._compiled()
        if pattern is None:
            return
        for manifest in manifests:
            body = manifest.body
            if manifest.key.kind == "Secret" and manifest.key.group == "":
                body = {k: v for k, v in body.items() if k not in SECRET_DATA}
            for where, text in _leaves(body, ""):
                found = pattern.search(text)
                if found:  # neither the value nor the object's name: either may be it
                    raise self._shown(manifest, where.lstrip("."), found.group())

    def close(self) -> None:
        if self._sops is not None:
            self._sops.close()
        if self._overlay is not None:
            shutil.rmtree(self._overlay, ignore_errors=True)

    def _plain(self, rel: str, data: bytes) -> bytes:
        if rel in self._opened:
            return self._opened[rel]
        found = encrypted(rel, data)
        if found is None:
            return data
        plaintext = self._decrypted(rel, found, data)
        for value in encrypted_values(rel, found, data, plaintext):
            self._values.setdefault(value, rel)
        self._opened[rel] = plaintext
        return plaintext

    def _decrypted(self, rel: str, found: Encrypted, data: bytes) -> bytes:
        if self._keys is None:
            raise failure(
                rel,
                f"it is encrypted for {found.named_kinds}, and the source has no decryption "
                "keys (decryption.secretRef, decryption.ageKeyFile, --sops-age-key-file)",
            )
        if self._sops is None:
            raise failure(rel, "decrypting it needs sops on PATH")
        return self._sops.decrypt(rel, found, data)

    def _opens(self, root: Path, rel: str) -> bool:
        """Whether the file is encrypted: decrypted now (read once) unless it was before."""
        if rel not in self._opened:
            self._plain(rel, (root / rel).read_bytes())
        return rel in self._opened

    def _compiled(self) -> re.Pattern[str] | None:
        """One pattern of every decrypted value and its base64, longest first."""
        count, pattern = self._pattern
        if count != len(self._values):
            forms = {form for value in self._values for form in _forms(value)}
            alternatives = sorted(forms, key=len, reverse=True)
            pattern = re.compile("|".join(map(re.escape, alternatives))) if forms else None
            self._pattern = (len(self._values), pattern)
        return pattern

    def _shown(self, manifest: Manifest, where: str, form: str) -> ManifestError:
        rel = next(rel for value, rel in self._values.items() if form in _forms(value))
        return ManifestError(
            f"{manifest.origin}: a {manifest.key.kind}'s {where} holds a value decrypted from "
            f"{rel}: a decrypted value may reach only a Secret's data and stringData, where "
            "it is masked (encrypt only those: encrypted_regex: ^(data|stringData)$)",
            ManifestReason.DECRYPTION_FAILED,
        )


def _forms(value: str) -> list[str]:
    if len(value) < SHORTEST_SEARCHED:
        return []
    return [value, base64.b64encode(value.encode()).decode()]


def _leaves(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """(path, text) of every string in `node`, mapping keys included."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{where}.{key}"
            yield path, str(key)
            yield from _leaves(value, path)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, f"{where}[{index}]")
    elif isinstance(node, str):
        yield where, node


def _files(root: Path, rels: Sequence[str]) -> Iterator[str]:
    """The regular files at and under `rels` (root-relative), links not followed."""
    for rel in rels:
        path = root / rel
        if path.is_symlink() or not path.exists():
            continue
        if path.is_file():
            yield os.path.normpath(rel)
            continue
        for directory, subdirectories, files in os.walk(path):
            subdirectories[:] = [d for d in subdirectories if d != ".git"]
            for name in files:
                if not (Path(directory) / name).is_symlink():
                    yield os.path.relpath(Path(directory) / name, root)

"""What a file of a revision is to SOPS, pure: whether it is encrypted, in which of sops's
formats, for which kinds of keys, and which of its values were encrypted.

sops picks a file's format by its extension (YAML, JSON, dotenv, INI; anything else is a
binary file, stored as JSON with its bytes under `data`) and keeps its metadata in the file:
a top-level `sops` mapping, or `sops_`-prefixed keys in a dotenv file, an `[sops]` section
in an INI file. Only a file that carries that metadata is encrypted; an encrypted value
reads `ENC[AES256_GCM,...]`, and a value sops left in the clear (unencrypted_suffix,
encrypted_regex) does not.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gitopsd.config import Limits
from gitopsd.errors import ManifestError
from gitopsd.manifests import parse_documents


class Format(StrEnum):
    """sops's names of its formats (its --input-type)."""

    YAML = "yaml"
    JSON = "json"
    DOTENV = "dotenv"
    INI = "ini"
    BINARY = "binary"


KEY_KINDS = {
    "age": "age",
    "pgp": "OpenPGP",
    "kms": "AWS KMS",
    "gcp_kms": "GCP KMS",
    "azure_kv": "Azure Key Vault",
    "hc_vault": "HashiCorp Vault",
}
"""The kinds of keys a file may be encrypted for (sops's metadata keys), as people call them."""
USABLE = frozenset({"age", "pgp"})
"""What gitopsd decrypts with: the cloud kinds need a network its renders do not have."""
ENCRYPTED_VALUE = "ENC["
_EXTENSIONS = {
    ".yaml": Format.YAML,
    ".yml": Format.YAML,
    ".json": Format.JSON,
    ".env": Format.DOTENV,
    ".ini": Format.INI,
}
_YAML_METADATA = re.compile(rb"^sops:[ \t]*(?:#.*)?$", re.MULTILINE)
_YAML_TOP_LEVEL = re.compile(rb"^(?:[^\s#]|---)", re.MULTILINE)
_FLAT_METADATA = {
    Format.DOTENV: re.compile(rb"^sops_(?:mac|version)=", re.MULTILINE),
    Format.INI: re.compile(rb"^\[sops\][ \t]*$", re.MULTILINE),
}
_KIND_NAMES = b"|".join(kind.encode() for kind in KEY_KINDS)
_FLAT_KIND = re.compile(
    rb"^(?:sops_)?(?:key_groups__list_\d+__map_)?(" + _KIND_NAMES + rb")__list_", re.MULTILINE
)


@dataclass(frozen=True)
class Encrypted:
    """A file sops encrypted: its format, and the kinds of keys it can be decrypted with."""

    format: Format
    kinds: frozenset[str]

    @property
    def usable(self) -> bool:
        return bool(self.kinds & USABLE)

    @property
    def named_kinds(self) -> str:
        return ", ".join(sorted(KEY_KINDS[kind] for kind in self.kinds)) or "no key"


def format_of(rel: str) -> Format:
    """The format sops reads a file in, by its extension."""
    return _EXTENSIONS.get(posixpath.splitext(rel)[1].lower(), Format.BINARY)


def encrypted(rel: str, data: bytes) -> Encrypted | None:
    """The file `rel` holding `data` as sops encrypted it, or None when it carries no SOPS
    metadata (a plain file)."""
    format_ = format_of(rel)
    if format_ is Format.YAML:
        return _yaml(data)
    if format_ in _FLAT_METADATA:
        if not _FLAT_METADATA[format_].search(data):
            return None
        return Encrypted(format_, frozenset(m.decode() for m in _FLAT_KIND.findall(data)))
    document = _json_object(data)
    if document is None or not isinstance(document.get("sops"), dict):
        return None
    if format_ is Format.BINARY and not isinstance(document.get("data"), str):
        return None
    return Encrypted(format_, _kinds(document["sops"]))


def _yaml(data: bytes) -> Encrypted | None:
    """A YAML file's metadata is a top-level `sops` mapping: only its own lines are read."""
    found = _YAML_METADATA.search(data)
    if found is None:
        return None
    end = _YAML_TOP_LEVEL.search(data, found.end() + 1)
    block = data[found.start() : end.start() if end else len(data)]
    try:
        documents = parse_documents(block.decode("utf-8", "replace"), "sops.yaml", Limits())
    except ManifestError:
        return None
    metadata = documents[0][1].get("sops") if documents else None
    if not isinstance(metadata, dict):
        return None
    return Encrypted(Format.YAML, _kinds(metadata))


def _kinds(metadata: dict[Any, Any]) -> frozenset[str]:
    groups = [metadata, *(g for g in metadata.get("key_groups") or [] if isinstance(g, dict))]
    return frozenset(kind for group in groups for kind in KEY_KINDS if group.get(kind))


def _json_object(data: bytes) -> dict[str, Any] | None:
    if b'"sops"' not in data:
        return None
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def encrypted_values(
    rel: str, found: Encrypted, ciphertext: bytes, plaintext: bytes
) -> Iterator[str]:
    """The plaintext of each value sops encrypted in the file (not those it left in the
    clear): what must never be shown. A binary file's whole content is one."""
    if found.format is Format.BINARY:
        yield plaintext.decode("utf-8", "replace")
    elif found.format in (Format.DOTENV, Format.INI):
        clear = dict(_flat_pairs(plaintext))
        sealed = [key for key, value in _flat_pairs(ciphertext) if _is_sealed(value)]
        yield from (clear[key] for key in sealed if key in clear)
    else:
        path = rel if found.format is Format.YAML else f"{rel}.json"
        sealed = [doc for _, doc in parse_documents(ciphertext.decode(), path, Limits())]
        opened = [doc for _, doc in parse_documents(plaintext.decode(), path, Limits())]
        for cipher, plain in zip(sealed, opened, strict=False):
            if isinstance(cipher, dict):
                cipher = {key: value for key, value in cipher.items() if key != "sops"}
            yield from _opened(cipher, plain)


def _opened(cipher: Any, plain: Any) -> Iterator[str]:
    """The values of `plain` where `cipher` holds an encrypted value, walked together."""
    if isinstance(cipher, str):
        if _is_sealed(cipher):
            yield plain if isinstance(plain, str) else json.dumps(plain)
    elif isinstance(cipher, dict) and isinstance(plain, dict):
        for key, value in cipher.items():
            yield from _opened(value, plain.get(key))
    elif isinstance(cipher, list) and isinstance(plain, list):
        for pair in zip(cipher, plain, strict=False):
            yield from _opened(*pair)


def _flat_pairs(data: bytes) -> Iterator[tuple[str, str]]:
    """KEY=VALUE lines of a dotenv or INI file (INI's `KEY = VALUE` too), comments apart."""
    for line in data.decode("utf-8", "replace").splitlines():
        key, equals, value = line.partition("=")
        if equals and not line.lstrip().startswith(("#", ";", "[")):
            yield key.strip(), value.strip()


def _is_sealed(value: str) -> bool:
    return value.startswith(ENCRYPTED_VALUE)

"""The keys a source decrypts with, read from their files once per revision read: age
identities as age-keygen writes them, and OpenPGP private keys, armored, which sops reads
from a keyring (the binary packets under the armor: what `gpg --dearmor` writes)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from gitopsd.config import Decryption
from gitopsd.errors import ConfigError

MAX_KEY_FILE_BYTES = 1024 * 1024
"""A key file past this is no key file (a Secret holds at most 1 MiB too)."""
_ARMOR = re.compile(
    rb"-----BEGIN PGP PRIVATE KEY BLOCK-----\r?\n(.*?)-----END PGP PRIVATE KEY BLOCK-----",
    re.DOTALL,
)
_AGE_IDENTITY = re.compile(rb"^AGE-SECRET-KEY-1[0-9A-Z]+$", re.MULTILINE)


@dataclass(frozen=True)
class Keys:
    """What a source decrypts with."""

    age: bytes = field(default=b"", repr=False)
    """age identities, one per line."""
    keyring: bytes = field(default=b"", repr=False)
    """OpenPGP private keys as packets (a keyring sops reads as $GNUPGHOME/secring.gpg)."""

    @property
    def digest(self) -> str:
        """What tells these keys from others, revealing none of them."""
        digest = hashlib.sha256(b"%d\0" % len(self.age) + self.age + self.keyring)
        return digest.hexdigest()[:32]


def keys_of(decryption: Decryption) -> Keys | None:
    """The keys its files name, read now (a rotated key is used from the next read on);
    None without any. Raises ConfigError for a file that cannot be read or holds no key."""
    if not decryption.enabled:
        return None
    age = _read(decryption.age_key_file, "age identities")
    pgp = _read(decryption.pgp_key_file, "OpenPGP private keys")
    if age and not _AGE_IDENTITY.search(age):
        raise ConfigError(
            f"{decryption.age_key_file}: holds no age identity (AGE-SECRET-KEY-1..., as "
            "age-keygen writes them)"
        )
    return Keys(age=age, keyring=_dearmored(pgp, decryption.pgp_key_file) if pgp else b"")


def _read(path: Path | None, what: str) -> bytes:
    if path is None:
        return b""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"{path}: the {what} cannot be read: {error.strerror}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ConfigError(f"{path}: the {what} are over {MAX_KEY_FILE_BYTES} bytes")
    return data


def _dearmored(data: bytes, path: Path | None) -> bytes:
    """The packets of each armored private key in `data` (RFC 4880's ASCII armor: headers,
    a blank line, base64, and a checksum line that starts with `=`)."""
    blocks = _ARMOR.findall(data)
    if not blocks:
        raise ConfigError(
            f"{path}: holds no armored OpenPGP private key (-----BEGIN PGP PRIVATE KEY "
            "BLOCK-----, as gpg --export-secret-keys --armor writes it)"
        )
    return b"".join(_packets(block, path) for block in blocks)


def _packets(block: bytes, path: Path | None) -> bytes:
    lines = block.replace(b"\r", b"").split(b"\n")
    body = lines[lines.index(b"") + 1 :] if b"" in lines else lines  # after the headers
    encoded = b"".join(line.strip() for line in body if not line.startswith(b"="))
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{path}: an OpenPGP private key's armor is not base64") from None

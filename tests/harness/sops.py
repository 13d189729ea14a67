"""SOPS-encrypted files for the tests, made as their owners make them: age identities by
age-keygen, an OpenPGP key by Debian's gnupg (an ed25519 key with a cv25519 subkey to
encrypt to, no passphrase), and `sops encrypt` from the control plane's build, which
encrypts only a Secret's data and stringData unless told otherwise (Flux's advice)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SECRET_DATA = "^(data|stringData)$"


@dataclass(frozen=True)
class AgeKey:
    identity: bytes
    """The identity file, as age-keygen writes it (the private key)."""
    recipient: str
    """The public key files are encrypted to."""


@dataclass(frozen=True)
class OpenPGPKey:
    private: bytes
    """The armored private key, as `gpg --export-secret-keys --armor` writes it."""
    fingerprint: str


class Sops:
    """Makes keys and encrypts with them, in a private folder of the test's."""

    def __init__(self, sops: Path, age_keygen: Path, folder: Path) -> None:
        self.program, self.age_keygen, self.folder = sops, age_keygen, folder
        self.gnupg = Path(tempfile.mkdtemp(prefix="gpg-", dir="/tmp"))  # agent socket: short
        self.gnupg.chmod(0o700)

    def close(self) -> None:
        subprocess.run(
            ["gpgconf", "--homedir", str(self.gnupg), "--kill", "gpg-agent"], check=False
        )
        subprocess.run(["rm", "-rf", str(self.gnupg)], check=False)

    def age(self) -> AgeKey:
        with tempfile.TemporaryDirectory(dir=self.folder) as work:
            identity = Path(work) / "key.txt"
            subprocess.run([self.age_keygen, "-o", identity], check=True, capture_output=True)
            recipient = subprocess.run(
                [self.age_keygen, "-y", identity], check=True, capture_output=True, text=True
            ).stdout.strip()
            return AgeKey(identity.read_bytes(), recipient)

    def openpgp(self, email: str) -> OpenPGPKey:
        self._gpg("--passphrase", "", "--quick-gen-key", email, "ed25519", "sign", "never")
        listing = self._gpg("--with-colons", "--list-keys", email).decode().splitlines()
        fingerprint = next(line.split(":")[9] for line in listing if line.startswith("fpr:"))
        self._gpg("--passphrase", "", "--quick-add-key", fingerprint, "cv25519", "encr", "never")
        private = self._gpg("--passphrase", "", "--armor", "--export-secret-keys", fingerprint)
        return OpenPGPKey(private, fingerprint)

    def encrypt(
        self,
        name: str,
        plaintext: str | bytes,
        *,
        age: tuple[AgeKey, ...] = (),
        openpgp: tuple[OpenPGPKey, ...] = (),
        regex: str | None = SECRET_DATA,
    ) -> bytes:
        """`plaintext` encrypted as the file `name` (its extension picks the format)."""
        data = plaintext.encode() if isinstance(plaintext, str) else plaintext
        keys = []
        if age:
            keys += ["--age", ",".join(key.recipient for key in age)]
        if openpgp:
            keys += ["--pgp", ",".join(key.fingerprint for key in openpgp)]
        chosen = ["--encrypted-regex", regex] if regex else []
        argv = [str(self.program), "encrypt", "--filename-override", name, *keys, *chosen]
        with tempfile.TemporaryDirectory(dir=self.folder) as empty:  # no .sops.yaml here
            done = subprocess.run(
                argv, input=data, cwd=empty, env=self._env(), check=True, capture_output=True
            )
        return done.stdout

    def _gpg(self, *arguments: str) -> bytes:
        argv = ["gpg", "--homedir", str(self.gnupg), "--batch", "--pinentry-mode", "loopback"]
        return subprocess.run(
            [*argv, *arguments], check=True, capture_output=True, env=self._env()
        ).stdout

    def _env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GNUPGHOME": str(self.gnupg)}


def for_kms_only(encrypted: bytes) -> bytes:
    """An encrypted YAML file as if encrypted for AWS KMS only: its age entries replaced by
    a KMS key's (its values and MAC untouched; no KMS is reached to make it)."""
    documents = list(yaml.safe_load_all(encrypted))
    metadata: dict[str, Any] = documents[0]["sops"]
    metadata.pop("age", None)
    metadata.pop("pgp", None)
    metadata["kms"] = [
        {
            "arn": "arn:aws:kms:eu-west-1:111122223333:key/0000",
            "created_at": "2026-12-05T00:00:00Z",
            "enc": "AQICAHh0",
            "aws_profile": "",
        }
    ]
    return yaml.safe_dump_all(documents, sort_keys=False).encode()


def tampered(encrypted: bytes, clear: str, changed: str) -> bytes:
    """The encrypted file with a value it holds in the clear changed: its MAC no longer
    matches."""
    assert clear.encode() in encrypted, clear
    return encrypted.replace(clear.encode(), changed.encode(), 1)

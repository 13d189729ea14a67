"""Signers of commits and tags, as people sign with `git commit -S`: OpenPGP keys made by
Debian's gnupg, each in a GNUPGHOME of its own, and SSH keys made by ssh-keygen. A key may
be made in the past (gpg's --faked-system-time), so that it has expired by now while its
signatures were made when it was valid. gpg signs through an agent of each GNUPGHOME's;
a `Keychain` stops them all when it closes."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DAY = 24 * 3600


@dataclass(frozen=True)
class OpenPGPSigner:
    home: Path
    fingerprint: str
    program: Path
    """gpg, or a script that runs it at the key's own time."""

    @property
    def key_id(self) -> str:
        """The long key id gpg names a signature's key by."""
        return self.fingerprint[-16:]

    def git_options(self) -> list[str]:
        return [
            *("-c", "gpg.format=openpgp", "-c", f"gpg.program={self.program}"),
            *("-c", f"user.signingkey={self.fingerprint}"),
        ]

    def env(self) -> dict[str, str]:
        return {"GNUPGHOME": str(self.home)}

    def public_key(self) -> bytes:
        """The armored public key, as a team publishes it."""
        return _gpg(self.home, "--armor", "--export", self.fingerprint)

    def revoked(self) -> bytes:
        """The armored public key with its revocation certificate (gpg made one with the
        key), as a team publishes a key it revoked."""
        [certificate] = (self.home / "openpgp-revocs.d").glob(f"{self.fingerprint}.rev")
        # gpg writes it with a colon before its armor, so that it is not imported by mistake
        armored = certificate.read_text().replace(":-----BEGIN PGP", "-----BEGIN PGP")
        _gpg(self.home, "--import", stdin=armored.encode())
        return self.public_key()


class Keychain:
    """The signers of one test, in a short private folder (gpg-agent's socket path is
    bounded); closing it stops their agents and removes their keys."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="gitopsd-keys-"))
        self.homes: list[Path] = []

    def __enter__(self) -> Keychain:
        return self

    def __exit__(self, *_: object) -> None:
        for home in self.homes:
            subprocess.run(
                ["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(self.folder, ignore_errors=True)

    def openpgp(self, email: str, expired: bool = False) -> OpenPGPSigner:
        """An ed25519 signing key without a passphrase; `expired`: made two days ago,
        valid for one."""
        home = self.folder / f"gnupg-{len(self.homes)}"
        home.mkdir(mode=0o700)
        self.homes.append(home)
        program = Path("gpg")
        faked: list[str] = []
        if expired:
            faked = ["--faked-system-time", f"{int(time.time()) - 2 * DAY}!"]
            program = home / "gpg-at-key-time"
            program.write_text(f'#!/bin/sh\nexec gpg {" ".join(faked)} "$@"\n')
            program.chmod(0o700)
        validity = "1d" if expired else "1y"
        _gpg(
            home, *faked, "--passphrase", "", "--quick-gen-key", email, "ed25519", "sign", validity
        )
        listing = _gpg(home, "--with-colons", "--list-keys", email).decode().splitlines()
        fingerprint = next(line.split(":")[9] for line in listing if line.startswith("fpr:"))
        return OpenPGPSigner(home, fingerprint, program)

    def ssh(self, email: str) -> SSHSigner:
        key = self.folder / f"ssh-{email.partition('@')[0]}"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", email, "-f", str(key)],
            check=True,
            capture_output=True,
        )
        return SSHSigner(key, email)


@dataclass(frozen=True)
class SSHSigner:
    key: Path
    """The private key; its public key is beside it (.pub)."""
    email: str

    def git_options(self) -> list[str]:
        return ["-c", "gpg.format=ssh", "-c", f"user.signingkey={self.key}.pub"]

    def env(self) -> dict[str, str]:
        return {}

    def allowed_signers(self) -> str:
        """Its line of an allowed signers file, as ssh-keygen reads it."""
        public = Path(f"{self.key}.pub").read_text().strip()
        return f'{self.email} namespaces="git" {public}\n'


Signer = OpenPGPSigner | SSHSigner


def _gpg(home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GNUPGHOME": str(home)}
    done = subprocess.run(
        ["gpg", "--batch", "--no-tty", *args],
        input=stdin,
        env=env,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"gpg {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout

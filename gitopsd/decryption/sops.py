"""Runs `sops decrypt` on one file, as helm and kubectl run: by absolute path, in the
renderers' sandbox (no network, memory, time and output bounded), from an empty directory
with an empty configuration, so that no `.sops.yaml` of anyone's is read, and with an
environment that names only the source's own keys: its age identities, and a private
GnuPG home whose keyring holds its OpenPGP keys (sops reads it itself; no gpg, no agent).
gitopsd writes no cryptography: sops decrypts and checks the file's MAC."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitopsd import sandbox
from gitopsd.decryption.formats import Encrypted, Format
from gitopsd.decryption.keys import Keys
from gitopsd.errors import ManifestError, ManifestReason

SOPS_AGE_KEY_FILE = "SOPS_AGE_KEY_FILE"
"""The variable sops reads age identities from, which the command line reads too."""
_OUTPUT_SLACK_BYTES = 64 * 1024
"""A plaintext is shorter than its ciphertext (each value's is base64 and more); this bounds
what reformatting a file's clear parts could add."""
_FAILURES = {
    128: "no key of the source's decrypts it",
    51: "its MAC does not match its values: it was changed after it was encrypted",
    52: "it carries no MAC",
    24: "its MAC cannot be decrypted: it was changed after it was encrypted",
    25: "a value cannot be decrypted: it was changed after it was encrypted",
}
"""sops's exit codes (cmd/sops/codes) for what a source's owner can mend, in their words."""


@dataclass
class Sops:
    """A source's keys, laid out once for sops in a private directory (removed by close)."""

    program: str
    keys: Keys
    tenant: str
    _home: Path | None = None

    def decrypt(self, rel: str, found: Encrypted, ciphertext: bytes) -> bytes:
        """The plaintext of `ciphertext` (the file `rel`); raises ManifestError
        (decryption_failed) naming the file and why it does not decrypt."""
        if not found.usable:
            raise failure(
                rel,
                f"it is encrypted for {found.named_kinds} only: gitopsd decrypts with age and "
                "OpenPGP keys (a cloud KMS is out of reach)",
            )
        home = self._laid_out()
        with tempfile.TemporaryDirectory(dir=home) as work:
            encrypted_file = Path(work) / "encrypted"
            encrypted_file.write_bytes(ciphertext)
            return self._run(rel, found, encrypted_file, len(ciphertext) + _OUTPUT_SLACK_BYTES)

    def close(self) -> None:
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def _run(self, rel: str, found: Encrypted, encrypted_file: Path, max_bytes: int) -> bytes:
        home = self._laid_out()
        stored = Format.JSON if found.format is Format.BINARY else found.format
        program = [
            self.program,
            f"--config={home / 'sops.yaml'}",
            "decrypt",
            f"--input-type={stored}",
            f"--output-type={found.format}",
            "--",
            str(encrypted_file),
        ]
        what = f"{rel}: sops"
        finished = sandbox.run(program, max_bytes, self._settings, what, [home], self.tenant)
        if finished.expired or finished.output is None or finished.status != 0:
            raise failure(rel, _why(finished, found, home))
        return finished.output

    def _settings(self, private: Path) -> dict[str, str]:
        home = self._laid_out()
        return {
            SOPS_AGE_KEY_FILE: str(home / "age"),
            "GNUPGHOME": str(home / "gnupg"),
            "SOPS_GPG_EXEC": str(home / "no-gpg"),  # never GnuPG: the keyring is all there is
            "SOPS_DISABLE_VERSION_CHECK": "true",
        }

    def _laid_out(self) -> Path:
        if self._home is None:
            home = Path(tempfile.mkdtemp(prefix="gitopsd-sops-"))
            (home / "sops.yaml").write_bytes(b"")
            (home / "age").write_bytes(self.keys.age)
            (home / "gnupg").mkdir(mode=0o700)
            (home / "gnupg" / "secring.gpg").write_bytes(self.keys.keyring)
            self._home = home
        return self._home


def _why(finished: sandbox.Finished, found: Encrypted, home: Path) -> str:
    if finished.expired:
        return f"sops did not finish in {sandbox.RENDER_TIMEOUT_SECONDS} s"
    if finished.output is None:
        return "sops wrote more than the file could hold"
    if finished.status in _FAILURES:
        return f"{_FAILURES[finished.status]} (it is encrypted for {found.named_kinds})"
    return f"sops failed: {sandbox.explained(finished.stderr, (), home)}"


def failure(rel: str, why: str) -> ManifestError:
    return ManifestError(
        f"{rel}: a SOPS-encrypted file that does not decrypt: {why}; nothing of the revision "
        "is applied",
        ManifestReason.DECRYPTION_FAILED,
    )

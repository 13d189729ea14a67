"""Signed revisions: a commit (or the annotated tag its ref names) is used only once git's
own verify-commit (or verify-tag) accepted its signature against the source's keys, as
Flux's `.spec.verify` does. No cryptography here: gpg and ssh-keygen check, through git.

Each check runs in a private keyring made for it (a GNUPGHOME of the source's OpenPGP
keys, imported from the exact bytes read, and a copy of its SSH allowed signers), so no
source sees another's keys, and gpg starts no agent. It fails closed: an unsigned commit,
an unknown, expired or revoked key, a bad signature, a ref that names no signed tag where
a tag is asked for, or a tag that points elsewhere than the commit fetched.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from gitopsd.errors import SourceError, SourceReason
from gitopsd.settings_table import VerifyMode
from gitopsd.source import gitreach
from gitopsd.source.gitreach import Reach
from gitopsd.source.repository import locked, target_ref
from gitopsd.source.runner import Runner
from gitopsd.source.snapshots import new_snapshot, remove_snapshot

MAX_KEYS_BYTES = 1 << 20
"""The most a keys file may hold: a Secret's own bound, and far more than any keyring."""
REMEMBERED = 4096
"""Verdicts kept: a commit verified with the same keys is not verified again at each poll."""
_GPG_CONF = "no-autostart\nno-auto-key-retrieve\n"  # no agent, no key servers
_GONE = re.compile(r"bad object|unable to read|not a valid object", re.IGNORECASE)
"""git's words for an object the cache does not hold."""

# First match wins: the status line gpg (through git --raw) or ssh-keygen writes for it.
_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), cause)
    for pattern, cause in (
        (r"\[GNUPG:\] EXPKEYSIG (\w+)", "is signed with OpenPGP key {}, which has expired"),
        (r"\[GNUPG:\] REVKEYSIG (\w+)", "is signed with OpenPGP key {}, which is revoked"),
        (r"\[GNUPG:\] EXPSIG (\w+)", "carries an expired signature of OpenPGP key {}"),
        (r"\[GNUPG:\] BADSIG (\w+)", "carries a bad signature of OpenPGP key {}: the content "
         "is not what was signed"),
        (r"\[GNUPG:\] NO_PUBKEY (\w+)", "is signed with OpenPGP key {}, which is not among the "
         "source's keys"),
        (r"\[GNUPG:\] ERRSIG (\w+)", "carries a signature of OpenPGP key {} that gpg cannot "
         "check"),
        (r"(?s)key (SHA256:\S+).*No principal matched", "is signed with SSH key {}, which is "
         "not among the source's allowed signers"),
        (r"allowedSignersFile needs to be configured", "is signed with an SSH key, and the "
         "source has no allowed signers"),
        (r"(?i)could not verify signature", "carries an SSH signature that does not verify"),
    )
)  # fmt: skip


@dataclass(frozen=True)
class Keys:
    """The exact bytes a source verifies with, and their digest (the verdicts' key)."""

    openpgp: bytes
    allowed_signers: bytes

    @property
    def digest(self) -> str:
        """Of both, each after its length: no two pairs of files share one."""
        digest = hashlib.sha256()
        for part in (self.openpgp, self.allowed_signers):
            digest.update(b"%d\0" % len(part) + part)
        return digest.hexdigest()


class Verdicts:
    """Commits (and tags) verified lately, by repository, objects and keys."""

    def __init__(self) -> None:
        self._held: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, key: tuple[str, ...]) -> bool:
        with self._lock:
            if key in self._held:
                self._held.move_to_end(key)
                return True
            return False

    def keep(self, key: tuple[str, ...]) -> None:
        with self._lock:
            self._held[key] = None
            while len(self._held) > REMEMBERED:
                self._held.popitem(last=False)


VERDICTS = Verdicts()
"""The process's: every source's verification goes through it."""


@dataclass(frozen=True)
class Check:
    """What verifying one revision takes: the commit, the tag object (mode Tag), the keys,
    and the verdict it is remembered by."""

    sha: str
    tag: str
    keys: Keys
    verdict: tuple[str, ...]


def keys_of(runner: Runner) -> Keys:
    """The source's keys, read once per fetch (before the repository's lock is taken)."""
    verification = runner.spec.verify
    return Keys(
        openpgp=_read(runner, verification.public_keys_file),
        allowed_signers=_read(runner, verification.allowed_signers_file),
    )


def needed(runner: Runner, sha: str, keys: Keys) -> Check | None:
    """The check commit `sha`, fetched for the runner's ref, still needs with `keys`;
    None once it passed with them. Runs git on the cache: call it under the repository's
    lock."""
    verification = runner.spec.verify
    tag = _tag_object(runner, sha) if verification.mode != VerifyMode.HEAD else ""
    verdict = (str(runner.repo), sha, tag, str(verification.mode), keys.digest)
    return None if VERDICTS.known(verdict) else Check(sha, tag, keys, verdict)


def verify(runner: Runner, check: Check, cache_dir: Path) -> None:
    """Raises SourceError (verification_failed) unless the revision is signed as the
    source's verification asks. Its keyring is made outside the repository's lock (gpg's
    import takes what the keys take, and other sources read the repository meanwhile);
    git verifies under it."""
    with _keyring(runner, check.keys, cache_dir) as reach, locked(runner):
        if check.tag:
            _check(runner, reach, "verify-tag", check.tag, f"tag {runner.spec.ref!r}")
        if runner.spec.verify.mode != VerifyMode.TAG:
            _check(runner, reach, "verify-commit", check.sha, f"commit {check.sha[:12]}")
    VERDICTS.keep(check.verdict)


def _read(runner: Runner, path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_KEYS_BYTES + 1)
    except OSError as error:
        raise _refused(runner, f"cannot read keys file {path}: {error.strerror}") from None
    if len(data) > MAX_KEYS_BYTES:
        raise _refused(runner, f"keys file {path} holds more than {MAX_KEYS_BYTES} bytes")
    return data


def _tag_object(runner: Runner, sha: str) -> str:
    """The annotated tag the ref names, which must point at `sha` (the commit used)."""
    try:
        tag = runner.run("rev-parse", "--verify", "--end-of-options", target_ref(runner.spec.ref))
        kind = runner.run("cat-file", "-t", tag)
    except SourceError:
        kind = ""
    if kind != "tag":
        raise _refused(
            runner,
            f"ref {runner.spec.ref!r} names no annotated tag, and mode "
            f"{runner.spec.verify.mode} verifies the signature of one",
        )
    points_at = runner.resolve(tag)
    if points_at != sha:
        raise _refused(
            runner,
            f"tag {runner.spec.ref!r} points at commit {points_at[:12]}, not at the commit "
            f"fetched ({sha[:12]})",
        )
    return tag


@contextmanager
def _keyring(runner: Runner, keys: Keys, cache_dir: Path) -> Iterator[Reach]:
    """A private GNUPGHOME holding exactly the source's OpenPGP keys, and a copy of its
    allowed signers; what a git command verifying with them gets. Removed after use."""
    home = new_snapshot(runner, cache_dir)
    try:
        home.chmod(0o700)
        (home / "gpg.conf").write_text(_GPG_CONF)
        options = ["-c", "gpg.program=gpg", "-c", "gpg.ssh.program=ssh-keygen"]
        if keys.openpgp:
            _import(runner, home, keys.openpgp)
        if keys.allowed_signers:
            signers = home / "allowed_signers"
            signers.write_bytes(keys.allowed_signers)
            options += ["-c", f"gpg.ssh.allowedSignersFile={signers}"]
        env = {**runner.env, "GNUPGHOME": str(home)}
        yield replace(gitreach.local(runner.spec, env), options=tuple(options))
    finally:
        remove_snapshot(home)


def _import(runner: Runner, home: Path, openpgp: bytes) -> None:
    """The keys into the private keyring; a file that holds no public key is refused."""
    command = ["gpg", "--batch", "--no-tty", "--homedir", str(home), "--status-fd", "1"]
    env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            [*command, "--import"],
            input=openpgp,
            capture_output=True,
            env=env,
            timeout=runner.spec.timeout_seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:
        said = f"gpg did not import the keys within {runner.spec.timeout_seconds:g} s"
        raise _refused(runner, said) from None
    if b"[GNUPG:] IMPORT_OK" not in done.stdout:
        path = runner.spec.verify.public_keys_file
        raise _refused(runner, f"keys file {path} holds no OpenPGP public key")


def _check(runner: Runner, reach: Reach, command: str, name: str, what: str) -> None:
    verified, said = runner.answer(command, "--raw", name, reach=reach)
    if verified:
        return
    if _GONE.search(said):  # the cache was cloned again since: no verdict, a retry
        raise runner.failed(f"{what} left the cache before it was verified", SourceReason.CORRUPT)
    raise _refused(runner, f"{what} {_cause(said)}")


def _cause(said: str) -> str:
    for pattern, cause in _FAILURES:
        if found := pattern.search(said):
            return cause.format(*found.groups())
    if not said.strip() or "no signature" in said:
        return "is not signed"
    return "is not signed with any of the source's keys"


def _refused(runner: Runner, cause: str) -> SourceError:
    return runner.failed(f"{cause}: nothing of it is used", SourceReason.VERIFICATION_FAILED)

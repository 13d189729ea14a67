"""A GitSync's git credentials: its secretRef's Secret, read with the GitSync's own rights
where it has a ServiceAccount, written as private files that the git runner reads at each
fetch (so a rotated Secret is used from the next poll on). Never the daemon's own. So are
the keys its revisions' signatures are verified with (verify.secretRef)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from gitopsd import gitsync
from gitopsd.cluster import Cluster
from gitopsd.config import Credentials, Decryption, Verification
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.gitsync.spec import GitSync, credentials_allowed
from gitopsd.objects import Body
from gitopsd.resources import SECRETS

SECRET_FILES = ("password", "identity", "known_hosts")
"""The keys of a secretRef's Secret that become files of the same names (Flux's keys)."""
ALLOWED_SIGNERS = "allowed_signers"
"""The key of a verify.secretRef's Secret that holds SSH allowed signers."""
AGE_SUFFIX, PGP_SUFFIX = ".agekey", ".asc"
"""The ends of a decryption.secretRef's keys: age identities, armored OpenPGP private keys."""
CLOUD_KEYS = {
    "sops.aws-kms": "AWS KMS",
    "sops.azure-kv": "Azure Key Vault",
    "sops.gcp-kms.json": "GCP KMS",
    "sops.vault-token": "HashiCorp Vault",
}
"""Flux's keys of cloud credentials: out of reach here (renders have no network)."""


def credentials_of(cluster: Cluster, wanted: GitSync, folder: Path) -> Credentials:
    """Its secretRef as files in `folder`; no credentials without one."""
    if wanted.secret_name is None:
        return Credentials(password_env=None)
    secret = _secret(cluster, wanted)
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths = {name: write_private(folder / name, data.get(name)) for name in SECRET_FILES}
    username = data.get("username", b"").decode(errors="replace").strip()
    return Credentials(
        username=username or Credentials.username,
        password_env=None,
        password_file=paths["password"],
        ssh_key_file=paths["identity"],
        known_hosts_file=paths["known_hosts"],
    )


def fingerprint(credentials: Credentials) -> str:
    """What identifies the credentials, not where they are: their username and the bytes
    of their files (a digest: it reveals none of them)."""
    digest = hashlib.sha256(credentials.username.encode())
    for path in (credentials.password_file, credentials.ssh_key_file, credentials.known_hosts_file):
        content = path.read_bytes() if path is not None else b""
        digest.update(b"\0%d\0" % len(content) + content)
    return digest.hexdigest()[:32]


def webhook_token(cluster: Cluster, wanted: GitSync) -> bytes | None:
    """The key its webhook's calls are signed with: `token` of its webhook's Secret, read
    as its secretRef is (no opt-in: the token is never sent anywhere, only checked against
    calls); None without a webhook."""
    if wanted.webhook_secret is None:
        return None
    field = "spec.webhook.secretRef"
    secret = _read(cluster, wanted, wanted.webhook_secret, field)
    token = (secret.get("data") or {}).get("token")
    if not token:
        name = f"{wanted.namespace}/{wanted.webhook_secret}"
        raise ClusterError(
            f"GitSync {wanted.key}: Secret {name} ({field}) has no key token",
            ClusterReason.NOT_FOUND,
        )
    return base64.b64decode(token)


def keys_of(cluster: Cluster, wanted: GitSync, home: Path) -> tuple[Verification, Decryption]:
    """The keys its revisions are verified with and its encrypted files decrypted with, as
    files under its `home`."""
    decrypting = decryption_of(cluster, wanted, home / "decryption")
    return verification_of(cluster, wanted, home), decrypting


def verification_of(cluster: Cluster, wanted: GitSync, folder: Path) -> Verification:
    """Its verify.secretRef's keys as files in `folder` (its mode is its spec's, see
    GitSync.source): `allowed_signers` (SSH, ssh-keygen's format), and every other key an
    OpenPGP public key, armored (Flux's keys). Read as its webhook's token is: the keys
    are only checked against, never sent. No verification without a verify block; a
    Secret with no key is refused (it would verify nothing)."""
    if wanted.verify_secret is None:
        return Verification()
    data, where = secret_values(cluster, wanted, wanted.verify_secret, "spec.verify.secretRef")
    signers = data.pop(ALLOWED_SIGNERS, None)
    openpgp = b"\n".join(data[name] for name in sorted(data)) or None
    if signers is None and openpgp is None:
        raise _no_key(
            where,
            f"OpenPGP public keys (armored, any key name) or SSH allowed signers (key "
            f"{ALLOWED_SIGNERS})",
        )
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Verification(
        public_keys_file=write_private(folder / "public_keys", openpgp),
        allowed_signers_file=write_private(folder / ALLOWED_SIGNERS, signers),
    )


def decryption_of(cluster: Cluster, wanted: GitSync, folder: Path) -> Decryption:
    """Its decryption.secretRef's keys as files in `folder` (Flux's keys): age identities
    under keys ending in .agekey, armored OpenPGP private keys under keys ending in .asc.
    Read as its webhook's token is: the keys decrypt its own files, whose values reach only
    Secrets of its own (docs/security.md), and are never sent. A key of a cloud KMS, or of
    no kind gitopsd knows, is refused by name; so is a Secret with no key."""
    if wanted.decryption_secret is None:
        return Decryption()
    field = "spec.decryption.secretRef"
    data, where = secret_values(cluster, wanted, wanted.decryption_secret, field)
    for name in sorted(data):
        if not name.endswith((AGE_SUFFIX, PGP_SUFFIX)):
            raise ClusterError(f"{where}: {_unusable(name)}", ClusterReason.INVALID)
    age = b"\n".join(data[k] for k in sorted(data) if k.endswith(AGE_SUFFIX)) or None
    pgp = b"\n".join(data[k] for k in sorted(data) if k.endswith(PGP_SUFFIX)) or None
    if age is None and pgp is None:
        raise _no_key(
            where,
            f"age identities (keys ending in {AGE_SUFFIX}) or armored OpenPGP private keys "
            f"(keys ending in {PGP_SUFFIX})",
        )
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Decryption(
        age_key_file=write_private(folder / "identities.agekey", age),
        pgp_key_file=write_private(folder / "private_keys.asc", pgp),
    )


def secret_values(
    cluster: Cluster, wanted: GitSync, secret_name: str, field: str
) -> tuple[dict[str, bytes], str]:
    """The values of a Secret of keys its `field` names, and how errors name it."""
    secret = _read(cluster, wanted, secret_name, field)
    where = f"GitSync {wanted.key}: Secret {wanted.namespace}/{secret_name} ({field})"
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}, where


def _no_key(where: str, give: str) -> ClusterError:
    """A Secret of keys with none: it would verify or decrypt nothing."""
    return ClusterError(f"{where} holds no key: give {give}", ClusterReason.NOT_FOUND)


def _unusable(name: str) -> str:
    cloud = CLOUD_KEYS.get(name)
    if cloud is not None:
        return (
            f"key {name}: {cloud} is out of reach: gitopsd decrypts with age and OpenPGP keys "
            "only (its renders have no network)"
        )
    return f"key {name}: neither age identities ({AGE_SUFFIX}) nor an OpenPGP key ({PGP_SUFFIX})"


def _secret(cluster: Cluster, wanted: GitSync) -> Body:
    """Its secretRef, read as its ServiceAccount where it has one (the API server decides
    whether that account may read it); otherwise with the daemon's rights, and used only
    if the Secret opts in to the GitSync's URL: whoever may create a GitSync must never
    have the daemon send a Secret they could not read to a server of their choosing."""
    secret = _read(cluster, wanted, str(wanted.secret_name), "spec.repository.secretRef")
    name = f"{wanted.namespace}/{wanted.secret_name}"
    where = f"GitSync {wanted.key}: Secret {name} (spec.repository.secretRef)"
    if wanted.user is None and not credentials_allowed(secret, wanted.url):
        raise ClusterError(
            f"{where} does not allow its use for this repository URL: a GitSync without "
            "a ServiceAccount may use only a Secret annotated "
            f"{gitsync.CREDENTIALS_FOR_ANNOTATION} with its URL (or a prefix of it "
            "ending in /); none of its values was used",
            ClusterReason.FORBIDDEN,
        )
    return secret


def _read(cluster: Cluster, wanted: GitSync, secret_name: str, field: str) -> Body:
    """A Secret of its namespace, read as its ServiceAccount where it has one (the API
    server decides whether that account may read it), otherwise with the daemon's rights."""
    where = f"GitSync {wanted.key}: Secret {wanted.namespace}/{secret_name} ({field})"
    reader = cluster.impersonating(wanted.user) if wanted.user else cluster
    try:
        secret = reader.get(SECRETS, wanted.namespace, secret_name)
    except ClusterError as error:
        raise ClusterError(f"{where}: {error}", error.reason) from None
    if secret is None:
        raise ClusterError(f"{where} not found", ClusterReason.NOT_FOUND)
    return secret


def write_private(path: Path, content: bytes | None) -> Path | None:
    """`content` in a file only this process's user may read; None (and no file) without."""
    if content is None:
        path.unlink(missing_ok=True)
        return None
    if path.exists() and path.read_bytes() == content:
        return path
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    partial.touch(mode=0o600)
    partial.write_bytes(content)
    partial.replace(path)
    return path

"""What git's children get: an environment built from nothing, and credentials only
through GIT_ASKPASS (never a command line or URL), with every spelling of the secret known
so messages can be scrubbed of it."""

from __future__ import annotations

import base64
import os
import shlex
from pathlib import Path
from urllib.parse import quote, quote_plus

from gitopsd.config import Credentials, SourceSpec
from gitopsd.errors import ConfigError
from gitopsd.source.policy import url_scheme

_ASKPASS = """#!/bin/sh
# gitopsd: answers git's prompts from variables set only in that git child's environment.
case "$1" in
Username*) printf '%s\\n' "$GITOPSD_ASKPASS_USERNAME" ;;
*) printf '%s\\n' "$GITOPSD_ASKPASS_PASSWORD" ;;
esac
"""


def read_password(credentials: Credentials) -> str | None:
    """The https password or token: the file wins over the environment variable."""
    if credentials.password_file is None:
        variable = credentials.password_env
        return (os.environ.get(variable) or None) if variable else None
    try:
        return credentials.password_file.read_text().strip() or None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not text"
        raise ConfigError(
            f"cannot read password file {credentials.password_file}: {reason}"
        ) from None


def secret_forms(username: str, password: str) -> tuple[str, ...]:
    """Every spelling of the secret an error could carry, longest first."""
    basic = base64.b64encode(f"{username}:{password}".encode()).decode()
    forms = {password, quote(password, safe=""), quote_plus(password), basic}
    forms |= {form.lower() for form in forms if "%" in form}
    forms.add(base64.b64encode(password.encode()).decode())
    return tuple(sorted(forms, key=len, reverse=True))


def environment(spec: SourceSpec, cache_dir: Path, password: str | None) -> dict[str, str]:
    """Everything git's children see, built from nothing so the daemon's variables stay home."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(cache_dir),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ALLOW_PROTOCOL": "https:ssh:http:file" if spec.allow_insecure else "https:ssh",
        "LANG": "C",
        "LC_ALL": "C",  # gitpython sets these two anyway
        "LANGUAGE": "C",
    }
    if password:
        env["GIT_ASKPASS"] = str(_write_askpass(cache_dir))
        env["GITOPSD_ASKPASS_USERNAME"] = spec.credentials.username
        env["GITOPSD_ASKPASS_PASSWORD"] = password
    if url_scheme(spec.url) == "ssh":
        env["GIT_SSH_COMMAND"] = _ssh_command(spec.credentials)
    return env


def _write_askpass(cache_dir: Path) -> Path:
    """The askpass script holds no secret; it is replaced whole so git never runs half of it."""
    path = cache_dir / "askpass.sh"
    if path.is_file() and path.read_text() == _ASKPASS and path.stat().st_mode & 0o777 == 0o700:
        return path
    partial = cache_dir / f"askpass.sh.{os.getpid()}"
    partial.write_text(_ASKPASS)
    partial.chmod(0o700)
    partial.replace(path)
    return path


def _ssh_command(credentials: Credentials) -> str:
    """ssh without the user's config, agent identities or any host key not pinned by us."""
    known_hosts = shlex.quote(str(credentials.known_hosts_file))
    words = ["ssh", "-F", "/dev/null"]
    if credentials.ssh_key_file is not None:
        words += ["-i", shlex.quote(str(credentials.ssh_key_file))]
    words += ["-o", "IdentitiesOnly=yes", "-o", f"UserKnownHostsFile={known_hosts}"]
    words += ["-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes"]
    return " ".join([*words, "-o", "BatchMode=yes"])

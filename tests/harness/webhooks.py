"""A GitSync's webhook as the tests call it: the token its Secret holds, and a push as a
git host announces it."""

from __future__ import annotations

import base64
import json
from typing import Any

TOKEN = b"a-webhook-token-9d1c"
PUSH = json.dumps({"ref": "refs/heads/main", "after": "0" * 40}).encode()


def hook_secret(core: Any, namespace: str) -> None:
    """The Secret `hook` whose key `token` signs the GitSyncs' webhook calls."""
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "hook"}, "data": {"token": secret_data(TOKEN)}}
    )


def secret_data(data: bytes) -> str:
    """`data` as a Secret's `data` holds it: base64."""
    return base64.b64encode(data).decode()

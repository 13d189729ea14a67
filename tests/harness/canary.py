"""A secret value planted where a test handles a Secret or a credential, and looked for in
every form it could leak in: as written, URL-encoded (a credential in a URL), base64 (what
the API returns in a Secret's `data`, and in a basic-auth header), JSON-escaped (inside
kubectl's last-applied annotation, or a JSON log line). It holds characters that each of
those encodings changes, so each form is a different string to find."""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

from kubernetes import client

from gitopsd import gitsync


@dataclass(frozen=True)
class Canary:
    value: str
    username: str = "gitopsd"
    """The user a credential canary goes with (a basic-auth header encodes both)."""

    @classmethod
    def fresh(cls) -> Canary:
        return cls(f'CANARY-{secrets.token_hex(6)}-^+/="\\')

    @property
    def base64(self) -> str:
        """As a Secret's `data` holds it."""
        return base64.b64encode(self.value.encode()).decode()

    @property
    def url_encoded(self) -> str:
        """As a URL's user info holds it."""
        return quote(self.value, safe="")

    def forms(self) -> dict[str, str]:
        return {
            "plain": self.value,
            "url-encoded": self.url_encoded,
            "url-encoded, / kept": quote(self.value),
            "form-encoded": quote_plus(self.value),
            "base64": self.base64,
            "basic auth": base64.b64encode(f"{self.username}:{self.value}".encode()).decode(),
            "JSON string": json.dumps(self.value)[1:-1],
        }

    def assert_absent(self, text: str, where: str) -> None:
        for form, spelling in self.forms().items():
            assert spelling not in text, f"the secret leaked ({form}) in {where}: {text[-2000:]}"

    def assert_not_in_cluster(self, admin_api: Any, namespace: str) -> None:
        """Nowhere gitopsd writes in `namespace` but the Secret itself: its Events, its
        ApplySet parents and the GitSyncs' statuses."""
        core: Any = client.CoreV1Api(admin_api)
        for event in core.list_namespaced_event(namespace).items:
            self.assert_absent(f"{event.reason} {event.message}", f"Event {event.metadata.name}")
        for config_map in core.list_namespaced_config_map(namespace).items:
            if config_map.metadata.name.startswith("gitopsd-"):
                whole = json.dumps(admin_api.sanitize_for_serialization(config_map))
                self.assert_absent(whole, f"ApplySet parent {config_map.metadata.name}")
        custom: Any = client.CustomObjectsApi(admin_api)
        try:
            found = custom.list_namespaced_custom_object(
                gitsync.GROUP, gitsync.VERSION, namespace, gitsync.PLURAL
            )
        except client.ApiException as error:
            if error.status == 404:  # the CRD is not installed for this test
                return
            raise
        for body in found["items"]:
            self.assert_absent(json.dumps(body), f"GitSync {body['metadata']['name']}")

"""What the GitSync CRD's OpenAPI v3 schema is built from: typed nodes, each with its
description, and the patterns that Kubernetes names and durations match."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DURATION = "^([0-9]+h)?([0-9]+m)?([0-9]+(\\.[0-9]+)?s)?$"


def string(description: str, **rules: Any) -> Schema:
    return {"type": "string", "description": description, **rules}


def boolean(description: str, default: bool) -> Schema:
    return {"type": "boolean", "description": description, "default": default}


def strings(description: str, default: tuple[str, ...], item: Schema) -> Schema:
    rules: Schema = {"minItems": 1} if default else {}
    return {
        "type": "array",
        "description": description,
        "default": list(default),
        "maxItems": 100,
        "items": item,
        **rules,
    }


def duration(description: str, default_seconds: float) -> Schema:
    return string(
        description,
        default=f"{default_seconds:g}s",
        pattern=DURATION,
        minLength=2,
        maxLength=32,
        **{
            "x-kubernetes-validations": [
                {
                    "rule": "duration(self) >= duration('1s') "
                    "&& duration(self) <= duration('168h')",
                    "message": "must be from 1s to 168h (7 days), like 30s, 5m or 1h30m",
                }
            ]
        },
    )


def object_(description: str, properties: Schema, **rules: Any) -> Schema:
    return {"type": "object", "description": description, "properties": properties, **rules}

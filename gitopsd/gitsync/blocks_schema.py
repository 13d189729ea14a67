"""Blocks of a GitSync's spec written here by hand, as Flux names them: its notification
providers, and its post-build variables."""

from __future__ import annotations

from gitopsd.configfile.postbuild import KINDS, MAX_SOURCES, MAX_VALUES, VARIABLE_NAME
from gitopsd.gitsync.openapi import DNS_LABEL, DNS_SUBDOMAIN, boolean, object_, string
from gitopsd.notifications import Topic
from gitopsd.notifications.providers import Type

SECRET_NAME = string("The Secret's name.", pattern=DNS_SUBDOMAIN, maxLength=253)
NOTIFICATION = object_(
    "A provider of notifications.",
    {
        "name": string(
            "Its name (default: its type), the provider label of gitopsd_notifications_total.",
            pattern=DNS_LABEL,
            maxLength=63,
        ),
        "type": string("The receiver's kind.", enum=[str(kind) for kind in Type]),
        "secretRef": object_(
            "A Secret in the GitSync's namespace: `address` (the receiver's URL; for a "
            "commit status, the repository's, https://HOST/OWNER/REPOSITORY) and `token` "
            "(a webhook's HMAC key, a git host's API token, Alertmanager's bearer token).",
            {"name": SECRET_NAME},
            required=["name"],
        ),
        "events": {
            "type": "array",
            "description": "What it hears of (default: a commit status sync and failure, "
            "the others all).",
            "maxItems": len(Topic),
            "items": string("A topic.", enum=[str(topic) for topic in Topic]),
        },
    },
    required=["type", "secretRef"],
)
POST_BUILD = object_(
    "Variables expanded in every object the revision renders, as Flux's postBuild: "
    "${VAR}, ${VAR:=default}, ${VAR:-default} and bash's string functions; $${VAR} for the "
    "text ${VAR} (docs/sync.md, Variables). An object labelled or annotated "
    "kustomize.toolkit.fluxcd.io/substitute: disabled is left as written.",
    {
        "substitute": {
            "type": "object",
            "description": "Variables by name, each matching "
            f"{VARIABLE_NAME.pattern} (they win over substituteFrom's).",
            "maxProperties": MAX_VALUES,
            "additionalProperties": {"type": "string"},
        },
        "substituteFrom": {
            "type": "array",
            "description": "ConfigMaps and Secrets of the GitSync's namespace whose data "
            "are variables, later ones winning; a Secret's may be used only in Secrets' data.",
            "maxItems": MAX_SOURCES,
            "items": object_(
                "A ConfigMap or Secret of variables.",
                {
                    "kind": string("Its kind.", enum=list(KINDS)),
                    "name": string("Its name.", pattern=DNS_SUBDOMAIN, maxLength=253),
                    "optional": boolean("A missing one is skipped, not an error.", False),
                },
                required=["kind", "name"],
            ),
        },
        "strict": boolean("A variable with no value and no default is an error.", False),
    },
)

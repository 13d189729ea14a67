"""Names (and namespaces) a hostile repository gives its objects (SE-11, BI-14): each is
refused as gitopsd reads it, and never reaches a request's path. Shared by the unit tests
of gitopsd.manifests and the cluster's bad-input tests."""

from __future__ import annotations

HOSTILE_NAMES = {
    "path escape": "../../kube-system/configmaps/victim",
    "query": "x?dryRun=All",
    "slash": "a/b",
    "encoded dots": "%2e%2e",
    "dot-dot": "..",
    "300 characters": "x" * 300,
    "upper case": "Victim",
    "unicode": "vïctim",
    "blank": " ",
    "only a dash": "-",
}
